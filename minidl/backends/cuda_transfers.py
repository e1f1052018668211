"""Counting the copies between host and device, so host round trips are measurable.

Every explicit copy the cuda backend makes goes through ``upload`` (host -> device) or
``download`` (device -> host). Both add to a process-wide tally and to every open
``transfer_log``::

    from minidl.backends.cuda import transfer_log
    with transfer_log() as log:
        loss = train_step()
        float(loss)
    log.d2h_count, log.d2h_bytes, log.h2d_count, log.h2d_bytes
    print(log)          # one line per copy: direction, bytes, shape, and the minidl call site

What is counted: the copies minidl itself asks for (CudaArray.from_host / copy_to_host, index
arrays, constants). Not counted: kernel launch arguments (scalars and shape tuples travel with
the launch, as on any GPU) and copies a user makes on numba device arrays directly. A kernel
launched with a NumPy array argument would make numba copy it silently; minidl never does
that (every kernel receives device buffers), and a test would see the result as a mismatch.
"""
import contextlib
import os
import sys

from numba import cuda

from ..cuda import allocator as _allocator

_LOGS = []          # the open transfer_logs, innermost last
TOTAL = {"h2d_count": 0, "h2d_bytes": 0, "d2h_count": 0, "d2h_bytes": 0}
_HERE = os.path.dirname(os.path.abspath(__file__))


class Transfer:
    __slots__ = ("direction", "nbytes", "shape", "site")

    def __init__(self, direction, nbytes, shape, site):
        self.direction, self.nbytes, self.shape, self.site = direction, nbytes, shape, site

    def __repr__(self):
        return f"{self.direction} {self.nbytes:>8} B shape={self.shape} at {self.site}"


class TransferLog:
    """The copies made while it was open (see the module docstring)."""

    def __init__(self):
        self.transfers = []

    def _of(self, direction):
        return [t for t in self.transfers if t.direction == direction]

    @property
    def h2d(self):
        return self._of("h2d")

    @property
    def d2h(self):
        return self._of("d2h")

    @property
    def h2d_count(self):
        return len(self.h2d)

    @property
    def d2h_count(self):
        return len(self.d2h)

    @property
    def h2d_bytes(self):
        return sum(t.nbytes for t in self.h2d)

    @property
    def d2h_bytes(self):
        return sum(t.nbytes for t in self.d2h)

    def __repr__(self):
        head = (f"TransferLog(h2d: {self.h2d_count} copies, {self.h2d_bytes} B; "
                f"d2h: {self.d2h_count} copies, {self.d2h_bytes} B)")
        return "\n  ".join([head] + [repr(t) for t in self.transfers])


def _call_site():
    """'file:line (function)' of the innermost frame outside minidl/backends (and the cuda package
    in it): who asked."""
    f = sys._getframe(2)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(_HERE + os.sep):
        f = f.f_back
    if f is None:
        return "?"
    path = f.f_code.co_filename
    short = path[path.rfind("minidl"):] if "minidl" in path else os.path.basename(path)
    return f"{short}:{f.f_lineno} ({f.f_code.co_name})"


def _record(direction, nbytes, shape):
    TOTAL[direction + "_count"] += 1
    TOTAL[direction + "_bytes"] += nbytes
    if _LOGS:
        t = Transfer(direction, nbytes, tuple(shape), _call_site())
        for log in _LOGS:
            log.transfers.append(t)


def upload(host):
    """A numba device array holding a copy of the contiguous ndarray ``host`` (its bytes counted
    by md.cuda's memory statistics, minidl/cuda/allocator.py)."""
    _record("h2d", host.nbytes, host.shape)
    return _allocator.allocate(cuda.to_device, host, host.nbytes)


def download(buf):
    """An ndarray holding a copy of the numba device array ``buf``."""
    _record("d2h", buf.nbytes, buf.shape)
    return buf.copy_to_host()


@contextlib.contextmanager
def transfer_log():
    """Open a TransferLog for the duration of the ``with`` block (logs nest)."""
    log = TransferLog()
    _LOGS.append(log)
    try:
        yield log
    finally:
        _LOGS.remove(log)
