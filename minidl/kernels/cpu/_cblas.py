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

The functions are the CBLAS ``sgemm``/``dgemm`` of the OpenBLAS NumPy loaded (ILP64 in NumPy's
wheels: ``scipy_cblas_sgemm64_``). They are found in the process's loaded libraries and
registered with LLVM under fixed names, so kernels that call them are cached like any other.
``AVAILABLE`` is False where no such library is loaded (another BLAS, another platform). There,
callers keep their Python-thread path and never compile a call to ``gemm``. With
NUMBA_DISABLE_JIT=1, ``gemm`` is plain Python over the same ctypes functions. The BLAS thread
count is the caller's business (``minidl.runtime.blas_threads.single_threaded``): each call
here should run on the calling thread only.
"""
import ctypes

import numpy as np
from numba import types
from numba.extending import overload

from ...runtime.blas_threads import loaded_openblas

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112   # CBLAS's enum values
# (float32 symbol, float64 symbol) under the names OpenBLAS builds export, with 64-bit integers
_NAMES = (("scipy_cblas_sgemm64_", "scipy_cblas_dgemm64_"), ("cblas_sgemm64_", "cblas_dgemm64_"))
_SYMBOLS = {np.float32: "minidl_cblas_sgemm", np.float64: "minidl_cblas_dgemm"}


def _find():
    """{dtype: ctypes function} from the first loaded OpenBLAS that exports a 64-bit-integer
    CBLAS GEMM pair, else {}."""
    for path in loaded_openblas():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for names in _NAMES:
            try:
                fns = [getattr(lib, name) for name in names]
            except AttributeError:
                continue
            found = {}
            for dtype, fn in zip((np.float32, np.float64), fns):
                real = ctypes.c_float if dtype is np.float32 else ctypes.c_double
                fn.restype = None
                fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64,
                               ctypes.c_int64, real, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                               ctypes.c_int64, real, ctypes.c_void_p, ctypes.c_int64]
                found[dtype] = fn
            return found
    return {}


_FUNCTIONS = _find()
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
