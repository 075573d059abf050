"""FPGA target: int8 LIR -> Verilog datapath, simulated by Verilator, synthesized by yosys."""
