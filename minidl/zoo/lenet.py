"""LeNet-style CNN: two conv -> ReLU -> 2x2 max-pool stages, then three fully connected layers.

For 28x28 inputs it is LeNet-5 (with ReLU and max-pooling): 5x5 convolutions, the first
padded, 6 and 16 channels, 16*5*5 -> 120 -> 84 -> classes. For small inputs (the 8x8
digits) the convolutions are 3x3 and padded, so each pool halves the size: 8 -> 4 -> 2,
and the classifier sees 16*2*2 features.

The feature stack runs through ``fused.run``: norm + ReLU and ReLU + max-pool as one op each.
"""
from .. import nn
from . import fused
from .norms import make_norm


class LeNet(nn.Module):
    def __init__(self, in_channels=1, num_classes=10, input_size=28, norm="none"):
        super().__init__()
        if input_size >= 28:
            k, pads = 5, (2, 0)
            side = ((input_size + 4 - 4) // 2 - 4) // 2
        else:
            if input_size < 4 or input_size % 4:
                raise ValueError(f"LeNet for small inputs needs a size divisible by 4, got {input_size}")
            k, pads = 3, (1, 1)
            side = input_size // 4
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 6, k, padding=pads[0], bias=norm == "none"), make_norm(norm, 6), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(6, 16, k, padding=pads[1], bias=norm == "none"), make_norm(norm, 16), nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(16 * side * side, 120), nn.ReLU(),
            nn.Linear(120, 84), nn.ReLU(),
            nn.Linear(84, num_classes),
        )

    def forward(self, x):
        return self.classifier(fused.run(self.features, x))
