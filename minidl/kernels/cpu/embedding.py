"""Embedding backward: scatter-add the gradient rows into the rows their indices picked.

    gw[idx[k]] += g[k]   for every flattened position k (repeated indices accumulate)

Serial on purpose: two positions with the same index write the same row, and the work
(one contiguous row add per position) is memory-bound and small. ``np.add.at`` computes the
same (the reference) but goes element by element through a generic ufunc loop.
"""
import numpy as np
from numba import njit


@njit(error_model="numpy", cache=True)
def _scatter_rows(idx, g, gw):
    for k in range(idx.shape[0]):
        dst = gw[idx[k]]
        src = g[k]
        for d in range(src.shape[0]):
            dst[d] += src[d]


def embedding_backward(idx, g, num_embeddings):
    """idx: int array (any shape), g: (*idx.shape, D) -> gw (num_embeddings, D)."""
    D = g.shape[-1]
    gw = np.zeros((num_embeddings, D), dtype=g.dtype)
    if g.size == 0:     # no positions, or rows of no features: nothing to add
        return gw
    _scatter_rows(np.ascontiguousarray(idx.reshape(-1), dtype=np.int64), np.ascontiguousarray(g.reshape(-1, D)), gw)
    return gw
