"""StudentT(df, loc=0, scale=1): Student's t, as torch.distributions.StudentT.

    y = (x - loc) / scale,
    log p(x) = -(df + 1)/2 ln(1 + y**2 / df) - ln scale - ln(df)/2 - ln(pi)/2 - lnG(df/2) + lnG((df+1)/2),
    H = ln scale + (df + 1)/2 (psi((df+1)/2) - psi(df/2)) + ln(df)/2 + ln B(df/2, 1/2)

rsample is loc + scale x / sqrt(z / df) with x ~ N(0, 1) and z ~ Chi2(df) (PyTorch's construction),
differentiable in all three parameters (in df through the Gamma draw's implicit gradient).
The mean is NaN for df <= 1; the variance is inf for 1 < df <= 2 and NaN for df <= 1.
"""
import math

from ..tensor.size import Size
from . import constraints
from .chi2 import Chi2
from .distribution import Distribution
from .utils import _attr_property, _standard_normal

__all__ = ["StudentT"]


class StudentT(Distribution):
    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        batch_shape = self._broadcast_params(df=df, loc=loc, scale=scale)
        self._chi2 = Chi2(self.df)
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(StudentT, batch_shape, _instance, _chi2=self._chi2.expand(batch_shape))

    mode = _attr_property("loc")

    @property
    def mean(self):
        import minidl as md
        return md.where(self.df <= 1, md.full_like(self.loc, math.nan), self.loc)

    @property
    def variance(self):
        import minidl as md
        df = self.df
        finite = self.scale.pow(2) * df / (df - 2)
        return md.where(df > 2, finite, md.where(df > 1, md.full_like(df, math.inf), md.full_like(df, math.nan)))

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        x = _standard_normal(shape, dtype=self.df.dtype, device=self.df.device)
        z = self._chi2.rsample(sample_shape)
        return self.loc + self.scale * (x * (z / self.df).rsqrt())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        z = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi) + (0.5 * self.df).lgamma()
             - (0.5 * (self.df + 1.0)).lgamma())
        return -0.5 * (self.df + 1.0) * (y ** 2.0 / self.df).log1p() - z

    def entropy(self):
        lbeta = (0.5 * self.df).lgamma() + math.lgamma(0.5) - (0.5 * (self.df + 1)).lgamma()
        return (self.scale.log() + 0.5 * (self.df + 1) * ((0.5 * (self.df + 1)).digamma() - (0.5 * self.df).digamma())
                + 0.5 * self.df.log() + lbeta)
