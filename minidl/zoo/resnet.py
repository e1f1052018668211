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
norms.py); convolutions followed by a norm have no bias (the norm's shift replaces it).
"""
from .. import nn
from ..nn import functional as F
from .norms import make_norm


class BasicBlock(nn.Module):
    def __init__(self, in_channels, channels, stride=1, norm="batch"):
        super().__init__()
        bias = norm == "none"
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride=stride, padding=1, bias=bias)
        self.norm1 = make_norm(norm, channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, stride=1, padding=1, bias=bias)
        self.norm2 = make_norm(norm, channels)
        if stride != 1 or in_channels != channels:
            self.shortcut = nn.Sequential(nn.Conv2d(in_channels, channels, 1, stride=stride, bias=bias),
                                          make_norm(norm, channels))
        else:
            self.shortcut = None

    def forward(self, x):
        out = F.relu(self.norm1(self.conv1(x)))
        out = self.norm2(self.conv2(out))
        skip = x if self.shortcut is None else self.shortcut(x)
        return F.relu(out + skip)


class ResNet(nn.Module):
    def __init__(self, depth=20, in_channels=3, num_classes=10, norm="batch", width=16):
        super().__init__()
        if (depth - 2) % 6 != 0 or depth < 8:
            raise ValueError(f"a CIFAR ResNet has depth 6n + 2 (8, 14, 20, 32, ...), got {depth}")
        n = (depth - 2) // 6
        self.norm_name = norm
        self.conv1 = nn.Conv2d(in_channels, width, 3, padding=1, bias=norm == "none")
        self.norm1 = make_norm(norm, width)
        blocks, c = [], width
        for stage, w in enumerate((width, 2 * width, 4 * width)):
            for i in range(n):
                stride = 2 if (stage > 0 and i == 0) else 1
                blocks.append(BasicBlock(c, w, stride, norm))
                c = w
        self.layers = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(c, num_classes)

    def forward(self, x):
        x = F.relu(self.norm1(self.conv1(x)))
        x = self.layers(x)
        return self.fc(self.pool(x).flatten(1))

    def extra_repr(self):
        return f"norm={self.norm_name!r}"


def resnet8(**kw):
    return ResNet(depth=8, **kw)


def resnet20(**kw):
    return ResNet(depth=20, **kw)
