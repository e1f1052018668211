"""RelaxedBernoulli(temperature, probs | logits): a continuous relaxation of the Bernoulli on (0, 1)
(the binary Concrete / Gumbel-softmax distribution of Maddison et al. and Jang et al., 2017), as
torch.distributions.RelaxedBernoulli: the sigmoid of a LogitRelaxedBernoulli draw.

LogitRelaxedBernoulli(t, l) draws y = (l + logistic noise) / t, with the noise ln u - ln(1 - u) for
u ~ U(0, 1), so rsample is differentiable in the logits; its density is

    log p(y) = ln t + (l - t y) - 2 ln(1 + e**(l - t y)).

As t -> 0 the sigmoid of y tends to a Bernoulli(sigmoid(l)) draw.
"""
from ..tensor.size import Size
from . import constraints
from .distribution import Distribution
from .transformed_distribution import TransformedDistribution
from .transforms import SigmoidTransform
from .utils import _delegated, _param_shape, _probs_logits_properties, _uniform01, broadcast_all, clamp_probs

__all__ = ["LogitRelaxedBernoulli", "RelaxedBernoulli"]


class LogitRelaxedBernoulli(Distribution):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self.temperature = temperature
        super().__init__(self._broadcast_probs_or_logits(probs, logits), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(LogitRelaxedBernoulli, batch_shape, _instance, share=("temperature",))

    logits, probs = _probs_logits_properties(is_binary=True)
    param_shape = _param_shape

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        probs = clamp_probs(self.probs.expand(shape))
        uniforms = clamp_probs(_uniform01(shape, dtype=probs.dtype, device=probs.device))
        return (uniforms.log() - (-uniforms).log1p() + probs.log() - (-probs).log1p()) / self.temperature

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        diff = logits - value * self.temperature
        return self.temperature.log() + diff - 2 * diff.exp().log1p()


class RelaxedBernoulli(TransformedDistribution):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base_dist = LogitRelaxedBernoulli(temperature, probs, logits)
        super().__init__(base_dist, SigmoidTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, self._get_checked_instance(RelaxedBernoulli, _instance))

    temperature, logits, probs = _delegated("base_dist", "temperature", "logits", "probs")
