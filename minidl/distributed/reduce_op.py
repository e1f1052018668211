"""ReduceOp: how all_reduce and reduce_scatter combine the ranks' values, as PyTorch's.

``SUM``, ``PRODUCT``, ``MIN``, ``MAX`` and the bitwise ``BAND``, ``BOR``, ``BXOR`` (integer and
bool tensors only) map onto MPI's own operations; ``AVG`` (floating tensors only) is a SUM
followed by a division by the world size on every rank, so every rank holds the same bits.
"""
import enum

import numpy as np


class ReduceOp(enum.Enum):
    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7

    def __repr__(self):
        return f"ReduceOp.{self.name}"


_BITWISE = (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR)


def check_op(op, dtype, collective):
    """``op`` as a ReduceOp, after checking that it applies to arrays of ``dtype``."""
    if isinstance(op, str):
        op = ReduceOp.__members__.get(op.upper(), op)
    if not isinstance(op, ReduceOp):
        raise ValueError(f"{collective}: op must be a dist.ReduceOp, got {op!r}")
    kind = np.dtype(dtype).kind
    if op in _BITWISE and kind not in "biu":
        raise ValueError(f"{collective}: ReduceOp.{op.name} needs an integer or bool tensor, got {dtype}")
    if op is ReduceOp.AVG and kind not in "fc":
        raise ValueError(f"{collective}: ReduceOp.AVG needs a floating-point tensor, got {dtype}")
    if op in (ReduceOp.MIN, ReduceOp.MAX) and kind == "c":
        raise ValueError(f"{collective}: ReduceOp.{op.name} is not defined for the complex dtype {dtype}")
    return op


def combine(op, arrays, out):
    """Reduce the equal-shaped ``arrays`` (in rank order) into ``out`` with ``op`` (AVG's SUM
    part only: the division happens where the result is written back)."""
    if op in (ReduceOp.SUM, ReduceOp.AVG):
        fn = np.logical_or if out.dtype == np.bool_ else np.add
    elif op is ReduceOp.PRODUCT:
        fn = np.logical_and if out.dtype == np.bool_ else np.multiply
    else:
        fn = {ReduceOp.MIN: np.minimum, ReduceOp.MAX: np.maximum, ReduceOp.BAND: np.bitwise_and,
              ReduceOp.BOR: np.bitwise_or, ReduceOp.BXOR: np.bitwise_xor}[op]
    out[...] = arrays[0]
    for a in arrays[1:]:
        fn(out, a, out=out)
    return out
