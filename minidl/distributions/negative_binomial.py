"""NegativeBinomial(total_count, probs | logits): the number of successes before total_count failures
of Bernoulli(p) trials, as torch.distributions.NegativeBinomial (total_count may be any r >= 0).

    log P(k) = r ln sigmoid(-l) + k ln sigmoid(l) + lnG(r + k) - lnG(k + 1) - lnG(r),

l the logits (so it is finite for any l; r = k = 0 has probability 1). Samples are Poisson draws
at Gamma(r, e**-l) rates (the Gamma-Poisson mixture), as PyTorch's.
"""
from ..ops.activation_elementwise import logsigmoid
from ..tensor.size import Size
from . import constraints
from .distribution import Distribution
from .gamma import Gamma
from .utils import _param_shape, _probs_logits_properties, _where, lazy_property

__all__ = ["NegativeBinomial"]


class NegativeBinomial(Distribution):
    arg_constraints = {"total_count": constraints.greater_than_eq(0),
                       "probs": constraints.half_open_interval(0.0, 1.0), "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        batch_shape = self._broadcast_probs_or_logits(probs, logits, total_count=total_count)
        self.total_count = self.total_count.type_as(self._param)
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(NegativeBinomial, batch_shape, _instance)

    logits, probs = _probs_logits_properties(is_binary=True)
    param_shape = _param_shape

    @property
    def mean(self):
        return self.total_count * self.logits.exp()

    @property
    def mode(self):
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self):
        return self.mean / (-self.logits).sigmoid()

    @lazy_property
    def _gamma(self):
        return Gamma(concentration=self.total_count, rate=(-self.logits).exp(), validate_args=False)

    def sample(self, sample_shape=Size()):
        import minidl as md
        with md.no_grad():
            return md.poisson(self._gamma.sample(sample_shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_unnormalized_prob = self.total_count * logsigmoid(-self.logits) + value * logsigmoid(self.logits)
        log_normalization = (-(self.total_count + value).lgamma() + (1.0 + value).lgamma()
                             + self.total_count.lgamma())
        # r = k = 0 has probability 1, but lnG(0) is infinite
        log_normalization = _where(self.total_count + value == 0.0, 0.0, log_normalization)
        return log_unnormalized_prob - log_normalization
