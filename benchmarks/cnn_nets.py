"""The CNNs of bench_cnn as PyTorch modules with seeded random weights (torchvision does not
import beside the pinned torch): ResNet-50, MobileNetV2, a VGG-style and an Inception-style
network. ``width`` scales every channel count, ``classes`` the head and ``short`` keeps one
block per stage (one inception module per stage), so the CI tests run the same kinds of block
small and fast; ``export`` writes one to ONNX at a given opset.

Batch-norm statistics are randomised too (a freshly initialised BN is the identity, which
would hide a wrong fold), and every module is returned in eval mode.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import torch
from torch import nn


def _ch(c: float) -> int:
    return max(1, int(round(c)))


def conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1,
            act: type[nn.Module] | None = nn.ReLU) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups,
                                         bias=False), nn.BatchNorm2d(cout)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


# ---- ResNet-50 ----------------------------------------------------------------------------------
class Bottleneck(nn.Module):
    def __init__(self, cin: int, mid: int, stride: int):
        super().__init__()
        cout = mid * 4
        self.body = nn.Sequential(conv_bn(cin, mid, 1), conv_bn(mid, mid, 3, stride),
                                  conv_bn(mid, cout, 1, act=None))
        self.skip = conv_bn(cin, cout, 1, stride, act=None) \
            if stride != 1 or cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.skip(x))


class ResNet50(nn.Module):
    def __init__(self, width: float = 1.0, classes: int = 1000, short: bool = False):
        super().__init__()
        c = _ch(64 * width)
        layers: list[nn.Module] = [conv_bn(3, c, 7, 2), nn.MaxPool2d(3, 2, 1)]
        cin = c
        for i, blocks in enumerate((1, 2, 1, 1) if short else (3, 4, 6, 3)):
            mid = _ch(64 * width * 2 ** i)
            for b in range(blocks):
                layers.append(Bottleneck(cin, mid, 2 if (b == 0 and i > 0) else 1))
                cin = mid * 4
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


# ---- MobileNetV2 --------------------------------------------------------------------------------
class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        mid = cin * expand
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(conv_bn(cin, mid, 1, act=nn.ReLU6))
        layers += [conv_bn(mid, mid, 3, stride, groups=mid, act=nn.ReLU6),
                   conv_bn(mid, cout, 1, act=None)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return x + y if self.residual else y


class MobileNetV2(nn.Module):
    # (expansion, channels, repeats, stride) of the paper's table 2
    CONFIG = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
              (6, 160, 3, 2), (6, 320, 1, 1))

    def __init__(self, width: float = 1.0, classes: int = 1000, short: bool = False):
        super().__init__()
        cin = _ch(32 * width)
        layers: list[nn.Module] = [conv_bn(3, cin, 3, 2, act=nn.ReLU6)]
        for t, c, n, s in self.CONFIG:
            n = min(n, 2) if short else n  # the second block is the residual one
            cout = _ch(c * width)
            for i in range(n):
                layers.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        last = _ch(1280 * max(width, 1.0)) if width >= 1.0 else _ch(1280 * width)
        layers.append(conv_bn(cin, last, 1, act=nn.ReLU6))
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Dropout(0.2), nn.Linear(last, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


# ---- VGG-style (VGG-11 convolutions, global-average-pooled head) -------------------------------
class VGG(nn.Module):
    CONFIG = (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")
    SHORT = (64, "M", 128, "M", 256, "M", 512, "M")

    def __init__(self, width: float = 1.0, classes: int = 1000, short: bool = False):
        super().__init__()
        layers: list[nn.Module] = []
        cin = 3
        for v in self.SHORT if short else self.CONFIG:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                cout = _ch(int(v) * width)
                layers += [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU()]
                cin = cout
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Linear(cin, _ch(1024 * width)), nn.ReLU(), nn.Dropout(),
                                  nn.Linear(_ch(1024 * width), classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


# ---- Inception-style (GoogLeNet's inception modules) ----------------------------------------
class Inception(nn.Module):
    def __init__(self, cin: int, c1: int, c3r: int, c3: int, c5r: int, c5: int, pool: int):
        super().__init__()
        self.b1 = conv_bn(cin, c1, 1)
        self.b3 = nn.Sequential(conv_bn(cin, c3r, 1), conv_bn(c3r, c3, 3))
        self.b5 = nn.Sequential(conv_bn(cin, c5r, 1), conv_bn(c5r, c5, 5))
        self.bp = nn.Sequential(nn.MaxPool2d(3, 1, 1), conv_bn(cin, pool, 1))
        self.cout = c1 + c3 + c5 + pool

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.b1(x), self.b3(x), self.b5(x), self.bp(x)], 1)


class InceptionNet(nn.Module):
    # GoogLeNet's 3a, 3b, (pool), 4a, 4b, 4c, (pool), 5a
    CONFIG = ((64, 96, 128, 16, 32, 32), (128, 128, 192, 32, 96, 64), "M",
              (192, 96, 208, 16, 48, 64), (160, 112, 224, 24, 64, 64),
              (128, 128, 256, 24, 64, 64), "M", (256, 160, 320, 32, 128, 128))

    def __init__(self, width: float = 1.0, classes: int = 1000, short: bool = False):
        super().__init__()
        c1, c2 = _ch(64 * width), _ch(192 * width)
        layers: list[nn.Module] = [conv_bn(3, c1, 7, 2), nn.MaxPool2d(3, 2, 1),
                                   conv_bn(c1, c1, 1), conv_bn(c1, c2, 3),
                                   nn.MaxPool2d(3, 2, 1)]
        cin = c2
        for i, v in enumerate(self.CONFIG):
            if short and i in (1, 4, 5):
                continue  # one module per stage: 3a, 4a, 5a
            if v == "M":
                layers.append(nn.MaxPool2d(3, 2, 1))
                continue
            block = Inception(cin, *(_ch(c * width) for c in v))
            layers.append(block)
            cin = block.cout
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Dropout(0.4), nn.Linear(cin, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


NETWORKS: dict[str, Callable[..., nn.Module]] = {
    "resnet50": ResNet50,
    "mobilenet_v2": MobileNetV2,
    "vgg": VGG,
    "inception": InceptionNet,
}


def build(name: str, width: float = 1.0, classes: int = 1000, seed: int = 0,
          short: bool = False) -> nn.Module:
    """Network ``name`` with seeded random weights and batch-norm statistics, in eval mode."""
    torch.manual_seed(seed)
    net = NETWORKS[name](width=width, classes=classes, short=short)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
    return net.eval()


def export(net: nn.Module, x: torch.Tensor, opset: int, keep_batchnorm: bool = False) -> bytes:
    """The ONNX bytes of ``net`` at ``opset`` (the TorchScript exporter: the dynamo one needs
    onnxscript and targets opset 18+). It folds each BatchNormalization into the preceding Conv
    unless ``keep_batchnorm`` (exported in training-preserving mode, as older exporters and
    model zoos leave them)."""
    import warnings

    f = io.BytesIO()
    kw: dict[str, Any] = {}
    if keep_batchnorm:
        kw["training"] = torch.onnx.TrainingMode.PRESERVE
        kw["do_constant_folding"] = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (x,), f, opset_version=opset, dynamo=False,
                          input_names=["x"], output_names=["y"], **kw)
    return f.getvalue()
