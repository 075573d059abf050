"""Optimizers as graph transformations: forward + backward + update compile to one graph."""

from rlx_core.optim.optimizers import SGD, Adam, OptimizerError
from rlx_core.optim.train_step import CompiledStep, compile_step, step_function, training_graph

__all__ = ["SGD", "Adam", "OptimizerError", "CompiledStep", "compile_step", "step_function",
           "training_graph"]
