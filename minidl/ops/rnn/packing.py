"""Moving between padded batches and PyTorch's packed layout, differentiably.

A padded time-major batch x (T, B, *) whose sequences are sorted by length (longest first) packs
into data (N, *): step t contributes rows x[t, :batch_sizes[t]], batch_sizes[t] = #{b: len_b > t}.
Packing is a gather at the index pairs (t, b) with b < batch_sizes[t]; its backward scatters the
gradient back (zero at padded positions, which took no part). Padding is the inverse scatter
(padded positions get ``padding_value``) and its backward the gather. The (t, b) index arrays
are host arrays (batch_sizes lives on the host, as in PyTorch); the data may be on any device.
"""
import numpy as np

from ...autograd.op_function import Function
from ...backends import namespace_of


def batch_sizes_of(lengths):
    """batch_sizes of lengths sorted in decreasing order: how many sequences run at each step."""
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.size == 0:
        return np.zeros(0, np.int64)
    steps = np.arange(int(lengths[0]))
    return (lengths[None, :] > steps[:, None]).sum(axis=1).astype(np.int64)


def packed_index(batch_sizes):
    """(t, b) index arrays of the packed rows, in packed order."""
    bs = np.asarray(batch_sizes, dtype=np.int64)
    t = np.repeat(np.arange(bs.size), bs)
    b = np.arange(int(bs.sum())) - np.repeat(np.concatenate([[0], np.cumsum(bs)[:-1]]), bs)
    return t, b


class Pack(Function):
    """data = x[t, b] over the packed (t, b) of ``batch_sizes``; x (T, B, *) time-major."""

    @staticmethod
    def forward(ctx, x, batch_sizes):
        t, b = packed_index(batch_sizes)
        ctx.index, ctx.shape = (t, b), x.shape
        return namespace_of(x).ascontiguousarray(x[t, b])

    @staticmethod
    def backward(ctx, g):
        dx = namespace_of(g).zeros(ctx.shape, g.dtype)
        dx[ctx.index] = g
        return dx, None


class Unpack(Function):
    """The padded (total_length, B, *) batch of packed ``data``; padded positions hold ``value``."""

    @staticmethod
    def forward(ctx, data, batch_sizes, total_length, value):
        t, b = packed_index(batch_sizes)
        B = int(batch_sizes[0]) if len(batch_sizes) else 0
        out = namespace_of(data).full((total_length, B) + data.shape[1:], value, data.dtype)
        out[t, b] = data
        ctx.index = (t, b)
        return out

    @staticmethod
    def backward(ctx, g):
        return namespace_of(g).ascontiguousarray(g[ctx.index]), None, None, None


class PadSequences(Function):
    """(B, L, *) (or ``time_major``: (L, B, *)) from B tensors (len_i, *), ``value`` elsewhere;
    ``left``: sequences are aligned to the end instead of the start."""

    @staticmethod
    def forward(ctx, time_major, left, value, *seqs):
        xp = namespace_of(seqs[0]) if seqs else np
        L = max((s.shape[0] for s in seqs), default=0)
        trailing = seqs[0].shape[1:] if seqs else ()
        dtype = np.result_type(*(s.dtype for s in seqs)) if seqs else np.float32
        out = xp.full((len(seqs), L) + trailing, value, dtype)
        ctx.spans = []
        for i, s in enumerate(seqs):
            start = L - s.shape[0] if left else 0
            out[i, start:start + s.shape[0]] = s
            ctx.spans.append((start, s.shape[0], s.dtype))
        ctx.time_major = time_major
        return xp.ascontiguousarray(out.swapaxes(0, 1)) if time_major else out

    @staticmethod
    def backward(ctx, g):
        xp = namespace_of(g)
        if ctx.time_major:
            g = g.swapaxes(0, 1)
        return (None, None, None) + tuple(xp.ascontiguousarray(g[i, a:a + n], dtype=dt)
                                          for i, (a, n, dt) in enumerate(ctx.spans))
