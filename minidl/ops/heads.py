"""Splitting a packed projection into attention heads, as one op with three outputs.

x (B, T, P*H*D) holds P parts (q, k, v for P = 3) side by side, each the H heads' D features:

    out_p[b, h, t, d] = x[b, t, (p*H + h)*D + d]         p < P, each out_p (B, H, T, D), a view of x

This is a pure relabelling, so the backward writes each part's gradient back into its slot:
dL/dx[b, t, (p*H + h)*D + d] = g_p[b, h, t, d], one (B, T, P, H, D) array filled from the P
gradients (no zeros-then-scatter per part, no sum of P full-size gradients, as
``x.reshape(...).permute(...)[p]`` would cost).

The outputs are views of x. An op that consumes all P of them (attention's q, k, v) can ask
``packed_like`` for gradient buffers laid out the same way, parts of one fresh packed array;
the backward then finds its P gradients already in place (``packed_root``) and hands that
array on without copying.
"""
import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of


class SplitHeads(Function):
    @staticmethod
    def forward(ctx, x, parts, heads):
        B, T, F = x.shape
        D = F // (parts * heads)
        ctx.shape = (B, T, parts, heads, D)
        y = x.reshape(B, T, parts, heads, D)
        # views, not copies: each head's (T, D) matrix has unit column stride, which BLAS takes
        # as it is (leading dimension parts*heads*D), and attention's first steps are matmuls
        return tuple(y[:, :, p].transpose(0, 2, 1, 3) for p in range(parts))

    @staticmethod
    def backward(ctx, *grads):
        B, T, P, H, D = ctx.shape
        whole = packed_root(grads)
        if whole is not None and whole.shape[:2] == (B, T):   # the consumer wrote them in place
            return whole.reshape(B, T, P * H * D), None, None
        xp = namespace_of(grads[0])
        gx = xp.empty(ctx.shape, dtype=grads[0].dtype)
        for p, g in enumerate(grads):
            gx[:, :, p] = g.transpose(0, 2, 1, 3)
        return gx.reshape(B, T, P * H * D), None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, *grads):
        """backward's relabelling on Tensors: the parts' gradients stacked back into their slots."""
        from .join import stack
        B, T, P, H, D = ctx.shape
        return stack([g.transpose(1, 2) for g in grads], 2).reshape(B, T, P * H * D), None, None


def split_heads(x, parts, heads):
    """(B, T, parts*heads*D) -> ``parts`` tensors (B, heads, T, D); see the module docstring."""
    if x.ndim != 3 or x.shape[-1] % (parts * heads):
        raise ValueError(f"split_heads: expected (B, T, {parts}*{heads}*D), got shape {list(x.shape)}")
    out = SplitHeads.apply(x, int(parts), int(heads))
    return out if isinstance(out, tuple) else (out,)


def _root(a):
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _address(a):
    return a.__array_interface__["data"][0]


def packed_root(parts):
    """The array that ``parts`` are the parts of, as split_heads makes them, or None.

    That is: NumPy arrays (B, H, T, D) of one dtype that are views of one C-contiguous array of
    B*T*P*H*D elements (P = len(parts)), part p starting p*H*D elements in, each with the strides
    of ``root.reshape(B, T, P, H, D)[:, :, p].transpose(0, 2, 1, 3)``."""
    first = parts[0]
    if not all(type(a) is np.ndarray for a in parts) or first.ndim != 4:
        return None
    B, H, T, D = first.shape
    P, size = len(parts), first.itemsize
    strides = (T * P * H * D * size, D * size, P * H * D * size, size)
    root = _root(first)
    if not (root.flags.c_contiguous and root.size == B * T * P * H * D and root.dtype == first.dtype):
        return None
    start = _address(root)
    for p, a in enumerate(parts):
        if (a.shape != first.shape or a.dtype != first.dtype or a.strides != strides or _root(a) is not root
                or _address(a) != start + p * H * D * size):
            return None
    return root


def packed_like(parts):
    """Empty arrays shaped and laid out as ``parts`` (the parts of a fresh packed array) when
    ``parts`` come from split_heads (``packed_root``), else None."""
    if packed_root(parts) is None:
        return None
    B, H, T, D = parts[0].shape
    buf = np.empty((B, T, len(parts), H, D), parts[0].dtype)
    return tuple(buf[:, :, p].transpose(0, 2, 1, 3) for p in range(len(parts)))
