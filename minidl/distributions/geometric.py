"""Geometric(probs | logits): the number of failures before the first success of Bernoulli(p)
trials, P(k) = (1 - p)**k p for k = 0, 1, ..., as torch.distributions.Geometric.

Samples invert the CDF: k = floor(ln u / ln(1 - p)), u ~ U(tiny, 1). The entropy is the Bernoulli
cross-entropy over p (the entropy of one trial times the expected number of trials 1 / p).
"""
from ..tensor.dtype_info import finfo
from ..tensor.size import Size
from . import constraints
from .distribution import Distribution
from .utils import _bce_with_logits, _probs_logits_properties, _uniform01, _where, broadcast_all

__all__ = ["Geometric"]


class Geometric(Distribution):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        super().__init__(self._broadcast_probs_or_logits(probs, logits), validate_args=validate_args)
        if self._validate_args and probs is not None:
            # p = 0 would mean no success ever: the constraint is (0, 1], stricter than unit_interval
            value = self.probs
            if not bool((value > 0).all()):
                raise ValueError(f"Expected parameter probs ({type(value).__name__} of shape {tuple(value.shape)}) "
                                 f"of distribution {self!r} to satisfy the constraint "
                                 f"{constraints.interval(0.0, 1.0)!r}, but found invalid values:\n{value}")

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Geometric, batch_shape, _instance)

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        import minidl as md
        return md.zeros_like(self.probs)

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    logits, probs = _probs_logits_properties(is_binary=True)

    def sample(self, sample_shape=Size()):
        import minidl as md
        shape = self._extended_shape(sample_shape)
        tiny = finfo(self.probs.dtype).tiny
        with md.no_grad():
            u = _uniform01(shape, dtype=self.probs.dtype, device=self.probs.device).clamp(min=tiny)
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        probs = _where((probs == 1) & (value == 0), 0.0, probs)   # 0 * ln(0) at k = 0, p = 1: count it as 0
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self):
        return _bce_with_logits(self.logits, self.probs) / self.probs
