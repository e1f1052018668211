"""numba.cuda kernels behind the "cuda" device (see minidl/backends/cuda/).

Generic kernels, each compiled lazily per operation and cached (numba then specialises
each one per dtype and ndim, since shapes and strides are passed as tuples):

- ``map``: out = f(x, c) elementwise over arbitrary strides (unary ops, ops with a scalar);
- ``zip``: out = f(a, b) with NumPy broadcasting over arbitrary strides;
- ``reduce``: sum / max / min / argmax over any set of axes, one block per output element;
- ``matmul``: batched matmul with broadcast batch dims, shared-memory tiles;
- ``gather``: where(cond, a, b), gathers and scatters (set / atomic add) for integer indexing;
- ``scan``: cumsum / cumprod / logaddexp.accumulate along an axis, one thread per row;
- ``scatter``: torch.scatter's write along an axis (set, and add / max / min with atomics,
  multiply one thread per line), behind scatter, scatter_add, scatter_reduce;
- ``bfloat16``: conversions between bfloat16 (kept as uint16 bits) and float32 / float64;
- ``special``: lgamma, digamma, trigamma, erfc, erfinv, i0, i1, polygamma, Hurwitz zeta and
  nextafter as device functions the ``map`` / ``zip`` kernels apply (float64 inside).

Layer kernels: ``layer_norm`` (LayerNorm and RMSNorm forward/backward, one block per row),
``channel_norm`` (GroupNorm, InstanceNorm, BatchNorm on the row kernels), ``scale_norm``,
``im2col`` (conv2d). Under NUMBA_ENABLE_CUDASIM=1 they all run in numba's (slow, pure
Python) simulator; the tests keep shapes tiny for that reason.
"""
