"""The "cuda" device: an ndarray-like array over a numba.cuda buffer, and its namespace.

``CudaArray`` is (flat device buffer, shape, strides in elements, offset, dtype), NumPy's
own model of an array. Everything that only relabels elements is therefore a *view* that
shares the buffer and costs no kernel: reshape of a contiguous array, transpose/permute,
swapaxes, expand_dims, broadcast_to (stride 0), and basic slicing (``x[1:, ::2, None]``).
Everything that computes runs one of the generic kernels in ``minidl.kernels.cuda``,
which read any strides, so views are never copied just to be consumed:

- elementwise ops            -> ``map`` (one operand and maybe a scalar) / ``zip`` (two, broadcast);
- sum / mean / max / min     -> ``reduce`` (one block per output element);
- matmul                     -> ``matmul`` (shared-memory tiles, broadcast batch dims);
- where, integer indexing    -> ``gather`` (where, gather, scatter-set, scatter-add).

``CUDA_NUMPY`` (the backend's ``xp``) offers the NumPy functions that minidl.ops call, each
built on those kernels, so the ops run here unchanged. A NumPy function it lacks raises
NotImplementedError naming it and the device.

The modules: ``array`` (the type and its views), ``elementwise`` (NumPy's dtype rules, map /
zip launches), ``bfloat16`` (copies into and out of bfloat16, kept as its uint16 bits: see
``array``'s docstring), ``creation`` (filled arrays, arange, constants), ``indexing`` (views, gathers,
scatters, where), ``reduction`` (reductions, matmul), ``namespace_scan`` (cumsum, cumprod, prod,
logaddexp.accumulate, flip, scatter_along) and ``einsum`` (a composition of permutes, sums and
batched matmul), ``namespace`` (``CUDA_NUMPY``) and
``backend`` (``CudaBackend``, with the optimizer and dropout glue). Copies to and from the host
are ``cuda_transfers``; ``cuda_loader`` checks for a GPU before this package is imported.

Host round trips. Every copy goes through ``cuda_transfers`` and is counted:
``with transfer_log() as log: ...`` lists them (bytes, count, call site). A training step of
the zoo models makes none but reading the loss (tests/test_cuda_transfers.py): integer-array
indices (x[i], x[:, i, j], add.at) become element offsets on the device; ``arange`` and
causal masks are computed there; dropout masks are drawn there; index range checks run there
and report at the next read (kernels/cuda/checks.py); optimizers run one fused kernel per
parameter. What still reads back, by nature: ``bool(x)`` / ``float(x)`` / ``item()`` /
``.numpy()``; a bool-mask index ``x[mask]`` with array values, and integer indices separated
by slices (``x[i, :, j]``), whose offsets NumPy's rules compute on the host; and the first use
of a scalar constant in where/scatter (``_const``, cached: one upload per value, once).
"""
from ..cuda_flags import (cudnn_sdp_enabled, enable_cudnn_sdp, enable_flash_sdp, enable_math_sdp,  # noqa: F401
                          enable_mem_efficient_sdp, flash_sdp_enabled, is_built, math_sdp_enabled, matmul,
                          mem_efficient_sdp_enabled)   # md.backends.cuda's flags (see cuda_flags.py)
from ..cuda_transfers import transfer_log  # noqa: F401  (public: minidl.backends.cuda.transfer_log)
from .array import CudaArray  # noqa: F401
from .backend import CudaBackend  # noqa: F401
from .namespace import CUDA_NUMPY, CudaNamespace  # noqa: F401
