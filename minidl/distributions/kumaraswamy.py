"""Kumaraswamy(concentration1, concentration0): density a b x**(a-1) (1 - x**a)**(b-1) on [0, 1], as
torch.distributions.Kumaraswamy: (1 - u**(1/b))**(1/a) for u ~ U(0, 1) (a TransformedDistribution by
PowerTransform(1/b), AffineTransform(1, -1), PowerTransform(1/a): its CDF 1 - (1 - x**a)**b inverts
in closed form, so rsample is differentiable in both).

    E[x**n] = b B(1 + n/a, b),   mode = ((a - 1) / (a b - 1))**(1/a) (NaN when a < 1 or b < 1),
    H = (1 - 1/b) + (1 - 1/a) (psi(b + 1) + gamma_E) - ln a - ln b

The mode is that closed form (the maximiser of the density); PyTorch's evaluates
ln(1 - b) / b - ln(1 - a b), which is NaN for every b > 1, so the two differ there.
"""
import math

from . import constraints
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, PowerTransform
from .uniform import Uniform
from .utils import _where, broadcast_all, euler_constant

__all__ = ["Kumaraswamy"]


def _moments(a, b, n):
    """E[x**n] = b Gamma(1 + n/a) Gamma(b) / Gamma(1 + n/a + b)."""
    arg1 = 1 + n / a
    return b * (arg1.lgamma() + b.lgamma() - (arg1 + b).lgamma()).exp()


class Kumaraswamy(TransformedDistribution):
    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        c0 = self.concentration0
        base_dist = Uniform(c0.new_zeros(c0.shape), c0.new_ones(c0.shape), validate_args=validate_args)
        transforms = [PowerTransform(exponent=c0.reciprocal()), AffineTransform(loc=1.0, scale=-1.0),
                      PowerTransform(exponent=self.concentration1.reciprocal())]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, self._get_checked_instance(Kumaraswamy, _instance))

    @property
    def mean(self):
        return _moments(self.concentration1, self.concentration0, 1)

    @property
    def mode(self):
        a, b = self.concentration1, self.concentration0
        log_mode = ((a - 1).log() - (a * b - 1).log()) / a
        return _where((b < 1) | (a < 1), math.nan, log_mode).exp()

    @property
    def variance(self):
        return _moments(self.concentration1, self.concentration0, 2) - self.mean.pow(2)

    def entropy(self):
        t1 = 1 - self.concentration1.reciprocal()
        t0 = 1 - self.concentration0.reciprocal()
        h0 = (self.concentration0 + 1).digamma() + euler_constant
        return t0 + t1 * h0 - self.concentration1.log() - self.concentration0.log()
