"""Cortex-M target: int8 LIR -> C99 (CMSIS-NN style) -> arm-none-eabi-gcc -> QEMU MPS2."""
