"""The tpu target: StableHLO (MLIR text) compiled and run by XLA through jaxlib (PJRT)."""
