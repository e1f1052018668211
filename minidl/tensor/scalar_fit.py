"""A Python number written into a tensor (``full``, ``full_like``, ``fill_``): PyTorch's overflow
check, so that a value the dtype cannot hold is refused instead of wrapping into garbage
(NumPy's unsafe cast writes -2**63 for ``inf`` in an int64 tensor).

PyTorch's rules (c10's ``overflows``), which ``fit`` follows:

    int value, integer dtype      signed: lo <= v <= hi; unsigned: -hi <= v <= hi (a negative
                                  int wraps, two's complement: full(-1, uint8) is 255)
    float value, integer dtype    lo <= v <= hi, NaN refused (2.7 truncates to 2; -0.5 and
                                  255.9 are refused for uint8)
    float value, float32,         |v| <= the dtype's largest finite value, or not finite (inf
      float16, bfloat16           and NaN are written)
    complex value, real dtype     refused unless its imaginary part is 0
    float64, bool                 never refused

(PyTorch writes inf instead for a float16 or bfloat16 tensor of one element, a path of its own;
minidl refuses at every size, as PyTorch does from two elements on.)

``fit`` returns the value for NumPy to write: a negative int wrapped for an unsigned dtype.

The refusal is a RuntimeError "value cannot be converted to type T without overflow", T the C
type's name as PyTorch prints it; a Python int beyond 64 bits is an OverflowError ("int too big
to convert"), as its conversion to a C integer fails first.
"""
import math
import numbers

import numpy as np

_C_NAMES = {"int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "uint16": "uint16_t", "int32": "int",
            "uint32": "uint32_t", "int64": "int64_t", "uint64": "uint64_t", "float32": "float",
            "float16": "c10::Half", "bfloat16": "c10::BFloat16", "complex64": "c10::complex<float>"}
_FLT_MAX = float(np.finfo(np.float32).max)


def _float_overflows(f, dt):
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return math.isnan(f) or f < info.min or f > info.max
    if _is_half(dt):
        return math.isfinite(f) and abs(f) > _half_max(dt)
    return dt in (np.float32, np.complex64) and math.isfinite(f) and abs(f) > _FLT_MAX


def _is_half(dt):
    """float16 or bfloat16 (ml_dtypes' bfloat16 is not of NumPy's float kind)."""
    return dt.kind not in "iucb" and dt.itemsize == 2


def fit(value, dtype):
    """``value`` as written into a tensor of ``dtype``, or the error PyTorch raises where it does
    not fit (the module docstring). Anything but a scalar (a tensor, an array) passes as is."""
    dt = np.dtype(getattr(dtype, "dtype", dtype))
    if dt.kind == "b" or isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Number):
        return value
    if isinstance(value, numbers.Integral):
        v = int(value)
        if not -2 ** 63 <= v < 2 ** 64:
            raise OverflowError("int too big to convert")
        if dt.kind not in "iu":
            return value
        info = np.iinfo(dt)
        bad = v > info.max or (v < info.min if dt.kind == "i" else -v > info.max)
        if not bad and dt.kind == "u" and v < 0:
            value = v % (int(info.max) + 1)          # two's complement: -1 is all ones
    elif isinstance(value, numbers.Real):
        bad = _float_overflows(float(value), dt)
    else:
        z = complex(value)
        bad = (dt.kind != "c" and z.imag != 0) or _float_overflows(z.real, dt) or \
            (dt.kind == "c" and _float_overflows(z.imag, dt))
    if bad:
        raise RuntimeError(f"value cannot be converted to type {_C_NAMES.get(dt.name, dt.name)} without overflow")
    return value


def _half_max(dt):
    """The largest finite value of a 2-byte float dtype (float16 or bfloat16)."""
    if dt == np.float16:
        return float(np.finfo(np.float16).max)
    import ml_dtypes
    return float(ml_dtypes.finfo(dt).max)
