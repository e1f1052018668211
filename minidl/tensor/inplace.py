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
import numpy as np

from ..autograd import function, grad_mode, versions, views
from .dtype import check_floating


def _tensor_args(args):
    return [a for a in args if isinstance(a, function.Tensor)]


def apply_inplace(t, name, compute, *args):
    """Write ``compute(old)`` into t; ``args`` are the op's other operands."""
    Tensor = function.Tensor
    others = _tensor_args(args)
    views.current(t)              # a view whose base was written since: its history first
    record = grad_mode._state.enabled and (t._requires_grad or any(o._requires_grad for o in others))
    data = t._data
    if type(data) is np.ndarray and not data.flags.writeable:
        raise RuntimeError(f"{name}: the tensor's memory is read-only (an expanded tensor, whose elements share "
                           "memory, or a read-only array); clone() it before writing to it in place")
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
    t._data[...] = result._data
    versions.bump(t._version_counter)
    if pos is not None:
        views.adopt_view_history(t, pos)
    elif result._node is not None:
        t._node, t._out_index, t._requires_grad = result._node, result._out_index, True
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


class InplaceMethods:
    """The in-place methods of Tensor (a mixin, so that tensor.py stays about routing)."""

    __slots__ = ()

    # arithmetic ----------------------------------------------------------------------------
    def add_(self, other, alpha=1):
        return apply_inplace(self, "add_", lambda s: s.add(other, alpha=alpha), other)

    def sub_(self, other, alpha=1):
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

    def addcmul_(self, tensor1, tensor2, *, value=1):
        return apply_inplace(self, "addcmul_", lambda s: s.addcmul(tensor1, tensor2, value=value), tensor1, tensor2)

    def addcdiv_(self, tensor1, tensor2, *, value=1):
        return apply_inplace(self, "addcdiv_", lambda s: s.addcdiv(tensor1, tensor2, value=value), tensor1, tensor2)

    def lerp_(self, end, weight):
        return apply_inplace(self, "lerp_", lambda s: s.lerp(end, weight), end, weight)

    def pow_(self, exponent):
        return apply_inplace(self, "pow_", lambda s: s ** exponent, exponent)

    def neg_(self):
        return apply_inplace(self, "neg_", lambda s: -s)

    def clamp_(self, min=None, max=None):
        return apply_inplace(self, "clamp_", lambda s: s.clamp(min, max))

    def clamp_min_(self, min):
        return apply_inplace(self, "clamp_min_", lambda s: s.clamp(min, None))

    def clamp_max_(self, max):
        return apply_inplace(self, "clamp_max_", lambda s: s.clamp(None, max))

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
    def index_add_(self, dim, index, source, *, alpha=1):
        from ..ops.scatter import index_add
        return apply_inplace(self, "index_add_", lambda s: index_add(s, dim, index, source, alpha=alpha), source)

    def index_fill_(self, dim, index, value):
        from ..ops.scatter import index_fill
        return apply_inplace(self, "index_fill_", lambda s: index_fill(s, dim, index, value), value)

    def scatter_(self, dim, index, src=None, value=None, *, reduce=None):
        from ..ops.scatter import scatter
        return apply_inplace(self, "scatter_", lambda s: scatter(s, dim, index, src, value, reduce=reduce), src)

    def scatter_add_(self, dim, index, src):
        from ..ops.scatter import scatter_add
        return apply_inplace(self, "scatter_add_", lambda s: scatter_add(s, dim, index, src), src)

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
        return apply_inplace(self, "fill_", lambda s: overwrite(s, value.reshape(()) if hasattr(value, "numel")
                                                               else value), value)

    def zero_(self):
        return self.fill_(0)

    def copy_(self, src):
        from ..ops.overwrite import overwrite
        Tensor = function.Tensor
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

    def bernoulli_(self, p=0.5):
        from .. import random
        check_leaf(self, "bernoulli_")
        p = p.numpy() if hasattr(p, "numpy") else p
        return self._overwrite_host("bernoulli_", random.generator().random(self.shape) < p)
