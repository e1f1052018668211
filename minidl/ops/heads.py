"""Splitting a packed projection into attention heads, as one op with three outputs.

x (B, T, P*H*D) holds P parts (q, k, v for P = 3) side by side, each the H heads' D features:

    out_p[b, h, t, d] = x[b, t, (p*H + h)*D + d]         p < P, each out_p (B, H, T, D), a view of x

This is a pure relabelling, so the backward writes each part's gradient back into its slot:
dL/dx[b, t, (p*H + h)*D + d] = g_p[b, h, t, d], one (B, T, P, H, D) array filled from the P
gradients (no zeros-then-scatter per part, no sum of P full-size gradients, as
``x.reshape(...).permute(...)[p]`` would cost).
"""
from ..autograd.function import Function
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
        xp = namespace_of(grads[0])
        gx = xp.empty(ctx.shape, dtype=grads[0].dtype)
        for p, g in enumerate(grads):
            gx[:, :, p] = g.transpose(0, 2, 1, 3)
        return gx.reshape(B, T, P * H * D), None, None


def split_heads(x, parts, heads):
    """(B, T, parts*heads*D) -> ``parts`` tensors (B, heads, T, D); see the module docstring."""
    if x.ndim != 3 or x.shape[-1] % (parts * heads):
        raise ValueError(f"split_heads: expected (B, T, {parts}*{heads}*D), got shape {list(x.shape)}")
    out = SplitHeads.apply(x, int(parts), int(heads))
    return out if isinstance(out, tuple) else (out,)
