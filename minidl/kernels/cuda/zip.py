"""out = f(a, b) elementwise with NumPy broadcasting: one thread per output element.

Broadcasting costs nothing here: the caller gives a and b strides over the *output*
shape, with stride 0 along every axis where the operand has size 1 (or is missing), so
thread i reads a[offset_a(i)] and b[offset_b(i)] straight from the operands' buffers.
"""
from numba import cuda

from . import scalar_ops
from ._common import grid_for, kernel_cache, strided_offset


def _build(name):
    f = scalar_ops.BINARY[name]

    @cuda.jit
    def kernel(out, o_strides, o_off, a, a_strides, a_off, b, b_strides, b_off, shape, n):
        i = cuda.grid(1)
        if i < n:
            out[strided_offset(i, shape, o_strides, o_off)] = f(a[strided_offset(i, shape, a_strides, a_off)],
                                                               b[strided_offset(i, shape, b_strides, b_off)])
    return kernel


_kernel = kernel_cache(_build)


def launch(name, out, o_strides, o_off, a, a_strides, a_off, b, b_strides, b_off, shape):
    n = 1
    for s in shape:
        n *= s
    if n == 0:
        return
    _kernel(name)[grid_for(n)](out, o_strides, o_off, a, a_strides, a_off, b, b_strides, b_off, shape, n)
