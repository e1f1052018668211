"""Batched matmul, out[z] = a[z] @ b[z], batch dims broadcast, with shared-memory tiles.

A block computes one TILE x TILE tile of one batch entry's output. It walks the shared
dimension K one tile at a time: each thread loads one element of a's tile and one of b's
into shared memory, the block waits, and every thread adds the TILE products for its
output element; so each element of a and b is read from global memory K/TILE times
fewer than in the naive kernel. Operands may have any strides (a transposed operand is
read in place); the batch index z maps to each operand's offset through broadcast batch
strides (0 along a broadcast axis). Accumulates in float32 or wider.

Low-precision operands are read as they are, 2 bytes an element, as a tensor core reads
them: the conversion happens once per element, at the load from global memory into the
shared tile, and the inner product loop sees float32 only.

    float16    the global value is converted to the tile's float32 by the cuda float16
               type (exact: every float16 is a float32).
    bfloat16   the buffer holds the bits as uint16 (minidl/backends/cuda/array.py);
               ``bits << 16`` is the float32 with the same value, so the tile is declared
               uint32, written with the shifted bits, and read through a float32 view of
               the same shared memory (no float bit-cast intrinsic is needed, so the one
               source runs on a GPU and in the simulator).

Each product of two float16 (11-bit) or bfloat16 (8-bit) significands is exact in float32,
the sums are float32, and the output is written once in its own dtype: float32 as summed,
float16 by the float32 -> float16 conversion (round to nearest even), bfloat16 by
``round_bits`` (kernels/cuda/bfloat16.py, round to nearest even) on the float32 total's
bits, read back through a per-thread slot of a uint32 shared tile viewed as float32.
"""
import numba
import numpy as np
from numba import cuda, uint32

from ._common import SIMULATOR, TILE, kernel_cache, strided_offset
from .bfloat16 import round_bits


@cuda.jit(device=True)
def _put_value(tile, i, j, v):
    tile[i, j] = v   # converted to the tile's dtype (float16 -> float32 exactly)


@cuda.jit(device=True)
def _put_bfloat16(tile_bits, i, j, v):
    tile_bits[i, j] = uint32(v) << uint32(16)   # the float32 of the same value, as bits


@cuda.jit(device=True)
def _store_value(out, pos, total, slot_f32, slot_bits, ty, tx):
    out[pos] = total   # one conversion to out's dtype


@cuda.jit(device=True)
def _store_bfloat16(out, pos, total, slot_f32, slot_bits, ty, tx):
    slot_f32[ty, tx] = total   # this thread's own slot: no other thread reads it, no barrier
    out[pos] = round_bits(slot_bits[ty, tx])


def _build(acc, tile, a_bf16, b_bf16, out_bf16):
    """The kernel for one accumulator dtype and tile, with a bfloat16-bits operand (uint16 buffer)
    where a_bf16 / b_bf16 say so and a bfloat16-bits output where out_bf16 does."""
    acc = np.dtype(acc)
    acc_t = numba.from_dtype(acc)
    # each tile as written (a numba type) and as read (a NumPy scalar type, which a view takes
    # both compiled and in the simulator)
    ra_t, va_t = (uint32, np.float32) if a_bf16 else (acc_t, acc.type)
    rb_t, vb_t = (uint32, np.float32) if b_bf16 else (acc_t, acc.type)
    put_a = _put_bfloat16 if a_bf16 else _put_value
    put_b = _put_bfloat16 if b_bf16 else _put_value
    store = _store_bfloat16 if out_bf16 else _store_value
    slots = (tile, tile) if out_bf16 else (1, 1)

    @cuda.jit
    def kernel(out, a, a_off, a_bstrides, a_rs, a_cs, b, b_off, b_bstrides, b_rs, b_cs, batch_shape, nbatch, M, N, K):
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        row = cuda.blockIdx.y * tile + ty
        col = cuda.blockIdx.x * tile + tx
        sa_raw = cuda.shared.array((tile, tile), ra_t)
        sb_raw = cuda.shared.array((tile, tile), rb_t)
        so_bits = cuda.shared.array(slots, uint32)
        sa = sa_raw.view(va_t)
        sb = sb_raw.view(vb_t)
        so = so_bits.view(np.float32)
        z = cuda.blockIdx.z
        while z < nbatch:   # the grid's z extent is capped; loop over the rest
            ao = strided_offset(z, batch_shape, a_bstrides, a_off)
            bo = strided_offset(z, batch_shape, b_bstrides, b_off)
            total = acc_t(0)
            for k0 in range(0, K, tile):
                ka = k0 + tx
                if row < M and ka < K:
                    put_a(sa_raw, ty, tx, a[ao + row * a_rs + ka * a_cs])
                else:
                    sa_raw[ty, tx] = 0   # +0.0 as bits too
                kb = k0 + ty
                if kb < K and col < N:
                    put_b(sb_raw, ty, tx, b[bo + kb * b_rs + col * b_cs])
                else:
                    sb_raw[ty, tx] = 0
                cuda.syncthreads()
                for k in range(tile):
                    total += sa[ty, k] * sb[k, tx]
                cuda.syncthreads()
            if row < M and col < N:
                store(out, (z * M + row) * N + col, total, so, so_bits, ty, tx)
            z += cuda.gridDim.z
    return kernel


_kernel = kernel_cache(_build)
_STORAGE = np.dtype(np.uint16)


def launch(out, a, a_off, a_bstrides, a_rs, a_cs, b, b_off, b_bstrides, b_rs, b_cs, batch_shape, M, N, K, acc,
           bf16=(False, False, False)):
    """out (contiguous, batch x M x N) = a @ b over flat strided buffers. ``bf16`` says which of
    (a, b, out) are bfloat16 arrays held as uint16 bits; those need acc float32 (the tile and the
    rounding work on float32 bits)."""
    nbatch = 1
    for s in batch_shape:
        nbatch *= s
    if nbatch * M * N == 0:
        return
    a_bf16, b_bf16, out_bf16 = (bool(x) for x in bf16)
    for flag, buf, name in ((a_bf16, a, "a"), (b_bf16, b, "b"), (out_bf16, out, "out")):
        if flag and np.dtype(buf.dtype) != _STORAGE:
            raise TypeError(f"matmul kernel: bfloat16 {name} must be its uint16 bits, got a {buf.dtype} buffer")
    if out_bf16 and np.dtype(acc) != np.float32:
        raise TypeError(f"matmul kernel: a bfloat16 output is rounded from a float32 sum, got accumulator {acc}")
    tile = TILE
    if SIMULATOR:   # each simulated thread is a Python thread: no idle ones for tiny outputs
        while tile > 1 and tile // 2 >= max(M, N):
            tile //= 2
    grid = ((N + tile - 1) // tile, (M + tile - 1) // tile, min(nbatch, 65535))
    _kernel(np.dtype(acc), tile, a_bf16, b_bf16, out_bf16)[grid, (tile, tile)](
        out, a, a_off, a_bstrides, a_rs, a_cs, b, b_off, b_bstrides, b_rs, b_cs, batch_shape, nbatch, M, N, K)
