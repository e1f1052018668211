"""Binomial(total_count, probs | logits): successes in total_count Bernoulli(p) trials, as
torch.distributions.Binomial.

    log P(k) = k l - n max(l, 0) - n ln(1 + e**-|l|) + ln n! - ln k! - ln (n-k)!

with l the logits, which is ln C(n, k) + k ln p + (n - k) ln(1 - p) written to stay finite for any l
(n softplus(l) = n (max(l, 0) + ln(1 + e**-|l|))). Samples come from NumPy's binomial sampler.
"""
from ..tensor.size import Size
from . import constraints
from .distribution import Distribution
from .utils import _host_draw, _param_shape, _probs_logits_properties

__all__ = ["Binomial"]


def _clamp_by_zero(x):
    # max(x, 0) whose gradient at x = 0 is 1/2, as PyTorch's
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(Distribution):
    arg_constraints = {"total_count": constraints.nonnegative_integer, "probs": constraints.unit_interval,
                       "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        batch_shape = self._broadcast_probs_or_logits(probs, logits, total_count=total_count)
        self.total_count = self.total_count.type_as(self._param)
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Binomial, batch_shape, _instance)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    logits, probs = _probs_logits_properties(is_binary=True)
    param_shape = _param_shape

    def sample(self, sample_shape=Size()):
        import minidl as md
        shape = tuple(self._extended_shape(sample_shape))
        with md.no_grad():
            n = self.total_count.expand(shape).detach().cpu().numpy().astype("int64")
            p = self.probs.expand(shape).detach().cpu().numpy()
            return _host_draw(lambda rng, s: rng.binomial(n, p), shape, self.probs.dtype, self.probs.device)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_factorial_n = (self.total_count + 1).lgamma()
        log_factorial_k = (value + 1).lgamma()
        log_factorial_nmk = (self.total_count - value + 1).lgamma()
        normalize_term = (self.total_count * _clamp_by_zero(self.logits)
                          + self.total_count * (-self.logits.abs()).exp().log1p() - log_factorial_n)
        return value * self.logits - log_factorial_k - log_factorial_nmk - normalize_term

    def entropy(self):
        total_count = int(self.total_count.max())
        if not self.total_count.min() == total_count:
            raise NotImplementedError("Inhomogeneous total count not supported by `entropy`.")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(log_prob.exp() * log_prob).sum(0)

    def enumerate_support(self, expand=True):
        import minidl as md
        total_count = int(self.total_count.max())
        if not self.total_count.min() == total_count:
            raise NotImplementedError("Inhomogeneous total count not supported by `enumerate_support`.")
        values = md.arange(1 + total_count, dtype=self._param.dtype, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
