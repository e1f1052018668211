"""``vmap``, as ``torch.func.vmap``, implemented as a loop.

PyTorch's vmap is a batching transform: it runs f once on "batched tensors" whose ops
process the whole batch. minidl has no batched tensors, so ``vmap(f)(x)`` here slices x along
its mapped dimension, calls f once per batch element, and stacks the per-element outputs
along ``out_dims``. The slicing (``select``) and the stacking are ordinary differentiable ops,
so gradients flow through vmap into the batched inputs (per-sample gradients, ensembles of
stacked parameters). The results are PyTorch's; the speed is that of a Python loop over the
batch, and f may do what a batching transform forbids (``.item()``, data-dependent branches).

Randomness follows PyTorch's modes: "error" makes a draw from the global generator inside f
raise RuntimeError; "different" lets each element draw its own numbers (the loop does that
by itself); "same" rewinds the global generator before each element, so every element sees
the numbers the first one drew.
"""
import functools

import numpy as np

from .. import backends
from .. import random as _random
from ..autograd import op_function as _op_function
from . import _pytree
from ._derivatives import RANDOM_IN_VMAP, check_randomness

__all__ = ["vmap"]


def _is_dim(x):
    return x is None or (isinstance(x, int) and not isinstance(x, bool))


def _fname(func):
    return getattr(func, "__name__", repr(func))


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """A function that maps ``func`` over a dimension of its inputs: ``vmap(f)(x)[i]`` is
    ``f(x[i])``, computed by calling f once per batch element (a loop; see the module doc).

    ``in_dims``: per positional argument, the dimension to map over, or None to pass the
    argument unchanged to every call; an int applies to every argument, and a (nested) tuple,
    list or dict mirrors the arguments' pytrees, down to where an int or None stands for a
    whole subtree. Keyword arguments are never mapped. ``out_dims``: where the batch dimension
    goes in each output, likewise (None: the output is not batched and is returned as is; an
    output that differs between elements is then an error). ``randomness``: "error",
    "different" or "same" (see the module doc). ``chunk_size`` (PyTorch: how many elements
    to process per batched call) is checked and does not change the result."""
    check_randomness(randomness)
    if chunk_size is not None and not (isinstance(chunk_size, int) and chunk_size > 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        batched, size = _batched_inputs(func, in_dims, args)
        if randomness == "error":
            with _random._draws_forbidden(RANDOM_IN_VMAP):
                results = _run(func, kwargs, batched, size, same=False)
        else:
            results = _run(func, kwargs, batched, size, same=randomness == "same")
        return _stack_outputs(func, out_dims, results, empty=size == 0)
    return wrapper


def _batched_inputs(func, in_dims, args):
    """(per leaf of the arguments' pytree: its mapped dimension or None, the batch size)."""
    where = f"vmap({_fname(func)}, in_dims={in_dims}, ...)(<inputs>)"
    if len(args) == 0:
        raise ValueError(f"vmap({_fname(func)})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you are "
                         "trying to vmap over a function with no inputs. The latter is unsupported.")
    if not (_is_dim(in_dims) or isinstance(in_dims, tuple)):
        raise ValueError(f"{where}: expected `in_dims` to be int or a (potentially nested) tuple matching the "
                         f"structure of inputs, got: {type(in_dims)}.")
    leaves, spec = _pytree.flatten(args)
    try:
        dims = _pytree.broadcast_prefix(in_dims if _is_dim(in_dims) else tuple(in_dims), args,
                                        lambda p: _pytree._children(p) is None)
    except _pytree.StructureMismatch:
        raise ValueError(f"{where}: in_dims is not compatible with the structure of `inputs`. in_dims has structure "
                         f"{_pytree.structure(in_dims)!r} but inputs has structure {spec!r}.") from None
    Tensor = _op_function.Tensor
    sizes, batched = [], []
    for x, d in zip(leaves, dims):
        if not _is_dim(d):
            raise ValueError(f"{where}: Got in_dim={d} for an input but in_dim must be either an integer dimension "
                             "or None.")
        if d is not None and not isinstance(x, Tensor):
            raise ValueError(f"{where}: Got in_dim={d} for an input but the input is of type {type(x)}. We cannot "
                             "vmap over non-Tensor arguments, please use None as the respective in_dim")
        if d is not None:
            if not -x.ndim <= d < x.ndim:
                raise ValueError(f"{where}: Got in_dim={d} for some input, but that input is a Tensor of "
                                 f"dimensionality {x.ndim} so expected in_dim to satisfy -{x.ndim} <= in_dim < "
                                 f"{x.ndim}.")
            d %= x.ndim
            sizes.append(x.shape[d])
        batched.append(d)
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if len(set(sizes)) != 1:
        raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                         f"{sizes} for the mapped dimension")
    return (leaves, spec, batched), sizes[0]


def _run(func, kwargs, batched, size, same):
    """The per-element results of f, in order (for an empty batch: [f of a zero-filled element])."""
    leaves, spec, dims = batched
    if size == 0:
        # no element to run f on; f of a zero-filled element gives the outputs' structure and shapes
        from ..tensor.factories import zeros
        sample = [x if d is None else zeros(tuple(s for i, s in enumerate(x.shape) if i != d), dtype=x.dtype,
                                             device=x.device) for x, d in zip(leaves, dims)]
        with _random.fork_rng():
            return [func(*spec.unflatten(sample), **kwargs)]
    start = _random.get_rng_state() if same else None
    results = []
    for i in range(size):
        if same:
            _random.set_rng_state(start)
        element = [x if d is None else x.select(d, i) for x, d in zip(leaves, dims)]
        results.append(func(*spec.unflatten(element), **kwargs))
    return results


def _host(t):
    return t._data if type(t._data) is np.ndarray else backends.get(t.device).to_host(t._data)


def _same(values):
    """Whether every per-element value of an output is the same (an unbatched output)."""
    first = values[0]
    Tensor = _op_function.Tensor
    for v in values[1:]:
        if isinstance(first, Tensor) != isinstance(v, Tensor):
            return False
        if isinstance(first, Tensor):
            if v is not first and (tuple(v.shape) != tuple(first.shape) or v.dtype != first.dtype
                                   or not np.array_equal(_host(v), _host(first), equal_nan=True)):
                return False
        elif not (v is first or v == first):
            return False
    return True


def _stack_outputs(func, out_dims, per_element, empty):
    from ..ops import stack
    from ..tensor.factories import zeros
    name = _fname(func)
    if not (_is_dim(out_dims) or isinstance(out_dims, (tuple, list))):
        raise ValueError(f"vmap({name}, ..., out_dims={out_dims}): `out_dims` must be an int, None or a python "
                         "collection of ints representing where in the outputs the vmapped dimension should appear.")
    flat = [_pytree.flatten(r) for r in per_element]
    leaves0, spec = flat[0]
    try:
        dims = _pytree.broadcast_prefix(out_dims, per_element[0], lambda p: _pytree._children(p) is None)
    except _pytree.StructureMismatch:
        raise ValueError(f"vmap({name}, ..., out_dims={out_dims})(<inputs>): out_dims is not compatible with the "
                         f"structure of `outputs`. out_dims has structure {_pytree.structure(out_dims)!r} but outputs "
                         f"has structure {spec!r}.") from None
    for s in flat[1:]:
        if s[1] != spec:
            raise ValueError(f"vmap({name}, ...): `{name}` returned outputs of different structures for different "
                             f"batch elements: {spec!r} and {s[1]!r}")
    Tensor = _op_function.Tensor
    out = []
    for j, (first, d) in enumerate(zip(leaves0, dims)):
        values = [leaves[j] for leaves, _ in flat]
        if not _is_dim(d):
            raise ValueError(f"vmap({name}, ..., out_dims={out_dims}): `out_dims` must be an int, None or a python "
                             "collection of ints representing where in the outputs the vmapped dimension should "
                             "appear.")
        if d is None:
            if not _same(values):
                raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor when out_dim is None")
            out.append(first)
            continue
        if not isinstance(first, Tensor) or not all(isinstance(v, Tensor) for v in values):
            bad = next(type(v) for v in values if not isinstance(v, Tensor))
            raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type {bad}. Did you mean to "
                             "set out_dims= to None for output?")
        ndim = first.ndim + 1
        if not -ndim <= d < ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], but got {d})")
        if empty:
            shape = list(first.shape)
            shape.insert(d % ndim, 0)
            out.append(zeros(tuple(shape), dtype=first.dtype, device=first.device))
        else:
            out.append(stack(values, dim=d))
    return spec.unflatten(out)
