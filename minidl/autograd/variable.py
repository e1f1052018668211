"""``Variable``: the wrapper that, before PyTorch 0.4, carried a tensor's autograd state.

Tensors carry that state themselves now, so ``Variable(t, requires_grad=...)`` only makes a
new leaf Tensor sharing ``t``'s memory (``t.detach()``, then ``requires_grad_``) and
``isinstance(t, Variable)`` holds for every Tensor, as in PyTorch, so old code that builds or
checks Variables keeps running.
"""
import warnings

from . import op_function


class VariableMeta(type):
    def __instancecheck__(cls, other):
        return isinstance(other, op_function.Tensor)


class Variable(metaclass=VariableMeta):
    """``Variable(data, requires_grad=False)``: a Tensor, a detached alias of ``data``.

    ``volatile`` is accepted and ignored with PyTorch's warning (no_grad replaced it)."""

    def __new__(cls, data=None, requires_grad=False, volatile=False):
        Tensor = op_function.Tensor
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with minidl.no_grad():` instead.",
                          stacklevel=2)
        if data is None:
            from .. import empty
            return empty(0).requires_grad_(bool(requires_grad))
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        return data.detach().requires_grad_(bool(requires_grad))
