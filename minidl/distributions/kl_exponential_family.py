"""The KL divergence between two members of one exponential family, as PyTorch's generic
(ExponentialFamily, ExponentialFamily) rule: the Bregman divergence of the log normaliser F,

    KL(p || q) = F(theta_q) - F(theta_p) - <theta_q - theta_p, grad F(theta_p)>

(E_p[t(x)] = grad F(theta_p) turns E_p[ln p - ln q] into it; exp_family.py). It applies to every
pair of one family for which no closed form is registered (a more specific pair wins the lookup),
e.g. two Wisharts. As PyTorch's, it is differentiable in q's parameters only: p's natural
parameters enter detached (a gradient in them would need the Hessian of F). Each inner product
sums over its parameter's own dims, those right of the batch dims (PyTorch sums the rightmost
len(event_shape) dims, which for a batched Wishart's degrees of freedom, one number per batch
member, sums across the batch: its KLs of a batch come out mixed; these equal the unbatched ones).
"""
import numpy as np

from .exp_family import ExponentialFamily, _log_normalizer_and_grads
from .kl import register_kl
from .utils import _sum_rightmost

__all__ = []


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p, q):
    if type(p) is not type(q):
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {type(p).__name__} and q type "
                                  f"{type(q).__name__}: the cross KL-divergence between different exponential "
                                  "families cannot be computed using Bregman divergences")
    p_nparams, lg_normal, gradients = _log_normalizer_and_grads(p)
    q_nparams = q._natural_params
    result = q._log_normalizer(*q_nparams) - lg_normal
    batch_dims = len(np.broadcast_shapes(tuple(p.batch_shape), tuple(q.batch_shape)))
    for pnp, qnp, g in zip(p_nparams, q_nparams, gradients):
        term = (qnp - pnp) * g
        result = result - _sum_rightmost(term, max(term.ndim - batch_dims, 0))
    return result
