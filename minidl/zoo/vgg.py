"""A small VGG: stacks of 3x3 convolution -> norm -> ReLU, 2x2 max-pools between them,
then global average pooling and a linear classifier.

``cfg`` lists output channels, "M" for a pool; the default (32, 32, M, 64, 64, M, 128)
turns an 8x8 digit into 128 channels at 2x2 and a 32x32 image into 128 at 8x8. ``norm`` is a
name of zoo.norms (``"batch"``, ``"group"``, ``"none"``, ...) or a callable that makes the layer
for a channel count (``norm=lambda c: nn.BatchRenorm2d(c)``), for experiments with norms of
their own. ``weight_std=True`` makes every 3x3 convolution a WSConv2d (Weight Standardization).
The feature stack runs through ``fused.run``: norm + ReLU and ReLU + max-pool as one op each.
"""
from .. import nn
from . import fused
from .norms import make_norm

DEFAULT_CFG = (32, 32, "M", 64, 64, "M", 128)


class VGG(nn.Module):
    def __init__(self, cfg=DEFAULT_CFG, in_channels=1, num_classes=10, norm="batch", dropout=0.0, weight_std=False):
        super().__init__()
        conv = nn.WSConv2d if weight_std else nn.Conv2d
        layers, c = [], in_channels
        for v in cfg:
            if v == "M":
                layers.append(nn.MaxPool2d(2))
            else:
                layer = make_norm(norm, v) if isinstance(norm, str) or norm is None else norm(v)
                layers += [conv(c, v, 3, padding=1, bias=norm in ("none", None)), layer, nn.ReLU()]
                c = v
        self.features = nn.Sequential(*layers)
        head = [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        if dropout:
            head.append(nn.Dropout(dropout))
        self.classifier = nn.Sequential(*head, nn.Linear(c, num_classes))

    def forward(self, x):
        return self.classifier(fused.run(self.features, x))


def vgg_small(**kw):
    return VGG(DEFAULT_CFG, **kw)
