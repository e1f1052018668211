"""The affine map of nn.Linear, fused into one op: y = x W^T + b.

x is (..., in), W is (out, in), b is (out,). Flattening the leading dims of x into M rows
(X: (M, in), G = dL/dy: (M, out)):

    dL/dX = G W           (M, in)
    dL/dW = G^T X         (out, in)    one GEMM over every row of the batch
    dL/db = sum_rows G    (out,)
"""
from ..autograd.function import Function
from ..backends import namespace_of


class Linear(Function):
    @staticmethod
    def forward(ctx, x, w, b):
        xp = namespace_of(x)
        # one (M, in) @ (in, out) GEMM for all leading dims, not one per batch entry
        y = xp.matmul(x.reshape(-1, x.shape[-1]), w.T)
        if b is not None:
            y += b
        ctx.save_for_backward(x, w)
        return y.reshape(x.shape[:-1] + (w.shape[0],))

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        xp = namespace_of(g)
        nx, nw, nb = ctx.needs_input_grad
        g2 = g.reshape(-1, g.shape[-1])
        dx = xp.matmul(g2, w).reshape(x.shape) if nx else None
        dw = xp.matmul(g2.T, x.reshape(-1, x.shape[-1])) if nw else None
        db = g2.sum(axis=0) if nb else None
        return dx, dw, db


def linear(input, weight, bias=None):
    """As ``torch.nn.functional.linear``: input (..., in_features) @ weight^T (+ bias)."""
    if weight.ndim != 2:
        raise ValueError(f"linear: weight must be 2-D (out_features, in_features), got shape {list(weight.shape)}")
    if input.ndim < 1 or input.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear: input of shape {list(input.shape)} does not match weight of shape "
                         f"{list(weight.shape)} (expected last dim {weight.shape[1]})")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"linear: bias must have shape [{weight.shape[0]}], got {list(bias.shape)}")
    return Linear.apply(input, weight, bias)
