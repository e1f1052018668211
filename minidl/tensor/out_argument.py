"""PyTorch's ``out=`` keyword on the module-level functions: ``md.add(a, b, out=c)``.

The result is computed as without ``out``, then written into ``out``, which is returned (for the
functions that give two tensors, such as ``md.sort``, ``out`` is a pair and the named tuple of
the pair is returned). The write is an in-place write, under PyTorch's rules:

- ``out`` must be on the result's device; its dtype must take the result. Elementwise math and
  the statistics follow ``can_cast`` (any width within a category, bool < integer < floating:
  float32 into a float64 ``out``, int64 into float32, never floating into an integer); the
  matrix products, indexing ops, sorting and the ops that keep their input's dtype want the
  result's dtype exactly. ``sum``, ``prod``, ``cumsum``, ``cumprod`` and ``mean`` without a
  ``dtype`` compute in ``out``'s dtype, and the factories (``zeros``, ``arange``, ``rand``...)
  create in ``out``'s dtype and device.
- an ``out`` of another shape is resized to the result's (``resize_``); one that had elements
  warns, as PyTorch does, since PyTorch means to stop resizing them;
- its version counter is bumped, so a node that saved it refuses to backpropagate;
- nothing is recorded: with grad mode on, an input or ``out`` that requires grad is refused
  (there is no history to give ``out``); under ``md.no_grad()`` the write is allowed.

The wrapper is put around each listed function once, when the namespace is installed; a call
without ``out`` goes straight to the function. Tensor methods take no ``out``, as PyTorch's.
"""
import functools
import inspect
import warnings

import numpy as np

from ..autograd import grad_mode
from .dtype import bool_
from .tensor import Tensor

# elementwise math, comparisons and the statistics: the result is cast to out's dtype when PyTorch's can_cast allows
CAST = (
    "add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide", "floor_divide", "remainder", "fmod",
    "pow", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sigmoid", "tanh", "sin", "cos",
    "tan", "asin", "acos", "atan", "arcsin", "arccos", "arctan", "sinh", "cosh", "asinh", "acosh", "atanh",
    "arcsinh", "arccosh", "arctanh", "erf", "erfc", "erfinv", "reciprocal", "square", "atan2", "arctan2", "hypot",
    "logaddexp", "logaddexp2", "maximum", "minimum", "fmax", "fmin", "lerp", "addcmul", "addcdiv", "xlogy",
    "eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less", "less_equal", "not_equal",
    "logical_and", "logical_or", "logical_xor", "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor",
    "bitwise_not", "std", "var", "logsumexp", "outer", "ger", "max", "min",
)
# concatenations: as CAST, but PyTorch's refusal is a TypeError
CONCAT = ("cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack", "column_stack", "row_stack")
# ops whose out must have the result's dtype exactly
EXACT = (
    "abs", "absolute", "neg", "negative", "floor", "ceil", "trunc", "fix", "round", "sign", "sgn", "frac",
    "clamp", "clip", "clamp_min", "clamp_max", "where", "amax", "amin", "argmax", "argmin", "norm",
    "matmul", "mm", "bmm", "addmm", "baddbmm", "addbmm", "addmv", "addr", "mv", "dot", "vdot", "inner",
    "index_select", "gather", "masked_select", "take", "take_along_dim", "tril", "triu",
)
# reductions that compute in out's dtype when no dtype is given
REDUCE = ("sum", "prod", "cumsum", "cumprod", "mean")
# factories: created in out's dtype and device
FACTORY = ("zeros", "ones", "full", "empty", "arange", "linspace", "eye", "rand", "randn", "randint", "randperm")
# (values, indices) and the like: out is a pair, each of the result's dtype exactly
PAIR = ("sort", "topk", "kthvalue", "mode", "median", "aminmax", "frexp", "cummax", "cummin")
# these take out= only with a dim (PyTorch's sum(x), prod(x) and median(x) have no out)
_NEEDS_DIM = ("sum", "prod", "median")

_TYPE_META = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
              "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
              "uint8": "unsigned char", "bool": "bool"}

_RESIZED = ("An output with one or more elements was resized since it had shape {have}, which does not match the "
            "required output shape {want}. This behavior is deprecated, and in a future PyTorch release outputs "
            "will not be resized unless they have zero elements. You can explicitly reuse an out tensor t by "
            "resizing it, inplace, to zero elements with t.resize_(0).")


def _scalar_type(dtype):
    """PyTorch's ScalarType name ("Float", "Long") of a dtype, as its messages spell it."""
    from .dtype import LEGACY_TYPE_NAMES, name_of
    name = name_of(dtype)
    return LEGACY_TYPE_NAMES.get(name, name)


def _can_cast(have, want):
    from .. import _namespace_arrange
    return _namespace_arrange.can_cast(have, want)


def _tensors(values):
    for v in values:
        if isinstance(v, Tensor):
            yield v
        elif isinstance(v, (list, tuple)):
            yield from _tensors(v)


def _check_out_type(name, out):
    outs = out if isinstance(out, (tuple, list)) else (out,)
    for o in outs:
        if not isinstance(o, Tensor):
            what = "tuple of Tensors" if isinstance(out, (tuple, list)) else "Tensor"
            raise TypeError(f"{name}(): argument 'out' must be {what}, not {type(o).__name__}")
    return outs


def _check_autograd(name, args, kwargs, outs):
    if grad_mode.is_grad_enabled() and any(t.requires_grad for t in
                                           (*_tensors(args), *_tensors(kwargs.values()), *outs)):
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic differentiation, "
                           "but one of the arguments requires grad.")


def _check_dtype(name, rule, have, want):
    if have == want:
        return
    if rule in ("cast", "concat") and _can_cast(have, want):
        return
    if rule == "concat":
        raise TypeError(f"{name}(): input types can't be cast to the desired output type {_scalar_type(want)}")
    if rule == "cast":
        raise RuntimeError(f"result type {_scalar_type(have)} can't be cast to the desired output type "
                           f"{_scalar_type(want)}")
    raise RuntimeError(f"Expected out tensor to have dtype {_TYPE_META.get(have.name, have.name)}, but got "
                       f"{_TYPE_META.get(want.name, want.name)} instead")


def _resize(out, shape):
    """Give ``out`` the shape ``shape``: resize_ on the host (a leaf that requires grad may be
    resized under no_grad, as PyTorch's out= allows); fresh memory on a device."""
    if type(out._data) is np.ndarray:
        requires_grad, out._requires_grad = out._requires_grad, False
        try:
            out.resize_(shape)
        finally:
            out._requires_grad = requires_grad
    else:
        from ..backends import namespace_of
        from ..autograd import versions
        out._data = namespace_of(out._data).empty(shape, dtype=out._data.dtype)
        versions.bump(out._version_counter)


def _write(name, out, result, rule, warn=True):
    if out.device != result.device:
        raise RuntimeError(f"{name}(): Expected out tensor to have device {result.device}, but got {out.device} "
                           "instead")
    _check_dtype(name, rule, result.dtype, out.dtype)
    shape = tuple(result.shape)
    if tuple(out.shape) != shape:
        if warn and out.numel():
            warnings.warn(_RESIZED.format(have=list(out.shape), want=list(shape)), UserWarning, stacklevel=3)
        _resize(out, shape)
    if np.may_share_memory(out._data, result._data) if type(out._data) is np.ndarray else out._data is result._data:
        result = result.clone()   # the result is out's own memory (a view of an input that out also is)
    with grad_mode.no_grad():
        out.copy_(result)
    return out


def _call_factory(name, fn, args, kwargs, out):
    dtype = kwargs.pop("dtype", None)
    if dtype is not None and dtype != out.dtype:
        raise RuntimeError(f"dtype {_scalar_type(dtype)} does not match dtype of out parameter "
                           f"({_scalar_type(out.dtype)})")
    requires_grad = kwargs.pop("requires_grad", False)
    result = fn(*args, dtype=out.dtype, device=kwargs.pop("device", out.device), **kwargs)
    if name == "arange" and out.numel() and out.numel() != result.numel():
        warnings.warn(f"The number of elements in the out tensor of shape {list(out.shape)} is {out.numel()} which "
                      f"does not match the computed number of elements {result.numel()}. Note that this may occur "
                      f"as a result of rounding error. The out tensor will be resized to a tensor of shape "
                      f"({result.numel()},).", UserWarning, stacklevel=3)
    _write(name, out, result, "exact", warn=False)
    if requires_grad:
        out.requires_grad_(True)
    return out


def _compute(name, rule, fn, args, kwargs, out):
    """The result, and the rule its dtype is checked by. A reduction given no dtype computes in
    out's (mean only in a floating one; PyTorch's cumulative sums have no bool kernel); given
    one, out must have it."""
    if rule == "reduce":
        if kwargs.get("dtype") is not None:
            return fn(*args, **kwargs), "exact"
        if isinstance(out, Tensor) and (name != "mean" or out.dtype.is_floating_point):
            if name in ("cumsum", "cumprod") and out.dtype == bool_:
                raise NotImplementedError(f"{name}: not implemented for an out of dtype bool")
            return fn(*args, **kwargs, dtype=out.dtype), "exact"
        return fn(*args, **kwargs), "cast"
    return fn(*args, **kwargs), rule


def with_out(name, fn, rule):
    """``fn`` taking PyTorch's ``out=`` keyword; ``rule`` says which dtypes ``out`` may have
    ("cast", "concat", "exact", "reduce", "factory", "pair")."""
    @functools.wraps(fn)
    def wrapper(*args, out=None, **kwargs):
        if out is None:
            return fn(*args, **kwargs)
        outs = _check_out_type(name, out)
        _check_autograd(name, args, kwargs, outs)
        if rule == "factory":
            if isinstance(out, (tuple, list)):
                raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
            return _call_factory(name, fn, args, kwargs, out)
        if name in _NEEDS_DIM and len(args) < 2 and not {"dim", "axis"} & kwargs.keys():
            raise TypeError(f"{name}(): out= is taken only with dim")
        result, check = _compute(name, rule, fn, args, kwargs, out)
        if isinstance(result, tuple):
            if not isinstance(out, (tuple, list)):
                raise TypeError(f"{name}(): argument 'out' must be tuple of Tensors, not {type(out).__name__}")
            if len(out) != len(result):
                raise TypeError(f"{name}(): expected tuple of {len(result)} elements but got {len(out)}")
            written = []
            for o, r in zip(out, result):   # a loop, not a comprehension: the warning's stacklevel
                written.append(_write(name, o, r, "exact"))
            return type(result)(*written) if hasattr(result, "_fields") else tuple(written)
        if isinstance(out, (tuple, list)):
            raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
        return _write(name, out, result, check)

    try:
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())
        at = next((i for i, p in enumerate(params) if p.kind is p.VAR_KEYWORD), len(params))
        params.insert(at, inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None))
        wrapper.__signature__ = sig.replace(parameters=params)
    except (TypeError, ValueError):   # a signature inspect cannot read: the wrapped one stands
        pass
    return wrapper


_RULES = {**{n: "cast" for n in CAST}, **{n: "concat" for n in CONCAT}, **{n: "exact" for n in EXACT},
          **{n: "reduce" for n in REDUCE}, **{n: "factory" for n in FACTORY}, **{n: "pair" for n in PAIR}}


def install_out_argument(module_globals):
    """Give the listed functions of minidl's namespace PyTorch's ``out=`` keyword."""
    for name, rule in _RULES.items():
        if name in module_globals:
            module_globals[name] = with_out(name, module_globals[name], rule)
