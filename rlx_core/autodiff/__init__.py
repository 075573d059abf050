"""Reverse-mode autodiff on MIR: VJP rules per primitive and the grad transformations."""

from rlx_core.autodiff.api import grad, grad_graph, value_and_grad
from rlx_core.autodiff.reverse import GradError, NoVJPRuleError, backward, to_mir
from rlx_core.autodiff.rules import NO_GRAD, VJP_RULES, ZERO_GRAD, rule_for

__all__ = ["grad", "grad_graph", "value_and_grad", "backward", "to_mir", "GradError",
           "NoVJPRuleError", "VJP_RULES", "ZERO_GRAD", "NO_GRAD", "rule_for"]
