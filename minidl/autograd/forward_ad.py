"""``torch.autograd.forward_ad``: forward-mode AD with dual numbers. minidl does not have it.

In PyTorch a dual tensor carries a tangent next to its value, and every op computes the
tangent of its output from those of its inputs with a forward derivative formula (a JVP rule)
of its own. minidl's ops define one derivative each, the backward (a vector-Jacobian product
on arrays), and nothing else: there is no forward formula to run, so there can be no dual
tensors. Entering a dual level or making a dual tensor raises NotImplementedError.

What forward mode is used for is available by reverse mode: ``minidl.func.jvp`` and
``minidl.func.linearize`` (J t, one backward pass per output element), ``minidl.func.jacfwd``
and ``minidl.autograd.functional.jvp``.

``unpack_dual`` works: no tensor is ever dual, so it returns ``(tensor, None)``, which is what
PyTorch returns for a tensor that is not dual.
"""
from typing import NamedTuple, Optional

from . import op_function

__all__ = ["UnpackedDualTensor", "dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual"]

_WHY = ("minidl has no forward-mode AD: its ops define a backward formula (a vector-Jacobian product) and no "
        "forward one, so no op could carry a tangent. Use minidl.func.jvp, minidl.func.linearize or "
        "minidl.func.jacfwd, which compute the same products by reverse mode")


def _unsupported(what):
    return NotImplementedError(f"torch.autograd.forward_ad.{what} is not supported: {_WHY}")


class UnpackedDualTensor(NamedTuple):
    """The primal and tangent of a dual tensor, as ``unpack_dual`` returns them."""
    primal: object
    tangent: Optional[object]


def enter_dual_level():
    """Not supported: there are no dual levels without forward mode."""
    raise _unsupported("enter_dual_level")


def exit_dual_level(*, level=None):
    """Not supported: there are no dual levels without forward mode."""
    raise _unsupported("exit_dual_level")


def make_dual(tensor, tangent, *, level=None):
    """Not supported: a dual tensor needs every op to propagate its tangent (forward mode)."""
    raise _unsupported("make_dual")


def unpack_dual(tensor, *, level=None):
    """``(tensor, None)``: minidl has no dual tensors, and PyTorch unpacks a tensor that is not
    dual (at the level, or with no level entered) this way."""
    if not isinstance(tensor, op_function.Tensor):
        raise TypeError(f"unpack_dual(): argument 'tensor' must be Tensor, not {type(tensor).__name__}")
    return UnpackedDualTensor(tensor, None)


class dual_level:  # noqa: N801  (PyTorch's name)
    """Context manager for a forward-AD level; entering it raises NotImplementedError (see the
    module docstring)."""

    def __enter__(self):
        raise _unsupported("dual_level")

    def __exit__(self, *exc):
        return False
