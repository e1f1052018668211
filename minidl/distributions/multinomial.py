"""Multinomial(total_count, probs | logits): the counts of each of K categories in total_count
Categorical draws, as torch.distributions.Multinomial (event_shape (K,)).

    log P(x) = lnG(sum x + 1) - sum lnG(x_i + 1) + sum x_i ln p_i

(a category of probability 0 drawn 0 times contributes 0, not 0 * -inf). log_prob does not need
total_count, so it scores counts of any total. Samples come from NumPy's multinomial sampler; the
entropy sums the Binomial marginals' E[lnG(x_i + 1)], as PyTorch's.
"""
import numpy as np

from ..tensor.size import Size
from . import constraints
from .binomial import Binomial
from .categorical import Categorical
from .distribution import Distribution
from .utils import _delegated, _host_draw, _where, broadcast_all

__all__ = ["Multinomial"]


class Multinomial(Distribution):
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._new_expanded(Multinomial, batch_shape, _instance, total_count=self.total_count,
                                  _categorical=self._categorical.expand(batch_shape))

    probs, logits, param_shape = _delegated("_categorical", "probs", "logits", "param_shape")

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        p = self.probs.detach().cpu().numpy().astype(np.float64)
        p = np.broadcast_to(p / p.sum(-1, keepdims=True), shape)
        return _host_draw(lambda rng, s: rng.multinomial(self.total_count, p), shape, self.probs.dtype,
                          self.probs.device)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_factorial_n = (value.sum(-1) + 1).lgamma()
        log_factorial_xs = (value + 1).lgamma().sum(-1)
        logits = _where((value == 0) & (logits == -float("inf")), 0.0, logits)
        return log_factorial_n - log_factorial_xs + (logits * value).sum(-1)

    def entropy(self):
        import minidl as md
        n = md.tensor(float(self.total_count), dtype=self.probs.dtype)
        term1 = n * self._categorical.entropy() - (n + 1).lgamma()
        # the Binomial marginals (counts 0..n of each category) broadcast over the batch
        binomial = Binomial(total_count=self.total_count, probs=self.probs, validate_args=False)
        support = binomial.enumerate_support(expand=False)[1:]
        binomial_probs = binomial.log_prob(support).exp()
        weights = (support + 1).lgamma()
        return term1 + (binomial_probs * weights).sum((0, -1))
