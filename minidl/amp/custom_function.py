"""``md.amp.custom_fwd`` and ``md.amp.custom_bwd``: autocast for a user's ``autograd.Function``,
as ``torch.amp.custom_fwd`` / ``custom_bwd`` (PyTorch 2.4+).

autocast casts the arguments of the ops in its table (``policy.py``); a user's Function is not
in it, so its forward gets its Tensor arguments as they come, in whatever dtype
autocast's other ops left them. The decorators say what the Function wants instead::

    class MyMatMul(md.autograd.Function):
        @staticmethod
        @md.amp.custom_fwd(device_type="cpu", cast_inputs=md.float32)
        def forward(ctx, a, b):               # float32 Tensors, also inside an autocast region
            ctx.save_for_backward(a, b)
            return a @ b

        @staticmethod
        @md.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):                 # under the autocast state forward ran under
            a, b = ctx.saved_tensors
            return g @ b.T, a.T @ g

- ``custom_fwd(device_type=..., cast_inputs=None)``: forward runs under the autocast state of the
  call (enabled or not, and its dtype).
- ``custom_fwd(device_type=..., cast_inputs=dtype)``: inside an autocast region enabled for
  ``device_type``, forward runs with autocast disabled there and every floating-point argument of
  that device that is not float64 cast to ``dtype``: the Tensors forward receives (the arrays,
  for a Function on the array-level base of minidl's ops), and Tensors inside list, tuple or dict
  arguments (which ``apply`` passes through unchanged). Outside such a region, nothing is cast.
  The cast is not an op of the graph: as in PyTorch, the engine casts each returned gradient to
  its input's dtype (a float16 input gets its float32 gradient rounded to float16).
- ``custom_bwd(device_type=...)``: backward runs under the autocast state that forward saw,
  ``enabled`` as forward's region was (False with ``cast_inputs``, which disabled it) and in
  its dtype; without the decorator backward runs under whatever state the thread has when
  ``backward()`` is called, usually none.

The state only matters to the minidl ops called inside forward or backward (NumPy arithmetic on
arrays is never autocast).
Both decorators take the function directly or make a decorator (``custom_fwd(f, device_type=..)``
or ``@custom_fwd(device_type=..)``); ``device_type`` is keyword-only and required, as in PyTorch.
``md.cuda.amp.custom_fwd(cast_inputs=...)`` and ``md.cuda.amp.custom_bwd`` are PyTorch's
deprecated spellings for ``device_type="cuda"``: they warn (FutureWarning) and are these.
"""
import collections.abc
import functools
import warnings

from ..autograd import op_function as _op_function
from ..backends import device_of
from ..tensor import dtype as dtypes
from .autocast_mode import _check_device, autocast, get_autocast_dtype, is_autocast_enabled


def _check_device_type(device_type, who):
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    return _check_device(device_type, who)


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """Decorate a Function's static ``forward`` (see the module docstring)."""
    _check_device_type(device_type, "custom_fwd")
    if cast_inputs is not None:
        cast_inputs = dtypes.wrap(dtypes.to_dtype(cast_inputs))
        if not cast_inputs.is_floating_point:
            raise TypeError(f"custom_fwd: cast_inputs must be a floating-point dtype, got {cast_inputs}")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)
    if not callable(fwd):
        raise TypeError(f"custom_fwd: expected the forward function to decorate, got {type(fwd).__name__}")

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            ctx._fwd_used_autocast = is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        ctx._fwd_used_autocast = False
        if not is_autocast_enabled(device_type):
            return fwd(*args, **kwargs)
        with autocast(device_type=device_type, enabled=False):
            return fwd(ctx, *_cast(args[1:], device_type, cast_inputs), **_cast(kwargs, device_type, cast_inputs))
    return decorate_fwd


def custom_bwd(bwd=None, *, device_type):
    """Decorate a Function's static ``backward`` (see the module docstring): it runs under the
    autocast state its forward (decorated with ``custom_fwd``) ran under."""
    _check_device_type(device_type, "custom_bwd")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)
    if not callable(bwd):
        raise TypeError(f"custom_bwd: expected the backward function to decorate, got {type(bwd).__name__}")

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        try:
            enabled, dtype = ctx._fwd_used_autocast, ctx._dtype
        except AttributeError:
            raise AttributeError(f"custom_bwd: the forward of {type(ctx).__name__} was not decorated with "
                                 f"custom_fwd(device_type={device_type!r}), so there is no autocast state to "
                                 f"run backward under") from None
        with autocast(device_type=device_type, enabled=enabled, dtype=dtype):
            return bwd(*args, **kwargs)
    return decorate_bwd


def _eligible_dtype(dt):
    """Floating and not float64: what autocast casts (bfloat16 is NumPy kind "V")."""
    return dt is not None and dt != dtypes.float64.dtype and (dt.kind == "f" or dt == _BF16)


_BF16 = dtypes.bfloat16.dtype if dtypes.bfloat16 is not None else None


def _cast(value, device_type, dtype):
    """``value`` with its floating arrays and Tensors of ``device_type`` (not float64) cast to
    ``dtype``, looking into lists, tuples and dicts; anything else unchanged."""
    Tensor = _op_function.Tensor
    if isinstance(value, Tensor):
        ok = _eligible_dtype(value._data.dtype) and value.device.type == device_type
        return value.to(dtype) if ok and value.dtype is not dtype else value
    if isinstance(value, (str, bytes)):
        return value
    if hasattr(value, "dtype") and hasattr(value, "shape") and hasattr(value, "astype"):   # an array
        dt = getattr(value, "dtype", None)
        if getattr(value, "ndim", 0) == 0 and not hasattr(value, "__array_interface__") and \
                not hasattr(value, "__cuda_array_interface__"):
            return value          # a NumPy scalar: a number, as PyTorch leaves numbers
        if _eligible_dtype(dt) and device_of(value) == device_type and dt != dtype.dtype:
            from ..ops.low_precision import cast_array
            return cast_array(value, dtype.dtype)
        return value
    if isinstance(value, collections.abc.Mapping):
        return {_cast(k, device_type, dtype): _cast(v, device_type, dtype) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, device_type, dtype) for v in value)
    return value


def _deprecated(name):
    warnings.warn(f"`minidl.cuda.amp.{name}(args...)` is deprecated. Please use "
                  f"`minidl.amp.{name}(args..., device_type='cuda')` instead.", FutureWarning, stacklevel=3)


def cuda_custom_fwd(fwd=None, *, cast_inputs=None):
    """``md.cuda.amp.custom_fwd``: the deprecated spelling of ``custom_fwd(device_type="cuda")``."""
    _deprecated("custom_fwd")
    return custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def cuda_custom_bwd(bwd=None):
    """``md.cuda.amp.custom_bwd``: the deprecated spelling of ``custom_bwd(device_type="cuda")``."""
    _deprecated("custom_bwd")
    return custom_bwd(bwd, device_type="cuda")
