"""F.embedding and F.embedding_bag: the lookups (``minidl.ops.embedding``, ``minidl.ops.embedding_bag``)
with PyTorch's ``max_norm`` renormalisation.

With ``max_norm``, every row of ``weight`` that ``input`` selects is first rescaled in place,
outside the graph, as ``torch.embedding_renorm_`` does:

    n = ||weight[v]||_p  (p = norm_type);   if n > max_norm:  weight[v] *= max_norm / (n + 1e-7)

so the lookup (and the gradient) then see the renormalised rows. Rows not selected, including
the padding row unless it is selected, are left as they are.
"""
from ...autograd import grad_mode, versions
from ...autograd import op_function as _op_function
from ...backends import namespace_of
from ...ops.embedding import embedding as _lookup
from ...ops.embedding_bag import embedding_bag as _bags


def _embedding_renorm_(weight, idx, max_norm, norm_type):
    """weight[v] *= max_norm / (||weight[v]||_p + 1e-7) for the selected rows v whose norm exceeds max_norm."""
    w = weight._data
    xp = namespace_of(w)
    if weight.ndim != 2 or getattr(idx, "dtype", None) is None or idx.dtype.kind not in "iu":
        return   # the lookup reports the bad weight or indices
    rows = xp.asarray(idx).reshape(-1)   # a repeated row gets the same new value from each position
    if rows.size == 0 or int(rows.min()) < 0 or int(rows.max()) >= w.shape[0]:
        return   # the lookup reports the out-of-range index
    sel = w[rows]
    p = float(norm_type)
    a = xp.abs(sel)
    if p == float("inf"):
        norms = a.max(axis=-1)
    elif p == 0:
        norms = (a != 0).sum(axis=-1).astype(w.dtype)
    else:
        norms = (a ** p).sum(axis=-1) ** (1.0 / p)
    over = norms > max_norm
    if not bool(over.any()):
        return
    scale = xp.where(over, max_norm / (norms + 1e-7), 1.0).astype(w.dtype)
    with grad_mode.no_grad():
        w[rows] = sel * scale[:, None]
    versions.bump(weight._version_counter)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """As ``torch.nn.functional.embedding``: ``input`` holds integer indices (a Tensor, an ndarray or
    a list), ``weight`` is (num_embeddings, dim); ``max_norm`` renormalises the selected rows of
    ``weight`` in place first (see the module docstring). ``scale_grad_by_freq`` and ``sparse``
    gradients are not supported."""
    if scale_grad_by_freq or sparse:
        raise NotImplementedError(f"embedding: scale_grad_by_freq and sparse gradients are not supported, got "
                                  f"scale_grad_by_freq={scale_grad_by_freq}, sparse={sparse}")
    _renorm_selected(input, weight, max_norm, norm_type)
    return _lookup(input, weight, padding_idx)


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """As ``torch.nn.functional.embedding_bag`` (the bags: ``minidl.ops.embedding_bag``); ``max_norm``
    renormalises every row ``input`` names in place first, as for ``embedding``."""
    _renorm_selected(input, weight, max_norm, norm_type)
    return _bags(input, weight, offsets, None, norm_type, scale_grad_by_freq, mode, sparse, per_sample_weights,
                 include_last_offset, padding_idx)


def _renorm_selected(input, weight, max_norm, norm_type):
    if max_norm is not None:
        Tensor = _op_function.Tensor
        if not isinstance(weight, Tensor):
            return   # the lookup reports the bad weight
        idx = input._data if isinstance(input, Tensor) else namespace_of(weight._data).asarray(input)
        _embedding_renorm_(weight, idx, float(max_norm), norm_type)
