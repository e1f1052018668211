"""Bernoulli(probs | logits): 1 with probability p, else 0, as torch.distributions.Bernoulli.

Given by ``probs`` p or by ``logits`` l = ln(p / (1 - p)) (exactly one); the other is computed on
first use. log p(x) = x l - softplus(l) (the negated binary cross-entropy with logits, stable for
any l), and the entropy is the cross-entropy of p with itself.
"""
from ..tensor.size import Size
from . import constraints
from .exp_family import ExponentialFamily
from .utils import _bce_with_logits, _param_shape, _probs_logits_properties, _where, broadcast_all

__all__ = ["Bernoulli"]


class Bernoulli(ExponentialFamily):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True
    _mean_carrier_measure = 0

    def __init__(self, probs=None, logits=None, validate_args=None):
        super().__init__(self._broadcast_probs_or_logits(probs, logits), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Bernoulli, batch_shape, _instance)

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return _where(self.probs == 0.5, float("nan"), mode)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    logits, probs = _probs_logits_properties(is_binary=True)
    param_shape = _param_shape

    def sample(self, sample_shape=Size()):
        import minidl as md
        shape = self._extended_shape(sample_shape)
        with md.no_grad():
            return md.bernoulli(self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -_bce_with_logits(logits, value)

    def entropy(self):
        return _bce_with_logits(self.logits, self.probs)

    @property
    def _natural_params(self):
        return (self.probs.logit(),)

    def _log_normalizer(self, x):
        return x.exp().log1p()

    def enumerate_support(self, expand=True):
        import minidl as md
        values = md.arange(2, dtype=self._param.dtype, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
