"""Launch helpers shared by the generic cuda kernels.

Arrays reach the kernels as a flat device buffer plus ``shape``, ``strides`` (in elements)
and ``offset``: element i of the (row-major) iteration space lives at
``offset + sum_d idx_d * strides_d`` where idx is the multi-index of i. Shapes and strides
are passed as tuples, so numba compiles one specialisation per (dtype, ndim) on first use
and caches it in the dispatcher; the Python-level kernel objects are cached in dicts here.
"""
import math

import numba
from numba import cuda

SIMULATOR = bool(numba.config.ENABLE_CUDASIM)

# Threads are cheap on a GPU and expensive in the simulator (one Python thread each, and
# every syncthreads is a barrier between them), so the simulator gets tiny blocks.
THREADS = 32 if SIMULATOR else 256
REDUCE_THREADS = 4 if SIMULATOR else 256
TILE = 4 if SIMULATOR else 16


def blocks_for(n, threads=THREADS):
    return max(1, math.ceil(n / threads))


def grid_for(n):
    """(blocks, threads) for one thread per element of n: THREADS per block, fewer (a power
    of two) for small n, where the simulator would otherwise run idle Python threads."""
    threads = THREADS
    while threads > 1 and threads // 2 >= n:
        threads //= 2
    return blocks_for(n, threads), threads


@cuda.jit(device=True)
def strided_offset(i, shape, strides, offset):
    """Buffer position of element i (row-major over ``shape``) of a strided array."""
    for d in range(len(shape) - 1, -1, -1):
        n = shape[d]
        offset += (i % n) * strides[d]
        i //= n
    return offset


def kernel_cache(build):
    """Memoise ``build(*key)``: one compiled kernel object per key."""
    cache = {}

    def get(*key):
        k = cache.get(key)
        if k is None:
            k = cache[key] = build(*key)
        return k
    get.cache = cache
    return get


def xp_of(a):
    """The array namespace of a device array (its backend's ``xp``), taken from the array because
    kernels sit below the backends and import nothing from them."""
    return a.__array_namespace__()
