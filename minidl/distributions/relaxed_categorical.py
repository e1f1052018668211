"""RelaxedOneHotCategorical(temperature, probs | logits): a continuous relaxation of the one-hot
Categorical on the simplex (the Concrete / Gumbel-softmax distribution), as
torch.distributions.RelaxedOneHotCategorical: the exp of an ExpRelaxedCategorical draw.

ExpRelaxedCategorical(t, logits) draws the log of softmax((logits + g) / t), g_i iid standard
Gumbel noise -ln(-ln u_i), so rsample is differentiable in the logits; its density over the
log-simplex is

    log p(y) = lnG(K) + (K - 1) ln t + sum_i s_i - K logsumexp(s),   s = logits - t y

(written, as PyTorch's, as sum_i (s_i - logsumexp(s)) + lnG(K) + (K - 1) ln t).
"""
from ..tensor.size import Size
from . import constraints
from .categorical import Categorical
from .distribution import Distribution
from .transformed_distribution import TransformedDistribution
from .transforms import ExpTransform
from .utils import _delegated, _uniform01, broadcast_all, clamp_probs

__all__ = ["ExpRelaxedCategorical", "RelaxedOneHotCategorical"]


class ExpRelaxedCategorical(Distribution):
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        self.temperature = temperature
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._new_expanded(ExpRelaxedCategorical, batch_shape, _instance, temperature=self.temperature,
                                  _categorical=self._categorical.expand(batch_shape))

    param_shape, logits, probs = _delegated("_categorical", "param_shape", "logits", "probs")

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        uniforms = clamp_probs(_uniform01(shape, dtype=self.logits.dtype, device=self.logits.device))
        gumbels = -((-(uniforms.log())).log())
        scores = (self.logits + gumbels) / self.temperature
        return scores - scores.logsumexp(dim=-1, keepdim=True)

    def log_prob(self, value):
        import minidl as md
        k = self._categorical._num_events
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_scale = md.full_like(self.temperature, float(k)).lgamma() + (k - 1) * self.temperature.log()
        score = logits - value * self.temperature
        score = (score - score.logsumexp(dim=-1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(TransformedDistribution):
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base_dist = ExpRelaxedCategorical(temperature, probs, logits, validate_args=validate_args)
        super().__init__(base_dist, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, self._get_checked_instance(RelaxedOneHotCategorical, _instance))

    temperature, logits, probs = _delegated("base_dist", "temperature", "logits", "probs")
