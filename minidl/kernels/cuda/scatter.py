"""Scatter along one axis: out[c(p)] (op)= v[p] for every position p of an index array.

With ``idx`` of out's number of dims and ``axis`` d, position p of idx names the output position
c(p) = p with its coordinate along d replaced by idx[p] (torch.scatter's rule; idx is no larger
than out along the other dims). ``how`` combines v[p] into out[c(p)]:

    "set"       out[c] = v[p]             (which write lands where p's collide is unspecified, as torch)
    "add"       out[c] = out[c] + v[p]
    "multiply"  out[c] = out[c] * v[p]
    "max"/"min" out[c] = max(out[c], v[p]) / min(...), nan winning as in np.maximum / np.minimum

Several p may name one c (duplicate indices), so the combining writes must not race. Two kernels:

- ``each``: one thread per p, combining with an atomic (cuda.atomic.add / max / min), for the
  dtypes the atomics take (float32, float64, int32, int64, uint32, uint64). A GPU's atomic max and
  min on floats drop a nan operand where np.maximum keeps it, so after them the positions a nan
  reached (from v, or already in out) are set to nan again: the result is np.maximum.at's.
- ``lines``: one thread per line of idx along d (every p that shares its coordinates off d), which
  walks its line serially in order. Positions off d are out's coordinates too, so two lines never
  name the same c: no atomics, and the combination runs in the CPU's order. It serves "multiply"
  (there is no atomic multiply; a compare-and-swap loop on a float's bits would be the other way,
  and its order of products would vary run to run) and the dtypes without atomics.

Indices are trusted by the kernels (numba does no bounds checks), so ``scatter_along`` checks the
shapes and copies idx's least and greatest values to the host to check its range before launching.
"""
import numpy as np
from numba import cuda

from ._common import grid_for, kernel_cache, strided_offset

HOWS = ("set", "add", "multiply", "max", "min")
ATOMIC_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64, np.uint32, np.uint64))


def _build_each(how):
    @cuda.jit
    def kernel(out, out_off, out_strides, axis_stride, idx, v, v_strides, v_off, shape, total):
        t = cuda.grid(1)
        if t < total:
            pos = strided_offset(t, shape, out_strides, out_off) + idx[t] * axis_stride
            val = v[strided_offset(t, shape, v_strides, v_off)]
            if how == "set":
                out[pos] = val
            elif how == "add":
                cuda.atomic.add(out, pos, val)
            elif how == "max":
                cuda.atomic.max(out, pos, val)
            else:
                cuda.atomic.min(out, pos, val)
    return kernel


_each = kernel_cache(_build_each)


@cuda.jit
def _nan_set(out, out_off, out_strides, axis_stride, idx, v, v_strides, v_off, shape, total):
    """out[c(p)] = v[p] where v[p] is nan (after the atomic max / min: nan wins)."""
    t = cuda.grid(1)
    if t < total:
        val = v[strided_offset(t, shape, v_strides, v_off)]
        if val != val:
            out[strided_offset(t, shape, out_strides, out_off) + idx[t] * axis_stride] = val


def _build_lines(how):
    @cuda.jit
    def kernel(out, out_off, line_shape, out_strides, axis_stride, idx, idx_strides, idx_step, v, v_strides, v_off,
               v_step, n, lines):
        r = cuda.grid(1)
        if r < lines:
            ob = strided_offset(r, line_shape, out_strides, out_off)
            ib = strided_offset(r, line_shape, idx_strides, 0)
            vb = strided_offset(r, line_shape, v_strides, v_off)
            for j in range(n):
                pos = ob + idx[ib + j * idx_step] * axis_stride
                val = v[vb + j * v_step]
                cur = out[pos]
                if how == "set":
                    out[pos] = val
                elif how == "add":
                    out[pos] = cur + val
                elif how == "multiply":
                    out[pos] = cur * val
                elif how == "max":
                    if cur == cur and (val != val or val > cur):
                        out[pos] = val
                else:
                    if cur == cur and (val != val or val < cur):
                        out[pos] = val
    return kernel


_lines = kernel_cache(_build_lines)


def _check(out, axis, idx, v, how):
    if how not in HOWS:
        raise ValueError(f"scatter_along: expected how in {HOWS}, got {how!r}")
    if idx.ndim != out.ndim or not 0 <= axis < max(out.ndim, 1):
        raise ValueError(f"scatter_along: expected an index with out's {out.ndim} dims and an axis in [0, {out.ndim}), "
                         f"got index shape {idx.shape} and axis {axis}")
    if any(n > m for k, (n, m) in enumerate(zip(idx.shape, out.shape)) if k != axis):
        raise ValueError(f"scatter_along: index {idx.shape} is larger than out {out.shape} off axis {axis}")
    if np.broadcast_shapes(v.shape, idx.shape) != idx.shape:
        raise ValueError(f"scatter_along: values of shape {v.shape} do not broadcast to the index's {idx.shape}")
    if idx.dtype.kind not in "iu":
        raise ValueError(f"scatter_along: expected an integer index, got {idx.dtype}")
    if v.dtype != out.dtype:
        raise ValueError(f"scatter_along: expected values of out's dtype {out.dtype}, got {v.dtype}")
    lo, hi = int(idx.min()), int(idx.max())   # two scalars to the host: the kernels trust every index
    if lo < 0 or hi >= out.shape[axis]:
        bad = lo if lo < 0 else hi
        raise IndexError(f"scatter_along: index {bad} is out of bounds for axis {axis} with size {out.shape[axis]}")


def scatter_along(out, axis, idx, v, how):
    """out[c(p)] (how)= v[p] for every position p of idx (see the module docstring), in place.
    out: a writeable CudaArray (any strides, not bfloat16: the caller widens it); idx: an integer
    CudaArray of out's number of dims, no larger than out off ``axis``, every value in
    [0, out.shape[axis]); v: a CudaArray of out's dtype that broadcasts to idx's shape."""
    if idx.size == 0:   # empty inputs never reach a kernel
        return out
    _check(out, axis, idx, v, how)
    if idx.dtype != np.int64 or not idx.is_contiguous():
        idx = idx.astype(np.int64)   # a contiguous copy: element t of the launch is idx's flat element t
    idx_flat = idx._buf[idx._off:idx._off + idx.size]
    shape = idx.shape
    v_st = v._strides_for(shape)
    o_st = out.elem_strides
    axis_stride = o_st[axis]
    out_st = o_st[:axis] + (0,) + o_st[axis + 1:]
    if out.dtype.kind == "b":   # np.add.at / np.multiply.at on bools are logical or / and
        how = {"add": "max", "multiply": "min"}.get(how, how)
    if how != "multiply" and out.dtype in ATOMIC_DTYPES:
        total = idx.size
        nan_before = None
        if how in ("max", "min") and out.dtype.kind == "f":
            nan_before = out != out
        _each(how)[grid_for(total)](out._buf, out.offset, out_st, axis_stride, idx_flat, v._buf, v_st, v.offset, shape,
                                    total)
        if nan_before is not None:
            _nan_set[grid_for(total)](out._buf, out.offset, out_st, axis_stride, idx_flat, v._buf, v_st, v.offset,
                                      shape, total)
            out[nan_before] = np.nan
        return out
    n = shape[axis]
    lines = idx.size // n
    keep = [k for k in range(out.ndim) if k != axis]
    line_shape = tuple(shape[k] for k in keep) or (1,)
    idx_st = idx.elem_strides
    _lines(how)[grid_for(lines)](out._buf, out.offset, line_shape, tuple(o_st[k] for k in keep) or (0,), axis_stride,
                                 idx_flat, tuple(idx_st[k] for k in keep) or (0,), idx_st[axis], v._buf,
                                 tuple(v_st[k] for k in keep) or (0,), v.offset, v_st[axis], n, lines)
    return out
