"""LKJCholesky(dim, concentration): the LKJ distribution over the lower Cholesky factors L of dim x dim
correlation matrices, as torch.distributions.LKJCholesky (after NumPyro's): the correlation matrix
M = L L^T has density proportional to det(M)**(eta - 1), eta the concentration (eta = 1: uniform
over correlation matrices; larger eta concentrates on the identity).

Sampling is the onion method (Lewandowski, Kurowicka and Joe, 2009, section 3), row by row: row i
(i >= 1) of L is sqrt(y_i) u_i on its first i entries, u_i a uniform direction on the unit sphere
of R**i (a normalised normal draw) and y_i ~ Beta(i / 2, eta + (dim - 2) / 2 - (i - 1) / 2), and
sqrt(1 - y_i) on the diagonal, so every row has unit norm; row 0 is (1, 0, ..., 0). The draw is not
reparameterised (no rsample), as PyTorch's. The Betas' first concentrations are i / 2 as in the paper
and NumPyro; PyTorch's are i - 1/2, which agrees for i = 1 only, so for dim >= 3 its draws do not
follow this density (each off-diagonal correlation of M should be 2 Beta(a, a) - 1 with
a = eta - 1 + dim / 2, of variance 1 / (2 eta + dim - 1); PyTorch's spread wider). The log density
is PyTorch's.

The density of L, with respect to Lebesgue measure on its strictly lower entries (det M is the
product of the squared diagonal, and the change of variables from M to L adds a power of each L_ii):

    log p(L) = sum_{i=1}^{dim-1} (2 (eta - 1) + dim - 1 - i) ln L_ii - ln c,
    ln c = (dim - 1)/2 ln pi + lnGamma_{dim-1}(alpha - 1/2) - (dim - 1) lnGamma(alpha),
    alpha = eta + (dim - 1) / 2,

lnGamma_p the multivariate log-gamma function.
"""
import math

from ..tensor.dtype_info import finfo
from ..tensor.size import Size
from . import constraints
from .beta import Beta
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["LKJCholesky"]


class LKJCholesky(Distribution):
    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim, concentration=1.0, validate_args=None):
        import minidl as md
        if dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        batch_shape = self.concentration.size()
        event_shape = Size((dim, dim))
        # the Beta of row i: concentration1 i / 2, concentration0 eta + (dim - 2) / 2 - (i - 1) / 2
        # (row 0's, Beta(1/2, ...), is drawn and unused: its direction is the zero vector)
        marginal_conc = self.concentration + 0.5 * (self.dim - 2)
        offset = 0.5 * md.arange(self.dim - 1, dtype=self.concentration.dtype, device=self.concentration.device)
        offset = md.cat([offset.new_zeros((1,)), offset])
        beta_conc1 = offset + 0.5
        beta_conc0 = marginal_conc.unsqueeze(-1) - offset
        self._beta = Beta(beta_conc1, beta_conc0)
        super().__init__(batch_shape, event_shape, validate_args)

    def expand(self, batch_shape, _instance=None):
        batch_shape = Size(tuple(batch_shape))
        return self._new_expanded(LKJCholesky, batch_shape, _instance, dim=self.dim,
                                  concentration=self.concentration.expand(tuple(batch_shape)),
                                  _beta=self._beta.expand(tuple(batch_shape) + (self.dim,)))

    def sample(self, sample_shape=Size()):
        import minidl as md
        with md.no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            u_normal = md.randn(tuple(self._extended_shape(sample_shape)), dtype=y.dtype, device=y.device).tril(-1)
            norm = u_normal.norm(dim=-1, keepdim=True)
            # row 0 is all zeros: divide it by 1 instead of 0, leaving it zero
            u_hypersphere = u_normal / md.where(norm == 0, md.ones_like(norm), norm)
            w = y.sqrt() * u_hypersphere
            diag_elems = (1 - (w ** 2).sum(-1)).clamp(min=finfo(w.dtype).tiny).sqrt()
            return w + md.diag_embed(diag_elems)

    def log_prob(self, value):
        import minidl as md
        if self._validate_args:
            self._validate_sample(value)
        diag_elems = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = md.arange(2, self.dim + 1, dtype=self.concentration.dtype, device=self.concentration.device)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized_log_pdf = (order * diag_elems.log()).sum(-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        denominator = alpha.lgamma() * dm1
        numerator = md.mvlgamma(alpha - 0.5, dm1)
        pi_constant = 0.5 * dm1 * math.log(math.pi)
        return unnormalized_log_pdf - (pi_constant + numerator - denominator)
