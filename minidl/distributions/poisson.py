"""Poisson(rate): counts k >= 0 with P(k) = rate**k e**-rate / k!, as torch.distributions.Poisson.

log P(k) = k ln rate - rate - lnGamma(k + 1) (xlogy, so k = 0 at rate = 0 gives 0). Samples come from
NumPy's Poisson sampler (no rsample: the counts are not differentiable in the rate).
"""
from ..tensor.size import Size
from . import constraints
from .exp_family import ExponentialFamily
from .utils import broadcast_all

__all__ = ["Poisson"]


class Poisson(ExponentialFamily):
    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        super().__init__(self._broadcast_params(rate=rate), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Poisson, batch_shape, _instance)

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=Size()):
        import minidl as md
        shape = self._extended_shape(sample_shape)
        with md.no_grad():
            return md.poisson(self.rate.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return value.xlogy(rate) - rate - (value + 1).lgamma()

    @property
    def _natural_params(self):
        return (self.rate.log(),)

    def _log_normalizer(self, x):
        return x.exp()
