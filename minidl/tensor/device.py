"""md.device: where a tensor lives, as torch.device.

``md.device("cpu")``, ``md.device("cuda", 0)`` and ``md.device("cuda:0")`` have ``.type``
and ``.index`` and print as ``cpu`` / ``cuda:0``. Anything that takes a device name takes a
device too (``str(device)`` is the name minidl.backends understands). A device compares
equal to another device or to a device string naming the same type, the index counting only
where both say one: ``md.device("cuda", 0) == "cuda"`` holds (minidl has one GPU per process,
and code written against device strings compares with the bare type), where PyTorch would
say False. It hashes like its type's name, so ``{"cpu": ...}[x.device]`` finds the entry.
"""

from .. import backends

_TYPES = ("cpu", "cuda", "mps", "meta", "xpu")


class device:   # noqa: N801  (PyTorch's name)
    __slots__ = ("type", "index")

    def __init__(self, type, index=None):   # noqa: A002  (PyTorch's parameter name)
        if isinstance(type, device):
            if index is not None:
                raise TypeError("device(): an index cannot be given with a device object")
            self.type, self.index = type.type, type.index
            return
        if isinstance(type, int) and not isinstance(type, bool):   # md.device(0): the first GPU
            type, index = "cuda", type
        if not isinstance(type, str):
            raise TypeError(f"device() expected a string or int as its type, got {type.__class__.__name__}")
        name, sep, idx = type.strip().partition(":")
        if name not in _TYPES and name not in backends._BACKENDS:   # (a test may register its own backend)
            raise RuntimeError(f"Expected one of {', '.join(_TYPES)} device type at start of device string: {type}")
        if sep:
            if index is not None:
                raise RuntimeError(f"type (string) must not include an index because index was passed "
                                   f"explicitly: {type}")
            if not idx.isdigit():
                raise RuntimeError(f"Invalid device string: '{type}'")
            index = int(idx)
        if index is not None:
            if isinstance(index, bool) or not isinstance(index, int):
                raise TypeError(f"device(): index must be an int, got {index.__class__.__name__}")
            if index < 0:
                raise RuntimeError(f"Device index must not be negative, got {index}")
        self.type, self.index = name, index

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = device(other)
            except (RuntimeError, TypeError):
                return False
        if not isinstance(other, device):
            return NotImplemented
        return self.type == other.type and (self.index is None or other.index is None or self.index == other.index)

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):
        return hash(self.type)

    def __reduce__(self):
        return (device, (self.type, self.index))


def cuda_device(index_or_device=None):
    """The device ``.cuda(device)`` moves to: the GPU for None, ``cuda:i`` for an index i."""
    if index_or_device is None:
        return "cuda"
    if isinstance(index_or_device, int) and not isinstance(index_or_device, bool):
        return device("cuda", index_or_device)
    return index_or_device


_CPU = device("cpu")
_CUDA = device("cuda", 0)


def of_name(name):
    """The device object for a backend's name ("cpu", "cuda"), shared rather than rebuilt."""
    if name == "cpu":
        return _CPU
    if name == "cuda":
        return _CUDA
    return device(name)
