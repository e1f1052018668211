"""Data types.

minidl's dtypes *are* NumPy dtypes, so ``x.dtype == md.float32`` and
``x.numpy().dtype == x.dtype`` both hold and nothing has to be translated at the
boundary with NumPy or Numba.
"""
import numpy as np

float16 = np.dtype("float16")
float32 = np.dtype("float32")
float64 = np.dtype("float64")
int32 = np.dtype("int32")
int64 = np.dtype("int64")
uint8 = np.dtype("uint8")
bool_ = np.dtype("bool")

SUPPORTED = (float16, float32, float64, int32, int64, uint8, bool_)
FLOATING = (float16, float32, float64)
DEFAULT_FLOAT = float32


def to_dtype(dtype):
    """Turn anything NumPy accepts as a dtype (md.float32, "float32", float, np.int64)
    into one of minidl's dtypes, or raise a TypeError listing the supported ones."""
    if dtype is float:
        return DEFAULT_FLOAT
    if dtype is int:
        return int64
    if dtype is bool:
        return bool_
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt not in SUPPORTED:
        names = ", ".join(d.name for d in SUPPORTED)
        raise TypeError(f"unsupported dtype {dtype!r}; minidl supports {names}")
    return dt


def is_floating(dtype):
    return np.dtype(dtype) in FLOATING


def default_dtype_for(array, from_ndarray):
    """The dtype md.tensor picks when none is given, as torch.tensor does: Python floats
    become float32, while an ndarray keeps its own floating dtype (a float64 array stays
    float64); integers become int64 unless an ndarray says otherwise."""
    kind = array.dtype.kind
    if kind == "f":
        return array.dtype if from_ndarray else DEFAULT_FLOAT
    if kind in "iu":
        return array.dtype if (from_ndarray and array.dtype in SUPPORTED) else int64
    if kind == "b":
        return bool_
    return to_dtype(array.dtype)  # raises for complex, object, strings
