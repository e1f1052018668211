"""NumPy's own BLAS GEMM, callable from inside Numba kernels.

Why: conv2d's block loops alternate transforms (Numba kernels) with GEMMs. Run from Python
threads (``minidl.runtime.block_workers``), every kernel and every GEMM hands the GIL over. On a
virtual machine, a thread that waits for the GIL is woken through the hypervisor, which is slow.
The result (docs/performance.md, "One region for the shares"): a share of a layer took
1.46-1.67 ms while the other share ran, against 1.09 ms alone. Called from a Numba kernel, both
shares run in one parallel region of Numba's pool, and no thread waits for the GIL.

    gemm(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc)

This is row-major C = alpha op(A) op(B) + beta C for float32 or float64 arrays. The arrays are
views whose first element is the matrix's first. The ld* arguments are the row strides in
elements; ta and tb are NO_TRANS or TRANS.

The functions are a CBLAS ``sgemm``/``dgemm`` pair with 64-bit integers, from one of two
libraries (``PROVIDER``):
- "openblas": the OpenBLAS NumPy loaded (``scipy_cblas_sgemm64_`` in NumPy's wheels), found in
  the process's loaded libraries. Its thread count is the caller's business: a kernel's
  region of calls runs inside ``one_thread_per_call``, so that each call runs on the calling
  thread only.
- "mkl": Intel's MKL (``cblas_sgemm_64``), where the optional ``mkl`` package is installed
  (``pip install minidl[mkl]``) and the CPU is an Intel one, or where MINIDL_GEMM=mkl asks
  for it. Its threading layer is set to sequential, so every call runs on the calling thread.
  On an Intel Xeon VM its kernels ran the GPT's linear-layer products about a fifth faster than
  OpenBLAS's, and on an AMD EPYC slower (docs/performance.md, "Linear's GEMMs in one region,
  MKL in the regions").
  MINIDL_GEMM=openblas keeps OpenBLAS.
The pair is registered with LLVM under fixed names, the same for either library, so kernels
that call them are cached like any other and call whichever this process found.
``AVAILABLE`` is False where neither is found (another BLAS, another platform). There, callers
keep their Python-thread path and never compile a call to ``gemm``. With NUMBA_DISABLE_JIT=1,
``gemm`` is plain Python over the same ctypes functions.
"""
import contextlib
import ctypes
import os
import warnings

import numpy as np
from numba import types
from numba.extending import overload

from ...runtime.blas_threads import loaded_openblas, single_threaded

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112   # CBLAS's enum values
# (float32 symbol, float64 symbol) under the names OpenBLAS builds export, with 64-bit integers
_NAMES = (("scipy_cblas_sgemm64_", "scipy_cblas_dgemm64_"), ("cblas_sgemm64_", "cblas_dgemm64_"))
_SYMBOLS = {np.float32: "minidl_cblas_sgemm", np.float64: "minidl_cblas_dgemm"}


_MKL_NAMES = ("cblas_sgemm_64", "cblas_dgemm_64")
_MKL_SEQUENTIAL = 1     # MKL_THREADING_SEQUENTIAL, for MKL_Set_Threading_Layer
CHOICES = ("auto", "openblas", "mkl")


def _typed(fns):
    """{dtype: ctypes function} for a (sgemm, dgemm) pair with 64-bit integers."""
    found = {}
    for dtype, fn in zip((np.float32, np.float64), fns):
        real = ctypes.c_float if dtype is np.float32 else ctypes.c_double
        fn.restype = None
        fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64,
                       ctypes.c_int64, real, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                       ctypes.c_int64, real, ctypes.c_void_p, ctypes.c_int64]
        found[dtype] = fn
    return found


def _find_openblas():
    """The pair from the first loaded OpenBLAS that exports one, else {}."""
    for path in loaded_openblas():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for names in _NAMES:
            try:
                return _typed([getattr(lib, name) for name in names])
            except AttributeError:
                continue
    return {}


def _mkl_library():
    """The path of the ``mkl`` package's libmkl_rt, or None where it is not installed."""
    from importlib import metadata
    try:
        dist = metadata.distribution("mkl")
    except metadata.PackageNotFoundError:
        return None
    for f in dist.files or ():
        if os.path.basename(str(f)).startswith("libmkl_rt.so"):
            path = dist.locate_file(f)
            if os.path.exists(path):
                return os.path.realpath(path)
    return None


def _intel_cpu():
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("vendor_id") and "GenuineIntel" in line for line in f)
    except OSError:
        return False


def _mkl_already_loaded(ours):
    """Has another library (NumPy built on MKL, say) loaded an MKL other than the one in the
    folder ``ours``? Setting that MKL's threading layer would make its products single-threaded."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "libmkl" in line and "/" in line}
    except OSError:
        return False
    return any(os.path.dirname(os.path.realpath(p)) != ours for p in paths)


def _find_mkl():
    """The pair from MKL, its threading layer set to sequential, else {} (also where an MKL is
    already loaded by someone else)."""
    path = _mkl_library()
    if path is None or _mkl_already_loaded(os.path.dirname(path)):
        return {}
    try:
        lib = ctypes.CDLL(path)
        layer = lib.MKL_Set_Threading_Layer
        fns = [getattr(lib, name) for name in _MKL_NAMES]
    except (OSError, AttributeError):
        return {}
    layer.restype, layer.argtypes = ctypes.c_int, [ctypes.c_int]
    layer(_MKL_SEQUENTIAL)
    return _typed(fns)


def _find():
    """(provider, {dtype: ctypes function}) as the module docstring says, else (None, {})."""
    choice = os.environ.get("MINIDL_GEMM", "auto").strip().lower() or "auto"
    if choice not in CHOICES:
        warnings.warn(f"MINIDL_GEMM must be one of {', '.join(CHOICES)}, got {choice!r}; using 'auto'",
                      RuntimeWarning, stacklevel=2)
        choice = "auto"
    if choice == "mkl" or (choice == "auto" and _intel_cpu()):
        found = _find_mkl()
        if found:
            return "mkl", found
        if choice == "mkl":
            warnings.warn("MINIDL_GEMM=mkl, but no MKL was found (pip install minidl[mkl]); using OpenBLAS",
                          RuntimeWarning, stacklevel=2)
    found = _find_openblas()
    return ("openblas" if found else None), found


PROVIDER, _FUNCTIONS = _find()
AVAILABLE = bool(_FUNCTIONS)
_EXTERNAL = {}
if AVAILABLE:
    import llvmlite.binding as llvm
    for _dtype, _fn in _FUNCTIONS.items():
        llvm.add_symbol(_SYMBOLS[_dtype], ctypes.cast(_fn, ctypes.c_void_p).value)
        _real = types.float32 if _dtype is np.float32 else types.float64
        _EXTERNAL[_dtype] = types.ExternalFunction(_SYMBOLS[_dtype], types.void(
            types.int32, types.int32, types.int32, types.int64, types.int64, types.int64, _real,
            types.CPointer(_real), types.int64, types.CPointer(_real), types.int64, _real, types.CPointer(_real),
            types.int64))


def one_thread_per_call():
    """The context a kernel's region of ``gemm`` calls runs in, so that each call runs on its
    caller's thread only: OpenBLAS held at one thread (``blas_threads.single_threaded``) where it
    is the provider; nothing to do for MKL, whose sequential layer already does, and whose
    regions would otherwise pay OpenBLAS's thread-count changes for nothing (two ctypes calls
    per region, and OpenBLAS's pool restarted after each: about 1 ms of a GPT step)."""
    if PROVIDER == "mkl":
        return contextlib.nullcontext()
    return single_threaded()


def gemm(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc):
    """C = alpha op(A) op(B) + beta C, row-major (the module docstring); as Python, for
    NUMBA_DISABLE_JIT=1 and for calls from Python."""
    _FUNCTIONS[a.dtype.type](ROW_MAJOR, ta, tb, M, N, K, alpha, a.ctypes.data, lda, b.ctypes.data, ldb, beta,
                             c.ctypes.data, ldc)


@overload(gemm, jit_options={"cache": True})
def _gemm_compiled(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc):
    fn = _EXTERNAL.get(np.dtype(str(a.dtype)).type) if isinstance(a, types.Array) else None
    if fn is None:
        return None
    real = a.dtype

    def impl(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc):
        fn(ROW_MAJOR, ta, tb, M, N, K, real(alpha), a.ctypes, lda, b.ctypes, ldb, real(beta), c.ctypes, ldc)
    return impl
