"""OneHotCategoricalStraightThrough(probs | logits): a OneHotCategorical with an rsample, as
torch.distributions.OneHotCategoricalStraightThrough: the straight-through gradient estimator
(Bengio et al., 2013, "Estimating or propagating gradients through stochastic neurons").

    rsample = s + (p - stop_gradient(p)),   s the one-hot sample, p the probabilities

The value is the one-hot sample (the added term is zero), and the gradient passes to the
probabilities as if the sample were p itself (d rsample / dp = I): a biased estimate that lets a
discrete choice sit inside a differentiable model.
"""
from ..tensor.size import Size
from .one_hot_categorical import OneHotCategorical

__all__ = ["OneHotCategoricalStraightThrough"]


class OneHotCategoricalStraightThrough(OneHotCategorical):
    has_rsample = True

    def rsample(self, sample_shape=Size()):
        samples = self.sample(sample_shape)
        probs = self._categorical.probs   # computed once and cached (lazy_property)
        return samples + (probs - probs.detach())
