"""Batched matmul, out[z] = a[z] @ b[z], batch dims broadcast, with shared-memory tiles.

A block computes one TILE x TILE tile of one batch entry's output. It walks the shared
dimension K one tile at a time: each thread loads one element of a's tile and one of b's
into shared memory, the block waits, and every thread adds the TILE products for its
output element; so each element of a and b is read from global memory K/TILE times
fewer than in the naive kernel. Operands may have any strides (a transposed operand is
read in place); the batch index z maps to each operand's offset through broadcast batch
strides (0 along a broadcast axis). Accumulates in float32 or wider.
"""
import numba
from numba import cuda

from ._common import SIMULATOR, TILE, kernel_cache, strided_offset


def _build(acc, tile):
    acc_t = numba.from_dtype(acc)

    @cuda.jit
    def kernel(out, a, a_off, a_bstrides, a_rs, a_cs, b, b_off, b_bstrides, b_rs, b_cs, batch_shape, nbatch, M, N, K):
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        row = cuda.blockIdx.y * tile + ty
        col = cuda.blockIdx.x * tile + tx
        sa = cuda.shared.array((tile, tile), acc_t)
        sb = cuda.shared.array((tile, tile), acc_t)
        z = cuda.blockIdx.z
        while z < nbatch:   # the grid's z extent is capped; loop over the rest
            ao = strided_offset(z, batch_shape, a_bstrides, a_off)
            bo = strided_offset(z, batch_shape, b_bstrides, b_off)
            total = acc_t(0)
            for k0 in range(0, K, tile):
                ka = k0 + tx
                if row < M and ka < K:
                    sa[ty, tx] = a[ao + row * a_rs + ka * a_cs]
                else:
                    sa[ty, tx] = 0
                kb = k0 + ty
                if kb < K and col < N:
                    sb[ty, tx] = b[bo + kb * b_rs + col * b_cs]
                else:
                    sb[ty, tx] = 0
                cuda.syncthreads()
                for k in range(tile):
                    total += sa[ty, k] * sb[k, tx]
                cuda.syncthreads()
            if row < M and col < N:
                out[(z * M + row) * N + col] = total
            z += cuda.gridDim.z
    return kernel


_kernel = kernel_cache(_build)


def launch(out, a, a_off, a_bstrides, a_rs, a_cs, b, b_off, b_bstrides, b_rs, b_cs, batch_shape, M, N, K, acc):
    nbatch = 1
    for s in batch_shape:
        nbatch *= s
    if nbatch * M * N == 0:
        return
    tile = TILE
    if SIMULATOR:   # each simulated thread is a Python thread: no idle ones for tiny outputs
        while tile > 1 and tile // 2 >= max(M, N):
            tile //= 2
    grid = ((N + tile - 1) // tile, (M + tile - 1) // tile, min(nbatch, 65535))
    _kernel(acc, tile)[grid, (tile, tile)](out, a, a_off, a_bstrides, a_rs, a_cs, b, b_off, b_bstrides, b_rs, b_cs,
                                           batch_shape, nbatch, M, N, K)
