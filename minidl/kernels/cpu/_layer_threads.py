"""Whether the layer kernels (im2col/col2im, pooling, GELU) run Numba-parallel (prange).

These kernels run between multi-threaded BLAS calls (the conv GEMMs). OpenBLAS's idle
workers spin for about 0.1 s after each call, so a parallel Numba kernel right after a GEMM
used to share its second core with a spinning BLAS worker: on 2 cores a 64x16x32x32 conv
forward+backward took 5x longer with both pools active than with serial kernels. Since
minidl shortens that spin when it is imported (``minidl.backends.blas_threads``) and starts
Numba's pool with short spinning too (``thread_pool``), the parallel kernels pay: ResNet-8
training steps, alternating serial and parallel layer kernels in one process (2 cores), took
166 vs 183 ms (and 147 vs 167 ms with the same short spin set through the environment).
Where the BLAS spin could not be shortened (not NumPy's OpenBLAS, or the user set their own
OPENBLAS_THREAD_TIMEOUT) they stay serial. MINIDL_LAYER_PARALLEL=1 or 0 forces either.
"""
import os

from ...backends import blas_threads

_FORCED = os.environ.get("MINIDL_LAYER_PARALLEL")
PARALLEL = None   # None: follow blas_threads.SHORT; True/False: forced (env above, or assigned)
if _FORCED in ("0", "1"):
    PARALLEL = _FORCED == "1"


def use_parallel(n_elements, threshold):
    """Run a kernel's parallel variant for a problem of ``n_elements``?"""
    parallel = blas_threads.SHORT if PARALLEL is None else PARALLEL
    return parallel and n_elements >= threshold
