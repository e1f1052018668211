"""Whether the layer kernels (im2col/col2im, pooling, GELU, recurrent gates) run Numba-parallel.

These kernels run between multi-threaded BLAS calls (the conv GEMMs). OpenBLAS's idle
workers spin for about 0.1 s after each call, so a parallel Numba kernel right after a GEMM
shares its core with a spinning BLAS worker and loses to a serial one. Once minidl has
shortened that spin (``blas_threads``) and started Numba's pool with short spinning too
(``thread_pool``), the parallel kernels pay (measurements: docs/performance.md). Where the
BLAS spin could not be shortened (not NumPy's OpenBLAS, or the user set their own
OPENBLAS_THREAD_TIMEOUT) they stay serial. MINIDL_LAYER_PARALLEL=1 or 0 forces either.
"""
import os

from . import blas_threads

_FORCED = os.environ.get("MINIDL_LAYER_PARALLEL")
PARALLEL = None   # None: follow blas_threads.SHORT; True/False: forced (env above, or assigned)
if _FORCED in ("0", "1"):
    PARALLEL = _FORCED == "1"


def allowed():
    """May the layer kernels run their parallel variants in this process? (Whether a given
    input is large enough is ``minidl.kernels.cpu._threads.layer_parallel``'s question.)"""
    return blas_threads.SHORT if PARALLEL is None else PARALLEL
