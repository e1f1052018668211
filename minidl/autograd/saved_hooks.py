"""Saved-tensor hooks: how what a forward keeps for its backward is stored, PyTorch's
``saved_tensors_hooks(pack_hook, unpack_hook)``, ``save_on_cpu`` and ``disable_saved_tensors_hooks``.

Inside ``with saved_tensors_hooks(pack, unpack):`` every array an op keeps for its backward is
handed to ``pack`` as it is recorded, and the node keeps what ``pack`` returns instead of the
array; each time the backward (or anyone) reads it, ``unpack`` turns it back into a Tensor.
Offloading activations to the host, compressing them, or recomputing them are written this way.

What pack receives: minidl's forwards see arrays, so pack gets a Tensor: the op's input or
output Tensor itself when the array is that tensor's memory (as PyTorch passes the very input
or output), else a Tensor wrapping the array outside the graph. What counts as kept: the arrays
in ``ctx.save_for_backward`` and those the forward put on ``ctx`` as attributes (alone or in a
tuple or list), which is everything a minidl backward reads. unpack must return a Tensor of the
saved array's shape on its device (a TypeError or RuntimeError otherwise); another dtype is cast
back to the saved one, the dtype the backward formula was written for.

How it is wired: the hooks live on a per-thread stack (the innermost pair applies; entering a
pair while ``disable_saved_tensors_hooks`` is in force raises its message, as does disabling
while a pair is set). While any thread has a pair set, op_function.py installs an ``apply`` that
calls ``pack_node`` after each op is recorded (``install_seam``, as autocast does); otherwise
ops pay nothing. ``pack_node`` moves the kept arrays out of the node's ``__dict__`` into
``_packed``, and the node's ``__getattr__`` (node.py), reached only because the attribute is now
missing, unpacks on access. Ops run inside a pack hook save plainly (no recursion).

As in PyTorch, a node whose saves went through hooks is not checked for in-place writes to
them (versions.py finds no array to compare): the hooks own what is stored.
"""
import contextlib
import threading

import numpy as np

from . import op_function
from ..backends import device_of


class _State(threading.local):
    def __init__(self):
        self.stack = []        # (pack_hook, unpack_hook), innermost last
        self.disabled = None   # the error message while disable_saved_tensors_hooks is in force
        self.packing = False   # inside a pack hook: ops there keep their arrays as they are


state = _State()
install_seam = None    # op_function._install_saved_hooks_seam(on): set by op_function.py
_active = 0            # pairs entered and not yet left, all threads together
_lock = threading.Lock()


def _count(delta):
    global _active
    with _lock:
        before, _active = _active, _active + delta
        if (before == 0) != (_active == 0):
            install_seam(_active > 0)


class saved_tensors_hooks:  # noqa: N801  (PyTorch's name)
    """Context manager: ``pack_hook(tensor) -> Any`` for each tensor an op saves for backward,
    ``unpack_hook(packed) -> Tensor`` each time it is read back (see the module docstring)."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        for what, fn in (("pack_hook", self.pack_hook), ("unpack_hook", self.unpack_hook)):
            if not callable(fn):
                raise TypeError(f"saved_tensors_hooks: {what} must be callable, got {type(fn).__name__}")
        if state.disabled is not None:
            raise RuntimeError(state.disabled)
        state.stack.append((self.pack_hook, self.unpack_hook))
        _count(1)

    def __exit__(self, *exc):
        state.stack.pop()
        _count(-1)
        return False


class save_on_cpu(saved_tensors_hooks):  # noqa: N801  (PyTorch's name)
    """Saved tensors are kept on the host and copied back to their device for backward: GPU
    memory traded for copies. A CPU tensor is kept as it is (no copy), unless ``pin_memory``,
    which makes a host copy (minidl has no page-locked memory; the copies are synchronous, so
    ``non_blocking`` changes nothing). ``device_type`` is accepted for PyTorch's signature."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        def pack_to_cpu(tensor):
            if tensor.device.type == "cpu":
                return tensor.device, (tensor.detach().clone() if pin_memory else tensor)
            return tensor.device, tensor.detach().cpu()

        def unpack_from_cpu(packed):
            device, tensor = packed
            return tensor.to(device, non_blocking=pin_memory)

        super().__init__(pack_to_cpu, unpack_from_cpu)


@contextlib.contextmanager
def disable_saved_tensors_hooks(error_message):
    """Within the block, setting saved-tensor hooks raises ``RuntimeError(error_message)``; so
    does entering the block while hooks are set. (Also a decorator.)"""
    previous = state.disabled
    try:
        if state.stack:
            raise RuntimeError(error_message)
        state.disabled = error_message
        yield
    finally:
        state.disabled = previous


def unpacked(unpack, packed):
    """``unpack(packed)``, which must be a Tensor (PyTorch's TypeError otherwise)."""
    out = unpack(packed)
    if not isinstance(out, op_function.Tensor):
        kind = type(out)
        name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
        raise TypeError(f"Output of saved tensor unpack_hook expected to be a Tensor but got result of type {name}")
    return out


class _Saved:
    """One array kept through the hooks: what pack returned, and what unpack must give back."""
    __slots__ = ("packed", "unpack", "shape", "dtype", "device")

    def __init__(self, packed, unpack, array):
        self.packed, self.unpack = packed, unpack
        self.shape, self.dtype, self.device = array.shape, array.dtype, device_of(array)

    def get(self):
        a = unpacked(self.unpack, self.packed)._data
        if a.shape != self.shape:
            raise RuntimeError(f"unpack_hook returned a tensor of shape {list(a.shape)} for a saved tensor of shape "
                               f"{list(self.shape)}; it must give back what pack_hook received")
        if device_of(a) != self.device:
            raise RuntimeError(f"unpack_hook returned a tensor on device '{device_of(a)}' for a saved tensor on "
                               f"'{self.device}'; it must give back what pack_hook received")
        return a if a.dtype == self.dtype else a.astype(self.dtype)


class _SavedSequence:
    """A tuple or list kept on the node with arrays among its items."""
    __slots__ = ("kind", "items")

    def __init__(self, kind, items):
        self.kind, self.items = kind, items


def unpack_value(entry):
    if type(entry) is _Saved:
        return entry.get()
    return entry.kind(e.get() if type(e) is _Saved else e for e in entry.items)


# a node's own bookkeeping, never saved data
_SKIP = frozenset(("inputs", "edges", "_saved_versions", "needs_input_grad", "output_meta", "n_outputs",
                   "non_differentiable", "_forward_stack", "_metadata", "_node_hooks", "_output_hooks",
                   "_retained", "_packed"))


def _is_array(a):
    Tensor = op_function.Tensor
    return (hasattr(a, "shape") and hasattr(a, "dtype") and not isinstance(a, (np.generic, Tensor))
            and hasattr(a, "ndim"))


def pack_outputs(out):
    """After an op was recorded in a thread with hooks set: pack what its node keeps."""
    if type(out) is tuple:
        node = next((o._node for o in out if o._node is not None), None)
        outs = out
    else:
        node, outs = out._node, (out,)
    if node is None or "_packed" in node.__dict__:
        return
    pack_node(node, outs)


def pack_node(node, outs):
    Tensor = op_function.Tensor
    pack, unpack = state.stack[-1]
    d = node.__dict__
    known = {}                      # id(array) -> the Tensor whose memory it is
    for t in node.inputs:
        if t is not None:
            known.setdefault(id(t._data), t)
    for t in outs:
        known.setdefault(id(t._data), t)

    def one(a):
        t = known.get(id(a))
        return _Saved(pack(Tensor._wrap(a, None, 0) if t is None else t), unpack, a)

    packed = {}
    state.packing = True
    try:
        saved = d.get("saved_tensors")
        if type(saved) is tuple:
            packed["saved_tensors"] = _SavedSequence(tuple, [one(a) if _is_array(a) else a for a in saved])
        for k, v in d.items():
            if k in _SKIP or k == "saved_tensors":
                continue
            if _is_array(v):
                packed[k] = one(v)
            elif (type(v) is tuple or type(v) is list) and any(_is_array(a) for a in v):
                packed[k] = _SavedSequence(type(v), [one(a) if _is_array(a) else a for a in v])
    finally:
        state.packing = False
    for k in packed:
        del d[k]
    d["_packed"] = packed
