"""Padding layers over F.pad: ZeroPad1d/2d/3d, ConstantPad1d/2d/3d, ReflectionPad1d/2d/3d,
ReplicationPad1d/2d/3d, CircularPad1d/2d/3d. ``padding`` is an int (every side) or a tuple
(left, right[, top, bottom[, front, back]]), as PyTorch."""
from ...ops.pad import pad
from .module import Module


class _Pad(Module):
    mode, dims = "constant", 2   # set by subclasses

    def __init__(self, padding, value=0.0):
        super().__init__()
        if isinstance(padding, int):
            padding = (padding,) * (2 * self.dims)
        padding = tuple(int(p) for p in padding)
        if len(padding) != 2 * self.dims:
            raise ValueError(f"{type(self).__name__}: expected padding of {2 * self.dims} ints or one int, "
                             f"got {padding}")
        self.padding, self.value = padding, value

    def forward(self, input):
        return pad(input, self.padding, self.mode, self.value if self.mode == "constant" else None)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPad(_Pad):
    def __init__(self, padding, value):
        super().__init__(padding, value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class _ZeroPad(_Pad):
    def __init__(self, padding):
        super().__init__(padding, 0.0)


def _family(base, mode, stem):
    return tuple(type(f"{stem}{d}d", (base,), {"mode": mode, "dims": d, "__module__": __name__}) for d in (1, 2, 3))


ZeroPad1d, ZeroPad2d, ZeroPad3d = _family(_ZeroPad, "constant", "ZeroPad")
ConstantPad1d, ConstantPad2d, ConstantPad3d = _family(_ConstantPad, "constant", "ConstantPad")
ReflectionPad1d, ReflectionPad2d, ReflectionPad3d = _family(_Pad, "reflect", "ReflectionPad")
ReplicationPad1d, ReplicationPad2d, ReplicationPad3d = _family(_Pad, "replicate", "ReplicationPad")
CircularPad1d, CircularPad2d, CircularPad3d = _family(_Pad, "circular", "CircularPad")
