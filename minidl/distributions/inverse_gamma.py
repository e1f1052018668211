"""InverseGamma(concentration, rate): the law of 1 / X for X ~ Gamma(concentration, rate), as
torch.distributions.InverseGamma (a TransformedDistribution of the Gamma by PowerTransform(-1), so
log_prob comes from the change of variables and rsample is differentiable through the Gamma's).
With a = concentration and b = rate, on y > 0:

    log p(y) = a ln b - lnGamma(a) - (a + 1) ln y - b / y
    mean = b / (a - 1) (a > 1),   mode = b / (a + 1),   variance = b**2 / ((a - 1)**2 (a - 2)) (a > 2)
    H = a + ln b + lnGamma(a) - (1 + a) digamma(a)

with the mean and variance inf where they do not exist, as PyTorch's.
"""
from . import constraints
from .gamma import Gamma
from .transformed_distribution import TransformedDistribution
from .transforms_more import PowerTransform
from .utils import _delegated

__all__ = ["InverseGamma"]

_INF = float("inf")


class InverseGamma(TransformedDistribution):
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        base_dist = Gamma(concentration, rate, validate_args=validate_args)
        neg_one = -base_dist.rate.new_ones(())
        super().__init__(base_dist, PowerTransform(neg_one), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(InverseGamma, _instance)
        return super().expand(batch_shape, _instance=new)

    concentration, rate = _delegated("base_dist", "concentration", "rate")

    @property
    def mean(self):
        import minidl as md
        return md.where(self.concentration > 1, self.rate / (self.concentration - 1), _INF)

    @property
    def mode(self):
        return self.rate / (self.concentration + 1)

    @property
    def variance(self):
        import minidl as md
        c = self.concentration
        return md.where(c > 2, self.rate.square() / ((c - 1).square() * (c - 2)), _INF)

    def entropy(self):
        c = self.concentration
        return c + self.rate.log() + c.lgamma() - (1 + c) * c.digamma()
