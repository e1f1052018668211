"""``md._foreach_<op>``: one op over a list of tensors, as PyTorch's multi-tensor functions.

PyTorch runs these as one fused kernel per group of tensors; EMA and optimizer code calls them
directly (``torch._foreach_lerp_(ema_params, params, 1 - decay)``, ``torch._foreach_mul_``
then ``_foreach_add_``). Here each is the loop over the tensors of the Tensor method of the
same name, so dtype promotion, broadcasting, autograd and the in-place checks (a leaf that
requires grad, a result dtype the tensor cannot hold) are that method's.

The second operand is, as in PyTorch, one number for every tensor, a list of numbers (one per
tensor), a list of tensors (paired), or a 0-d tensor; ``addcmul``/``addcdiv`` also take their
per-tensor values as a 1-D tensor. In-place forms hand back their first argument itself (the
same list, as PyTorch's bindings do); the others a tuple of new tensors.
"""
import numbers

from .tensor.tensor import Tensor


def _tensors(op, tensors, name="self"):
    if not isinstance(tensors, (list, tuple)) or not all(isinstance(t, Tensor) for t in tensors):
        got = type(tensors).__name__ if not isinstance(tensors, (list, tuple)) else \
            "a sequence holding " + ", ".join(sorted({type(t).__name__ for t in tensors}))
        raise TypeError(f"{op}(): argument '{name}' must be a list or tuple of Tensors, got {got}")
    if not tensors:
        raise RuntimeError(f"{op}(): Tensor list must have at least one tensor.")
    return tensors


def _paired(op, tensors, others, name="other"):
    _tensors(op, others, name)
    if len(others) != len(tensors):
        raise RuntimeError(f"{op}(): Tensor lists must have the same number of tensors, got {len(tensors)} "
                           f"and {len(others)}")
    return others


def _per_tensor(op, tensors, other, name="other"):
    """The second operand for each tensor: a number, a 0-d tensor, a list of numbers or of tensors."""
    n = len(tensors)
    if isinstance(other, Tensor):
        if other.ndim != 0:
            raise RuntimeError(f"{op}(): scalar tensor expected to be 0 dim but it has {other.ndim} dimensions "
                               f"and {other.numel()} elements.")
        return [other] * n
    if isinstance(other, numbers.Number):
        return [other] * n
    if isinstance(other, (list, tuple)) and other and all(isinstance(o, Tensor) for o in other):
        return _paired(op, tensors, other, name)
    if isinstance(other, (list, tuple)) and all(isinstance(o, numbers.Number) for o in other):
        if len(other) != n:
            raise RuntimeError(f"{op}(): Tensor list must have same number of elements as scalar list "
                               f"({n} tensors, {len(other)} scalars).")
        return list(other)
    raise TypeError(f"{op}(): argument '{name}' must be a number, a 0-d Tensor or a list of numbers or of "
                    f"Tensors, got {type(other).__name__}")


def _result(tensors, outs, inplace):
    return tensors if inplace else tuple(outs)


def _unary(method):
    def fn(self):
        op = f"_foreach_{method}"
        return tuple(getattr(t, method)() for t in _tensors(op, self))

    def fn_(self):
        op = f"_foreach_{method}_"
        for t in _tensors(op, self):
            getattr(t, method + "_")()
        return self
    fn.__name__ = fn.__qualname__ = f"_foreach_{method}"
    fn_.__name__ = fn_.__qualname__ = f"_foreach_{method}_"
    return fn, fn_


def _binary(name, method, with_alpha=False):
    """``name`` is PyTorch's op, ``method`` the Tensor method doing it for one tensor (maximum with a
    number is clamp_min, which also takes a tensor)."""
    def run(self, other, inplace, alpha):
        op = f"_foreach_{name}{'_' if inplace else ''}"
        _tensors(op, self)
        others = _per_tensor(op, self, other)
        if alpha != 1 and not (isinstance(other, Tensor) or all(isinstance(o, Tensor) for o in others)):
            raise TypeError(f"{op}(): alpha is taken only with Tensor operands, got a {type(other).__name__}")
        call = method + "_" if inplace else method
        kwargs = {"alpha": alpha} if with_alpha and alpha != 1 else {}
        return _result(self, [getattr(t, call)(o, **kwargs) for t, o in zip(self, others)], inplace)

    if with_alpha:
        def fn(self, other, *, alpha=1):
            return run(self, other, False, alpha)

        def fn_(self, other, *, alpha=1):
            return run(self, other, True, alpha)
    else:
        def fn(self, other):
            return run(self, other, False, 1)

        def fn_(self, other):
            return run(self, other, True, 1)
    fn.__name__ = fn.__qualname__ = f"_foreach_{name}"
    fn_.__name__ = fn_.__qualname__ = f"_foreach_{name}_"
    return fn, fn_


def _pow(self, exponent):
    """Each tensor to ``exponent`` (a number, 0-d tensor or list), or a number to each tensor."""
    if isinstance(self, numbers.Number):
        from . import _namespace_extra
        return tuple(_namespace_extra.pow(self, t) for t in _tensors("_foreach_pow", exponent, "exponent"))
    _tensors("_foreach_pow", self)
    return tuple(t.pow(e) for t, e in zip(self, _per_tensor("_foreach_pow", self, exponent, "exponent")))


def _pow_(self, exponent):
    _tensors("_foreach_pow_", self)
    for t, e in zip(self, _per_tensor("_foreach_pow_", self, exponent, "exponent")):
        t.pow_(e)
    return self


def _lerp_run(self, tensors1, weight, inplace):
    op = "_foreach_lerp_" if inplace else "_foreach_lerp"
    _tensors(op, self)
    ends = _paired(op, self, tensors1, "tensors1")
    weights = _per_tensor(op, self, weight, "weight")
    call = "lerp_" if inplace else "lerp"
    return _result(self, [getattr(t, call)(e, w) for t, e, w in zip(self, ends, weights)], inplace)


def _lerp(self, tensors1, weight):
    return _lerp_run(self, tensors1, weight, False)


def _lerp_(self, tensors1, weight):
    return _lerp_run(self, tensors1, weight, True)


def _addc(name):
    """addcmul / addcdiv: self + value * tensor1 (* or /) tensor2, value per tensor from a number,
    a list of numbers or a 1-D tensor of them."""
    def run(self, tensor1, tensor2, value, inplace):
        op = f"_foreach_{name}{'_' if inplace else ''}"
        _tensors(op, self)
        t1, t2 = _paired(op, self, tensor1, "tensor1"), _paired(op, self, tensor2, "tensor2")
        if isinstance(value, Tensor):
            if value.ndim != 1 or value.numel() != len(self):
                raise RuntimeError(f"{op}(): expected the scalars as a 1-D tensor of {len(self)} elements, got "
                                   f"shape {list(value.shape)}")
            value = value.tolist()
        values = _per_tensor(op, self, value, "scalars")
        call = name + "_" if inplace else name
        return _result(self, [getattr(t, call)(a, b, value=v) for t, a, b, v in zip(self, t1, t2, values)], inplace)

    def fn(self, tensor1, tensor2, value=1):
        return run(self, tensor1, tensor2, value, False)

    def fn_(self, tensor1, tensor2, value=1):
        return run(self, tensor1, tensor2, value, True)
    fn.__name__ = fn.__qualname__ = f"_foreach_{name}"
    fn_.__name__ = fn_.__qualname__ = f"_foreach_{name}_"
    return fn, fn_


def _copy_(self, src, non_blocking=False):
    for t, s in zip(_tensors("_foreach_copy_", self), _paired("_foreach_copy_", self, src, "src")):
        t.copy_(s, non_blocking=non_blocking)
    return self


def _zero_(self):
    for t in _tensors("_foreach_zero_", self):
        t.zero_()
    return self


def _clone(self):
    return tuple(t.clone() for t in _tensors("_foreach_clone", self))


def _norm(self, ord=2, dtype=None):
    """The vector norm of each tensor, flattened (``linalg.vector_norm``)."""
    from .linalg import vector_norm
    return tuple(vector_norm(t, ord, dtype=dtype) for t in _tensors("_foreach_norm", self))


def _max(self):
    return tuple(t.max() for t in _tensors("_foreach_max", self))


def _powsum(self, ord=2, dtype=None):
    """sum(|x|**ord) of each tensor, term by term (0**0 = 1: ord=0 counts the elements)."""
    return tuple((t if dtype is None else t.to(dtype)).abs().pow(ord).sum()
                 for t in _tensors("_foreach_powsum", self))


def _mm(self, mat2):
    return tuple(a.mm(b) for a, b in zip(_tensors("_foreach_mm", self), _paired("_foreach_mm", self, mat2, "mat2")))


_UNARY = ("abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1", "floor", "frac",
          "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal", "round", "rsqrt", "sigmoid", "sign", "sin",
          "sinh", "sqrt", "tan", "tanh", "trunc")
_BINARY = (("add", "add", True), ("sub", "sub", True), ("mul", "mul", False), ("div", "div", False),
           ("maximum", "clamp_min", False), ("minimum", "clamp_max", False), ("clamp_min", "clamp_min", False),
           ("clamp_max", "clamp_max", False))


def _table():
    table = {"_foreach_pow": _pow, "_foreach_pow_": _pow_, "_foreach_lerp": _lerp, "_foreach_lerp_": _lerp_,
             "_foreach_copy_": _copy_, "_foreach_zero_": _zero_, "_foreach_clone": _clone, "_foreach_norm": _norm,
             "_foreach_max": _max, "_foreach_powsum": _powsum, "_foreach_mm": _mm}
    for fn in [f for m in _UNARY for f in _unary(m)] + [f for b in _BINARY for f in _binary(*b)] + \
            [f for n in ("addcmul", "addcdiv") for f in _addc(n)]:
        table[fn.__name__] = fn
    return table


BOTH, METHODS_ONLY = {}, {}
MODULE_ONLY = _table()
