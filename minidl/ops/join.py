"""Joining tensors: cat along an existing dim, stack along a new one. The backward
slices g back into the pieces each input contributed.

The result has the dtype the inputs promote to, as PyTorch (int32 with float32 gives float32,
where NumPy's concatenate would give float64); each input is cast to it first, so its gradient
comes back in its own dtype."""
import functools

from ..autograd import op_function as _op_function
from ..autograd.op_function import Function
from ..backends import namespace_of
from ._broadcast import normalize_dim
from ._elementwise_args import _promote
from .shape_error import ShapeError


class Cat(Function):
    """out = [x_1, x_2, ...] joined along ``dim``;  dL/dx_k = the slice of g that x_k filled."""

    @staticmethod
    def forward(ctx, dim, *xs):
        ctx.dim, ctx.sizes = dim, [x.shape[dim] for x in xs]
        return namespace_of(xs[0]).concatenate(xs, axis=dim)

    @staticmethod
    def backward(ctx, g):
        grads, start = [None], 0
        index = [slice(None)] * g.ndim
        for n in ctx.sizes:
            index[ctx.dim] = slice(start, start + n)
            grads.append(g[tuple(index)])
            start += n
        return tuple(grads)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        grads, start = [None], 0
        index = [slice(None)] * g.ndim
        for n in ctx.sizes:
            index[ctx.dim] = slice(start, start + n)
            grads.append(g[tuple(index)])
            start += n
        return tuple(grads)


class Stack(Function):
    """out[..., k, ...] = x_k along a new ``dim``;  dL/dx_k = g indexed at k on that dim."""

    @staticmethod
    def forward(ctx, dim, *xs):
        ctx.dim, ctx.n = dim, len(xs)
        return namespace_of(xs[0]).stack(xs, axis=dim)

    @staticmethod
    def backward(ctx, g):
        xp = namespace_of(g)
        return (None,) + tuple(xp.take(g, k, axis=ctx.dim) for k in range(ctx.n))

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        lead = (slice(None),) * ctx.dim
        return (None,) + tuple(g[lead + (k,)] for k in range(ctx.n))


def _check(ts, op, same_shape, legacy_empty=False):
    Tensor = _op_function.Tensor
    if not ts:
        raise ValueError(f"{op}: expected a non-empty sequence of tensors")
    ts = [t if isinstance(t, Tensor) else _as_tensor(t) for t in ts]
    ref = ts[0].shape
    for i, t in enumerate(ts[1:], 1):
        bad = t.shape != ref if same_shape else (t.ndim != len(ref))
        if legacy_empty and (t.shape == (0,) or ref == (0,)):
            bad = False
        if bad:
            raise ShapeError(f"{op}: tensor 0 has shape {list(ref)} but tensor {i} has shape {list(t.shape)}")
    return ts


def _as_tensor(t):
    from ..tensor.factories import tensor
    return tensor(t)


def _promoted(ts):
    """The tensors cast to the dtype they promote to (all of them count alike, 0-d ones too)."""
    dt = functools.reduce(_promote, (t._data.dtype for t in ts))
    if all(t._data.dtype == dt for t in ts):
        return ts
    from ..tensor.dtype import wrap
    return [t if t._data.dtype == dt else t.to(wrap(dt)) for t in ts]


def cat(tensors, dim=0):
    """The tensors joined along ``dim``. As PyTorch, a 1-d tensor with no elements is skipped
    whatever the others' shape (the legacy empty tensor), though it takes part in the dtype."""
    ts = _promoted(_check(list(tensors), "cat", same_shape=False, legacy_empty=True))
    kept = [t for t in ts if not (t.ndim == 1 and t.shape[0] == 0)]
    if kept and len(kept) < len(ts):
        ts = kept
        _check(ts, "cat", same_shape=False)
    if ts[0].ndim == 0:
        raise ShapeError("cat: zero-dimensional tensors cannot be concatenated; use md.stack")
    d = normalize_dim(dim, ts[0].ndim, "cat")
    for i, t in enumerate(ts[1:], 1):
        if t.shape[:d] + t.shape[d + 1:] != ts[0].shape[:d] + ts[0].shape[d + 1:]:
            raise ShapeError(f"cat: sizes must match except in dim {dim}: tensor 0 has shape {list(ts[0].shape)}, "
                             f"tensor {i} has shape {list(t.shape)}")
    return Cat.apply(d, *ts)


def stack(tensors, dim=0):
    ts = _promoted(_check(list(tensors), "stack", same_shape=True))
    return Stack.apply(normalize_dim(dim, ts[0].ndim + 1, "stack"), *ts)
