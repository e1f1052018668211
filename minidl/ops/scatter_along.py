"""torch.scatter's write and its adjoint gather, on every device: the array-level pieces that
scatter, scatter_add and scatter_reduce (ops/scatter.py, ops/scatter_reduce.py) are built from.

With ``idx`` of the target's number of dims and an axis d, position p of idx names the target
position c(p) = p with its coordinate along d replaced by idx[p]:

    scatter_along(out, d, idx, v, how):  out[c(p)] (how)= v[p] for every p, in place; ``how`` is
        "set", "add", "multiply", "max" or "min" (nan wins, as np.maximum); repeated c(p) combine
        every v[p] ("set": one of them lands, which one unspecified)
    gather_along(a, d, idx)[p] = a[c(p)]  (take_along_axis of a cut to idx's extent off d)

On the CPU scatter_along is NumPy's unbuffered ufunc.at at scatter's coordinates; on another
device it is that device's ``scatter_along`` (cuda: backends/cuda/namespace_scan.py, with the
kernels of kernels/cuda/scatter.py: atomics, or one thread per line along d for products).
Callers check idx's range first (ops/scatter.py's ``_check_range``); the cuda kernels check it
again before they launch, since numba does no bounds checks.
"""
import numpy as np

from ..backends import namespace_of

_UFUNCS = {"add": np.add, "multiply": np.multiply, "max": np.maximum, "min": np.minimum}


def scatter_coords(dim, idx):
    """The index tuple of c(p) for every p (NumPy's advanced indexing): idx's own coordinates,
    with the coordinate along dim replaced by the index values."""
    coords = list(np.indices(idx.shape, sparse=True))
    coords[dim] = idx
    return tuple(coords)


def scatter_along(out, dim, idx, values, how):
    """out[c(p)] (how)= values[p] in place (see the module docstring); values is an array that
    broadcasts to idx's shape, or a number."""
    if type(out) is not np.ndarray:
        return namespace_of(out).scatter_along(out, dim, idx, values, how)
    coords = scatter_coords(dim, idx)
    if how == "set":
        out[coords] = values
    else:
        _UFUNCS[how].at(out, coords, np.broadcast_to(values, idx.shape))
    return out


def gather_along(a, dim, idx):
    """a[c(p)] for every position p of idx (the values scatter_along's positions hold)."""
    cut = tuple(slice(None) if k == dim else slice(0, n) for k, n in enumerate(idx.shape))
    return namespace_of(a).take_along_axis(a[cut], idx, axis=dim)
