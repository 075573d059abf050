"""``rlx.nn``: model-level (HIR) ops; see rlx_core/frontend/nn.py. Outside a trace they compute
eagerly on plain arrays (rlx_core/frontend/eager.py)."""

from rlx_core.frontend import nn as _nn
from rlx_core.frontend.eager import eager as _eager
from rlx_core.frontend.nn import __all__  # noqa: F401

block = _nn.block
linear = _eager(_nn.linear)
layer_norm = _eager(_nn.layer_norm)
rms_norm = _eager(_nn.rms_norm)
softmax = _eager(_nn.softmax)
log_softmax = _eager(_nn.log_softmax)
gelu = _eager(_nn.gelu)
silu = _eager(_nn.silu)
relu = _eager(_nn.relu)
sigmoid = _eager(_nn.sigmoid)
attention = _eager(_nn.attention)
embedding = _eager(_nn.embedding)
conv2d = _eager(_nn.conv2d)
max_pool2d = _eager(_nn.max_pool2d)
avg_pool2d = _eager(_nn.avg_pool2d)
