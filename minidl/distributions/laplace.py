"""Laplace(loc, scale): density e**(-|x - loc| / scale) / (2 scale), as torch.distributions.Laplace.

rsample inverts the CDF at u ~ U(-1, 1): x = loc - scale sign(u) ln(1 - |u|), differentiable in
loc and scale.
"""
from ..tensor.dtype_info import finfo
from ..tensor.size import Size
from .distribution import _LocScale
from .utils import _attr_property, _uniform01

__all__ = ["Laplace"]


class Laplace(_LocScale):
    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Laplace, batch_shape, _instance)

    mean = _attr_property("loc")

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return (2 ** 0.5) * self.scale

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        eps = finfo(self.loc.dtype).eps
        u = (eps - 1) + (2 - eps) * _uniform01(shape, dtype=self.loc.dtype, device=self.loc.device)   # [eps-1, 1)
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * (-(value - self.loc).abs() / self.scale).expm1()

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * (-2 * term.abs()).log1p()

    def entropy(self):
        return 1 + (2 * self.scale).log()


