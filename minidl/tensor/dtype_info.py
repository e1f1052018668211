"""md.finfo / md.iinfo (the limits of a dtype) and the default floating dtype.

``set_default_dtype`` (float16, float32 or float64) changes what the factories (md.zeros, md.randn, md.tensor of Python
floats, md.arange of floats...) and the float promotion of integer inputs produce, as
torch.set_default_dtype does.
"""
import numpy as np

from . import dtype as dtypes


def _floating_dtype(dtype, who):
    d = dtypes.wrap(dtypes.to_dtype(dtype))
    if not d.is_floating_point:
        raise TypeError(f"{who} expected a floating point dtype, got {d}")
    return d


class finfo:   # noqa: N801  (PyTorch's name)
    """Machine limits of a floating dtype: bits, eps, max, min, tiny (= smallest_normal),
    resolution, and dtype (its name, as in PyTorch). ``finfo()`` describes the default dtype."""

    def __init__(self, type=None):   # noqa: A002  (PyTorch's parameter name)
        d = get_default_dtype() if type is None else _floating_dtype(type, "finfo()")
        if d is dtypes.bfloat16:
            import ml_dtypes
            info = ml_dtypes.finfo(ml_dtypes.bfloat16)
        else:
            info = np.finfo(d.dtype)
        self.bits = int(info.bits)
        self.eps = float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.tiny = self.smallest_normal = float(info.smallest_normal)
        self.resolution = 10.0 ** -int(info.precision)   # exactly a power of ten, as PyTorch gives it
        self.dtype = d.name

    def __repr__(self):
        return (f"finfo(resolution={self.resolution}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:   # noqa: N801
    """Machine limits of an integer (or bool) dtype: bits, max, min, and dtype (its name)."""

    def __init__(self, type):   # noqa: A002
        d = dtypes.wrap(dtypes.to_dtype(type))
        if d.is_floating_point:
            raise TypeError(f"iinfo() expected an integer dtype, got {d}")
        if d is dtypes.bool_:
            self.bits, self.min, self.max = 8, 0, 1
        else:
            info = np.iinfo(d.dtype)
            self.bits, self.min, self.max = int(info.bits), int(info.min), int(info.max)
        self.dtype = d.name

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


def set_default_dtype(d):
    """Make ``d`` (a floating dtype) what the factories produce when no dtype is given."""
    dt = dtypes.wrap(dtypes.to_dtype(d))
    if not dt.is_floating_point:
        raise TypeError(f"only floating-point types are supported as the default type, got {dt}")
    if dt is dtypes.bfloat16:   # ops compute in the IEEE types; bfloat16 only stores
        raise TypeError("bfloat16 cannot be the default dtype in minidl, where it is a storage format only; "
                        "expected float16, float32 or float64")
    dtypes.DEFAULT_FLOAT = dt.dtype


def get_default_dtype():
    return dtypes.wrap(dtypes.DEFAULT_FLOAT)


def is_floating_point(input):   # noqa: A002
    return input.dtype.is_floating_point
