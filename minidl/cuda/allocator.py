"""The bytes minidl holds on the GPU: every device buffer minidl makes is counted here.

minidl makes its device buffers in two places, ``CudaArray.empty`` (``cuda.device_array``) and
``cuda_transfers.upload`` (``cuda.to_device``), and both go through ``allocate``. It counts
the buffer's bytes and watches the buffer with a weak reference whose callback takes them off
when the last view of it is dropped: the counts are the bytes of live minidl device tensors
(views share their base's buffer and add nothing). A kernel's own scratch (a deferred check's
flag, the dropout generator's states) is numba's business and is not counted.

minidl keeps no cache of freed blocks, as PyTorch's caching allocator does: numba frees a
dropped buffer itself (after a short queue of pending frees, see ``empty_cache``). So the
"reserved" numbers equal the "allocated" ones, and one block is one segment. Bytes are
counted as asked for (PyTorch rounds each block up to 512 B). Blocks of at most 1 MiB count
in the "small pool" and larger ones in the "large pool", PyTorch's split.

``OutOfMemoryError`` is what minidl raises when numba reports that the GPU (or, under the
simulator, the host standing in for it) has no memory left for a buffer.

This module imports nothing from numba: ``md.cuda``'s memory functions read it without
starting the GPU.
"""
import threading
import weakref

SMALL_BLOCK = 1 << 20       # PyTorch's small pool: blocks of at most 1 MiB
_CUDA_ERROR_OUT_OF_MEMORY = 2   # CUresult


class OutOfMemoryError(RuntimeError):
    """The GPU has no memory left for a buffer minidl asked for (torch.OutOfMemoryError)."""


_lock = threading.RLock()   # re-entrant: a garbage collection inside a locked block may free a buffer
# one row per pool, all / large_pool / small_pool, of counters at these places:
_CUR_B, _PEAK_B, _ALLOC_B, _FREED_B, _CUR_N, _PEAK_N, _ALLOC_N, _FREED_N = range(8)
_rows = [[0] * 8 for _ in range(3)]
_events = {"num_ooms": 0, "started": False}    # started: minidl has made a device buffer
_live = {}      # id(weakref) -> (weakref, nbytes, pool row): the counted buffers still alive


def _freed(ref):
    entry = _live.pop(id(ref), None)
    if entry is None:
        return
    _, nbytes, pool = entry
    with _lock:
        _release(_rows[0], nbytes)
        _release(pool, nbytes)


def _release(row, nbytes):
    row[_CUR_B] -= nbytes
    row[_FREED_B] += nbytes
    row[_CUR_N] -= 1
    row[_FREED_N] += 1


def _hold(row, nbytes):
    row[_CUR_B] = cur = row[_CUR_B] + nbytes
    if cur > row[_PEAK_B]:
        row[_PEAK_B] = cur
    row[_ALLOC_B] += nbytes
    row[_CUR_N] = cur = row[_CUR_N] + 1
    if cur > row[_PEAK_N]:
        row[_PEAK_N] = cur
    row[_ALLOC_N] += 1


def track(buf, nbytes):
    """Count ``buf`` (a numba device array of ``nbytes`` bytes) until it is garbage."""
    if nbytes <= 0:
        return
    total, pool = _rows[0], _rows[1 if nbytes > SMALL_BLOCK else 2]
    with _lock:
        _hold(total, nbytes)
        _hold(pool, nbytes)
    ref = weakref.ref(buf, _freed)
    _live[id(ref)] = (ref, nbytes, pool)
    _events["started"] = True


def is_out_of_memory(exc):
    """Whether numba's exception says the memory ran out: its CUDA_ERROR_OUT_OF_MEMORY (once
    numba's own retry after flushing its pending frees failed too), or, under the simulator,
    NumPy's MemoryError for the host array standing in for the buffer."""
    if isinstance(exc, MemoryError):
        return True
    code = getattr(exc, "code", None)
    try:
        return type(exc).__name__ == "CudaAPIError" and int(code) == _CUDA_ERROR_OUT_OF_MEMORY
    except (TypeError, ValueError):
        return False


def allocate(make, arg, nbytes, **kwargs):
    """``make(arg, **kwargs)`` (numba's ``device_array`` or ``to_device``), a buffer of
    ``nbytes`` bytes, counted; numba's out-of-memory error becomes OutOfMemoryError."""
    try:
        buf = make(arg, **kwargs)
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
        with _lock:
            _events["num_ooms"] += 1
        raise OutOfMemoryError(
            f"CUDA out of memory. Tried to allocate {format_bytes(nbytes)}; {format_bytes(current_bytes())} "
            f"is allocated by minidl tensors ({type(exc).__name__}: {exc})") from exc
    track(buf, nbytes)
    return buf


def format_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024


def stats():
    """The counters, as PyTorch's ``memory_stats`` flat dict (see the module docstring)."""
    out = {}
    kinds = ("current", "peak", "allocated", "freed")
    with _lock:
        for pool, row in zip(("all", "large_pool", "small_pool"), _rows):
            for k, kind in enumerate(kinds):
                for key in ("allocated_bytes", "active_bytes", "requested_bytes", "reserved_bytes"):
                    out[f"{key}.{pool}.{kind}"] = row[_CUR_B + k]
                for key in ("allocation", "active", "segment"):
                    out[f"{key}.{pool}.{kind}"] = row[_CUR_N + k]
                out[f"inactive_split_bytes.{pool}.{kind}"] = 0     # no cached blocks, so none split
                out[f"inactive_split.{pool}.{kind}"] = 0
        for kind in kinds:
            out[f"oversize_allocations.{kind}"] = 0
            out[f"oversize_segments.{kind}"] = 0
        out.update(num_alloc_retries=0, num_ooms=_events["num_ooms"], num_sync_all_streams=0,
                   num_device_alloc=_rows[0][_ALLOC_N], num_device_free=_rows[0][_FREED_N], max_split_size=-1)
    return dict(sorted(out.items()))


def reset_peak():
    with _lock:
        for row in _rows:
            row[_PEAK_B], row[_PEAK_N] = row[_CUR_B], row[_CUR_N]


def reset_accumulated():
    with _lock:
        for row in _rows:
            row[_ALLOC_B] = row[_FREED_B] = row[_ALLOC_N] = row[_FREED_N] = 0
        _events["num_ooms"] = 0


def ever_allocated():
    return _events["started"]


def current_bytes():
    return _rows[0][_CUR_B]
