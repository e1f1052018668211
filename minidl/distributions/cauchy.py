"""Cauchy(loc, scale): density 1 / (pi scale (1 + z**2)), z = (x - loc) / scale, as
torch.distributions.Cauchy (the Student-t with one degree of freedom: no mean, infinite variance).

    cdf = atan(z) / pi + 1/2,   icdf(u) = loc + scale tan(pi (u - 1/2)),   H = ln(4 pi scale)

rsample is loc + scale eps with eps a standard Cauchy draw (NumPy's): differentiable in loc and scale.
"""
import math

from ..tensor.size import Size
from .distribution import _LocScale
from .utils import _host_draw

__all__ = ["Cauchy"]


class Cauchy(_LocScale):
    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Cauchy, batch_shape, _instance)

    @property
    def mean(self):
        import minidl as md
        return md.full(tuple(self._extended_shape()), math.nan, dtype=self.loc.dtype, device=self.loc.device)

    @property
    def variance(self):
        import minidl as md
        return md.full(tuple(self._extended_shape()), math.inf, dtype=self.loc.dtype, device=self.loc.device)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        eps = _host_draw(lambda rng, s: rng.standard_cauchy(s), shape, self.loc.dtype, self.loc.device)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -math.log(math.pi) - self.scale.log() - (((value - self.loc) / self.scale) ** 2).log1p()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.loc) / self.scale).atan() / math.pi + 0.5

    def icdf(self, value):
        return (math.pi * (value - 0.5)).tan() * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()
