"""Dropout: zero elements with probability p in training (scaling the rest by 1/(1-p)); identity in eval.
Dropout1d/2d/3d zero whole channels instead (``minidl.ops.channel_dropout``). AlphaDropout and
FeatureAlphaDropout keep SELU's mean 0 / variance 1 (``minidl.ops.alpha_dropout``)."""
from ...ops import alpha_dropout, channel_dropout
from .. import functional as F
from .module import Module


class Dropout(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = float(p), inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(Dropout):
    def forward(self, input):
        return channel_dropout.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(Dropout):
    def forward(self, input):
        return channel_dropout.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(Dropout):
    def forward(self, input):
        return channel_dropout.dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(Dropout):
    def forward(self, input):
        return alpha_dropout.alpha_dropout(input, self.p, self.training, self.inplace)


class FeatureAlphaDropout(Dropout):
    def forward(self, input):
        return alpha_dropout.feature_alpha_dropout(input, self.p, self.training, self.inplace)
