"""out = f(x, c) elementwise: one thread per output element.

Thread i turns i into a multi-index over ``shape`` and that into a strided offset in
both the input and the output, so any view (transposed, sliced, broadcast input; strided
output, e.g. ``out[::2] = x``) works without a copy. ``c`` is a scalar passed to f:
ignored by unary functions, the constant operand of ``x + 2`` or ``2 - x``.
"""
from numba import cuda

from . import scalar_ops
from ._common import grid_for, kernel_cache, strided_offset


def _build(name, scalar_first):
    f = scalar_ops.UNARY.get(name) or scalar_ops.BINARY[name]

    if scalar_first:   # c op x, e.g. 2 - x
        @cuda.jit
        def kernel(out, o_strides, o_off, x, x_strides, x_off, shape, n, c):
            i = cuda.grid(1)
            if i < n:
                out[strided_offset(i, shape, o_strides, o_off)] = f(c, x[strided_offset(i, shape, x_strides, x_off)])
    else:
        @cuda.jit
        def kernel(out, o_strides, o_off, x, x_strides, x_off, shape, n, c):
            i = cuda.grid(1)
            if i < n:
                out[strided_offset(i, shape, o_strides, o_off)] = f(x[strided_offset(i, shape, x_strides, x_off)], c)
    return kernel


_kernel = kernel_cache(_build)


def launch(name, out, o_strides, o_off, x, x_strides, x_off, shape, c=0, scalar_first=False):
    """out[view] = f(x[view], c) over ``shape`` (at least 1-d; strides in elements)."""
    n = 1
    for s in shape:
        n *= s
    if n == 0:
        return
    _kernel(name, scalar_first)[grid_for(n)](out, o_strides, o_off, x, x_strides, x_off, shape, n, c)
