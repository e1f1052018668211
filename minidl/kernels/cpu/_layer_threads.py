"""Whether the layer kernels (im2col/col2im, pooling, gelu) run Numba-parallel (prange).

Off by default, on measurement: these kernels run between multi-threaded BLAS calls (the
conv GEMMs), and two thread pools on the same cores fight. OpenBLAS's idle workers spin
(yielding) after each call and Numba's OpenMP workers spin after each parallel region; on
the 2-core test machine with other jobs running, a 64x16x32x32 conv forward+backward took
5x longer with both pools active than with serial kernels and threaded BLAS (and burned
3-8x the CPU time in spinning). Serial kernels cost at most their own share of the time
(about a third of a conv) on an idle machine. Set MINIDL_LAYER_PARALLEL=1 (or assign
``PARALLEL``) to run them in parallel, e.g. with OPENBLAS_NUM_THREADS=1.
"""
import os

PARALLEL = os.environ.get("MINIDL_LAYER_PARALLEL", "0") == "1"


def use_parallel(n_elements, threshold):
    """Run a kernel's parallel variant for a problem of ``n_elements``?"""
    return PARALLEL and n_elements >= threshold
