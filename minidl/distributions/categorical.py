"""Categorical(probs | logits): one of K categories, as torch.distributions.Categorical.

``probs`` (normalised over the last dim here) or ``logits`` (unnormalised log-probabilities,
normalised by subtracting their logsumexp); the last dim indexes the categories, the others are
batch dims. log p(k) = logits[k]; H = -sum_k p_k logits_k (logits clamped to the dtype's lowest
finite value, so a zero probability contributes 0 rather than 0 * -inf).
"""
from ..tensor.dtype_info import finfo
from ..tensor.size import Size
from . import constraints
from .distribution import Distribution
from .utils import _param_shape, _probs_logits_properties, _probs_or_logits

__all__ = ["Categorical"]


class Categorical(Distribution):
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        name, param = _probs_or_logits(probs, logits)
        if param.dim() < 1:
            raise ValueError(f"`{name}` parameter must be at least one-dimensional.")
        if name == "probs":
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        self._param = getattr(self, name)
        self._num_events = self._param.size()[-1]
        batch_shape = self._param.size()[:-1] if self._param.ndim > 1 else Size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Categorical, batch_shape, _instance, share=("_num_events",))

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    logits, probs = _probs_logits_properties(is_binary=False)
    param_shape = _param_shape

    @property
    def mean(self):
        import minidl as md
        return md.full(tuple(self._extended_shape()), float("nan"), dtype=self.probs.dtype)

    @property
    def mode(self):
        return self.probs.argmax(-1)

    @property
    def variance(self):
        return self.mean

    def sample(self, sample_shape=Size()):
        import minidl as md
        sample_shape = Size(tuple(sample_shape))
        with md.no_grad():
            probs_2d = self.probs.reshape(-1, self._num_events)
            samples_2d = md.multinomial(probs_2d, max(sample_shape.numel(), 1), True).T
            if sample_shape.numel() == 0:
                samples_2d = samples_2d[:0]
            return samples_2d.reshape(tuple(self._extended_shape(sample_shape)))

    def log_prob(self, value):
        import minidl as md
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = md.broadcast_tensors(value, self.logits)
        value = value[..., :1]
        return log_pmf.gather(-1, value).squeeze(-1)

    def entropy(self):
        logits = self.logits.clamp(min=finfo(self.logits.dtype).min)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        import minidl as md
        values = md.arange(self._num_events, dtype=md.int64, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
