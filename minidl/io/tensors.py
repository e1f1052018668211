"""Tensors in a checkpoint: the ``tensor`` manifest node and the memory tensors share.

A Tensor is saved as ``["tensor", name, meta]``, ``name`` naming the stored array (its
*buffer*) and ``meta`` a dict:

- ``"id"``: which tensor object this is within the checkpoint. An object saved twice (a tied
  Parameter under two keys of ``state_dict(keep_vars=True)``) has two identical nodes with
  one id and loads as one object, as torch.load's;
- ``"requires_grad"``, ``"parameter"``: the tensor's flag, and whether it is an nn.Parameter
  (it loads as one, with that requires_grad);
- ``"dtype"`` (only where the buffer's dtype is not the tensor's): ``"bfloat16"``, stored as
  its uint16 bits, a type NumPy lacks;
- ``"view"`` (only for tensors that share memory): ``{"offset", "shape", "stride"}``, where the
  tensor's elements sit in the buffer, counted in elements as ``storage_offset()`` and
  ``stride()`` count them: element i is at ``offset + sum_k i_k * stride_k``.

Tensors saved in one ``md.save`` call whose memory is one storage (a tensor and its view,
two slices of one base: the same ``untyped_storage().data_ptr()``) and one dtype are stored
once, as the 1-d span of that storage that covers them all, each as a ``view`` of it. They
load as views of one array, so that a write through one is seen through the others, as after
torch.load. Every other tensor is stored compactly as its values (a non-contiguous one loses
its strides; torch would keep them and the whole storage). Tensors on a device other than the
CPU, empty ones, and views of one memory in different dtypes are stored compactly too. Loaded
to a device (``map_location``), each shared buffer moves there once and its tensors are made as
views of it there, so they still share memory.

Loading checks each node before any array is read: the meta's keys and types, one id never
describing two tensors, a buffer serving either one compact tensor or views only, a
numeric dtype, and every view inside its buffer (offset, shape and strides non-negative ints,
the last element it reaches within the buffer's length), so that a forged view raises
CheckpointError instead of reading outside the buffer.
"""
import math

import numpy as np

from .. import backends
from ..ops.as_strided import shared_place, strided_view
from ..tensor import dtype as _dtypes
from ..tensor.factories import from_numpy
from ..tensor.tensor import Tensor
from .archive import MAX_NDIM as _MAX_NDIM

TAG = "tensor"
_BFLOAT16 = _dtypes.bfloat16.dtype if _dtypes.bfloat16 is not None else None
_KINDS = "biufc"                 # what a tensor's buffer may hold (bfloat16 arrives as uint16 bits)
_MAX_BYTES = 1 << 62             # no view (even one that repeats an element) may span more: NumPy's limit
_META_KEYS = {"id", "requires_grad", "parameter", "dtype", "view"}
_REQUIRED = ("id", "requires_grad", "parameter")


def _is_parameter(t):
    from ..nn.parameter import Parameter
    return isinstance(t, Parameter)


# saving -------------------------------------------------------------------------------------
class Saver:
    """The tensors of one ``md.save`` call: ``node(t)`` during the walk over the object, then
    ``store(arrays)`` names each node's buffer once all of them are known (sharing is a property
    of the whole set)."""

    def __init__(self):
        self._seen = {}      # id(tensor) -> (tensor, node)

    def node(self, t):
        entry = self._seen.get(id(t))
        if entry is None:
            meta = {"id": len(self._seen), "requires_grad": bool(t.requires_grad), "parameter": _is_parameter(t)}
            entry = self._seen[id(t)] = (t, [TAG, None, meta])
        return entry[1]

    def store(self, arrays):
        groups = {}
        for t, node in self._seen.values():
            place = _place(t._data)
            if place is None:
                _store_compact(t, node, arrays)
            else:
                key, flat, offset, stride = place
                groups.setdefault(key, (flat, []))[1].append((t, node, offset, stride))
        for flat, members in groups.values():
            if len(members) == 1:
                _store_compact(*members[0][:2], arrays)
                continue
            lo = min(offset for _, _, offset, _ in members)
            hi = max(_end(t._data.shape, stride, offset) for t, _, offset, stride in members)
            name = _add(arrays, flat[lo:hi], [node[2] for _, node, _, _ in members])
            for t, node, offset, stride in members:
                node[1] = name
                shape = [int(n) for n in t._data.shape]
                node[2]["view"] = {"offset": offset - lo, "shape": shape, "stride": list(stride)}


def _store_compact(t, node, arrays):
    data = t._data if type(t._data) is np.ndarray else backends.get(t.device).to_host(t._data)
    node[1] = _add(arrays, data, [node[2]])


def _add(arrays, a, metas):
    if _BFLOAT16 is not None and a.dtype == _BFLOAT16:
        a = a.view(np.uint16)
        for meta in metas:
            meta["dtype"] = "bfloat16"
    name = f"a{len(arrays)}"
    arrays[name] = a
    return name


def _place(a):
    """Where a CPU array sits in its storage: (key, flat, offset, stride) with ``flat`` the
    storage as a 1-d array of a's dtype and offset and stride in its elements; None for an
    array to store compactly (empty, on a device, negative strides, memory not in one run)."""
    place = shared_place(a)
    if place is None:
        return None
    _, flat, offset, stride = place
    return (flat.__array_interface__["data"][0], flat.size, a.dtype), flat, offset, stride


def _end(shape, stride, offset):
    """One past the last storage element a non-empty geometry reaches."""
    return offset + 1 + sum((n - 1) * s for n, s in zip(shape, stride))


# checking -----------------------------------------------------------------------------------
class Checker:
    """Checks the tensor nodes of one manifest (before any array is read) and remembers, for
    loading, each buffer's dtype."""

    def __init__(self, archive):
        self.archive = archive
        self._ids = {}          # id -> node
        self.buffers = {}       # name -> ("compact", id) or ("view", dtype meta)
        self.bfloat16 = set()   # the buffers that hold bfloat16 bits

    def check(self, node, names, bad):
        if len(node) != 3:
            bad(f"has a {TAG!r} entry with {len(node) - 1} values instead of 2")
        name, meta = node[1], node[2]
        if not isinstance(name, str) or name == "__minidl__":   # the manifest (checkpoint.MANIFEST_KEY)
            bad(f"has a {TAG!r} entry that does not name an array member")
        if not isinstance(meta, dict) or not set(meta) <= _META_KEYS or any(k not in meta for k in _REQUIRED):
            bad(f"has a {TAG!r} entry whose description is not a dict of {sorted(_META_KEYS)} (with "
                f"{', '.join(_REQUIRED)})")
        tid = meta["id"]
        if type(tid) is not int or tid < 0:
            bad(f"has a {TAG!r} entry whose id is not a non-negative int")
        if type(meta["requires_grad"]) is not bool or type(meta["parameter"]) is not bool:
            bad(f"has a {TAG!r} entry whose requires_grad or parameter is not a bool")
        if tid in self._ids:
            if self._ids[tid] != node:
                bad(f"describes tensor id {tid} twice, differently")
            return
        member = self.archive.members.get(name + ".npy")
        if member is None:
            bad(f"is inconsistent with its arrays: it refers to {name!r}, which the file does not hold")
        if names.get(name, TAG) != TAG:
            bad(f"refers to the array {name!r} both as a tensor and as an array")
        dtype = self._dtype(meta, member, name, bad)
        if meta["requires_grad"] and dtype.kind != "f" and dtype != _BFLOAT16:
            bad(f"has a tensor of dtype {dtype} that requires grad (only floating tensors can)")
        use = ("view", meta.get("dtype")) if "view" in meta else ("compact", tid)
        if self.buffers.setdefault(name, use) != use:
            bad(f"uses the array {name!r} for tensors that cannot share it (one compact tensor, or views of one "
                "dtype)")
        if "view" in meta:
            _check_view(meta["view"], member, dtype, name, bad)
        if "dtype" in meta:
            self.bfloat16.add(name)
        names[name] = TAG
        self._ids[tid] = node

    @staticmethod
    def _dtype(meta, member, name, bad):
        if "dtype" in meta:
            if meta["dtype"] != "bfloat16" or member.dtype != np.uint16 or _BFLOAT16 is None:
                bad(f"has a tensor dtype {str(meta['dtype'])[:20]!r} for the array {name!r} of dtype {member.dtype}; "
                    "only a bfloat16 entry over uint16 bits is valid, and needs ml_dtypes installed")
            return _BFLOAT16
        if member.dtype.kind not in _KINDS:
            bad(f"has a tensor whose array {name!r} has dtype {member.dtype}, which no tensor has")
        return member.dtype


def _check_view(view, member, dtype, name, bad):
    if not isinstance(view, dict) or set(view) != {"offset", "shape", "stride"}:
        bad("has a tensor view that is not a dict of offset, shape and stride")
    offset, shape, stride = view["offset"], view["shape"], view["stride"]
    if not isinstance(shape, list) or not isinstance(stride, list) or len(shape) != len(stride) \
            or len(shape) > _MAX_NDIM:
        bad(f"has a tensor view whose shape and stride are not lists of one length (at most {_MAX_NDIM})")
    limit = _MAX_BYTES // dtype.itemsize
    if any(type(v) is not int or not 0 <= v <= limit for v in [offset, *shape, *stride]):
        bad(f"has a tensor view whose offset, shape or stride is not an int in [0, {limit}]")
    if len(member.shape) != 1:
        bad(f"has tensor views of the array {name!r}, which is not 1-d (shape {member.shape})")
    length = member.shape[0]
    if math.prod(shape) > limit:
        bad(f"has a tensor view of {math.prod(shape)} elements, more than any array may hold")
    end = offset if 0 in shape else _end(shape, stride, offset)
    if end > length:
        bad(f"has a tensor view that reaches element {end - 1} of the array {name!r}, which holds {length} "
            "(outside its buffer)")


# loading ------------------------------------------------------------------------------------
class Builder:
    """Makes the tensor of each node, once per id, over the checked and read ``arrays``;
    ``placement`` (locations.Placement) makes each buffer's storage and says where tensors go."""

    def __init__(self, arrays, placement):
        self._arrays, self._placement = arrays, placement
        self._storages, self._tensors = {}, {}

    def build(self, node):
        _, name, meta = node
        t = self._tensors.get(meta["id"])
        if t is None:
            t = self._tensors[meta["id"]] = self._make(name, meta)
        return t

    def _storage(self, name):
        """The buffer's storage, on the placement's device: moved there once, so that the tensors
        made as views of it share its memory on that device, as torch.load's do."""
        s = self._storages.get(name)
        if s is None:
            s = self._placement.storage(self._arrays[name])
            device = self._placement.device
            if device is not None and str(s.device) != device:
                s = s.to(device)
            self._storages[name] = s
        return s

    def _make(self, name, meta):
        s = self._storage(name)
        if "view" in meta:
            s = self._view(s, meta["view"], name)
        return _finish(s, meta)

    @staticmethod
    def _view(storage, view, name):
        """The tensor at ``view`` of a 1-d storage, over its memory on its device."""
        data = storage._data
        shape, stride, offset = tuple(view["shape"]), tuple(view["stride"]), view["offset"]
        end = offset if 0 in shape else _end(shape, stride, offset)
        if data.ndim != 1 or end > data.shape[0]:   # only a map_location callable can make it so
            raise ValueError(f"md.load: map_location returned a storage of shape {tuple(data.shape)} for {name!r}, "
                             f"whose tensors need a 1-d storage of at least {end} elements")
        if type(data) is np.ndarray:
            return from_numpy(strided_view(np.ascontiguousarray(data), shape, stride, offset))
        return Tensor._wrap(_device_view(data, shape, stride, offset), None, 0)


def _device_view(flat, shape, stride, offset):
    """The (shape, stride, offset) view of a 1-d device storage (a CudaArray is a strided view of
    a device buffer, as an ndarray is of host memory); a strided storage is made contiguous first,
    as ``np.ascontiguousarray`` makes a host one."""
    if not hasattr(flat, "elem_strides"):
        raise NotImplementedError(f"md.load: cannot make tensors that share memory on a storage of type "
                                  f"{type(flat).__name__}; load to the CPU and move the tensors")
    if flat.elem_strides != (1,):
        flat = flat.copy()
    return flat._view(shape, stride, flat.offset + offset)


def _finish(t, meta):
    if meta["parameter"]:
        from ..nn.parameter import Parameter
        return Parameter(t, requires_grad=meta["requires_grad"])
    if meta["requires_grad"] and not t.requires_grad:
        t.requires_grad_(True)
    return t
