"""NumPy's dispatch protocols for cuda arrays (NEP 13 ``__array_ufunc__``, NEP 18
``__array_function__``): ``np.exp(x)``, ``np.add.at(x, i, v)``, ``np.roll(x, 1)`` on a cuda array run
``CUDA_NUMPY``'s function of that name on the device, so an op that names NumPy directly still
computes where its data lives. A NumPy function the namespace lacks runs NumPy's own Python
implementation when that only reads attributes (``np.shape``, ``np.size``); one that would copy the
array to the host raises NotImplementedError naming it and the device, never a silent host result."""
import numpy as np

from .array import CudaArray

_HOST_COPY = "cuda: a device array cannot be used as a NumPy array implicitly"


def _unsupported(name):
    return NotImplementedError(f"numpy.{name} is not implemented for device 'cuda' (minidl.backends.cuda); "
                               "add it to CudaNamespace on top of the generic kernels, or move the tensor to "
                               "the CPU with .cpu()")


def _lookup(xp, name):
    try:
        return getattr(xp, name)
    except NotImplementedError:
        return None


def array_ufunc(xp, ufunc, method, inputs, kwargs):
    name = ufunc.__name__
    if method == "at" and name == "add":
        if not isinstance(inputs[0], CudaArray):
            raise TypeError(f"cuda: numpy.add.at into a {type(inputs[0]).__name__} with a cuda operand; "
                            "allocate the target on the device (xp = namespace_of(...))")
        return xp.add.at(*inputs, **kwargs)
    if method == "accumulate":   # np.logaddexp.accumulate(x, axis=...): the namespace ufunc's own
        accumulate = getattr(_lookup(xp, name), "accumulate", None)
        if accumulate is None:
            raise _unsupported(f"{name}.accumulate")
        return accumulate(*inputs, **kwargs)
    fn = _lookup(xp, name) if method == "__call__" else None
    if fn is None:
        raise _unsupported(name if method == "__call__" else f"{name}.{method}")
    out = kwargs.pop("out", None)
    if isinstance(out, tuple):
        if len(out) != 1:
            raise _unsupported(f"{name} with several outputs")
        out = out[0]
    if kwargs:
        raise NotImplementedError(f"numpy.{name}(..., {', '.join(kwargs)}=) is not implemented for device 'cuda'")
    return fn(*inputs) if out is None else fn(*inputs, out=out)


def array_function(xp, func, args, kwargs):
    name = func.__name__
    fn = _lookup(xp, name) if getattr(np, name, None) is func else None
    if fn is not None and fn is not func:
        return fn(*args, **kwargs)
    try:
        return func._implementation(*args, **kwargs)
    except TypeError as exc:
        if _HOST_COPY in str(exc):
            raise _unsupported(name) from exc
        raise
