"""VonMises(loc, concentration): the circular normal on [-pi, pi), density
e**(k cos(x - loc)) / (2 pi I0(k)), as torch.distributions.VonMises.

ln I0(k) = ln i0e(k) + k with minidl.special.i0e (exact to rounding, differentiable); PyTorch uses
a polynomial approximation of ln I0 good to ~1e-7 relative, so the two agree to that. The variance
is 1 - I1(k) / I0(k) (the circular variance). Samples come from the rejection sampler of Best and
Fisher (1979), as PyTorch's, run in float64 on NumPy draws from the global generator; there is no
rsample (has_rsample is False).
"""
import math

import numpy as np

from ..tensor.size import Size
from . import constraints
from .distribution import Distribution
from .utils import _attr_property

__all__ = ["VonMises"]


def _log_i0(k):
    from ..special import i0e
    return i0e(k).log() + k


def _rejection_sample(loc, kappa, shape, rng):
    """Best-Fisher rejection sampling of VonMises(loc, kappa) draws of ``shape`` (float64 NumPy)."""
    loc, kappa = np.broadcast_to(loc, shape), np.broadcast_to(kappa, shape)
    tau = 1 + np.sqrt(1 + 4 * kappa ** 2)
    rho = (tau - np.sqrt(2 * tau)) / (2 * kappa)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(kappa < 1e-5, 1 / kappa + kappa, (1 + rho ** 2) / (2 * rho))
    x = np.zeros(shape)
    done = np.zeros(shape, dtype=bool)
    while not done.all():
        u1, u2, u3 = rng.random((3,) + tuple(shape))
        z = np.cos(math.pi * u1)
        f = (1 + r * z) / (r + z)
        c = kappa * (r - f)
        with np.errstate(divide="ignore", invalid="ignore"):
            accept = (c * (2 - c) - u2 > 0) | (np.log(c / u2) + 1 - c >= 0)
        accept &= ~done
        x = np.where(accept, np.sign(u3 - 0.5) * np.arccos(f), x)
        done |= accept
    return (x + math.pi + loc) % (2 * math.pi) - math.pi


class VonMises(Distribution):
    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args=None):
        super().__init__(self._broadcast_params(loc=loc, concentration=concentration), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(VonMises, batch_shape, _instance)

    mean = mode = _attr_property("loc")

    @property
    def variance(self):
        from ..special import i0e, i1e
        return 1 - i1e(self.concentration) / i0e(self.concentration)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (self.concentration * (value - self.loc).cos() - math.log(2 * math.pi)
                - _log_i0(self.concentration))

    def sample(self, sample_shape=Size()):
        import minidl as md
        from ..tensor.generator import numpy_generator
        shape = tuple(self._extended_shape(sample_shape))
        loc = self.loc.detach().cpu().numpy().astype(np.float64)
        kappa = self.concentration.detach().cpu().numpy().astype(np.float64)
        x = _rejection_sample(loc, kappa, shape, numpy_generator(None))
        return md.tensor(x, dtype=self.loc.dtype, device=self.loc.device)
