"""The half of a distribution symmetric about 0, folded onto [0, inf) by |x| (HalfNormal, HalfCauchy).

For a base density p symmetric about 0, y = |x| has density 2 p(y) on y >= 0 (0 below), the CDF
2 F(y) - 1, the quantile F^-1((u + 1) / 2) and the entropy H(p) - ln 2 (as PyTorch's).
"""
import math

from . import constraints
from .transformed_distribution import TransformedDistribution
from .transforms import AbsTransform
from .utils import _delegated

__all__ = []


class _Folded(TransformedDistribution):
    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, base_dist, validate_args=None):
        super().__init__(base_dist, AbsTransform(), validate_args=validate_args)

    (scale,) = _delegated("base_dist", "scale")

    @property
    def mode(self):
        import minidl as md
        return md.zeros_like(self.scale)

    def log_prob(self, value):
        import minidl as md
        if self._validate_args:
            self._validate_sample(value)
        value = value if isinstance(value, md.Tensor) else md.tensor(value, dtype=self.scale.dtype,
                                                                      device=self.scale.device)
        log_prob = self.base_dist.log_prob(value) + math.log(2)
        return md.where(value >= 0, log_prob, md.full_like(log_prob, -math.inf))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob):
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)
