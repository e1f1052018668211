"""Views of a cuda array's buffer by (shape, strides, offset), counted in elements as PyTorch counts
them: what ``Tensor.unfold`` and ``as_strided`` build on (``CudaNamespace`` inherits them). A
CudaArray is such a view already (array.py), so these make no copy and launch nothing; the
caller checks the geometry (``storage_extent``) before any kernel reads through it."""
from .array import CudaArray


def _storage_extent(x):
    """(the number of elements of x's buffer, the buffer position of x's first element)."""
    return int(x._buf.size), x.offset


def _strided_view(x, shape, strides, offset=None, writeable=None):
    """The view of x's buffer with ``shape`` and ``strides`` (elements) from ``offset`` (x's own by
    default); as writable as x unless ``writeable`` says otherwise. The view must stay inside the
    buffer: refused (ValueError) when it would reach beyond it or before its start."""
    if not isinstance(x, CudaArray):
        raise TypeError(f"cuda strided_view: expected a cuda array, got {type(x).__name__}")
    shape, strides = tuple(int(n) for n in shape), tuple(int(s) for s in strides)
    offset = x.offset if offset is None else int(offset)
    if len(shape) != len(strides) or any(n < 0 for n in shape):
        raise ValueError(f"cuda strided_view: bad geometry shape={shape} strides={strides} offset={offset}")
    if 0 not in shape:
        lo = offset + sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
        hi = offset + sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
        size = _storage_extent(x)[0]
        if lo < 0 or hi >= size:
            raise ValueError(f"cuda strided_view: shape={shape} strides={strides} offset={offset} reaches "
                             f"elements {lo}..{hi} of a buffer of {size}")
    return x._view(shape, strides, offset, writeable=x._writeable if writeable is None else writeable)


class StridedNumPy:
    strided_view = staticmethod(_strided_view)
    storage_extent = staticmethod(_storage_extent)
