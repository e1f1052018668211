"""Batch Renormalization on the CPU: BatchNorm's Numba kernels, reused.

With r and d constants (minidl.ops.normalization.batch_renorm) the forward is BatchNorm's apply
with weight gamma r and bias gamma d + beta, and the backward is BatchNorm's backward with weight
gamma r, so the op calls ``batch_norm_apply`` and ``batch_norm_backward`` of
``minidl.kernels.cpu.batch_norm`` as they are. Only the statistics come first, alone: r and d
depend on them before any output is written, so the forward takes the chunked statistics pass
(``batch_norm_stats``) and then the apply pass, where BatchNorm's fused kernel does both in one
parallel region: one extra read of x per training step.
"""
import numpy as np

from .batch_norm import batch_norm_apply, batch_norm_backward, batch_norm_stats  # noqa: F401


def batch_renorm_statistics(x, eps):
    """(mean, rstd) per channel, float64 (C,), by BatchNorm's chunked kernels; NaN without values."""
    mean, var, _ = batch_norm_stats(x)
    return mean, 1.0 / np.sqrt(var + eps)
