"""A small VGG: stacks of 3x3 convolution -> norm -> ReLU, 2x2 max-pools between them,
then global average pooling and a linear classifier.

``cfg`` lists output channels, "M" for a pool; the default (32, 32, M, 64, 64, M, 128)
turns an 8x8 digit into 128 channels at 2x2 and a 32x32 image into 128 at 8x8.
"""
from .. import nn
from .norms import make_norm

DEFAULT_CFG = (32, 32, "M", 64, 64, "M", 128)


class VGG(nn.Module):
    def __init__(self, cfg=DEFAULT_CFG, in_channels=1, num_classes=10, norm="batch", dropout=0.0):
        super().__init__()
        layers, c = [], in_channels
        for v in cfg:
            if v == "M":
                layers.append(nn.MaxPool2d(2))
            else:
                layers += [nn.Conv2d(c, v, 3, padding=1, bias=norm == "none"), make_norm(norm, v), nn.ReLU()]
                c = v
        self.features = nn.Sequential(*layers)
        head = [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        if dropout:
            head.append(nn.Dropout(dropout))
        self.classifier = nn.Sequential(*head, nn.Linear(c, num_classes))

    def forward(self, x):
        return self.classifier(self.features(x))


def vgg_small(**kw):
    return VGG(DEFAULT_CFG, **kw)
