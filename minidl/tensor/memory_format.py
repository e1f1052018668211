"""md.memory_format: PyTorch's names for the order a tensor's elements are laid out in
(``md.preserve_format``, ``md.contiguous_format``, ``md.channels_last``, ``md.channels_last_3d``).

minidl keeps every array in the layout its op produced and its kernels pick their own working
layout (conv transposes to channels-last internally), so a memory format changes no value and
no speed here: ``to(memory_format=...)`` accepts one. What it keeps is PyTorch's aliasing:
asking for a channels-last layout returns a new tensor, as PyTorch copies a default-layout
tensor into it, so writing to the result never changes the original.
"""


class NamedConstant:
    """One of PyTorch's named singletons (``md.channels_last``, ``md.strided``): printed as
    ``minidl.<name>``, and unpickled as the module's own object, so ``is`` comparisons hold."""
    __slots__ = ("_name",)

    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return f"minidl.{self._name}"

    def __reduce__(self):
        return (_by_name, (type(self).__module__, self._name))


class memory_format(NamedConstant):   # noqa: N801  (PyTorch's name)
    __slots__ = ()


preserve_format = memory_format("preserve_format")
contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")

_RANK = {channels_last: 4, channels_last_3d: 5}   # the rank a channels-last layout is defined for


def _by_name(module, name):
    import importlib
    return getattr(importlib.import_module(module), name)


def check(fmt):
    """``fmt`` if it is a memory format (or None, for the default); TypeError otherwise."""
    if fmt is not None and not isinstance(fmt, memory_format):
        raise TypeError(f"memory_format must be a minidl.memory_format (md.channels_last...), got "
                        f"{type(fmt).__name__}")
    return fmt


def copies(t, fmt):
    """Whether ``t.to(memory_format=fmt)`` gives a new tensor: only for a channels-last layout,
    which PyTorch defines for one rank (``RuntimeError`` for another, as PyTorch)."""
    rank = _RANK.get(check(fmt))
    if rank is None:
        return False
    if t.ndim != rank:
        raise RuntimeError(f"required rank {rank} tensor to use {fmt._name} format")
    return True
