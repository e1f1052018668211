"""HalfCauchy(scale): |x| for x ~ Cauchy(0, scale), as torch.distributions.HalfCauchy.

    log p(y) = ln 2 - ln(pi scale) - ln(1 + (y / scale)**2) on y >= 0;  the mean and variance are inf.
"""
import math

from ._folded import _Folded
from .cauchy import Cauchy

__all__ = ["HalfCauchy"]


class HalfCauchy(_Folded):
    def __init__(self, scale, validate_args=None):
        super().__init__(Cauchy(0, scale, validate_args=False), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, self._get_checked_instance(HalfCauchy, _instance))

    @property
    def mean(self):
        import minidl as md
        return md.full(tuple(self._extended_shape()), math.inf, dtype=self.scale.dtype, device=self.scale.device)

    @property
    def variance(self):
        return self.base_dist.variance
