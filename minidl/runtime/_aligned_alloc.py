"""The C callbacks of minidl's NumPy allocation handler (``aligned_arrays`` says what and why), as
Numba cfuncs. glibc's functions and NumPy's own handler's are registered with LLVM under fixed
names before this module is imported (``aligned_arrays._register``), so the code cached by Numba
finds this process's copies. Pointers are integers here: Numba has no truth value for ``void*``.
Imported only where ``aligned_arrays.supported()`` holds (Linux, glibc, Numba compiling)."""
from numba import cfunc, types

from .aligned_arrays import ALIGNED_BYTES, ALIGNMENT, LAZY_ZERO_BYTES

_ptr = _size = types.uintp
_memalign = types.ExternalFunction("minidl_libc_memalign", _ptr(_size, _size))
_memset = types.ExternalFunction("minidl_libc_memset", _ptr(_ptr, types.int32, _size))
_memcpy = types.ExternalFunction("minidl_libc_memcpy", _ptr(_ptr, _ptr, _size))
_calloc = types.ExternalFunction("minidl_libc_calloc", _ptr(_size, _size))
_free = types.ExternalFunction("minidl_libc_free", types.void(_ptr))
# NumPy's own handler's functions, each taking its context first
_np_malloc = types.ExternalFunction("minidl_numpy_malloc", _ptr(_ptr, _size))
_np_calloc = types.ExternalFunction("minidl_numpy_calloc", _ptr(_ptr, _size, _size))
_np_realloc = types.ExternalFunction("minidl_numpy_realloc", _ptr(_ptr, _ptr, _size))
_np_free = types.ExternalFunction("minidl_numpy_free", types.void(_ptr, _ptr, _size))


@cfunc(_ptr(_ptr, _size), cache=True)
def aligned_malloc(ctx, n):
    if n < ALIGNED_BYTES:
        return _np_malloc(ctx, n)
    return _memalign(ALIGNMENT, n)


@cfunc(_ptr(_ptr, _size, _size), cache=True)
def aligned_calloc(ctx, k, n):
    total = k * n
    if n != 0 and total // n != k:           # k * n overflows: no memory, as calloc says
        return 0
    if total < ALIGNED_BYTES:
        return _np_calloc(ctx, k, n)
    if total > LAZY_ZERO_BYTES:
        return _calloc(k, n)
    p = _memalign(ALIGNMENT, total)
    if p != 0:
        _memset(p, 0, total)
    return p


@cfunc(_ptr(_ptr, _ptr, _size), cache=True)
def aligned_realloc(ctx, p, n):
    q = _np_realloc(ctx, p, n)
    if q == 0 or n < ALIGNED_BYTES or q % ALIGNMENT == 0:
        return q
    r = _memalign(ALIGNMENT, n)
    if r == 0:
        return q                             # still valid, only off a line
    _memcpy(r, q, n)
    _free(q)
    return r


@cfunc(types.void(_ptr, _ptr, _size), cache=True)
def aligned_free(ctx, p, n):
    if n < ALIGNED_BYTES:
        _np_free(ctx, p, n)
    else:
        _free(p)


CALLBACKS = (aligned_malloc, aligned_calloc, aligned_realloc, aligned_free)   # PyDataMemAllocator's order
