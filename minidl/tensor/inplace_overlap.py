"""When an indexed in-place write may read memory it writes: PyTorch's rules, for ``apply_inplace``.

An indexed write (``x[idx] = v`` with an index array or a mask, ``index_put_``, ``index_copy_``,
``index_add_``, ``scatter_``, ``scatter_add_``, ``scatter_reduce_``, ``index_reduce_``, ``put_``)
reads its operand while it writes, in an order of its own. So PyTorch refuses an operand (the
values, or an index) that shares memory with the written tensor anywhere, not only at the written
positions: ``x[[2, 3]] = x[:2]`` reads elements 0 and 1, writes 2 and 3, and is refused; so is the
very same memory (``x.index_copy_(0, i, x)``), which copy_'s rule lets through. It judges only what
it can judge cheaply: two arrays that are each *dense* (some order of their dims is contiguous, no
element twice) and whose spans of memory intersect. An operand laid out otherwise (``x[::3]``, an
expanded one) is not judged, and the op computes as if it had been cloned first.

Two exceptions, PyTorch's: a write of one value through one bool mask (``x[mask] = x[0]``) is a
``masked_fill_`` of that number, which reads nothing while writing; and ``masked_scatter_`` judges
nothing and reads its source as it writes (``masked_scatter_order``).

Elementwise in-place ops and writes through a basic index (slices, ints) follow copy_'s laxer rule
instead (inplace.py's ``check_no_partial_overlap``). Only ndarrays are judged (device arrays are
left to the device).
"""
import numpy as np

_OVERLAP = ("unsupported operation: some elements of the input tensor and the written-to tensor refer to a "
            "single memory location. Please clone() the tensor before performing the operation.")


def _dense_span(a):
    """[start, end) byte addresses of the ndarray ``a`` if it is non-empty and dense (its elements
    fill that span, each once, in some order of its dims); None otherwise."""
    if type(a) is not np.ndarray or a.size == 0:
        return None
    expected = a.itemsize
    for n, s in sorted(((n, s) for n, s in zip(a.shape, a.strides) if n > 1), key=lambda ns: ns[1]):
        if s != expected:
            return None
        expected *= n
    start = a.__array_interface__["data"][0]
    return start, start + a.size * a.itemsize


def check_no_overlap(dest, src, name):
    """PyTorch's ``assert_no_overlap``: refuse when ``dest`` (the array an indexed write writes into)
    and ``src`` (an operand) are both dense and their spans intersect."""
    a, b = _dense_span(dest), _dense_span(src)
    if a is not None and b is not None and a[0] < b[1] and b[0] < a[1]:
        raise RuntimeError(_OVERLAP + f" ({name})")


def index_put_overlap(dest, indices, value, name, accumulate=False):
    """The overlap rule of ``dest.index_put_(indices, value)`` for ``apply_inplace`` (also of
    ``x[...] = value`` with an index array or a mask, ``dest`` then the view the basic part of the
    index selects): None (nothing to judge) for a masked_fill_ (one bool mask, one value, no
    accumulation); else the index arrays are checked against ``dest`` here, and the rule returned
    checks the value against ``dest``."""
    arrays = [getattr(i, "_data", i) for i in indices if isinstance(i, np.ndarray) or hasattr(i, "_data")]
    n_values = value.numel() if hasattr(value, "numel") else int(np.prod(np.shape(value)))
    if not accumulate and len(arrays) == 1 and arrays[0].dtype.kind == "b" and arrays[0].ndim and n_values == 1:
        return None
    for index in arrays:
        check_no_overlap(dest, index, name)
    return lambda data, src, name: check_no_overlap(dest, src, name)


def masked_scatter_order(dest, mask, source):
    """The source elements ``dest.masked_scatter_(mask, source)`` writes, as positions into
    ``source``'s leading elements (flattened), or None for 0, 1, 2, ...: PyTorch reads a contiguous
    source while it writes, one masked position after the other (in dest's row-major order), so
    where source shares memory with dest, a position written earlier is read with its new value.
    The k-th write reads source element k; if an earlier write j put its value there, k takes
    whatever j took, down to a write that read memory nothing had written yet."""
    if any(type(a) is not np.ndarray for a in (dest, mask, source)) or mask.dtype != np.bool_ \
            or not source.flags.c_contiguous or not np.may_share_memory(dest, source):
        return None              # (a mask masked_scatter refuses is refused there)
    try:
        mask = np.broadcast_to(mask, dest.shape)
    except ValueError:
        return None
    item = dest.itemsize
    written = element_addresses(dest)[mask]
    count = written.size
    if count > source.size:
        return None
    read = source.__array_interface__["data"][0] + np.arange(count, dtype=np.int64) * item
    order = np.argsort(written, kind="stable")
    at = np.minimum(np.searchsorted(written[order], read), max(count - 1, 0))
    writer = order[at] if count else at
    prev = np.where((written[writer] == read) & (writer < np.arange(count)), writer, np.arange(count))
    while True:                      # follow each chain of earlier writes back to its first read
        nxt = prev[prev]
        if np.array_equal(nxt, prev):
            break
        prev = nxt
    return None if np.array_equal(prev, np.arange(count)) else prev


def element_addresses(a):
    """The byte address of each element of the ndarray ``a``, in a's shape."""
    addr = np.asarray(a.__array_interface__["data"][0], dtype=np.int64)
    for n, stride in zip(a.shape, a.strides):
        addr = np.add.outer(addr, np.arange(n, dtype=np.int64) * stride)
    return addr
