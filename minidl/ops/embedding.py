"""Embedding lookup: out[...] = weight[idx[...]].

The lookup is a row selection, so dL/dweight[v] = sum of g[...] over every position where
idx == v: a scatter-add of the gradient rows (``xp.add.at``, the reference; a Numba kernel in
``minidl.kernels.cpu.embedding`` on the CPU), which handles repeated indices. The row
``padding_idx`` (if given) gets no gradient, as in PyTorch.
"""
import numpy as np

from ..autograd import op_function as _op_function
from ..autograd.op_function import Function
from ..backends import namespace_of
from ._higher_order import constant, keep_where
from ._kernel_switch import LAYER
from ._saved import keep_for_backward


def embedding_backward_reference(idx, g, num_embeddings):
    """idx: int array (any shape), g: (*idx.shape, D) -> gw (num_embeddings, D), by ``xp.add.at``."""
    xp = namespace_of(g)
    D = g.shape[-1]
    gw = xp.zeros((num_embeddings, D), dtype=g.dtype)
    xp.add.at(gw, idx.reshape(-1), g.reshape(idx.size, D))
    return gw


EMBEDDING = LAYER.kernels(("embedding_backward",), __name__, cpu="minidl.kernels.cpu.embedding")


class Embedding(Function):
    @staticmethod
    def forward(ctx, idx, weight, padding_idx):
        ctx.save_for_backward(keep_for_backward(ctx, idx))   # the kernel trusts them: no caller may change them
        ctx.vocab, ctx.padding_idx = weight.shape[0], padding_idx
        ctx.impl = EMBEDDING.select(weight)
        return weight[idx]

    @staticmethod
    def backward(ctx, g):
        (idx,) = ctx.saved_tensors
        gw = ctx.impl.embedding_backward(idx, g, ctx.vocab)
        if ctx.padding_idx is not None:
            gw[ctx.padding_idx] = 0
        return None, gw, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        """backward's scatter-add as a recorded op (index_put with accumulate), linear in g."""
        from .index_put import IndexPutAccumulate
        (idx,) = ctx.saved_tensors
        xp = namespace_of(g._data)
        d = g.shape[-1]
        zeros = constant(xp.zeros((ctx.vocab, d), dtype=g.dtype))
        gw = IndexPutAccumulate.apply(zeros, g.reshape(idx.size, d), (idx.reshape(-1),))
        if ctx.padding_idx is not None:
            kept = xp.ones((ctx.vocab, 1), dtype=bool)
            kept[ctx.padding_idx] = False
            gw = keep_where(kept, gw)
        return None, gw, None


def embedding(input, weight, padding_idx=None):
    """As ``torch.nn.functional.embedding(input, weight, padding_idx=None)``: ``input`` holds
    integer indices (a Tensor, an ndarray or a list), ``weight`` is (num_embeddings, dim)."""
    Tensor = _op_function.Tensor
    idx = input._data if isinstance(input, Tensor) else np.asarray(input)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"embedding: expected integer indices, got dtype {idx.dtype}")
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), "
                         f"got shape {list(weight.shape)}")
    V = weight.shape[0]
    if type(idx) is not np.ndarray:   # checked where idx lives, reported at the next read (no round trip)
        from ..backends import device_of, get
        get(device_of(idx)).assert_all((idx >= 0) & (idx < V), IndexError,
                                       f"embedding: index out of range in self: an index lies outside [0, {V}) "
                                       f"(num_embeddings is {V}; checked on device {device_of(idx)!r})")
    elif idx.size and (int(idx.min()) < 0 or int(idx.max()) >= V):
        raise IndexError(f"embedding: index out of range in self: indices span [{int(idx.min())}, {int(idx.max())}] "
                         f"but num_embeddings is {V}")
    if padding_idx is not None:
        if not -V <= padding_idx < V:
            raise ValueError(f"embedding: padding_idx {padding_idx} out of range for {V} embeddings")
        padding_idx %= V
    return Embedding.apply(idx, weight, padding_idx)
