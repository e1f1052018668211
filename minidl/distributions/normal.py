"""Normal(loc, scale): the Gaussian with mean loc and standard deviation scale, as torch.distributions.Normal.

    log p(x) = -(x - loc)**2 / (2 scale**2) - ln scale - ln sqrt(2 pi)
    H = 1/2 + ln sqrt(2 pi) + ln scale,   cdf = (1 + erf((x - loc) / (scale sqrt 2))) / 2

rsample is loc + scale * eps with eps ~ N(0, 1): differentiable in loc and scale.
"""
import math
import numbers

from ..tensor.size import Size
from .distribution import _LocScale
from .exp_family import ExponentialFamily
from .utils import _attr_property, _standard_normal

__all__ = ["Normal"]


class Normal(_LocScale, ExponentialFamily):
    _mean_carrier_measure = 0

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Normal, batch_shape, _instance)

    mean = _attr_property("loc")

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        eps = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        var = self.scale ** 2
        log_scale = math.log(self.scale) if isinstance(self.scale, numbers.Real) else self.scale.log()
        return -((value - self.loc) ** 2) / (2 * var) - log_scale - math.log(math.sqrt(2 * math.pi))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + ((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)).erf())

    def icdf(self, value):
        return self.loc + self.scale * (2 * value - 1).erfinv() * math.sqrt(2)

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()

    @property
    def _natural_params(self):
        return (self.loc / self.scale.pow(2), -0.5 * self.scale.pow(2).reciprocal())

    def _log_normalizer(self, x, y):
        return -0.25 * x.pow(2) / y + 0.5 * (-math.pi / y).log()
