"""In-place methods (``add_``, ``x += y``, ``fill_``, ``x[i] = v``...), as in PyTorch.

Each one computes its result with the ordinary out-of-place op, then writes the values
into the tensor's own memory (so every view of it sees them) and bumps its version
counter (so a node that saved those values refuses to backpropagate; see
autograd/versions.py). When the op is recorded in the graph, the tensor takes the
result's history ("rebasing"): its gradient now flows through the op to the tensor's old
history, which the op's node reached through the edges it took when it was built.

The rules, PyTorch's:
- in grad mode, a leaf that requires grad may not be written in place (the write would
  be invisible to its gradient); under ``no_grad`` it may (``p -= lr * p.grad``);
- the result must keep the tensor's shape (no broadcasting the tensor itself up) and be
  castable to its dtype (float into an integer tensor is refused);
- a recorded write through a view also rewrites the history of the tensor it views
  (PyTorch's CopySlices; see autograd/views.py), and views of a tensor written in place
  renew their history from it before they are next used.

When the op is recorded, it reads a copy of the old values: the node may save them for its
backward, and the write is about to overwrite the memory they live in.
"""
import numbers
import warnings

import numpy as np

from ..autograd import op_function, grad_mode, versions, views
from .deprecated_overloads import value_first
from .dtype import check_floating
from .inplace_overlap import check_no_overlap, element_addresses, masked_scatter_order
from .scalar_fit import fit


def _tensor_args(args):
    return [a for a in args if isinstance(a, op_function.Tensor)]


def apply_inplace(t, name, compute, *args, write=None, overlap="partial"):
    """Write ``compute(old)`` into t; ``args`` are the op's other operands. ``write(memory, result)``,
    when given, writes only the part of the result the op changed (an index assignment: in a tensor
    whose elements share memory, an unfold's windows, writing the whole result back would put the
    old value of one alias over the new value of another). ``overlap`` judges the operands over t's
    memory: "partial" is copy_'s rule (``check_no_partial_overlap``); an indexed write passes a
    stricter ``overlap(memory, operand, name)`` (inplace_overlap.py), or None to judge nothing."""
    Tensor = op_function.Tensor
    others = _tensor_args(args)
    views.current(t)              # a view whose base was written since: its history first
    record = grad_mode._state.enabled and (t._requires_grad or any(o._requires_grad for o in others))
    data = t._data
    if type(data) is np.ndarray and not data.flags.writeable:
        if any(s == 0 and n > 1 for n, s in zip(data.shape, data.strides)):
            raise RuntimeError(_INTERNAL_OVERLAP + f" ({name}: an expanded tensor's memory is read-only)")
        raise RuntimeError(f"{name}: the tensor's memory is read-only (a read-only array); clone() it before "
                           "writing to it in place")
    for o in others:              # an operand over the same memory (a view, detach())
        if o._version_counter is not t._version_counter or overlap is None:
            continue
        if overlap != "partial":
            overlap(data, o._data, name)
        elif o._data is not data:     # (t itself is read before it is written)
            check_no_partial_overlap(data, o._data, name, write)
    through_view = record and t._base is not None
    if record:
        _check_recordable(t, name)
        old = Tensor._wrap(data.copy(), t._node, t._out_index)
        old._requires_grad = t._requires_grad
    else:
        old = t
    result = compute(old)
    if result.shape != t.shape:
        raise RuntimeError(f"{name}: output with shape {list(t.shape)} doesn't match the broadcast shape "
                           f"{list(result.shape)}")
    have, want = result._data.dtype, data.dtype
    if have != want:
        if not np.can_cast(have, want, "same_kind"):
            raise RuntimeError(f"{name}: result type {have} can't be cast to the desired output type {want}")
        result = result.to(t.dtype)
    pos = views.write_through_view(t, result) if through_view and result._node is not None else None
    if write is None:
        t._data[...] = result._data
    else:
        write(t._data, result._data)
    versions.bump(t._version_counter)
    if pos is not None:
        views.adopt_view_history(t, pos)
    elif result._node is not None:
        old_node, old_index = t._node, t._out_index
        t._node, t._out_index, t._requires_grad = result._node, result._out_index, True
        if old_node is not None:
            views.move_retained(t, old_node, old_index)
    return t


def maybe_inplace(t, inplace, name, compute):
    """``compute(t)``; with ``inplace`` (the ``inplace=True`` of PyTorch's activations and dropout)
    the result is written into t, which is returned, under the rules of every in-place write."""
    return apply_inplace(t, name, compute) if inplace else compute(t)


def check_leaf(t, name):
    """The check every in-place write makes, also those that compute nothing (``zero_``)."""
    if grad_mode._state.enabled and t._requires_grad and t._node is None:
        raise RuntimeError(f"a leaf Variable that requires grad is being used in an in-place operation. "
                           f"({name}; to change a parameter's values, do it under md.no_grad())")


def _check_recordable(t, name):
    check_leaf(t, name)
    base = t._base
    if base is not None and base._requires_grad and base._node is None:
        raise RuntimeError(f"a view of a leaf Variable that requires grad is being used in an in-place "
                           f"operation. ({name})")
    if base is not None and t._node is not None:
        _check_not_identity_view(t, name)


def _check_not_identity_view(t, name):
    """An identity Function that returns its input's memory as its output (the nodes around a
    module with full backward hooks, whose backward runs the hooks) says so with a class attribute
    ``returns_input_view``, the name PyTorch gives it. Its outputs are views; writing into one, or
    into a view of one, would route the gradient around that node, so the hooks would never run:
    refused, as PyTorch refuses it. (Only views are looked at: such an output always is one.)"""
    node = t._node
    label = getattr(type(node), "returns_input_view", None)
    if label is None:             # a view of such an output: the node it was taken from
        inputs = node.__dict__.get("inputs") or ()
        viewed = inputs[0] if inputs else None
        if viewed is None or viewed._node is None or viewed._base is None:
            return
        label = getattr(type(viewed._node), "returns_input_view", None)
        if label is None:
            return
        label = node.name().removesuffix("Backward0").removesuffix("Backward")
    raise RuntimeError(
        f"Output {t._out_index} of {label} is a view and is being modified inplace ({name}). This view was created "
        "inside a custom Function (or because an input was returned as-is) and the autograd logic to handle "
        "view+inplace would override the custom backward associated with the custom Function, leading to "
        "incorrect gradients. This behavior is forbidden. You can fix this by cloning the output of the custom "
        "Function.")


_INTERNAL_OVERLAP = ("unsupported operation: more than one element of the written-to tensor refers to a single "
                     "memory location. Please clone() the tensor before performing the operation.")
_PARTIAL_OVERLAP = ("unsupported operation: some elements of the input tensor and the written-to tensor refer to a "
                    "single memory location. Please clone() the tensor before performing the operation.")


def check_no_partial_overlap(dest, src, name, write=None):
    """Raise PyTorch's error when the operand ``src`` and the memory the op writes (all of
    ``dest``, or the part ``write`` changes) share some elements without being the same elements
    in the same order. The op computes as if src had been cloned first, but PyTorch reads src while
    it writes, so its result would depend on the order of its loop: it refuses. The same elements
    (``x.add_(x)``, ``x[1:] = x[1:]``) are fine: each is read before it is written. Only ndarrays
    are compared (device arrays are left to the device)."""
    if type(dest) is not np.ndarray or type(src) is not np.ndarray or dest.size == 0 or src.size == 0:
        return
    if not np.may_share_memory(dest, src):
        return                    # their bounds are apart
    written = element_addresses(dest)
    if write is not None:         # an index assignment: the addresses at the positions it sets
        marks = np.full(dest.shape, -1, dtype=np.int64)
        write(marks, written)
        written = marks[marks >= 0]
    read = element_addresses(src).ravel()
    written = written.ravel()
    if written.size == read.size and np.array_equal(written, read):
        return
    if np.intersect1d(written, read, assume_unique=False).size:
        raise RuntimeError(_PARTIAL_OVERLAP + f" ({name})")


def _alpha_first(name, other, alpha):
    """(other, alpha) of PyTorch's deprecated overload ``add_(Number alpha, Tensor other)``
    (older training scripts step with ``p.data.add_(-lr, p.grad)``), which PyTorch still runs
    with a warning; any other call passes through unchanged."""
    if isinstance(other, numbers.Number) and isinstance(alpha, op_function.Tensor):
        warnings.warn(f"This overload of {name} is deprecated:\n\t{name}(Number alpha, Tensor other)\n"
                      f"Consider using one of the following signatures instead:\n"
                      f"\t{name}(Tensor other, *, Number alpha = 1)", UserWarning, stacklevel=3)
        return alpha, other
    return other, alpha


class InplaceMethods:
    """The in-place methods of Tensor (a mixin, so that tensor.py stays about routing)."""

    __slots__ = ()

    # arithmetic ----------------------------------------------------------------------------
    def add_(self, other, alpha=1):
        other, alpha = _alpha_first("add_", other, alpha)
        return apply_inplace(self, "add_", lambda s: s.add(other, alpha=alpha), other)

    def sub_(self, other, alpha=1):
        other, alpha = _alpha_first("sub_", other, alpha)
        return apply_inplace(self, "sub_", lambda s: s.sub(other, alpha=alpha), other)

    def mul_(self, other):
        return apply_inplace(self, "mul_", lambda s: s * other, other)

    def div_(self, other, *, rounding_mode=None):
        return apply_inplace(self, "div_", lambda s: s.div(other, rounding_mode=rounding_mode), other)

    def floor_divide_(self, other):
        return apply_inplace(self, "floor_divide_", lambda s: s // other, other)

    def remainder_(self, other):
        return apply_inplace(self, "remainder_", lambda s: s % other, other)

    def fmod_(self, other):
        return apply_inplace(self, "fmod_", lambda s: s.fmod(other), other)

    def addcmul_(self, tensor1, tensor2, *value_first_form, value=1):
        tensor1, tensor2, value = value_first("addcmul_", "", tensor1, tensor2, value_first_form, value)
        return apply_inplace(self, "addcmul_", lambda s: s.addcmul(tensor1, tensor2, value=value), tensor1, tensor2)

    def addcdiv_(self, tensor1, tensor2, *value_first_form, value=1):
        tensor1, tensor2, value = value_first("addcdiv_", "", tensor1, tensor2, value_first_form, value)
        return apply_inplace(self, "addcdiv_", lambda s: s.addcdiv(tensor1, tensor2, value=value), tensor1, tensor2)

    def lerp_(self, end, weight):
        return apply_inplace(self, "lerp_", lambda s: s.lerp(end, weight), end, weight)

    def pow_(self, exponent):
        return apply_inplace(self, "pow_", lambda s: s ** exponent, exponent)

    def neg_(self):
        return apply_inplace(self, "neg_", lambda s: -s)

    def clamp_(self, min=None, max=None):
        return apply_inplace(self, "clamp_", lambda s: s.clamp(min, max), min, max)

    def clamp_min_(self, min):
        return apply_inplace(self, "clamp_min_", lambda s: s.clamp(min, None), min)

    def clamp_max_(self, max):
        return apply_inplace(self, "clamp_max_", lambda s: s.clamp(None, max), max)

    def masked_fill_(self, mask, value):
        return apply_inplace(self, "masked_fill_", lambda s: s.masked_fill(mask, value))

    __iadd__ = add_
    __isub__ = sub_
    __imul__ = mul_
    __itruediv__ = div_
    __ifloordiv__ = floor_divide_
    __imod__ = remainder_
    __ipow__ = pow_

    # writing at indexed positions (ops/scatter.py) -----------------------------------------
    # (an operand, index included, sharing memory with self is refused: inplace_overlap.py)
    def index_add_(self, dim, index, source, *, alpha=1):
        from ..ops.scatter import index_add
        return apply_inplace(self, "index_add_", lambda s: index_add(s, dim, index, source, alpha=alpha), source,
                             index, overlap=check_no_overlap)

    def index_fill_(self, dim, index, value):
        """(A Tensor value is read as its number first, so it may share self's memory.)"""
        from ..ops.scatter import index_fill
        return apply_inplace(self, "index_fill_", lambda s: index_fill(s, dim, index, value), value, overlap=None)

    def scatter_(self, dim, index, src=None, value=None, *, reduce=None):
        from ..ops.scatter import scatter
        return apply_inplace(self, "scatter_", lambda s: scatter(s, dim, index, src, value, reduce=reduce), src,
                             index, overlap=check_no_overlap)

    def scatter_add_(self, dim, index, src):
        from ..ops.scatter import scatter_add
        return apply_inplace(self, "scatter_add_", lambda s: scatter_add(s, dim, index, src), src, index,
                             overlap=check_no_overlap)

    def scatter_reduce_(self, dim, index, src, reduce, *, include_self=True):
        from ..ops.scatter_reduce import scatter_reduce
        return apply_inplace(self, "scatter_reduce_",
                             lambda s: scatter_reduce(s, dim, index, src, reduce, include_self=include_self), src,
                             index, overlap=check_no_overlap)

    def index_copy_(self, dim, index, source):
        from .._namespace_arrange import index_copy
        return apply_inplace(self, "index_copy_", lambda s: index_copy(s, dim, index, source), source, index,
                             overlap=check_no_overlap)

    def masked_scatter_(self, mask, source):
        """Nothing is refused; a contiguous source over self's memory is read as it is written
        (``masked_scatter_order``), as PyTorch's CPU kernel reads it."""
        from .._namespace_arrange import masked_scatter

        def compute(s):
            order = masked_scatter_order(self._data, getattr(mask, "_data", mask), getattr(source, "_data", None))
            return masked_scatter(s, mask, source if order is None else source.reshape(-1)[order])
        return apply_inplace(self, "masked_scatter_", compute, source, overlap=None)

    def put_(self, index, source, accumulate=False):
        from .._namespace_arrange import put
        return apply_inplace(self, "put_", lambda s: put(s, index, source, accumulate), source, index,
                             overlap=check_no_overlap)

    # elementwise functions -------------------------------------------------------------------
    def exp_(self):
        return apply_inplace(self, "exp_", lambda s: s.exp())

    def log_(self):
        return apply_inplace(self, "log_", lambda s: s.log())

    def sqrt_(self):
        return apply_inplace(self, "sqrt_", lambda s: s.sqrt())

    def tanh_(self):
        return apply_inplace(self, "tanh_", lambda s: s.tanh())

    def sigmoid_(self):
        return apply_inplace(self, "sigmoid_", lambda s: s.sigmoid())

    def relu_(self):
        return apply_inplace(self, "relu_", lambda s: s.relu())

    # overwriting -----------------------------------------------------------------------------
    def fill_(self, value):
        from ..ops.overwrite import overwrite
        if hasattr(value, "numel") and value.numel() != 1:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with "
                               f"{value.ndim} dimensions")
        value = fit(value, self.dtype)
        return apply_inplace(self, "fill_", lambda s: overwrite(s, value.reshape(()) if hasattr(value, "numel")
                                                               else value), value)

    def zero_(self):
        return self.fill_(0)

    def copy_(self, src, non_blocking=False):
        """Write ``src`` (broadcast, cast to this dtype) into this tensor. ``non_blocking`` is
        PyTorch's overlap of a host-device copy with compute; every copy here completes before
        the call returns, so it changes nothing."""
        from ..ops.overwrite import overwrite
        Tensor = op_function.Tensor
        src_shape = src.shape if isinstance(src, Tensor) else np.shape(src)
        try:
            ok = np.broadcast_shapes(src_shape, self.shape) == self.shape
        except ValueError:
            ok = False
        if not ok:
            raise RuntimeError(f"copy_: the source of shape {list(src_shape)} does not broadcast to the "
                               f"destination's shape {list(self.shape)}")
        if isinstance(src, Tensor) and src.device != self.device:
            src = src.to(self.device)
        return apply_inplace(self, "copy_", lambda s: overwrite(s, src), src)

    def _overwrite_host(self, name, values):
        from ..ops.overwrite import overwrite
        return apply_inplace(self, name, lambda s: overwrite(s, values))

    def uniform_(self, a=0.0, b=1.0):
        from .. import random
        check_leaf(self, "uniform_")
        check_floating("uniform_", self.dtype, "tensor")   # not a truncation of the draws to integers
        if not a <= b:   # NumPy: "high - low < 0"
            raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={a} > to={b}")
        return self._overwrite_host("uniform_", random.generator().uniform(a, b, self.shape))

    def normal_(self, mean=0.0, std=1.0):
        from .. import random
        check_leaf(self, "normal_")
        check_floating("normal_", self.dtype, "tensor")
        if not std >= 0:   # NumPy: "scale < 0"
            raise RuntimeError(f"normal_ expects std >= 0.0, but found std {std}")
        return self._overwrite_host("normal_", random.generator().normal(mean, std, self.shape))

    def exponential_(self, lambd=1.0):
        """Draws of Exp(lambd): density lambd e**(-lambd x) on x >= 0."""
        from .. import random
        self._check_draw("exponential_")
        if not lambd > 0:
            raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
        return self._overwrite_host("exponential_", random.generator().exponential(1.0 / lambd, self.shape))

    def geometric_(self, p):
        """Draws of the number of Bernoulli(p) trials up to the first success (1, 2, ...)."""
        from .. import random
        check_leaf(self, "geometric_")
        if not 0 < p < 1:
            raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
        return self._overwrite_host("geometric_", random.generator().geometric(p, self.shape))

    def log_normal_(self, mean=1.0, std=2.0):
        """Draws of e**N(mean, std**2)."""
        from .. import random
        self._check_draw("log_normal_")
        if not std > 0:
            raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
        return self._overwrite_host("log_normal_", random.generator().lognormal(mean, std, self.shape))

    def cauchy_(self, median=0.0, sigma=1.0):
        """Draws of the Cauchy distribution: median + sigma tan(pi (U - 1/2))."""
        from .. import random
        self._check_draw("cauchy_")
        if not sigma > 0:
            raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
        return self._overwrite_host("cauchy_", median + sigma * random.generator().standard_cauchy(self.shape))

    def random_(self, from_=0, to=None):
        """Integers drawn uniformly from [from_, to); ``random_(to)`` is [0, to); without bounds,
        [0, 2**mantissa bits] for a float dtype (so every value is exact) or the integer dtype's
        range."""
        from .. import random
        check_leaf(self, "random_")
        if to is None and from_ != 0:
            from_, to = 0, from_
        if to is None:
            dt = np.dtype(self._data.dtype)
            if dt.kind == "b":
                to = 2
            elif dt.kind in "iu":
                to = int(np.iinfo(dt).max) + 1
            else:
                to = 2 ** (np.finfo(dt).nmant + 1) + 1 if dt.kind == "f" else 2 ** 8 + 1
        if not from_ < to:
            raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={from_} >= to={to}")
        return self._overwrite_host("random_", random.generator().integers(from_, to, self.shape))

    def _check_draw(self, name):
        check_leaf(self, name)
        check_floating(name, self.dtype, "tensor")

    def fill_diagonal_(self, fill_value, wrap=False):
        """The main diagonal (all indices equal) set to fill_value; a tall matrix with ``wrap``
        starts again every N + 1 rows, as numpy.fill_diagonal."""
        if self.ndim < 2:
            raise RuntimeError("dimensions must larger than 1")
        if self.ndim > 2 and len(set(self.shape)) != 1:
            raise RuntimeError("all dimensions of input must be of equal length")

        def fill(s):
            mask = np.zeros(s.shape, bool)
            np.fill_diagonal(mask, True, wrap=wrap)
            from ..ops.indexing import masked_fill
            from .factories import tensor
            return masked_fill(s, tensor(mask, device=s.device), fill_value)   # the mask where s lives
        return apply_inplace(self, "fill_diagonal_", fill)

    def bernoulli_(self, p=0.5):
        from .. import random
        check_leaf(self, "bernoulli_")
        p = p.numpy(force=True) if hasattr(p, "numpy") else p
        return self._overwrite_host("bernoulli_", random.generator().random(self.shape) < p)


# PyTorch's in-place form ``f_`` of each of these functions writes ``f``'s result into the tensor
INPLACE_FORMS = (
    "abs", "ceil", "floor", "round", "trunc", "sign", "cos", "sin", "tan", "erf", "expm1", "log1p", "log2", "log10",
    "reciprocal", "rsqrt", "square", "nan_to_num", "cumsum", "cumprod", "clip", "tril", "triu", "addmm", "addbmm",
    "baddbmm", "addmv", "addr", "eq", "ne", "lt", "le", "gt", "ge", "not_equal", "greater", "greater_equal", "less",
    "less_equal", "logical_and", "logical_or", "logical_xor", "logical_not", "bitwise_and", "bitwise_or",
    "bitwise_xor", "bitwise_not", "bitwise_left_shift", "bitwise_right_shift", "divide", "multiply", "subtract",
    "true_divide", "renorm", "index_reduce", "fmod", "remainder", "floor_divide", "lerp", "hypot", "atan2", "xlogy",
    "copysign", "frac", "fix", "sgn", "logit", "sinh", "cosh", "asin", "acos", "atan", "asinh", "acosh", "atanh",
    "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "arctan2", "exp2", "erfc", "erfinv", "sinc",
    "deg2rad", "rad2deg", "lgamma", "digamma", "negative", "float_power", "heaviside", "ldexp", "i0",
)


def _inplace_form(name):
    overlap = check_no_overlap if name == "index_reduce" else "partial"   # an indexed write

    def method(self, *args, **kwargs):
        return apply_inplace(self, name + "_", lambda s: getattr(s, name)(*args, **kwargs), *args, *kwargs.values(),
                             overlap=overlap)
    method.__name__ = method.__qualname__ = name + "_"
    method.__doc__ = f"``t.{name}_(...)`` writes ``t.{name}(...)`` into t."
    return method


def install_inplace_forms(cls):
    """Give ``cls`` the in-place form of every function of INPLACE_FORMS it has, where it has none
    written out."""
    for name in INPLACE_FORMS:
        if hasattr(cls, name) and not hasattr(cls, name + "_"):
            setattr(cls, name + "_", _inplace_form(name))
