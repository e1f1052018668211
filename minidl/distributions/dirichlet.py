"""Dirichlet(concentration): a distribution over the probability simplex, as torch.distributions.Dirichlet.

    log p(x) = sum_i (a_i - 1) ln x_i + lnGamma(sum_i a_i) - sum_i lnGamma(a_i)

rsample normalises independent Gamma(a_i, 1) draws, x = g / sum(g), and differentiates through
that composition with each g_i's implicit reparameterisation gradient (_gamma.py). That is an
exact reparameterisation gradient (unbiased, and the same law of samples), but not PyTorch's:
PyTorch's ``_dirichlet_grad`` reparameterises each x_i through its marginal Beta CDF, so the
per-sample gradients differ while their expectations agree.
"""
from ..tensor.dtype_info import finfo
from . import constraints
from ._gamma import StandardGamma
from .exp_family import ExponentialFamily

__all__ = ["Dirichlet"]


def _rsample_dirichlet(concentration):
    g = StandardGamma.apply(concentration)
    x = g / g.sum(-1, keepdim=True)
    return x.clamp(min=finfo(x.dtype).tiny)


class Dirichlet(ExponentialFamily):
    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        batch_shape, event_shape = concentration.shape[:-1], concentration.shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Dirichlet, batch_shape, _instance)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        return _rsample_dirichlet(self.concentration.expand(shape))

    def log_prob(self, value):
        import minidl as md
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return md.xlogy(c - 1.0, value).sum(-1) + c.sum(-1).lgamma() - c.lgamma().sum(-1)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, True)

    @property
    def mode(self):
        import minidl as md
        from ..ops.one_hot import one_hot
        cm1 = (self.concentration - 1).clamp(min=0.0)
        mode = cm1 / cm1.sum(-1, True)
        # all a_i < 1: the density peaks at a vertex; PyTorch picks the argmax of the (NaN) ratio, i.e. vertex 0
        corner = one_hot(mode.argmax(-1), cm1.shape[-1]).to(mode.dtype)
        mask = (self.concentration < 1).all(-1, keepdim=True)
        return md.where(mask, corner, mode)

    @property
    def variance(self):
        c0 = self.concentration.sum(-1, True)
        return self.concentration * (c0 - self.concentration) / (c0.pow(2) * (c0 + 1))

    @property
    def _natural_params(self):
        return (self.concentration,)

    def _log_normalizer(self, x):
        return x.lgamma().sum(-1) - x.sum(-1).lgamma()

    def entropy(self):
        c = self.concentration
        k = c.size(-1)
        a0 = c.sum(-1)
        return c.lgamma().sum(-1) - a0.lgamma() - (k - a0) * a0.digamma() - ((c - 1.0) * c.digamma()).sum(-1)
