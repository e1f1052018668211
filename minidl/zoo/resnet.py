"""CIFAR-style ResNets (He et al., 2016, section 4.2): resnet8, resnet20.

    conv3x3(in -> w) -> norm -> ReLU
    stage 1: n BasicBlocks at w channels        (full resolution)
    stage 2: n BasicBlocks at 2w, first stride 2
    stage 3: n BasicBlocks at 4w, first stride 2
    global average pool -> Linear(4w -> classes)

depth = 6n + 2 (n = 1: ResNet-8, n = 3: ResNet-20), w = 16. A BasicBlock computes
relu(x' + norm(conv(relu(norm(conv(x)))))) where the shortcut x' is x, or a 1x1 strided
convolution + norm when the shape changes (the paper's option B). The normalization is a
constructor choice (``norm="batch" | "group" | "layer" | "instance" | "none"``, see
norms.py); convolutions followed by a norm have no bias (the norm's shift replaces it). Each
relu(norm(...)) is ``norms.norm_relu``: one fused op for BatchNorm and GroupNorm, the two
layers otherwise; the block's last relu(x' + norm(...)) is ``norms.norm_add_relu``, one op for
BatchNorm and GroupNorm too (otherwise the norm, then the add and the ReLU as ``F.add_relu``).

``init`` chooses how a network without normalization keeps its residual stream in check:

- ``"default"``: PyTorch's layer initialisation everywhere (without a norm the variance of the
  residual stream grows with every block);
- ``"skipinit"`` (De & Smith 2020): every residual branch ends in a learnable scalar ``alpha``
  initialised to 0, so each block starts as its shortcut: relu(x' + alpha * branch(x));
- ``"fixup"`` (Zhang et al. 2019): the branch's first convolution He-initialised and scaled by
  L^(-1/2) (L residual branches of m = 2 layers: L^(-1/(2m-2))), its last convolution and the
  classifier initialised to 0, scalar biases before each convolution and activation and a
  scalar multiplier (1) at the end of each branch (a projection shortcut is He-initialised):
  relu(x' + scale * conv2(relu(conv1(x + b1a) + b1b) + b2a) + b2b), x' the shortcut of x + b1a.

Both are meant for ``norm="none"`` (they work with a norm, but a norm makes them unnecessary).
The default builds exactly the parameters and state_dict names it always had; the options add
``alpha`` or ``bias1a, bias1b, bias2a, bias2b, scale`` to each block (and ``fc_bias_in`` before
the classifier for Fixup).

Devices: the blocks are compositions of generic ops (conv2d, the norms, relu, elementwise
products with the scalar parameters), each with its own CPU and cuda kernels, so every
``norm``/``init`` combination runs on both devices with no code of its own here
(tests/test_zoo_options_grad_devices.py checks cuda against the CPU).
"""
import math

import numpy as np

from .. import nn
from ..nn import functional as F
from ..nn import init as nn_init
from ..nn.parameter import Parameter
from .norms import make_norm, norm_add_relu, norm_relu

INITS = ("default", "skipinit", "fixup")


def _scalar(value):
    return Parameter(np.full(1, value, np.float32))


class BasicBlock(nn.Module):
    def __init__(self, in_channels, channels, stride=1, norm="batch", init="default"):
        super().__init__()
        if init not in INITS:
            raise ValueError(f"unknown residual init {init!r}; expected one of {', '.join(INITS)}")
        self.init = init
        bias = norm == "none" and init != "fixup"      # Fixup's scalar biases replace the per-channel ones
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride=stride, padding=1, bias=bias)
        self.norm1 = make_norm(norm, channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, stride=1, padding=1, bias=bias)
        self.norm2 = make_norm(norm, channels)
        if stride != 1 or in_channels != channels:
            self.shortcut = nn.Sequential(nn.Conv2d(in_channels, channels, 1, stride=stride, bias=bias),
                                          make_norm(norm, channels))
        else:
            self.shortcut = None
        if init == "skipinit":
            self.alpha = _scalar(0.0)
        elif init == "fixup":
            for name in ("bias1a", "bias1b", "bias2a", "bias2b"):
                setattr(self, name, _scalar(0.0))
            self.scale = _scalar(1.0)

    def fixup_init_(self, num_branches):
        """Fixup's initialisation of this block, one of ``num_branches`` residual branches."""
        w = self.conv1.weight
        nn_init.normal_(w, 0.0, math.sqrt(2.0 / (w.shape[0] * w.shape[2] * w.shape[3])) * num_branches ** -0.5)
        nn_init.zeros_(self.conv2.weight)
        if self.shortcut is not None:
            nn_init.kaiming_normal_(self.shortcut[0].weight, mode="fan_in", nonlinearity="relu")

    def forward(self, x):
        if self.init == "fixup":
            xb = x + self.bias1a
            out = F.relu(self.norm1(self.conv1(xb)) + self.bias1b)
            out = self.norm2(self.conv2(out + self.bias2a)) * self.scale + self.bias2b
            skip = x if self.shortcut is None else self.shortcut(xb)
            return F.relu(out + skip)
        out = norm_relu(self.norm1, self.conv1(x))
        out = self.conv2(out)
        skip = x if self.shortcut is None else self.shortcut(x)
        if self.init == "skipinit":
            return F.add_relu(self.norm2(out) * self.alpha, skip)
        return norm_add_relu(self.norm2, out, skip)


class ResNet(nn.Module):
    def __init__(self, depth=20, in_channels=3, num_classes=10, norm="batch", width=16, init="default"):
        super().__init__()
        if (depth - 2) % 6 != 0 or depth < 8:
            raise ValueError(f"a CIFAR ResNet has depth 6n + 2 (8, 14, 20, 32, ...), got {depth}")
        if init not in INITS:
            raise ValueError(f"unknown residual init {init!r}; expected one of {', '.join(INITS)}")
        n = (depth - 2) // 6
        self.norm_name, self.init = norm, init
        self.conv1 = nn.Conv2d(in_channels, width, 3, padding=1, bias=norm == "none")
        self.norm1 = make_norm(norm, width)
        blocks, c = [], width
        for stage, w in enumerate((width, 2 * width, 4 * width)):
            for i in range(n):
                stride = 2 if (stage > 0 and i == 0) else 1
                blocks.append(BasicBlock(c, w, stride, norm, init))
                c = w
        self.layers = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(c, num_classes)
        if init == "fixup":
            self.fc_bias_in = _scalar(0.0)
            for block in blocks:
                block.fixup_init_(len(blocks))
            nn_init.zeros_(self.fc.weight)
            nn_init.zeros_(self.fc.bias)

    def forward(self, x):
        x = norm_relu(self.norm1, self.conv1(x))
        x = self.layers(x)
        x = self.pool(x).flatten(1)
        if self.init == "fixup":
            x = x + self.fc_bias_in
        return self.fc(x)

    def extra_repr(self):
        return f"norm={self.norm_name!r}" + ("" if self.init == "default" else f", init={self.init!r}")


def resnet8(**kw):
    return ResNet(depth=8, **kw)


def resnet20(**kw):
    return ResNet(depth=20, **kw)
