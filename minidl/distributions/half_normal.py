"""HalfNormal(scale): |x| for x ~ Normal(0, scale), as torch.distributions.HalfNormal.

    log p(y) = ln 2 - y**2 / (2 scale**2) - ln scale - ln sqrt(2 pi) on y >= 0,
    mean = scale sqrt(2 / pi),   variance = scale**2 (1 - 2 / pi)

rsample is |loc + scale eps|: differentiable in scale.
"""
import math

from ._folded import _Folded
from .normal import Normal

__all__ = ["HalfNormal"]


class HalfNormal(_Folded):
    def __init__(self, scale, validate_args=None):
        super().__init__(Normal(0, scale, validate_args=False), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, self._get_checked_instance(HalfNormal, _instance))

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def variance(self):
        return self.scale.pow(2) * (1 - 2 / math.pi)
