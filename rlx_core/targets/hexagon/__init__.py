"""The hexagon target: C with HVX intrinsics (128-byte vectors) for the Hexagon DSP."""
