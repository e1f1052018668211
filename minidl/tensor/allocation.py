"""Sizes that no machine holds are refused before anything is allocated.

A factory (``md.zeros(10**12)``) or an op whose output size comes from its arguments (a
convolution's padding) can ask for more memory than the machine has. NumPy would pass the
request to malloc, which under Linux's overcommit may well grant it (``np.zeros`` maps its
pages lazily): filling it then gets the process killed, or a kernel fails deep inside with a
MemoryError. PyTorch answers "can't allocate memory: you tried to allocate N bytes" (a
RuntimeError), so minidl checks the request against the machine's physical memory first and
raises that. A request that fits the machine but not its free memory is left to the allocator.
"""
import math
import os

import numpy as np

_physical = []


def physical_memory():
    """The machine's physical memory in bytes (None where the OS does not say)."""
    if not _physical:
        try:
            _physical.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        except (AttributeError, OSError, ValueError):   # no sysconf (Windows) or no such name
            _physical.append(None)
    return _physical[0]


def check_allocation(op, shape, dtype):
    """Raise RuntimeError, as PyTorch, if an array of ``shape`` (non-negative ints) and
    ``dtype`` needs more bytes than the machine has; ``op`` names the caller."""
    shape = tuple(int(n) for n in shape)
    itemsize = np.dtype(dtype).itemsize
    nbytes = math.prod(shape) * itemsize
    limit = physical_memory()
    if limit is not None and nbytes > limit:
        raise RuntimeError(f"{op}: can't allocate memory: you tried to allocate {nbytes} bytes (shape {list(shape)}, "
                           f"{np.dtype(dtype)}), more than this machine's {limit} bytes of memory")
    if math.prod(n for n in shape if n) * itemsize >= 2 ** 63:   # NumPy's strides and sizes are int64 bytes,
        raise RuntimeError(f"{op}: shape {list(shape)} is too large: its extents of {itemsize}-byte elements do "
                           f"not fit the 64-bit byte offsets of an array")   # even when another dim is 0
