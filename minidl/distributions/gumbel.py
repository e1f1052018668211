"""Gumbel(loc, scale): the distribution of the maximum of many draws, as torch.distributions.Gumbel.

    z = (x - loc) / scale,   log p(x) = -(z + e**-z) - ln scale,   cdf = exp(-e**-z)

rsample inverts the CDF: x = loc - scale ln(-ln u), u ~ U(tiny, 1 - eps). PyTorch builds Gumbel as a
TransformedDistribution of that Uniform; here it is a Distribution of its own with the same values,
samples' law and gradients (so ``isinstance(g, TransformedDistribution)`` is False).
"""
import math

from ..tensor.dtype_info import finfo
from ..tensor.size import Size
from .distribution import _LocScale
from .utils import _uniform01, euler_constant

__all__ = ["Gumbel"]


class Gumbel(_LocScale):
    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Gumbel, batch_shape, _instance)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        fi = finfo(self.loc.dtype)
        u = _uniform01(shape, dtype=self.loc.dtype, device=self.loc.device).clamp(min=fi.tiny, max=1 - fi.eps)
        return self.loc - self.scale * (-u.log()).log()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return (y - y.exp()) - self.scale.log()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (-(-(value - self.loc) / self.scale).exp()).exp()

    def icdf(self, value):
        return self.loc - self.scale * (-value.log()).log()

    @property
    def mean(self):
        return self.loc + self.scale * euler_constant

    @property
    def stddev(self):
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def entropy(self):
        return self.scale.log() + (1 + euler_constant)
