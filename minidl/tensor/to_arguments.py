"""The arguments of PyTorch's ``Tensor.to`` and ``Module.to``, parsed once for both."""
from ..autograd import op_function
from . import dtype as dtypes
from . import memory_format as _formats
from .device import device as device_type

_DTYPE_PREFIXES = ("float", "int", "bool", "uint", "bfloat")


def parse_to_args(args, kwargs):
    """PyTorch's ``to`` arguments, ``(device=None, dtype=None, non_blocking=False, copy=False, *,
    memory_format)``, ``(dtype, non_blocking, copy)`` or ``(tensor, non_blocking, copy)``, as
    (device, dtype, copy, memory_format). An int is a GPU index, as in PyTorch."""
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    flags = [kwargs.pop("non_blocking", False), kwargs.pop("copy", False)]
    memory_format = _formats.check(kwargs.pop("memory_format", None))
    if kwargs:
        raise TypeError(f"to() got unexpected arguments {sorted(kwargs)}")
    n_flags = 0
    for a in args:
        if isinstance(a, bool):      # non_blocking, then copy, after the device and dtype
            if n_flags == 2:
                raise TypeError("to() takes at most two flags (non_blocking, copy) after the device and dtype")
            flags[n_flags] = a
            n_flags += 1
        elif n_flags:
            raise TypeError(f"to(): {a!r} given after the non_blocking/copy flags; the device and dtype come first")
        elif isinstance(a, (device_type, int)) or isinstance(a, str) and not a.startswith(_DTYPE_PREFIXES):
            device = device_type(a) if isinstance(a, int) else a
        elif isinstance(a, op_function.Tensor):
            device, dtype = a.device, a.dtype
        else:
            dtype = a
    return device, (None if dtype is None else dtypes.to_dtype(dtype)), bool(flags[1]), memory_format
