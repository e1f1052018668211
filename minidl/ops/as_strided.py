"""A tensor's storage, and ``as_strided``: a view described by size, stride and storage offset.

A tensor's *storage* is the memory its array lives in: the array at the end of the ``.base``
chain of NumPy views (the array that owns the memory), read as one flat run of elements of
the tensor's dtype. ``storage_offset`` and ``stride`` place the tensor's elements in it, in
elements, as PyTorch counts them: element ``i`` of a tensor sits at storage position

    p(i) = offset + sum_k i_k * stride_k.

``as_strided(x, size, stride, offset)`` is the view whose element j sits at
q(j) = offset + sum_k j_k * stride_k of x's storage: it may read storage elements that x
itself does not show (the rest of the tensor x was sliced from), and name one element many
times (a stride of 0).

The gradient goes through the storage, as PyTorch's AsStridedBackward: the output's gradient
is added into a zero storage at q (an element named twice gets both), and x's gradient is
read from it at p; where x's own elements overlap (x expanded), each storage element's sum
is shared evenly among the elements of x that name it, so that the gradient flowing on to
x's history (an expand's backward sums them again) counts it once:

    s[m] = sum_{j: q(j) = m} g[j],     dL/dx[i] = s[p(i)] / #{i': p(i') = p(i)}.

On a device (cuda) the storage is the array's device buffer and the view the device namespace's
``strided_view`` of it; backward computes the positions p and q on the host (small int64 arrays,
every one inside the zero storage by construction), uploads them, and scatter-adds and gathers
on the device.
"""
import operator

import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of


def storage_root(a):
    """The ndarray that owns ``a``'s memory (through the views NumPy's as_strided makes, whose
    ``.base`` is a plain object holding the array)."""
    while True:
        b = a.base
        if type(b) is not np.ndarray:
            b = getattr(b, "base", None)
            if type(b) is not np.ndarray:
                return a
        a = b


def flat_storage(a):
    """``a``'s storage as a 1-d array of a's dtype over the same memory, and the offset in
    elements of a's first element in it."""
    root = storage_root(a)
    if root.ndim and not (root.flags.c_contiguous or root.flags.f_contiguous):
        root = a        # memory owned by an array NumPy did not allocate in one run: the tensor's own
    start = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    return flat_of(root, a.dtype), start // a.dtype.itemsize


def flat_of(root, dtype):
    """The memory of the array ``root`` (one contiguous run) as a 1-d array of ``dtype`` over
    it (the bytes past the last whole element left out)."""
    raw = root.reshape(-1, order="A").view(np.uint8)
    item = np.dtype(dtype).itemsize
    return raw[:raw.size - raw.size % item].view(dtype)


def shared_place(a):
    """Where the CPU array ``a`` sits in the memory it may share with other arrays:
    ``(root, flat, offset, stride)``, ``root`` the array owning that memory, ``flat`` its memory
    as ``flat_of(root, a.dtype)``, and a's offset and strides in elements of ``flat``; None for
    an array that can only be copied by itself (empty, negative or misaligned strides, memory
    not in one contiguous run)."""
    if type(a) is not np.ndarray or a.size == 0:
        return None
    root = storage_root(a)
    if root.ndim and not (root.flags.c_contiguous or root.flags.f_contiguous):
        return None
    item = a.dtype.itemsize
    start = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    if start < 0 or start % item:
        return None
    stride = []
    for n, s in zip(a.shape, a.strides):
        if n == 1:
            s = s if s >= 0 and s % item == 0 else 0     # a length-1 dim's stride is never used
        elif s < 0 or s % item:
            return None
        stride.append(s // item)
    return root, flat_of(root, a.dtype), start // item, tuple(stride)


def strides_of(a):
    """The strides of ``a`` in elements (NumPy counts bytes)."""
    return tuple(int(s) // a.dtype.itemsize for s in a.strides)


def positions(size, stride, offset):
    """The storage position of every element of a (size, stride, offset) geometry, as an int64
    array of that size."""
    p = np.full((), offset, dtype=np.int64)
    for n, s in zip(size, stride):
        p = p[..., None] + np.arange(n, dtype=np.int64) * s
    return p


def needed_storage(size, stride, offset):
    """The number of storage elements a geometry reaches (0 when it has no elements)."""
    if 0 in size:
        return 0
    return offset + 1 + sum((n - 1) * s for n, s in zip(size, stride))


def strided_view(flat, size, stride, offset):
    """The view of ``flat`` (a 1-d storage) with that geometry, writable as the storage is."""
    item = flat.dtype.itemsize
    if 0 in size:
        return np.ndarray(size, flat.dtype, buffer=flat[:0], strides=tuple(s * item for s in stride))
    return np.ndarray(size, flat.dtype, buffer=flat, offset=offset * item, strides=tuple(s * item for s in stride))


class AsStrided(Function):
    """out = the (size, stride, offset) view of x's storage; the gradient through the storage
    (see the module docstring)."""

    @staticmethod
    def forward(ctx, x, size, stride, offset):
        xp = namespace_of(x)
        if xp is np:
            flat, x_offset = flat_storage(x)
            ctx.x_geometry = (x.shape, strides_of(x), x_offset)
            ctx.out_geometry = (size, stride, offset)
            return strided_view(flat, size, stride, offset)
        ctx.x_geometry = (x.shape, strides_of(x), xp.storage_extent(x)[1])
        ctx.out_geometry = (size, stride, offset)
        return xp.strided_view(x, size, stride, offset)

    @staticmethod
    def backward(ctx, g):
        xp = namespace_of(g)
        p = positions(*ctx.x_geometry).reshape(-1)
        q = positions(*ctx.out_geometry).reshape(-1)
        n = int(max(p.max(initial=-1), q.max(initial=-1))) + 1
        storage = xp.zeros(n, dtype=g.dtype)
        if q.size:   # empty outputs add nothing (and launch nothing)
            xp.add.at(storage, q if xp is np else xp.asarray(q), g.reshape(-1))
        gx = storage[p if xp is np else xp.asarray(p)] if p.size else xp.zeros(0, dtype=g.dtype)
        if np.unique(p).size != p.size:      # x's elements overlap: share each sum among them
            counts = np.bincount(p, minlength=n)[p].astype(g.dtype)
            gx = gx / (counts if xp is np else xp.asarray(counts))
        return gx.reshape(ctx.x_geometry[0]).astype(g.dtype, copy=False), None, None, None


def ints(op, value, name):
    """A size or stride argument as a tuple of ints (a TypeError naming what came otherwise)."""
    try:
        return tuple(operator.index(v) for v in value)
    except TypeError:
        raise TypeError(f"{op}(): argument '{name}' must be tuple of ints, got {value!r}") from None


def check_geometry(op, size, stride, offset, storage_elements, itemsize):
    """PyTorch's checks of a (size, stride, offset) geometry against a storage."""
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if any(n < 0 for n in size):
        raise RuntimeError(f"Storage size calculation overflowed with sizes={list(size)} and strides={list(stride)}")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"{op}: Negative strides are not supported at the moment, got strides: {list(stride)}")
    if offset < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {offset}")
    need = needed_storage(size, stride, offset)
    if need > storage_elements:
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, and "
                           f"itemsize {itemsize} requiring a storage size of {need * itemsize} are out of bounds "
                           f"for storage of size {storage_elements * itemsize}")


def as_strided(input, size, stride, storage_offset=None):
    """The view of ``input``'s storage with the given size, stride and storage offset (the
    tensor's own offset when None), as torch.as_strided; differentiable."""
    xp = namespace_of(input._data)
    size, stride = ints("as_strided", size, "size"), ints("as_strided", stride, "stride")
    if xp is np:
        flat, own_offset = flat_storage(input._data)
        elements = flat.size
    else:
        elements, own_offset = xp.storage_extent(input._data)
    offset = own_offset if storage_offset is None else int(storage_offset)
    check_geometry("as_strided", size, stride, offset, elements, input._data.dtype.itemsize)
    return AsStrided.apply(input, size, stride, offset)
