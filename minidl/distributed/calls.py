"""What one rank asks of a collective, so that the ranks can check they asked the same.

Every collective call is described by a ``Call`` (which collective, the tensor's dtype and
shape, the reduction, the root rank) and numbered per process group. Before any data moves,
the ranks compare their calls: MPI itself would, on tensors of different sizes, truncate,
read past a buffer or wait forever. A difference raises on every rank, naming the ranks and
what differed. The threaded communicator compares the Call objects at its rendezvous; the MPI
communicator exchanges them as a fixed row of 16 integers (``encode``/``decode``).

The all-to-alls are the one family whose calls legitimately differ: rank i sends ``sends[j]``
elements to rank j, which must expect exactly that many from it (``recvs[i]`` there). Those
counts are not compared for equality but checked against each other (``exchange_mismatch``);
the MPI communicator appends them to the row (2 * world_size more integers).

A send and the receive it meets are checked by the receiver: the sender's Call travels with
the data (``p2p_mismatch``).
"""
import zlib
from dataclasses import dataclass, field

import numpy as np

from .reduce_op import ReduceOp

KINDS = ("all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter",
         "reduce_scatter_tensor", "barrier", "reduce", "gather", "scatter", "all_to_all", "all_to_all_single",
         "send")
EXCHANGES = ("all_to_all", "all_to_all_single")
_TO_ROOT = ("reduce", "gather")
_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64",
           "complex64", "complex128", "uint16", "uint32", "uint64")
_MAX_DIMS = 8
ROW = 16


@dataclass(frozen=True)
class Call:
    kind: str
    dtype: str = ""
    shape: tuple = ()
    op: object = None
    src: object = None
    sends: tuple = field(default=None, compare=False)   # all-to-all: elements to each rank
    recvs: tuple = field(default=None, compare=False)   # all-to-all: elements from each rank

    def describe(self):
        if self.kind == "barrier":
            return "barrier"
        if self.kind in EXCHANGES:
            return f"{self.kind} of {self.dtype} tensors"
        text = f"{self.kind} of a {self.dtype} tensor of shape {tuple(self.shape)}"
        if self.op is not None:
            text += f" with {self.op!r}"
        if self.src is not None:
            text += f" {'to' if self.kind in _TO_ROOT else 'from'} rank {self.src}"
        return text


def dtype_code(name):
    """A dtype name as an integer that every rank computes alike."""
    return _DTYPES.index(name) if name in _DTYPES else 1000 + zlib.crc32(name.encode())


def dtype_name(code, ours=None):
    """The name ``dtype_code`` made ``code`` from (``ours`` when it matches a name outside the table)."""
    code = int(code)
    if 0 <= code < len(_DTYPES):
        return _DTYPES[code]
    if ours is not None and code == dtype_code(ours):
        return ours
    return f"<dtype code {code}>"


def call(kind, array=None, op=None, src=None):
    if array is None:
        return Call(kind)
    return Call(kind, np.dtype(array.dtype).name, tuple(int(n) for n in array.shape), op, src)


def exchange(kind, dtype, sends, recvs):
    """The Call of an all-to-all that sends ``sends[j]`` elements to rank j and receives
    ``recvs[i]`` from rank i."""
    return Call(kind, np.dtype(dtype).name, (), sends=tuple(int(n) for n in sends),
                recvs=tuple(int(n) for n in recvs))


def mismatch(seq, calls):
    """None when every rank made the same call number ``seq``; else the error message."""
    first = calls[0]
    differ = [r for r, c in enumerate(calls) if c != first]
    if not differ:
        return exchange_mismatch(seq, calls) if first.kind in EXCHANGES else None
    r = differ[0]
    what = ", ".join(name for name in ("kind", "dtype", "shape", "op", "src")
                     if getattr(calls[r], name) != getattr(first, name))
    more = f" (and ranks {differ[1:]})" if len(differ) > 1 else ""
    return (f"collective #{seq} differs across ranks ({what}): rank 0 called {first.describe()}, "
            f"rank {r} called {calls[r].describe()}{more}")


def exchange_mismatch(seq, calls):
    """None when every rank expects from each other rank as many elements as that rank sends
    it (in an all-to-all); else the error message naming the first pair that disagrees."""
    for i, c in enumerate(calls):
        for j, n in enumerate(c.sends):
            expected = calls[j].recvs[i]
            if n != expected:
                return (f"collective #{seq} ({c.kind}) does not match across ranks: rank {i} sends {n} "
                        f"element(s) to rank {j}, which expects {expected} from rank {i}")
    return None


def p2p_mismatch(sent, received, src, tag):
    """None when a send (``sent``, the sender's Call) fits the receive that met it; else the
    error message."""
    if (sent.dtype, tuple(sent.shape)) == (received.dtype, tuple(received.shape)):
        return None
    return (f"recv of a {received.dtype} tensor of shape {tuple(received.shape)} (tag {tag}) met rank {src}'s "
            f"send of a {sent.dtype} tensor of shape {tuple(sent.shape)}: the dtype and shape must match")


def encode(seq, c, size=0):
    """``c`` as ROW integers, followed by 2 * ``size`` for an all-to-all's element counts."""
    row = np.zeros(ROW + 2 * size, np.int64)
    row[0] = seq
    row[1] = KINDS.index(c.kind)
    row[2] = dtype_code(c.dtype)
    row[3] = -1 if c.op is None else c.op.value
    row[4] = -1 if c.src is None else c.src
    row[5] = len(c.shape)
    dims = list(c.shape[:_MAX_DIMS])
    row[6:6 + len(dims)] = dims
    row[15] = zlib.crc32(repr(tuple(c.shape)).encode())
    if size and c.sends is not None:
        row[ROW:ROW + size] = c.sends
        row[ROW + size:] = c.recvs
    return row


def decode(row, ours):
    """The Call a row describes; fields that cannot be read back (a dtype outside the table, a
    shape past eight dims) come back as they are in ``ours`` when they agree with it."""
    dtype = dtype_name(row[2], ours.dtype)
    ndim = int(row[5])
    if ndim <= _MAX_DIMS:
        shape = tuple(int(n) for n in row[6:6 + ndim])
    else:
        shape = ours.shape if int(row[15]) == zlib.crc32(repr(tuple(ours.shape)).encode()) else \
            tuple(int(n) for n in row[6:6 + _MAX_DIMS]) + ("...",)
    kind = KINDS[int(row[1])] if 0 <= int(row[1]) < len(KINDS) else f"<collective {int(row[1])}>"
    if kind == "barrier":
        return Call("barrier")
    op = None if row[3] < 0 else ReduceOp(int(row[3]))
    src = None if row[4] < 0 else int(row[4])
    if kind in EXCHANGES and len(row) > ROW:
        size = (len(row) - ROW) // 2
        return Call(kind, dtype, shape, op, src, tuple(int(n) for n in row[ROW:ROW + size]),
                    tuple(int(n) for n in row[ROW + size:]))
    return Call(kind, dtype, shape, op, src)
