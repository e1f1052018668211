"""Weibull(scale, concentration): density (k / s) (x / s)**(k-1) e**(-(x / s)**k) on x > 0, as
torch.distributions.Weibull: scale * e**(1/k) for e ~ Exponential(1) (a TransformedDistribution by
PowerTransform(1/k) then AffineTransform(0, scale), so rsample is differentiable in both).

    mean = s G(1 + 1/k),   variance = s**2 (G(1 + 2/k) - G(1 + 1/k)**2),
    mode = s ((k - 1) / k)**(1/k),   H = gamma_E (1 - 1/k) + ln(s / k) + 1
"""
from . import constraints
from .exponential import Exponential
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, PowerTransform
from .utils import broadcast_all, euler_constant

__all__ = ["Weibull"]


def _transforms(scale, concentration_reciprocal):
    return [PowerTransform(exponent=concentration_reciprocal), AffineTransform(loc=0, scale=scale)]


class Weibull(TransformedDistribution):
    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive

    def __init__(self, scale, concentration, validate_args=None):
        self.scale, self.concentration = broadcast_all(scale, concentration)
        self.concentration_reciprocal = self.concentration.reciprocal()
        base_dist = Exponential(self.scale.new_ones(self.scale.shape), validate_args=validate_args)
        super().__init__(base_dist, _transforms(self.scale, self.concentration_reciprocal),
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape, self._get_checked_instance(Weibull, _instance))
        new.concentration_reciprocal = new.concentration.reciprocal()
        new.transforms = _transforms(new.scale, new.concentration_reciprocal)
        return new

    @property
    def mean(self):
        return self.scale * (1 + self.concentration_reciprocal).lgamma().exp()

    @property
    def mode(self):
        return self.scale * ((self.concentration - 1) / self.concentration) ** self.concentration.reciprocal()

    @property
    def variance(self):
        return self.scale.pow(2) * ((1 + 2 * self.concentration_reciprocal).lgamma().exp()
                                    - (2 * (1 + self.concentration_reciprocal).lgamma()).exp())

    def entropy(self):
        k_inv = self.concentration_reciprocal
        return euler_constant * (1 - k_inv) + (self.scale * k_inv).log() + 1
