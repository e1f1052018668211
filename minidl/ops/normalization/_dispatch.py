"""The normalization family's switch, and what every norm Function shares.

Every norm has one array-level forward/backward signature implemented three times: a readable,
array-namespace reference (``<norm>_forward_reference`` / ``<norm>_backward_reference`` in its
file, running on any device), the CPU's Numba kernels (``minidl.kernels.cpu.<norm>``) and the
cuda kernels (``minidl.kernels.cuda.<norm>``). A Function selects one in forward
(``ctx.impl = <NORM>.select(x)``, the rule of minidl.kernels.switch), owns ``ctx`` (what is saved
is decided here, in minidl/ops, for every device) and calls the same implementation in backward.
"""
from ...backends import namespace_of
from ...kernels.switch import NORM, into  # noqa: F401  (into: for the norms' references)

NORMS = NORM
IMPLEMENTATIONS = NORM.choices
set_implementation, get_implementation, implementation, use_kernel = NORM.set, NORM.get, NORM.use, NORM.use_kernel


def affine_meta(*params):
    """(shape, dtype) of each affine parameter (None where absent), for ``param_grads``."""
    return tuple(None if p is None else (p.shape, p.dtype) for p in params)


def param_grad(g, shape, dtype):
    """A sum over rows (the kernel's accumulator dtype, or a scalar) as a fresh array of the
    parameter's shape and dtype (fresh and unshared, so the engine can keep it as .grad without
    a defensive copy)."""
    return namespace_of(g).asarray(g).reshape(shape).astype(dtype)


def param_grads(meta, needs, grads):
    """``param_grad`` of each needed gradient, None for the others (``meta`` from affine_meta)."""
    return tuple(param_grad(g, *m) if need else None for m, need, g in zip(meta, needs, grads))


def flat_param(p, d):
    """An affine parameter of the normalized shape as the (D,) vector the row kernels take."""
    return None if p is None else p.reshape(d)


def rows(x, d):
    """x as contiguous (N, D) rows of its trailing d features (N spelled out: a -1 in reshape is
    ambiguous for an empty array)."""
    return namespace_of(x).ascontiguousarray(x).reshape(x.size // d if d else 0, d)


def row_output(shape, x2):
    """An output of ``shape`` and its (N, D) view for a row kernel to write into (allocated in the
    final shape, so autograd keeps it as .grad uncopied)."""
    out = namespace_of(x2).empty(shape, x2.dtype)
    return out, out.reshape(x2.shape)
