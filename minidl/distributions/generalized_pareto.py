"""GeneralizedPareto(loc, scale, concentration): the law of the excesses over a high threshold, as
torch.distributions.GeneralizedPareto (after TensorFlow Probability's). With z = (x - loc) / scale
and concentration xi,

    survival S(x) = (1 + xi z)**(-1/xi),   log p(x) = -ln scale - (1/xi + 1) ln(1 + xi z)

and their xi -> 0 limits, S = e**-z and log p = -ln scale - z (the Exponential). xi = 0 is detected
with isclose and the closed forms are evaluated at xi = 1 there (then discarded), so neither branch
divides by zero and the gradients stay finite. The support is [loc, inf) for xi >= 0 and
[loc, loc - scale / xi] for xi < 0. rsample is icdf(u), u ~ U[0, 1):

    icdf(u) = loc + scale / xi * expm1(-xi ln(1 - u))      (loc - scale ln(1 - u) at xi = 0)

differentiable in all three parameters. The mean exists for xi < 1 and the variance for xi < 1/2
(NaN elsewhere); the entropy is ln scale + xi + 1.
"""
from ..tensor.size import Size
from . import constraints
from .distribution import Distribution
from .utils import _attr_property, _uniform01

__all__ = ["GeneralizedPareto"]

_NAN, _INF = float("nan"), float("inf")


class GeneralizedPareto(Distribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive, "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args=None):
        batch_shape = self._broadcast_params(loc=loc, scale=scale, concentration=concentration)
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(GeneralizedPareto, batch_shape, _instance)

    def _safe_concentration(self):
        """(xi == 0 by isclose, xi with 1 in those places)."""
        import minidl as md
        eq_zero = md.isclose(self.concentration, md.zeros_like(self.concentration))
        return eq_zero, md.where(eq_zero, md.ones_like(self.concentration), self.concentration)

    def _z(self, x):
        return (x - self.loc) / self.scale

    def rsample(self, sample_shape=Size()):
        u = _uniform01(self._extended_shape(sample_shape), dtype=self.loc.dtype, device=self.loc.device)
        return self.icdf(u)

    def log_prob(self, value):
        import minidl as md
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe_conc = self._safe_concentration()
        y = 1 / safe_conc + md.ones_like(z)
        where_nonzero = md.where(y == 0, y, y * (safe_conc * z).log1p())
        return -self.scale.log() - md.where(eq_zero, z, where_nonzero)

    def log_survival_function(self, value):
        """ln S(x) = -ln(1 + xi z) / xi (-z at xi = 0)."""
        import minidl as md
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe_conc = self._safe_concentration()
        where_nonzero = -(safe_conc * z).log1p() / safe_conc
        return md.where(eq_zero, -z, where_nonzero)

    def log_cdf(self, value):
        return (-self.log_survival_function(value).exp()).log1p()

    def cdf(self, value):
        return self.log_cdf(value).exp()

    def icdf(self, value):
        import minidl as md
        eq_zero, safe_conc = self._safe_concentration()
        logu = (-value).log1p()
        where_nonzero = self.loc + self.scale / safe_conc * (-safe_conc * logu).expm1()
        where_zero = self.loc - self.scale * logu
        return md.where(eq_zero, where_zero, where_nonzero)

    @property
    def mean(self):
        import minidl as md
        valid = self.concentration < 1
        safe_conc = md.where(valid, self.concentration, 0.5)
        return md.where(valid, self.loc + self.scale / (1 - safe_conc), _NAN)

    @property
    def variance(self):
        import minidl as md
        valid = self.concentration < 0.5
        safe_conc = md.where(valid, self.concentration, 0.25)
        return md.where(valid, self.scale ** 2 / ((1 - safe_conc) ** 2 * (1 - 2 * safe_conc)), _NAN)

    def entropy(self):
        return (self.scale.log() + self.concentration + 1).broadcast_to(tuple(self._batch_shape))

    mode = _attr_property("loc")

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        import minidl as md
        lower = self.loc
        negative = self.concentration < 0
        safe_conc = md.where(negative, self.concentration, -1.0)
        upper = md.where(negative, lower - self.scale / safe_conc, _INF)
        return constraints.interval(lower, upper)
