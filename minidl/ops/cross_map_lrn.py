"""CrossMapLRN2d's op: local response normalization across channels with the window of PyTorch's
``torch.nn.CrossMapLRN2d`` (the legacy Lua Torch layer), which is not F.local_response_norm's.

PyTorch builds the channel sums by a running recurrence: with P = (size - 1) // 2 + 1, channel 0
sums x_0 .. x_{P-1}, and each next channel adds x_{c+P-1} and removes x_{c-P} only once c > P,
so x_0 is never removed. The window of channel c is therefore the symmetric one of half-width
P - 1 (size channels for an odd size, size - 1 for an even one), clipped to the tensor, plus
channel 0 once it has left that window:

    s_c = sum_{c' in [c-P+1, c+P-1]} x_c'^2 + [c >= P] x_0^2,      d_c = k + alpha / size * s_c
    y_c = x_c d_c**-beta

This op computes exactly those values. Its backward is the derivative of that forward: with
r_c = g_c x_c d_c**(-beta-1),

    dL/dx_j = g_j d_j**-beta - (2 alpha beta / size) x_j (sum_{c : j in W(c)} r_c)

where the windows containing j are the symmetric window around j (the window is symmetric, so
its adjoint is itself) and, for j = 0 only, also every c >= P. (PyTorch's own backward is that
of the plain symmetric window, so its gradients differ from the derivative of its forward
wherever channel 0 enters late; gradcheck rejects them. The gradients here are exact.)
"""
from ..autograd.op_function import Function
from ..backends import namespace_of
from .local_response_norm import window_sum


def _sums(a, P):
    """Each channel's window sum of a (N, C, ...), channel 0 included for channels c >= P."""
    s = window_sum(a, P - 1, P - 1)
    if a.shape[1] > P:
        s[:, P:] += a[:, :1]
    return s


class CrossMapLRN(Function):
    """See the module docstring."""

    @staticmethod
    def forward(ctx, x, size, alpha, beta, k):
        P = (size - 1) // 2 + 1
        d = k + alpha / size * _sums(x * x, P)
        ctx.save_for_backward(x, d)
        ctx.args = (size, alpha, beta, P)
        return (x * d ** -beta).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        x, d = ctx.saved_tensors
        size, alpha, beta, P = ctx.args
        xp = namespace_of(g)
        r = g * x * d ** (-beta - 1)
        inner = window_sum(r, P - 1, P - 1)
        if r.shape[1] > P:
            inner[:, :1] += xp.sum(r[:, P:], axis=1, keepdims=True)
        dx = g * d ** -beta - (2 * alpha * beta / size) * x * inner
        return dx.astype(x.dtype, copy=False), None, None, None, None
