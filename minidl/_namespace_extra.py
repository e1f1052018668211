"""More of PyTorch's tensor functions, installed by _namespace.py's tables like the rest: strided
views (narrow, unfold, diagonal, stride), elementwise log2 / reciprocal / nan_to_num, and the
functions that compose other ops (dot, broadcast_to, ravel) or give no gradient (count_nonzero,
isin, the one-argument where)."""
import numbers

import numpy as np

from .ops import cumulative as _cum
from .ops import elementwise_math as _em
from .ops import strided as _strided
from .tensor.dtype import DtypeNotImplementedError
from .tensor.tensor import Tensor


def _ops():
    from . import ops
    return ops


def _array(x):
    return x.numpy(force=True) if isinstance(x, Tensor) else np.asarray(x)


def count_nonzero(input, dim=None):
    """The number of non-zero elements over ``dim`` (all of them when None), as int64."""
    from .ops._broadcast import normalize_dims
    axes = None if dim is None else normalize_dims(dim, input.ndim, "count_nonzero")
    from ._namespace import _wrap_bool
    return _wrap_bool(np.asarray(np.count_nonzero(input.numpy(force=True), axis=axes), np.int64), input)


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """A bool tensor of ``elements``' shape: whether each is among ``test_elements`` (either may be
    a number)."""
    for name, v in (("elements", elements), ("test_elements", test_elements)):
        if not isinstance(v, (Tensor, numbers.Number)):
            raise TypeError(f"isin(): argument '{name}' must be a Tensor or a number, got {type(v).__name__}")
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin(): expected at least one of elements and test_elements to be a Tensor, got two numbers")
    out = np.isin(_array(elements), _array(test_elements), assume_unique=assume_unique, invert=invert)
    from ._namespace import _wrap_bool
    return _wrap_bool(out, elements if isinstance(elements, Tensor) else test_elements)


def broadcast_to(input, size):
    """``input.expand(size)``: a view, -1 keeping a dim's size."""
    return input.expand(*size)


def dot(input, tensor):
    """The inner product of two 1-D tensors of one size and dtype (a 0-d tensor; differentiable)."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"dot(): argument 'tensor' must be a Tensor, got {type(tensor).__name__}")
    if input.ndim != 1 or tensor.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {tensor.ndim}D tensors")
    if input.shape[0] != tensor.shape[0]:
        n, m = input.shape[0], tensor.shape[0]
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{n}] and src [{m}] to have the same number "
                           f"of elements, but got {n} and {m} elements respectively")
    if input.dtype != tensor.dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found {input.dtype} and "
                           f"{tensor.dtype}")
    from .amp.policy import outside_autocast   # torch.dot has no autocast rule: not matmul's lowering
    return outside_autocast(_ops().matmul, input, tensor)


def ravel(input):
    """The elements as one dim, in C order: a view when the layout allows, else a copy."""
    return input.reshape(-1)


def where(condition, input=None, other=None):
    """``where(condition, input, other)``: input where condition holds, else other (differentiable);
    ``where(condition)``: ``nonzero(condition, as_tuple=True)``, the indices per dim."""
    if input is None and other is None:
        from ._namespace import nonzero
        return nonzero(condition, as_tuple=True)
    if input is None or other is None:
        raise TypeError("where(): expected both input and other, or neither (where(condition) is "
                        "nonzero(condition, as_tuple=True))")
    return _ops().where(condition, input, other)


def pow(input, exponent):   # noqa: A001 (PyTorch's name)
    """``input ** exponent``, either of them a number: ``md.pow(2, t)`` is ``2 ** t``, as PyTorch's
    ``torch.pow(self: Number, exponent: Tensor)``."""
    if not isinstance(input, Tensor) and not isinstance(exponent, Tensor):
        raise TypeError(f"pow(): expected a Tensor as input or exponent, got {type(input).__name__} and "
                        f"{type(exponent).__name__}")
    return _ops().pow(input, exponent)


def round(input, *, decimals=None):   # noqa: A001 (PyTorch's name)
    """Round half to even. PyTorch has two forms: ``round(t)``, which gives integer tensors back
    unchanged, and ``round(t, decimals=n)``, floating point only, even for n = 0."""
    if decimals is None:
        return _em.round(input)
    if input.dtype.kind in "iu":
        raise DtypeNotImplementedError(f'"round" with decimals is not implemented for {input.dtype} tensors (as '
                                       f"PyTorch: floating point only); got decimals={decimals}")
    return _em.round(input, decimals)


def logsumexp(input, dim, keepdim=False):
    """log(sum(exp(input))) over ``dim``. An empty ``dim`` reduces every dim, and, as PyTorch, only
    with keepdim=True (or on a 0-d tensor): its result without keepdim has no shape to write into."""
    if isinstance(dim, (tuple, list)) and len(dim) == 0 and not keepdim and input.ndim:
        raise RuntimeError(f"logsumexp: dim=() reduces all dims, which needs keepdim=True; got a tensor of "
                           f"shape {list(input.shape)} and keepdim=False")
    return _cum.logsumexp(input, dim, keepdim)


BOTH = {
    "round": round, "logsumexp": logsumexp,
    "narrow": _strided.narrow, "diagonal": _strided.diagonal, "log2": _em.log2, "reciprocal": _em.reciprocal,
    "nan_to_num": _em.nan_to_num, "count_nonzero": count_nonzero, "isin": isin, "broadcast_to": broadcast_to,
    "dot": dot, "ravel": ravel,
}

MODULE_ONLY = {"where": where, "pow": pow}

METHODS_ONLY = {"unfold": _strided.unfold, "stride": _strided.stride}
