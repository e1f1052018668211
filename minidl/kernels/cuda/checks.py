"""Argument checks that run on the device and report at the next read (deferred asserts).

Checking an index range on the host (``idx.max() < V``) costs a device -> host copy and a
synchronisation per op: the host round trip a training step must not have. Instead a check
launches ``assert_all(ok, error, message)``: a kernel that, where ``ok`` is False anywhere,
writes the check's number into a one-element device flag (compare-and-swap from 0, so the
first failing check in launch order wins). Nothing is read then. The flag is read the next
time the host reads anything from the device (``CudaArray.copy_to_host``: a loss, a
``.numpy()``), which on a GPU is a synchronisation point anyway; if it is set, that read raises
the failing check's error instead of returning. This is PyTorch's asynchronous device assert,
made recoverable: the flag is cleared, and later reads work.

Cost: one 8-byte device -> host copy at a read that follows checks (none when no check ran
since the last read). Meanwhile the ops went on with clamped indices (the gather kernels
clamp, so a bad index never reads outside its buffer). More than ``MAX_PENDING`` checks with
no read in between force a read, to keep the list of messages bounded.
"""
import numpy as np
from numba import cuda

from ._common import grid_for, strided_offset

MAX_PENDING = 4096
_pending = []      # (error type, message) of the checks launched since the last read; check k is k + 1
_flag = []         # the device flag, allocated on first use
_host_read = []    # how the flag is copied to the host: the backend's counted download (use_host_read)


@cuda.jit(cache=True)
def _assert_all(ok, strides, off, shape, n, flag, code):
    i = cuda.grid(1)
    if i < n and not ok[strided_offset(i, shape, strides, off)]:
        cuda.atomic.compare_and_swap(flag, 0, code)


@cuda.jit(cache=True)
def _clear(flag):
    if cuda.grid(1) == 0:
        flag[0] = 0


def _device_flag():
    if not _flag:
        f = cuda.device_array(1, dtype=np.int64)
        _clear[1, 1](f)
        _flag.append(f)
    return _flag[0]


def use_host_read(download):
    """Read the flag with ``download`` (device buffer -> ndarray): the cuda backend passes its
    counted copy (backends/cuda_transfers.py), which this layer cannot import."""
    _host_read[:] = [download]


def assert_all(ok, error, message):
    """Defer ``if not ok.all(): raise error(message)`` for a cuda bool array ``ok``."""
    if ok.size == 0:
        return
    if len(_pending) >= MAX_PENDING:
        raise_pending()
    _pending.append((error, message))
    buf, shape, strides, off = ok._kernel_view()
    _assert_all[grid_for(ok.size)](buf, strides, off, shape, ok.size, _device_flag(), np.int64(len(_pending)))


def raise_pending():
    """Read the flag if checks ran since the last read; raise the first failed one's error."""
    if not _pending:
        return
    checks = list(_pending)
    _pending.clear()
    code = int(_host_read[0](_flag[0])[0])
    if code:
        _clear[1, 1](_flag[0])
        error, message = checks[code - 1]
        raise error(message)
