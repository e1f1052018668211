"""OneHotCategorical(probs | logits): a Categorical whose samples are one-hot vectors of length K,
as torch.distributions.OneHotCategorical (event_shape (K,)); it delegates to a Categorical."""
from ..tensor.size import Size
from . import constraints
from .categorical import Categorical
from .distribution import Distribution
from .utils import _delegated

__all__ = ["OneHotCategorical"]


class OneHotCategorical(Distribution):
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._new_expanded(OneHotCategorical, batch_shape, _instance,
                                  _categorical=self._categorical.expand(batch_shape))

    _param, probs, logits, param_shape = _delegated("_categorical", "_param", "probs", "logits", "param_shape")

    @property
    def mean(self):
        return self._categorical.probs

    @property
    def mode(self):
        from ..ops.one_hot import one_hot
        probs = self._categorical.probs
        return one_hot(probs.argmax(-1), probs.shape[-1]).to(probs.dtype)

    @property
    def variance(self):
        return self._categorical.probs * (1 - self._categorical.probs)

    def sample(self, sample_shape=Size()):
        from ..ops.one_hot import one_hot
        probs = self._categorical.probs
        indices = self._categorical.sample(sample_shape)
        return one_hot(indices, probs.shape[-1]).to(probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        indices = value.max(-1)[1]
        return self._categorical.log_prob(indices)

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand=True):
        import minidl as md
        n = self.event_shape[0]
        values = md.eye(n, dtype=self._param.dtype, device=self._param.device)
        values = values.view((n,) + (1,) * len(self.batch_shape) + (n,))
        if expand:
            values = values.expand((n,) + tuple(self.batch_shape) + (n,))
        return values
