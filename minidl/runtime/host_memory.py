"""Host memory: keep freed array buffers in the process, so the next step reuses them.

A training step allocates the same large arrays every time (activations, their gradients,
norm outputs) and frees them at the end of the step. glibc's malloc serves an allocation of
more than M_MMAP_THRESHOLD bytes (128 KiB to 32 MiB, adjusted as it goes) with a fresh mmap,
and gives freed memory at the top of its heap back to the system once more than
M_TRIM_THRESHOLD is free. Either way the next step's arrays land on pages the kernel must
fault in and zero again, on every step, which can cost more than the arithmetic of a
memory-bound op (measurements: docs/performance.md).

``keep_freed_memory`` raises both thresholds (arrays up to MMAP_BYTES come from the heap,
and up to TRIM_BYTES of free heap are kept), which is what a caching allocator does for a
GPU framework: the memory a step needed stays with the process for the next step. It runs
when minidl is imported, on Linux with glibc only, and changes nothing when the user has set
either threshold through malloc's own variables (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_,
or ``glibc.malloc.mmap_threshold`` / ``trim_threshold`` in GLIBC_TUNABLES) or
MINIDL_KEEP_FREED_MEMORY=0. Other tunables leave it on: ``GLIBC_TUNABLES=glibc.malloc.hugetlb=1``
(transparent huge pages for malloc's heap, measured in docs/performance.md, "Huge pages for the
heap") combines with it. The cost: a process's resident memory does not shrink after a
peak of up to TRIM_BYTES of freed arrays.
"""
import ctypes
import os
import sys

MMAP_BYTES = 256 << 20
TRIM_BYTES = 1 << 30
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3        # mallopt parameters, from glibc's malloc.h
_USER_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")
_USER_TUNABLES = ("glibc.malloc.mmap_threshold", "glibc.malloc.trim_threshold")


def _user_set_thresholds():
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    return any(v in os.environ for v in _USER_VARIABLES) or any(t in tunables for t in _USER_TUNABLES)


def glibc():
    """glibc as a ctypes library, or None (not Linux, or another C library: musl, ...), for the
    runtime pieces that tune its malloc."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.gnu_get_libc_version, libc.mallopt, libc.memalign  # noqa: B018  (glibc's own)
    except (OSError, AttributeError):
        return None
    return libc


def keep_freed_memory():
    """Raise glibc's mmap and trim thresholds (see the module docstring); True if done."""
    if os.environ.get("MINIDL_KEEP_FREED_MEMORY", "1") == "0" or _user_set_thresholds():
        return False
    libc = glibc()
    if libc is None:                        # leave another allocator alone
        return False
    return bool(libc.mallopt(_M_TRIM_THRESHOLD, TRIM_BYTES)) and bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_BYTES))
