"""PyTorch's legacy constructors, still common in older scripts: ``md.Tensor(data)`` and
``md.Tensor(*sizes)``, and the per-dtype types ``md.FloatTensor``, ``md.LongTensor``...

``md.Tensor(...)`` comes here through ``Tensor.__new__``; the tensors minidl itself makes never
do (``Tensor._wrap`` builds them with ``object.__new__``). As in PyTorch, data is copied into the
default float dtype (or the type's dtype), and sizes give a tensor of that shape: PyTorch leaves
it uninitialised; here it holds zeros. The per-dtype types are not subclasses of Tensor (there is
one Tensor class): ``isinstance(x, md.FloatTensor)`` asks whether x is a float32 tensor, as it
does in PyTorch.
"""
import numbers

import numpy as np

from . import dtype as dtypes
from .size import Size


def construct(dtype, args, kwargs):
    """A tensor from ``data`` or from sizes (see the module docstring); ``dtype`` None is the
    default float dtype."""
    from . import factories
    from .tensor import Tensor
    device = kwargs.pop("device", None)
    if kwargs:
        raise TypeError(f"new() received an invalid combination of arguments: got keyword arguments "
                        f"{sorted(kwargs)}; expected data or sizes, and only device= as a keyword")
    dt = dtypes.DEFAULT_FLOAT if dtype is None else dtypes.to_dtype(dtype)
    if not args:   # PyTorch: an empty 1-d tensor, not a 0-d one
        args = (0,)
    if all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in args) or \
            (len(args) == 1 and isinstance(args[0], Size)):
        sizes = tuple(args[0]) if len(args) == 1 and isinstance(args[0], Size) else args
        return factories.zeros(*sizes, dtype=dt, device=device or "cpu")
    if len(args) != 1:
        raise TypeError(f"new(): expected data (a sequence) or sizes (ints), got {len(args)} arguments of types "
                        f"{[type(a).__name__ for a in args]}")
    data = args[0]
    if isinstance(data, Tensor):
        if dtype is not None and data.dtype != dtypes.wrap(dt):
            raise TypeError(f"expected a tensor of dtype {dtypes.wrap(dt)}, got one of dtype {data.dtype}")
        return data.detach()   # PyTorch: a tensor over the same memory
    if not isinstance(data, (list, tuple, np.ndarray)):
        raise TypeError(f"new(): data must be a sequence (got {type(data).__name__})")
    return factories.tensor(np.asarray(data).astype(dt), device=device or "cpu")


class LegacyTensorType(type):
    """The type of ``md.FloatTensor`` and its siblings: calling one builds a tensor of its dtype,
    and ``isinstance`` asks for a tensor of that dtype."""

    def __instancecheck__(cls, obj):
        from .tensor import Tensor
        return isinstance(obj, Tensor) and obj.dtype == cls.dtype

    def __call__(cls, *args, **kwargs):
        return construct(cls.dtype, args, kwargs)


def legacy_types(metaclass=LegacyTensorType, module="minidl", alias="md", what="tensor"):
    """``{"FloatTensor": type, ...}`` for every dtype minidl has: the types of ``module`` (written
    ``alias`` in their docs), made by ``metaclass`` (md.cuda's pass their own: minidl/cuda/legacy.py)."""
    out = {}
    for name, prefix in dtypes.LEGACY_TYPE_NAMES.items():
        dtype = getattr(dtypes, "bool_" if name == "bool" else name, None)
        if dtype is not None:
            out[f"{prefix}Tensor"] = metaclass(f"{prefix}Tensor", (), {
                "dtype": dtype, "__module__": module,
                "__doc__": f"{alias}.{prefix}Tensor(data) or {alias}.{prefix}Tensor(*sizes): a {dtype} {what}."})
    return out
