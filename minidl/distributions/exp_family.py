"""ExponentialFamily: the base class of the distributions whose density has the exponential-family
form, as torch.distributions.ExponentialFamily:

    p(x; theta) = exp(<t(x), theta> - F(theta) + k(x))

with ``theta`` the natural parameters (``_natural_params``), t(x) the sufficient statistic, F the
log normaliser (``_log_normalizer``) and k the carrier measure (its mean under p is
``_mean_carrier_measure``). F is the cumulant generating function of t, so E_p[t(x)] = grad F(theta),
and the entropy and the KL divergence between two members of one family are Bregman divergences of
F (Nielsen and Nock, "Entropies and cross-entropies of exponential families", 2010):

    H(p)        = -E_p[k(x)] + F(theta) - <theta, grad F(theta)>
    KL(p || q)  = F(theta_q) - F(theta_p) - <theta_q - theta_p, grad F(theta_p)>

grad F is taken by autograd, so a family needs only to write down theta and F. The families give
closed-form entropies of their own; this generic one checks them (and serves the KL divergence of
kl_exponential_family.py where no closed form is registered).
"""
from .. import autograd
from .distribution import Distribution

__all__ = ["ExponentialFamily"]


def _log_normalizer_and_grads(dist):
    """(theta, F(theta), grad F(theta)) of ``dist``, theta detached into fresh leaves: the gradients
    are constants, as PyTorch's (its create_graph gradients hang off detached leaves too, so no
    gradient reaches the distribution's parameters through them)."""
    nparams = [p.detach().requires_grad_() for p in dist._natural_params]
    with autograd.enable_grad():
        lg_normal = dist._log_normalizer(*nparams)
        # retain_graph: F(theta) itself stays part of the result, whose backward walks it again
        gradients = autograd.grad(lg_normal.sum(), nparams, retain_graph=True)
    return nparams, lg_normal, gradients


class ExponentialFamily(Distribution):
    """A distribution of an exponential family (the module docstring): subclasses define
    ``_natural_params``, ``_log_normalizer`` and ``_mean_carrier_measure``."""

    @property
    def _natural_params(self):
        """The natural parameters theta, a tuple of Tensors."""
        raise NotImplementedError

    def _log_normalizer(self, *natural_params):
        """F(theta), the log normaliser, as a function of the natural parameters."""
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self):
        """E_p[k(x)], the expected carrier measure."""
        raise NotImplementedError

    def entropy(self):
        """-E[k(x)] + F(theta) - <theta, grad F(theta)>, each inner product summed over the
        parameter's event dims."""
        result = -self._mean_carrier_measure
        nparams, lg_normal, gradients = _log_normalizer_and_grads(self)
        result = lg_normal + result
        for theta, g in zip(nparams, gradients):
            result = result - (theta * g).reshape(tuple(self._batch_shape) + (-1,)).sum(-1)
        return result
