"""F.bilinear: y = x1^T A x2 + b per output feature, as ``torch.nn.functional.bilinear``.

With A (out, in1, in2) and inputs x1 (*, in1), x2 (*, in2):

    y[..., k] = sum_ij x1[..., i] A[k, i, j] x2[..., j] + b[k]
    dL/dx1[..., i] = sum_kj g[..., k] A[k, i, j] x2[..., j]
    dL/dx2[..., j] = sum_ki g[..., k] A[k, i, j] x1[..., i]
    dL/dA[k, i, j] = sum over the batch of g[..., k] x1[..., i] x2[..., j],   dL/db = sum of g
"""
from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.dtype import check_same_dtype
from ..tensor.tensor import Tensor
from .low_precision import float32_compute


@float32_compute   # float16/bfloat16 inputs: float32 products, one rounding (low_precision.py)
class Bilinear(Function):
    """See the module docstring."""

    @staticmethod
    def forward(ctx, x1, x2, w, b):
        xp = namespace_of(x1)
        y = xp.einsum("...i,kij,...j->...k", x1, w, x2, optimize=True)
        if b is not None:
            y = y + b
        ctx.save_for_backward(x1, x2, w)
        ctx.has_bias = b is not None
        return y.astype(x1.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        x1, x2, w = ctx.saved_tensors
        xp = namespace_of(g)
        n1, n2, nw, nb = ctx.needs_input_grad
        d1 = xp.einsum("...k,kij,...j->...i", g, w, x2, optimize=True) if n1 else None
        d2 = xp.einsum("...k,kij,...i->...j", g, w, x1, optimize=True) if n2 else None
        dw = xp.einsum("...k,...i,...j->kij", g, x1, x2, optimize=True) if nw else None
        db = g.reshape(-1, g.shape[-1]).sum(axis=0) if nb and ctx.has_bias else None
        return d1, d2, dw, db


def bilinear(input1, input2, weight, bias=None):
    """As ``torch.nn.functional.bilinear``; see the module docstring."""
    for name, t in (("input1", input1), ("input2", input2), ("weight", weight)):
        if not isinstance(t, Tensor):
            raise TypeError(f"bilinear: expected {name} to be a Tensor, got {type(t).__name__}")
    if weight.ndim != 3:
        raise RuntimeError(f"bilinear(): weight must be 3-dimensional (out, in1, in2), got shape {list(weight.shape)}")
    k, i, j = weight.shape
    if input1.ndim == 0 or input1.shape[-1] != i or input2.ndim == 0 or input2.shape[-1] != j:
        raise RuntimeError(f"bilinear(): expected input1 (*, {i}) and input2 (*, {j}) for weight of shape "
                           f"{list(weight.shape)}, got input1 {list(input1.shape)} and input2 {list(input2.shape)}")
    if tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise RuntimeError(f"bilinear(): input batch dimensions must be equal, got {list(input1.shape[:-1])} and "
                           f"{list(input2.shape[:-1])}")
    if bias is not None and tuple(bias.shape) != (k,):
        raise RuntimeError(f"bilinear(): expected bias of shape [{k}], got {list(bias.shape)}")
    check_same_dtype("bilinear", [("input1", input1), ("input2", input2), ("weight", weight), ("bias", bias)])
    return Bilinear.apply(input1, input2, weight, bias)
