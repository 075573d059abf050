"""What the int8 embedded targets (cortex-m, fpga) share: availability, the strict check and
the legalized firmware source (target.py)."""
