"""``torch.autograd.function`` for minidl: the names a ported script imports from it.

``Function`` (the Tensor-level custom op a user subclasses), ``FunctionCtx`` (what its ``ctx``
offers), ``FunctionMeta`` (the class of every Function: it gives each one its node class),
``BackwardCFunction`` (the base of those node classes, ``<Name>Backward``) and
``once_differentiable`` are defined in custom_function.py; ``minidl.autograd.Function`` is this
module's ``Function``. minidl's own ops subclass another base, which runs forward and backward on
arrays: op_function.py.

``InplaceFunction`` and ``NestedIOFunction`` are PyTorch's two legacy subclasses, kept so that code
naming them imports and subclasses as it does there. InplaceFunction only adds an ``inplace`` flag
to an instance (which PyTorch deprecates creating). NestedIOFunction's legacy protocol (an instance
called on nested inputs) no longer runs in PyTorch itself; here calling an instance raises the
legacy-Function error, as it does for any Function.
"""
from .custom_function import BackwardCFunction, Function, FunctionCtx, FunctionMeta, once_differentiable

__all__ = ["FunctionCtx", "BackwardCFunction", "FunctionMeta", "Function", "once_differentiable",
           "InplaceFunction", "NestedIOFunction"]


class InplaceFunction(Function):
    """A Function with an ``inplace`` flag set when an instance is made (PyTorch's legacy class)."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace


class NestedIOFunction(Function):
    """PyTorch's legacy Function whose forward and backward take nested inputs, as instance methods
    ``forward_extended`` and ``backward_extended`` (kept for imports and subclasses; see the module
    docstring)."""

    def forward_extended(self, *input):
        raise NotImplementedError

    def backward_extended(self, *grad_output):
        raise NotImplementedError
