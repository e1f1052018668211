"""FisherSnedecor(df1, df2): the F distribution, the law of (X1 / df1) / (X2 / df2) for independent
chi-squared X1, X2 with df1 and df2 degrees of freedom, as torch.distributions.FisherSnedecor.

With a = df1 / 2, b = df2 / 2 and r = df1 / df2, on x > 0:

    log p(x) = lnGamma(a + b) - lnGamma(a) - lnGamma(b) + a ln r + (a - 1) ln x - (a + b) ln(1 + r x)

X_i / df_i is Gamma(df_i / 2, rate df_i / 2); rsample draws X_i / (2 df_i) ~ Gamma(df_i / 2, df_i)
for both (the factor 1/2 cancels in the ratio, as in PyTorch) and divides them, so it is
differentiable in both degrees of freedom through the Gammas' implicit reparameterisation gradients. The mean (df2 > 2),
mode (df1 > 2) and variance (df2 > 4) are NaN where they do not exist.
"""
from ..tensor.dtype_info import finfo
from ..tensor.size import Size
from . import constraints
from .distribution import Distribution
from .gamma import Gamma

__all__ = ["FisherSnedecor"]

_NAN = float("nan")


class FisherSnedecor(Distribution):
    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1, df2, validate_args=None):
        batch_shape = self._broadcast_params(df1=df1, df2=df2)
        # unchecked: the degrees of freedom are checked below, under their own names
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1, validate_args=False)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2, validate_args=False)
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(FisherSnedecor, batch_shape, _instance, _gamma1=self._gamma1.expand(batch_shape),
                                   _gamma2=self._gamma2.expand(batch_shape))

    @property
    def mean(self):
        import minidl as md
        df2 = md.where(self.df2 > 2, self.df2, _NAN)   # NaN in, NaN out: no division by zero at df2 = 2
        return df2 / (df2 - 2)

    @property
    def mode(self):
        import minidl as md
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return md.where(self.df1 > 2, mode, _NAN)

    @property
    def variance(self):
        import minidl as md
        df1, df2 = self.df1, md.where(self.df2 > 4, self.df2, _NAN)
        return 2 * df2.pow(2) * (df1 + df2 - 2) / (df1 * (df2 - 2).pow(2) * (df2 - 4))

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        x1 = self._gamma1.rsample(sample_shape).view(shape)
        x2 = self._gamma2.rsample(sample_shape).view(shape)
        tiny = finfo(x2.dtype).tiny
        return (x1 / x2.clamp(min=tiny)).clamp(min=tiny)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        ct1 = self.df1 * 0.5
        ct2 = self.df2 * 0.5
        ct3 = self.df1 / self.df2
        t1 = (ct1 + ct2).lgamma() - ct1.lgamma() - ct2.lgamma()
        t2 = ct1 * ct3.log() + (ct1 - 1) * value.log()
        t3 = (ct1 + ct2) * (ct3 * value).log1p()
        return t1 + t2 - t3
