"""Selection kernels: where(cond, a, b), gather by offsets (take / integer indexing),
scatter by offsets (set, and add for the backward of indexing).

Integer-array indexing is reduced, by the caller, to a list of buffer offsets: element i
of the result is x_buffer[offsets[i]]. The backward sends g back to the same offsets;
an offset can repeat (x[[0, 0]]), so the scatter *adds* with atomics (the sum of the
gradients of every copy), never plain stores.
"""
from numba import cuda

from ._common import grid_for, kernel_cache, strided_offset


@cuda.jit(device=True)
def wrap_index(k, n):
    """k in [-n, n) as a position in [0, n); anything else clamped to the nearest end."""
    if k < 0:
        k += n
    if k < 0:
        return 0
    if k >= n:
        return n - 1
    return k


@cuda.jit
def _where(out, cond, c_strides, c_off, a, a_strides, a_off, b, b_strides, b_off, shape, n):
    i = cuda.grid(1)
    if i < n:
        if cond[strided_offset(i, shape, c_strides, c_off)]:
            out[i] = a[strided_offset(i, shape, a_strides, a_off)]
        else:
            out[i] = b[strided_offset(i, shape, b_strides, b_off)]


@cuda.jit
def _gather(out, x, offsets, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[offsets[i]]


def _build_scatter(add):
    @cuda.jit
    def kernel(out, offsets, v, v_strides, v_off, shape, n):
        i = cuda.grid(1)
        if i < n:
            val = v[strided_offset(i, shape, v_strides, v_off)]
            if add:
                cuda.atomic.add(out, offsets[i], val)
            else:
                out[offsets[i]] = val
    return kernel


_scatter = kernel_cache(_build_scatter)


def where(out, cond, c_strides, c_off, a, a_strides, a_off, b, b_strides, b_off, shape):
    n = out.size
    if n:
        _where[grid_for(n)](out, cond, c_strides, c_off, a, a_strides, a_off, b, b_strides, b_off, shape, n)


def gather(out, x, offsets):
    n = out.size
    if n:
        _gather[grid_for(n)](out, x, offsets, n)


def scatter(out, offsets, v, v_strides, v_off, shape, add):
    n = offsets.size
    if n:
        _scatter(bool(add))[grid_for(n)](out, offsets, v, v_strides, v_off, shape, n)


# gathers and scatters whose indices stay on the device ---------------------------------------
# x[:, :, idx] (one integer index array on one axis) and take/put_along_axis read their indices
# in the kernel, so a training step never copies token ids or targets back to the host. Negative
# indices wrap as in NumPy; out-of-range ones are clamped into the axis, so they never touch memory
# outside the array (ops that must reject them check on the device first: kernels/cuda/checks.py).

@cuda.jit
def _take_axis(out, x, x_off, pre_shape, pre_strides, idx, n_idx, axis_len, axis_stride, post_shape,
               post_strides, npost, total):
    t = cuda.grid(1)
    if t < total:
        q = t % npost
        r = t // npost
        p = r % n_idx
        k = wrap_index(idx[p], axis_len)
        out[t] = x[strided_offset(r // n_idx, pre_shape, pre_strides, x_off) + k * axis_stride
                   + strided_offset(q, post_shape, post_strides, 0)]


def _build_put_axis(add):
    @cuda.jit
    def kernel(x, x_off, pre_shape, pre_strides, idx, n_idx, axis_len, axis_stride, post_shape, post_strides,
               npost, v, v_strides, v_off, v_shape, total):
        t = cuda.grid(1)
        if t < total:
            q = t % npost
            r = t // npost
            p = r % n_idx
            k = wrap_index(idx[p], axis_len)
            off = (strided_offset(r // n_idx, pre_shape, pre_strides, x_off) + k * axis_stride
                   + strided_offset(q, post_shape, post_strides, 0))
            val = v[strided_offset(t, v_shape, v_strides, v_off)]
            if add:
                cuda.atomic.add(x, off, val)
            else:
                x[off] = val
    return kernel


_put_axis = kernel_cache(_build_put_axis)


@cuda.jit
def _take_along(out, x, x_off, x_strides, axis_stride, axis_len, idx, idx_strides, idx_off, shape, total):
    t = cuda.grid(1)
    if t < total:
        k = wrap_index(idx[strided_offset(t, shape, idx_strides, idx_off)], axis_len)
        out[t] = x[strided_offset(t, shape, x_strides, x_off) + k * axis_stride]


@cuda.jit
def _put_along(x, x_off, x_strides, axis_stride, axis_len, idx, idx_strides, idx_off, v, v_strides, v_off, shape,
               total):
    t = cuda.grid(1)
    if t < total:
        k = wrap_index(idx[strided_offset(t, shape, idx_strides, idx_off)], axis_len)
        x[strided_offset(t, shape, x_strides, x_off) + k * axis_stride] = v[strided_offset(t, shape, v_strides, v_off)]


def take_axis(out, x, x_off, pre_shape, pre_strides, idx, axis_len, axis_stride, post_shape, post_strides):
    total = out.size
    if total:
        npost = 1
        for s in post_shape:
            npost *= s
        _take_axis[grid_for(total)](out, x, x_off, pre_shape, pre_strides, idx, idx.size, axis_len, axis_stride,
                                    post_shape, post_strides, npost, total)


def put_axis(x, x_off, pre_shape, pre_strides, idx, axis_len, axis_stride, post_shape, post_strides,
             v, v_strides, v_off, v_shape, add):
    total = 1
    for s in v_shape:
        total *= s
    if total:
        npost = 1
        for s in post_shape:
            npost *= s
        _put_axis(bool(add))[grid_for(total)](x, x_off, pre_shape, pre_strides, idx, idx.size, axis_len, axis_stride,
                                              post_shape, post_strides, npost, v, v_strides, v_off, v_shape, total)


def take_along(out, x, x_off, x_strides, axis_stride, axis_len, idx, idx_strides, idx_off, shape):
    total = out.size
    if total:
        _take_along[grid_for(total)](out, x, x_off, x_strides, axis_stride, axis_len, idx, idx_strides, idx_off,
                                     shape, total)


def put_along(x, x_off, x_strides, axis_stride, axis_len, idx, idx_strides, idx_off, v, v_strides, v_off, shape):
    total = 1
    for s in shape:
        total *= s
    if total:
        _put_along[grid_for(total)](x, x_off, x_strides, axis_stride, axis_len, idx, idx_strides, idx_off,
                                    v, v_strides, v_off, shape, total)
