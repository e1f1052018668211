"""ContinuousBernoulli(probs | logits): the density C(p) p**x (1 - p)**(1-x) on [0, 1] (Loaiza-Ganem
and Cunningham, 2019), as torch.distributions.ContinuousBernoulli. ``probs`` is not a probability
here (nor ``logits`` log-odds), only named after the Bernoulli's.

    log C(p) = ln |ln(1 - p) - ln p| - ln |1 - 2p|,     log p(x) = -BCE(l, x) + log C(p)
    cdf(x) = (p**x (1-p)**(1-x) + p - 1) / (2p - 1),
    icdf(u) = (ln(1 - p + u (2p - 1)) - ln(1 - p)) / (ln p - ln(1 - p))

Each of these is 0/0 at p = 1/2 (where the law is uniform), so for p in (lims[0], lims[1]] the
closed forms are evaluated at p = lims[0] (to keep their gradients finite) and replaced by a
Taylor expansion about 1/2, as PyTorch does. rsample is icdf(u), u ~ U[0, 1): differentiable.
"""
import math

from ..tensor.size import Size
from . import constraints
from .exp_family import ExponentialFamily
from .utils import _bce_with_logits, _param_shape, _uniform01, broadcast_all, clamp_probs, lazy_property, \
    logits_to_probs, probs_to_logits

__all__ = ["ContinuousBernoulli"]


class ContinuousBernoulli(ExponentialFamily):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        batch_shape = self._broadcast_probs_or_logits(probs, logits)
        if probs is not None:
            if validate_args is not None and not bool(self.arg_constraints["probs"].check(self.probs).all()):
                raise ValueError("The parameter probs has invalid values")
            self.probs = self._param = clamp_probs(self.probs)
        self._lims = lims
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(ContinuousBernoulli, batch_shape, _instance, share=("_lims",))

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    param_shape = _param_shape

    def _outside_unstable_region(self):
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self):
        import minidl as md
        return md.where(self._outside_unstable_region(), self.probs, md.full_like(self.probs, self._lims[0]))

    def _cont_bern_log_norm(self):
        """log C(p), the log normalising constant, as a function of probs."""
        import minidl as md
        cut = self._cut_probs()
        below_half = md.where(cut <= 0.5, cut, md.zeros_like(cut))
        above_half = md.where(cut >= 0.5, cut, md.ones_like(cut))
        log_norm = ((-cut).log1p() - cut.log()).abs().log() - md.where(
            cut <= 0.5, (-2.0 * below_half).log1p(), (2.0 * above_half - 1.0).log())
        x = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return md.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self):
        import minidl as md
        cut = self._cut_probs()
        mus = cut / (2.0 * cut - 1.0) + 1.0 / ((-cut).log1p() - cut.log())
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x.pow(2)) * x
        return md.where(self._outside_unstable_region(), mus, taylor)

    @property
    def variance(self):
        import minidl as md
        cut = self._cut_probs()
        variances = cut * (cut - 1.0) / (1.0 - 2.0 * cut).pow(2) + 1.0 / ((-cut).log1p() - cut.log()).pow(2)
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return md.where(self._outside_unstable_region(), variances, taylor)

    def sample(self, sample_shape=Size()):
        import minidl as md
        u = _uniform01(self._extended_shape(sample_shape), dtype=self.probs.dtype, device=self.probs.device)
        with md.no_grad():
            return self.icdf(u)

    def rsample(self, sample_shape=Size()):
        u = _uniform01(self._extended_shape(sample_shape), dtype=self.probs.dtype, device=self.probs.device)
        return self.icdf(u)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -_bce_with_logits(logits, value) + self._cont_bern_log_norm()

    def cdf(self, value):
        import minidl as md
        if self._validate_args:
            self._validate_sample(value)
        cut = self._cut_probs()
        cdfs = (cut.pow(value) * (1.0 - cut).pow(1.0 - value) + cut - 1.0) / (2.0 * cut - 1.0)
        unbounded = md.where(self._outside_unstable_region(), cdfs, value)
        return md.where(value <= 0.0, md.zeros_like(unbounded),
                        md.where(value >= 1.0, md.ones_like(unbounded), unbounded))

    def icdf(self, value):
        import minidl as md
        cut = self._cut_probs()
        closed = ((-cut + value * (2.0 * cut - 1.0)).log1p() - (-cut).log1p()) / (cut.log() - (-cut).log1p())
        return md.where(self._outside_unstable_region(), closed, value)

    def entropy(self):
        log_probs0 = (-self.probs).log1p()
        log_probs1 = self.probs.log()
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0

    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        """F(l) = ln((e**l - 1) / l) = ln of the integral of e**(l x) over [0, 1]; 0/0 at l = 0, so near it
        (as PyTorch, the band is the probs' ``lims`` shifted by -1/2, applied to l) the closed form is
        evaluated at the band's edge and replaced by its Taylor series l/2 + l**2/24 - l**4/2880."""
        import minidl as md
        out_unst_reg = (x <= self._lims[0] - 0.5) | (x > self._lims[1] - 0.5)
        cut_nat_params = md.where(out_unst_reg, x, md.full_like(x, self._lims[0] - 0.5))
        log_norm = cut_nat_params.expm1().abs().log() - cut_nat_params.abs().log()
        taylor = 0.5 * x + x.pow(2) / 24.0 - x.pow(4) / 2880.0
        return md.where(out_unst_reg, log_norm, taylor)
