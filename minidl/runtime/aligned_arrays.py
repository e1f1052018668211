"""Aligned arrays: NumPy's array buffers start on a 64-byte cache line, as PyTorch's CPU tensors do.

glibc's malloc returns 16-byte aligned memory, so an array starts 0, 16, 32 or 48 bytes into a
cache line, at random. A kernel's 64-byte vector loads (AVX-512) then each straddle two lines,
and a 32-byte load every other time. Measured on an AVX-512 Xeon (docs/performance.md,
"Arrays on cache lines"): the same kernel on the same data, 16 bytes off a line against on one,
took 10% longer for GELU's forward, 3% for its backward and 8% for a Linear's backward; a GPT
training step, 2-3%. PyTorch's CPU allocator aligns every tensor to 64 bytes.

``install`` gives NumPy an allocation handler (NumPy's data-memory hook, NEP 49:
``PyDataMem_SetHandler``) of four native functions that Numba compiles as C callbacks
(``_aligned_alloc``):

    malloc(n)      n >= ALIGNED_BYTES: memalign(64, n); smaller: NumPy's own handler's
    calloc(k, n)   the same, zeroed; beyond LAZY_ZERO_BYTES glibc's calloc, whose fresh pages
                   are zero without being written (np.zeros of a huge array stays lazy)
    realloc(p, n)  NumPy's own (glibc's realloc), moved to a 64-byte boundary if it landed off one
    free(p, n)     n >= ALIGNED_BYTES: glibc's free; smaller: NumPy's own

Small buffers stay with NumPy's handler, whose cache of small blocks makes a tiny array cheaper
than glibc's malloc does (about 250 ns an op on a 16-element array). Every buffer comes from
glibc's heap either way (NumPy's handler is malloc with that cache), so a block may be freed by
either side, and an array made by NumPy's default handler (it remembers its handler) is freed
by that one. The handler belongs to the thread that imports minidl: NumPy keeps it in a context
variable, and a thread started later allocates with NumPy's default until it calls ``install``
itself (minidl's block workers do).

It runs when minidl is imported, on Linux with glibc, where Numba compiles (not with
NUMBA_DISABLE_JIT=1), and changes nothing with MINIDL_ALIGNED_ARRAYS=0 or where the user has set
a handler of their own.
"""
import ctypes
import os

import numpy as np

from . import host_memory

ALIGNMENT = 64
ALIGNED_BYTES = 1024          # smaller buffers (shapes, scalars, biases of a few features) as malloc gives them
LAZY_ZERO_BYTES = host_memory.MMAP_BYTES   # glibc maps larger blocks afresh, zero already
NAME = "minidl_aligned_64"

_CAPSULE_NAME = b"mem_handler"   # the name NumPy looks for; the capsule keeps a pointer to it
_handler = None               # (capsule, struct, callbacks, NumPy's capsule): alive as long as arrays may use them


def _multiarray():
    try:
        from numpy._core import _multiarray_umath as m       # NumPy 2
    except ImportError:                                      # pragma: no cover  (NumPy 1.x)
        from numpy.core import _multiarray_umath as m
    return m


def _python_api():
    """Python's C API as ctypes functions of our own: setting argtypes on ``ctypes.pythonapi``'s
    would change them for every other user of that shared object."""
    return ctypes.PyDLL(None)


def _c_api(index, restype, *argtypes):
    """Entry ``index`` of NumPy's C API table as a ctypes function called with the GIL held."""
    api = _python_api()
    api.PyCapsule_GetName.restype, api.PyCapsule_GetName.argtypes = ctypes.c_char_p, [ctypes.py_object]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    capsule = _multiarray()._ARRAY_API
    table = ctypes.cast(api.PyCapsule_GetPointer(capsule, api.PyCapsule_GetName(capsule)),
                        ctypes.POINTER(ctypes.c_void_p))
    return ctypes.PYFUNCTYPE(restype, *argtypes)(table[index])


_SET_HANDLER, _GET_HANDLER = 304, 305   # PyDataMem_Set/GetHandler's places in the table since NumPy 1.22 (its ABI)


class _Allocator(ctypes.Structure):             # PyDataMemAllocator
    _fields_ = [("ctx", ctypes.c_void_p), ("malloc", ctypes.c_void_p), ("calloc", ctypes.c_void_p),
                ("realloc", ctypes.c_void_p), ("free", ctypes.c_void_p)]


class _Handler(ctypes.Structure):               # PyDataMem_Handler, version 1
    _fields_ = [("name", ctypes.c_char * 127), ("version", ctypes.c_uint8), ("allocator", _Allocator)]


def _register(numpys):
    """The functions the callbacks call, under the fixed names ``_aligned_alloc`` declares: glibc's,
    and those of NumPy's own handler ``numpys`` (its PyDataMemAllocator)."""
    import llvmlite.binding as llvm
    libc = host_memory.glibc()
    for name in ("calloc", "free", "memalign", "memset", "memcpy"):
        llvm.add_symbol("minidl_libc_" + name, ctypes.cast(getattr(libc, name), ctypes.c_void_p).value)
    for name in ("malloc", "calloc", "realloc", "free"):
        llvm.add_symbol("minidl_numpy_" + name, getattr(numpys, name))


def supported():
    """Can this process take the handler (Linux with glibc, Numba compiling)?"""
    import numba
    return not numba.config.DISABLE_JIT and host_memory.glibc() is not None


def install():
    """Make the calling thread's new NumPy arrays 64-byte aligned (the module docstring); True if
    its handler is now minidl's."""
    global _handler
    multiarray = _multiarray()
    current = multiarray.get_handler_name()
    if current == NAME:
        return True
    if current != "default_allocator" or os.environ.get("MINIDL_ALIGNED_ARRAYS", "1") == "0" or not supported():
        return False
    if _handler is None:
        api = _python_api()
        numpys = _c_api(_GET_HANDLER, ctypes.py_object)()       # the default, as checked above
        api.PyCapsule_GetPointer.restype = ctypes.POINTER(_Handler)
        api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        own = api.PyCapsule_GetPointer(numpys, _CAPSULE_NAME).contents.allocator
        _register(own)
        from . import _aligned_alloc      # compiles (or loads from Numba's cache) the callbacks
        fns = _aligned_alloc.CALLBACKS
        # NumPy's context goes to its functions as ours: the callbacks pass theirs on
        struct = _Handler(NAME.encode(), 1, _Allocator(own.ctx, *(f.address for f in fns)))
        api.PyCapsule_New.restype = ctypes.py_object
        api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        capsule = api.PyCapsule_New(ctypes.addressof(struct), _CAPSULE_NAME, None)
        _handler = (capsule, struct, fns, numpys)
        # never freed: arrays outlive this module's globals at shutdown, and NumPy frees each
        # through its handler's struct and callbacks
        api.Py_IncRef.argtypes = [ctypes.py_object]
        api.Py_IncRef(_handler)
    _c_api(_SET_HANDLER, ctypes.py_object, ctypes.py_object)(_handler[0])
    return multiarray.get_handler_name() == NAME


def is_aligned(a):
    """Does array ``a``'s buffer start on a 64-byte boundary?"""
    return np.asarray(a).ctypes.data % ALIGNMENT == 0
