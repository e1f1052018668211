"""F.embedding_bag: the sum, mean or max of bags of embedding rows, without materialising
the (bag, element, dim) lookups per bag, as ``torch.nn.functional.embedding_bag``.

Bags are the rows of a 2-D index tensor, or slices input[offsets[b]:offsets[b+1]] of a 1-D
one. Element e of bag b(e) looks up row W[i_e]; entries equal to padding_idx are left out
(of the sum and of the mean's count). With weights w_e (per_sample_weights, "sum" only;
otherwise 1) and n_b the bag's size:

    sum:  y_b = sum_e w_e W[i_e]             dL/dW[i_e] += w_e g_b,   dL/dw_e = <g_b, W[i_e]>
    mean: y_b = (1 / n_b) sum_e W[i_e]       dL/dW[i_e] += g_b / n_b
    max:  y_b[d] = max_e W[i_e, d]           dL/dW[i_e*, d] += g_b[d] at the (first) argmax e*

An empty bag gives zeros (and no gradient). The gradient into W is a scatter-add.

The index bookkeeping (which rows, which bag, which elements padding_idx leaves out, the bag sizes)
is done on the host, where every index is checked; the row gathers, sums, maxima and the
scatter-adds of backward run in the weight's array namespace, so on its device. The maximum is
taken over a (bag, slot, dim) block padded with -inf (empty slots, empty bags) whose argmax along
the slots is the first maximal element, as a loop over the bags would find it.
"""
import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.tensor import Tensor

MODES = ("sum", "mean", "max")


class OffsetsError(RuntimeError, ValueError):
    """Offsets that do not describe bags of the input: PyTorch's RuntimeError, and a ValueError
    (a bad argument value)."""


class BagIndexError(RuntimeError, IndexError):
    """An index outside the embedding table: PyTorch's RuntimeError, and an IndexError."""


class BagDtypeError(RuntimeError, TypeError):
    """Indices or offsets that are not integers: PyTorch's RuntimeError, and a TypeError."""


class EmbeddingBag(Function):
    """See the module docstring. ``idx``/``bag`` (host int64) are the kept elements' rows and bags,
    ``keep`` (host bool) which input elements are kept."""

    @staticmethod
    def forward(ctx, weight, psw, idx, bag, keep, n_bags, mode):
        xp = namespace_of(weight)
        dev = (lambda a: a) if xp is np else xp.asarray   # host index arrays, uploaded once
        D = weight.shape[1]
        counts = np.bincount(bag, minlength=n_bags)
        idx_d, bag_d = dev(idx), dev(bag)
        rows = weight[idx_d] if idx.size else xp.zeros((0, D), dtype=weight.dtype)
        kept = dev(np.nonzero(keep)[0])
        arg = None
        if mode == "max":
            out, arg = _bag_max(xp, dev, weight, rows, idx, counts, n_bags)
        else:
            scale = psw[kept] if psw is not None and idx.size else xp.ones(len(idx), weight.dtype)
            if mode == "mean":
                scale = scale / dev(np.maximum(counts, 1)[bag])
            out = xp.zeros((n_bags, D), dtype=weight.dtype)
            if idx.size:
                xp.add.at(out, bag_d, (rows * scale[:, None]).astype(weight.dtype, copy=False))
            ctx.scale = scale
        ctx.save_for_backward(rows if psw is not None else None)
        ctx.args = (weight.shape, idx_d, bag_d, kept, keep.shape, counts, mode, arg, idx.size)
        return out

    @staticmethod
    def backward(ctx, g):
        (rows,) = ctx.saved_tensors
        shape, idx, bag, kept, keep_shape, counts, mode, arg, n = ctx.args
        xp = namespace_of(g)
        dw = dpsw = None
        if ctx.needs_input_grad[0]:
            dw = xp.zeros(shape, dtype=g.dtype)
            if mode == "max":   # flat positions arg * D + d; empty bags add an exact 0 to row 0
                full = (xp.asarray(counts) if xp is not np else counts) > 0
                flat = arg * shape[1] + xp.arange(shape[1])
                xp.add.at(dw.reshape(-1), flat.reshape(-1), xp.where(full[:, None], g, 0).reshape(-1))
            elif n:
                xp.add.at(dw, idx, (g[bag] * ctx.scale[:, None]).astype(g.dtype, copy=False))
        if ctx.needs_input_grad[1]:
            dpsw = xp.zeros(keep_shape, dtype=g.dtype)
            if n:   # kept positions are distinct: the add sets
                xp.add.at(dpsw, kept, (g[bag] * rows).sum(axis=1))
        return dw, dpsw, None, None, None, None, None


def _bag_max(xp, dev, weight, rows, idx, counts, n_bags):
    """(the per-bag maxima (B, D), the row each maximum came from (B, D)); 0 and row 0 for an
    empty bag. Kept elements are in bag order, so slot k of bag b is element starts[b] + k."""
    D = weight.shape[1]
    width = int(counts.max(initial=0))
    if width == 0:
        return xp.zeros((n_bags, D), dtype=weight.dtype), xp.zeros((n_bags, D), dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    slot = np.arange(width)
    filled = slot[None, :] < counts[:, None]                        # (B, width)
    element = np.where(filled, starts[:, None] + slot[None, :], 0)   # an index into rows (0 for an empty slot)
    block = xp.where(dev(filled)[:, :, None], rows[dev(element)], -np.inf)   # (B, width, D)
    first = xp.argmax(block, axis=1)                                 # (B, D): the first maximal slot
    out = xp.take_along_axis(block, first[:, None, :], axis=1)[:, 0, :]
    has = dev(counts > 0)[:, None]
    out = xp.where(has, out, 0).astype(weight.dtype, copy=False)
    source = dev(np.where(filled, idx[element], 0))                  # (B, width): the row of each slot
    arg = xp.take_along_axis(source, first, axis=1)
    return out, arg


def _flat_bags(input, offsets, include_last_offset):
    """(indices, bag of each index, number of bags, input shape) from either input form."""
    idx = input.numpy(force=True) if isinstance(input, Tensor) else np.asarray(input)
    if idx.dtype.kind not in "iu":
        raise BagDtypeError(f"embedding_bag: expected integer indices (int64 or int32), got dtype {idx.dtype}")
    if idx.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             f"fixed length sequences. However, found offsets of type {type(offsets).__name__}")
        B, L = idx.shape
        return idx.reshape(-1), np.repeat(np.arange(B), L), B
    if idx.ndim != 1:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {idx.ndim}")
    if offsets is None:
        raise ValueError("offsets has to be a 1D Tensor but got None")
    off = offsets.numpy(force=True) if isinstance(offsets, Tensor) else np.asarray(offsets)
    if off.ndim != 1:
        raise ValueError(f"offsets has to be a 1D Tensor, got shape {list(off.shape)}")
    if off.dtype.kind not in "iu":
        raise BagDtypeError(f"embedding_bag: expected integer offsets (int64 or int32), got dtype {off.dtype}")
    if off.size == 0:
        if include_last_offset:
            raise OffsetsError("include_last_offset: number of offset should be at least 1, got 0")
        return idx[:0], np.zeros(0, np.int64), 0
    if off[0] != 0:
        raise OffsetsError(f"offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from "
                           f"position 0. However, got {int(off[0])}")
    if off[-1] > idx.size:
        raise OffsetsError(f"offsets[-1] can not be greater than input's length ({idx.size}), but got offsets[-1] "
                           f"of {int(off[-1])}")
    if (np.diff(off) < 0).any():
        raise OffsetsError(f"embedding_bag: expected non-decreasing offsets, got {off.tolist()}")
    bounds = off if include_last_offset else np.concatenate([off, [idx.size]])
    B = len(bounds) - 1
    bag = np.repeat(np.arange(B), np.diff(bounds))
    return idx[:bounds[-1]], bag, B


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """As ``torch.nn.functional.embedding_bag``; see the module docstring. Returns (B, dim).
    ``max_norm`` is F.embedding_bag's (minidl/nn/functional/sparse.py), which renormalises the
    rows and then calls this."""
    if max_norm is not None:
        raise NotImplementedError("embedding_bag: max_norm is applied by minidl.nn.functional.embedding_bag, which "
                                  "renormalises the rows first; this lookup takes max_norm=None")
    if scale_grad_by_freq or sparse:
        raise NotImplementedError(f"embedding_bag: scale_grad_by_freq and sparse gradients are not supported, got "
                                  f"scale_grad_by_freq={scale_grad_by_freq}, sparse={sparse}")
    if mode not in MODES:
        raise ValueError(f"mode has to be one of sum, mean or max, got {mode!r}")
    if not isinstance(weight, Tensor) or weight.ndim != 2:
        raise ValueError(f"embedding_bag: weight must be a 2-D Tensor (num_embeddings, embedding_dim), got "
                         f"{list(getattr(weight, 'shape', [])) or type(weight).__name__}")
    for name, t in (("offsets", offsets), ("per_sample_weights", per_sample_weights), ("input", input)):
        if isinstance(t, Tensor) and t.device != weight.device:
            raise RuntimeError(f"embedding_bag: expected all tensors on the same device, but found weight on "
                               f"{weight.device} and {name} on {t.device}")
    in_shape = tuple(np.shape(input.numpy(force=True) if isinstance(input, Tensor) else input))
    idx, bag, B = _flat_bags(input, offsets, include_last_offset)
    V = weight.shape[0]
    if idx.size and (idx.min() < 0 or idx.max() >= V):
        raise BagIndexError(f"embedding_bag: index out of range in self: indices span [{int(idx.min())}, "
                            f"{int(idx.max())}] but num_embeddings is {V}")
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                      f"supported for mode='sum' (got mode='{mode}')")
        if tuple(per_sample_weights.shape) != in_shape:
            raise ValueError(f"embedding_bag: If per_sample_weights ({list(per_sample_weights.shape)}) is not None, "
                             f"then it must have the same shape as the input ({list(in_shape)})")
        per_sample_weights = per_sample_weights.reshape(-1)[:idx.size] if per_sample_weights.ndim else None
    keep = np.ones(idx.size, bool) if padding_idx is None else idx != (padding_idx % V)
    return EmbeddingBag.apply(weight, per_sample_weights, idx[keep].astype(np.int64), bag[keep], keep, B, mode)
