"""Rotary position embedding (RoPE, Su et al. 2021, "RoFormer") as one Function.

Features are split in halves x = [x1, x2] (the "rotate-half" layout of GPT-NeoX / LLaMA):
pair (x1_i, x2_i) at position t is rotated by the angle t * theta_i,

    y = x * cos + rot(x) * sin,    rot([x1, x2]) = [-x2, x1],

with cos, sin of shape (T, D) holding cos(t theta_i), sin(t theta_i) twice ([c, c]).
rot is linear with adjoint rot^T([u1, u2]) = [u2, -u1] (since <u, rot(x)> = -u1.x2 + u2.x1),
so   dL/dx = g * cos + rot^T(g * sin).   cos and sin are constants (no gradient).
Rotations preserve norms, and q_t . k_s after rotation depends on t - s only.
"""
from ..autograd.op_function import Function
from ..backends import namespace_of


def _rot(x, xp):
    h = x.shape[-1] // 2
    return xp.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def _rot_t(u, xp):
    h = u.shape[-1] // 2
    return xp.concatenate([u[..., h:], -u[..., :h]], axis=-1)


class Rotary(Function):
    @staticmethod
    def forward(ctx, x, cos, sin):
        xp = namespace_of(x)
        if type(cos) is not type(x):   # host tables for a device x: copy them beside it
            cos, sin = xp.asarray(cos), xp.asarray(sin)
        ctx.save_for_backward(cos, sin)
        return x * cos + _rot(x, xp) * sin

    @staticmethod
    def backward(ctx, g):
        cos, sin = ctx.saved_tensors
        xp = namespace_of(g)
        return g * cos + _rot_t(g * sin, xp), None, None


def apply_rotary(x, cos, sin):
    """Rotate the last dim of x (..., T, D) by the angles in cos, sin (T, D) (arrays)."""
    if x.shape[-1] % 2:
        raise ValueError(f"apply_rotary: the feature dim must be even, got shape {list(x.shape)}")
    if cos.shape != (x.shape[-2], x.shape[-1]) or sin.shape != cos.shape:
        raise ValueError(f"apply_rotary: cos/sin must have shape (T, D) = {(x.shape[-2], x.shape[-1])}, "
                         f"got {cos.shape} and {sin.shape}")
    return Rotary.apply(x, cos.astype(x.dtype, copy=False), sin.astype(x.dtype, copy=False))
