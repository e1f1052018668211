"""Version counters: how a node knows that what it saved was overwritten in place.

Every Tensor carries a ``VersionCounter``; a Tensor that views another's memory (the output
of reshape, transpose, a basic slice, ``detach()``...) shares its counter, so a write
through any view is seen by all of them. Each in-place op bumps the counter once.

When ``Function.apply`` records a node, it notes the counter and its value of every input
and output tensor. Before the engine runs the node's backward it compares them: when a
counter moved and that tensor's memory holds an array the forward kept (through
``save_for_backward`` or as a ``ctx`` attribute), the saved values are not the ones the
forward saw, and backward raises PyTorch's error instead of returning a silently wrong
gradient. A tensor the backward does not read (``x`` in ``x + y``) may be modified freely.
A global count of all writes makes the check one comparison when nothing was written in
place between a node's forward and its backward (nearly always).
"""
import numpy as np


class VersionCounter:
    __slots__ = ("value",)

    def __init__(self):
        self.value = 0


def storage_of(array):
    """The object that owns an array's memory: two arrays with the same storage may see
    each other's writes. (For an ndarray the end of its ``.base`` chain; for a device
    array its buffer.)"""
    if type(array) is np.ndarray:
        base = array.base
        while base is not None:
            if type(base) is not np.ndarray:
                if type(getattr(base, "base", None)) is not np.ndarray:
                    return base
                base = base.base   # as_strided's view holds its array through a DummyArray
            array, base = base, base.base
        return array
    return getattr(array, "_buf", array)


# Bumped with every counter: while it has not moved since a node was recorded, no tensor was
# written in place since, and the node's check is one comparison.
_writes = [0]


def bump(counter):
    """Count one in-place write into the memory ``counter`` watches."""
    counter.value += 1
    _writes[0] += 1


def snapshot(ctx, seen, outs):
    """Note on the node the version of every input (``seen``, taken as the inputs were read)
    and output tensor: cheap, so it is done for every recorded op; whether the forward saved
    any of them is only worked out by ``check`` in the rare case that a version moved. (An
    input's counter is found again through ``ctx.inputs``; an output is not kept, so its
    counter and storage are noted.)"""
    outs_seen = []
    for o in outs:
        c, d = o._version_counter, o._data
        outs_seen.append((c, c.value, id(d) if type(d) is np.ndarray and d.base is None else id(storage_of(d))))
    ctx._saved_versions = (_writes[0], seen, outs_seen)


def _saved_arrays(node):
    """The arrays the node's forward kept (in saved_tensors or as attributes), by the id of
    their storage. Those arrays are alive, so such an id cannot belong to another object."""
    found = {}
    for k, v in node.__dict__.items():
        if k in ("inputs", "edges", "_saved_versions"):
            continue
        for a in (v if type(v) is tuple or type(v) is list else (v,)):
            if hasattr(a, "shape") and hasattr(a, "dtype") and not isinstance(a, np.generic):
                found.setdefault(id(storage_of(a)), a)
    return found


def check(node):
    """Raise if something the node saved was modified in place after the forward."""
    writes, in_versions, out_versions = node._saved_versions
    if writes == _writes[0]:
        return                         # no in-place write anywhere since the forward
    for t, v in zip(node.inputs, in_versions):
        if t is not None and t._version_counter.value != v:
            break
    else:
        for c, v, _ in out_versions:
            if c.value != v:
                break
        else:
            return                     # nothing moved: the common case
    moved = [(t._version_counter.value, v, id(storage_of(t._data)), t, None)
             for t, v in zip(node.inputs, in_versions) if t is not None and t._version_counter.value != v]
    moved += [(c.value, v, root, None, i) for i, (c, v, root) in enumerate(out_versions) if c.value != v]
    if not moved:
        return
    saved = _saved_arrays(node)
    for now, expected, root, t, out_index in moved:
        a = saved.get(root)
        if a is None:
            continue                   # modified, but the backward does not read it
        if t is None:
            shape, dtype, array_type, produced_by = a.shape, a.dtype, type(a), (out_index, type(node).__name__)
        else:
            shape, dtype, array_type = t._data.shape, t._data.dtype, type(t._data)
            produced_by = None if t._node is None else (t._out_index, type(t._node).__name__)
        where = "" if produced_by is None else f", which is output {produced_by[0]} of {produced_by[1]},"
        raise modified_error(f"[{_describe(shape, dtype, array_type)}]{where}", now, expected,
                             f" (it was saved by {type(node).__name__} and written to in place afterwards; clone() "
                             "it before the in-place op, or do the op out of place)")


def modified_error(subject, now, expected, advice):
    """PyTorch's error for a tensor a backward needs that was written in place since it was saved."""
    return RuntimeError("one of the variables needed for gradient computation has been modified by an inplace "
                        f"operation: {subject} is at version {now}; expected version {expected} instead{advice}")


def _describe(shape, dtype, array_type):
    """PyTorch's name for a tensor's type and shape: ``minidl.FloatTensor [2, 3]``."""
    from ..backends import _BACKENDS
    from ..tensor.dtype import legacy_type_name
    name = legacy_type_name(dtype)
    device = next((b.name for b in _BACKENDS.values() if b.array_type is array_type), "cpu")
    prefix = "minidl." if device == "cpu" else f"minidl.{device}."
    return f"{prefix}{name} [{', '.join(str(n) for n in shape)}]"
