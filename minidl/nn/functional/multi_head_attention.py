"""F.multi_head_attention_forward: multi-head attention with its weights passed in, as
``torch.nn.functional.multi_head_attention_forward`` (nn.MultiheadAttention's forward is this
function called with the module's parameters).

    out, w = F.multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p,
                 out_proj_weight, out_proj_bias, training=True, key_padding_mask=None,
                 need_weights=True, attn_mask=None, use_separate_proj_weight=False,
                 q_proj_weight=None, k_proj_weight=None, v_proj_weight=None, static_k=None,
                 static_v=None, average_attn_weights=True, is_causal=False)

query (L, B, E), key and value (S, B, E_k / E_v), sequence first as PyTorch's (or unbatched
(L, E), (S, E)). For each head h (head_dim D = E / H):

    Q_h = query W_q,h^T + b_q,h,  K_h = key W_k,h^T + b_k,h,  V_h = value W_v,h^T + b_v,h
    head_h = softmax(Q_h K_h^T / sqrt(D) + M) V_h,    out = concat_h(head_h) W_o^T + b_o

with [W_q; W_k; W_v] = in_proj_weight (3E, E), or q/k/v_proj_weight with
``use_separate_proj_weight``. ``static_k`` / ``static_v`` (B*H, S', D) replace the projected
keys / values. Extra keys, as PyTorch: ``bias_k``/``bias_v`` (1, 1, E) append one learned key and
value to every sequence, ``add_zero_attn`` then a key and a value of zeros; both are visible to
every query (the masks are padded with "allowed"), so S grows by one for each. The outputs are
the attention output (L, B, E) and, with ``need_weights``, the attention weights (B, L, S),
averaged over heads with ``average_attn_weights`` (else (B, H, L, S)).

Masks use MultiheadAttention's convention (the opposite of scaled_dot_product_attention's): a bool
``attn_mask`` (L, S) or (B*H, L, S) / ``key_padding_mask`` (B, S) is True where attention is NOT
allowed; a float mask is added to the scores. ``is_causal`` is PyTorch's hint that ``attn_mask`` is
the causal mask: without a key_padding_mask and with need_weights=False the causal mask replaces
``attn_mask``, otherwise ``attn_mask`` is used as given. (PyTorch requires the mask with the hint;
here it may be omitted, and the causal mask then applies.)

need_weights=False runs the fused ``scaled_dot_product_attention`` op (a fully masked query row
then gives 0, not NaN). need_weights=True runs PyTorch's explicit path (softmax, dropout, matmul
as separate differentiable ops) so the returned weights are differentiable; there, as in
PyTorch, a fully masked row gives NaN. Malformed arguments raise PyTorch's AssertionError or
RuntimeError with its messages. Every step is a differentiable op; autograd composes the backward.
"""
import math
import warnings

import numpy as np

from ...ops.attention import scaled_dot_product_attention
from ...ops.join import cat
from ...tensor.tensor import Tensor
from .activation import dropout
from .linear import linear


def _data(m):
    return m._data if isinstance(m, Tensor) else np.asarray(m)


def _pad_keys(mask, extra):
    """The merged mask with ``extra`` trailing keys every query may attend to (False / 0)."""
    if isinstance(mask, Tensor):
        from ...tensor.factories import zeros
        return cat([mask, zeros(*mask.shape[:-1], extra, dtype=mask.dtype, device=mask.device)], -1)
    mask = np.asarray(mask)
    return np.concatenate([mask, np.zeros(mask.shape[:-1] + (extra,), mask.dtype)], -1)


def check_mask_pair(mask, name, other, other_name):
    """PyTorch's mask-type rules for a padding mask and the attention mask beside it: each must be
    bool or floating (else AssertionError naming it); masks of two different dtypes still work
    (each is applied in its own convention) but PyTorch deprecates mixing them and warns. Returns
    whether the two differ."""
    for m, n in ((mask, name), (other, other_name)):
        if m is not None and _data(m).dtype != np.bool_ and _data(m).dtype.kind != "f":
            raise AssertionError(f"only bool and floating types of {n} are supported, got {_data(m).dtype}")
    if mask is None or other is None or _data(mask).dtype == _data(other).dtype:
        return False
    warnings.warn(f"Support for mismatched {name} and {other_name} is deprecated. Use same type for both instead.",
                  stacklevel=3)
    return True


def float_mask(mask, dtype):
    """A bool mask (True = masked out) as the additive float mask of ``dtype`` (-inf / 0); float
    masks as they are."""
    if mask is None or _data(mask).dtype != np.bool_:
        return mask
    if isinstance(mask, Tensor):
        from ...tensor.factories import zeros_like
        return zeros_like(mask, dtype=dtype).masked_fill(mask, -math.inf)
    return np.where(np.asarray(mask), -np.inf, 0.0).astype(dtype)


def same_kind_masks(padding, padding_name, mask, mask_name, dtype):
    """A key padding mask and an attention mask of different types made both float (bool ones as
    -inf / 0 of ``dtype``), after PyTorch's deprecation warning, as PyTorch's modules do on entry
    before passing the masks on (where a float mask of another dtype than ``dtype`` then warns
    once more, as in PyTorch)."""
    if check_mask_pair(padding, padding_name, mask, mask_name):
        return float_mask(padding, dtype), float_mask(mask, dtype)
    return padding, mask


def _merge_masks(attn_mask, key_padding_mask, B, H, L, S, dtype):
    """One mask broadcastable to (B, H, L, S) in MHA's convention: a bool array (True = masked
    out) when both masks are bool, else a float Tensor/array to add to the scores."""
    parts = []
    if attn_mask is not None:
        m = attn_mask
        if m.ndim == 2:
            if tuple(m.shape) != (L, S):
                raise RuntimeError(f"The shape of the 2D attn_mask is {list(m.shape)}, but should be {(L, S)}.")
        elif m.ndim == 3:
            if tuple(m.shape) != (B * H, L, S):
                raise RuntimeError(f"The shape of the 3D attn_mask is {list(m.shape)}, but should be "
                                   f"{(B * H, L, S)}.")
            m = m.reshape(B, H, L, S)
        else:
            raise RuntimeError(f"attn_mask's dimension {m.ndim} is not supported")
        parts.append(m)
    if key_padding_mask is not None:
        m = key_padding_mask
        if tuple(m.shape) != (B, S):
            raise AssertionError(f"expecting key_padding_mask shape of {(B, S)}, but got {list(m.shape)}")
        parts.append(m.reshape(B, 1, 1, S))
    if not parts:
        return None
    if all(_data(p).dtype == np.bool_ for p in parts):
        out = _data(parts[0])
        for p in parts[1:]:
            out = out | _data(p)
        return out
    total = None
    for p in parts:
        d = _data(p)
        if d.dtype == np.bool_:
            p = np.where(d, -np.inf, 0.0).astype(dtype)
        elif not isinstance(p, Tensor):
            p = d.astype(dtype)
        total = p if total is None else total + p
    return total


def _shape_check(query, key, value, key_padding_mask, attn_mask, num_heads):
    """PyTorch's _mha_shape_check: whether the call is batched (3-D query), or AssertionError."""
    if query.ndim not in (2, 3):
        raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received {query.ndim}-D query "
                             "tensor")
    n = query.ndim
    which = f"{'batched' if n == 3 else 'unbatched'} ({n}-D) `query`"
    if key.ndim != n or value.ndim != n:
        raise AssertionError(f"For {which}, expected `key` and `value` to be {n}-D but found "
                             f"{key.ndim}-D and {value.ndim}-D tensors respectively")
    if key_padding_mask is not None and key_padding_mask.ndim != n - 1:
        raise AssertionError(f"For {which}, expected `key_padding_mask` to be `None` or {n - 1}-D but "
                             f"found {key_padding_mask.ndim}-D tensor instead")
    if attn_mask is not None and attn_mask.ndim not in (2, 3):
        raise AssertionError(f"For {which}, expected `attn_mask` to be `None`, 2-D or 3-D but "
                             f"found {attn_mask.ndim}-D tensor instead")
    if n == 2 and attn_mask is not None and attn_mask.ndim == 3:
        expected = (num_heads, query.shape[0], key.shape[0])
        if tuple(attn_mask.shape) != expected:
            raise AssertionError(f"Expected `attn_mask` shape to be {expected} but got {list(attn_mask.shape)}")
    return n == 3


def _in_projection(q, k, v, E, in_proj_weight, in_proj_bias, separate):
    """The q, k, v projections (batch first): one (E -> 3E) matmul for self-attention."""
    b = in_proj_bias
    bq, bk, bv = (None, None, None) if b is None else (b[:E], b[E:2 * E], b[2 * E:])
    if separate is not None:
        wq, wk, wv = separate
        return linear(q, wq, bq), linear(k, wk, bk), linear(v, wv, bv)
    w = in_proj_weight
    if q is k and k is v:
        qkv = linear(q, w, b)
        return qkv[..., :E], qkv[..., E:2 * E], qkv[..., 2 * E:]
    return linear(q, w[:E], bq), linear(k, w[E:2 * E], bk), linear(v, w[2 * E:], bv)


def _heads(t, static, B, H, D, name):
    """(B, S, E) -> (B, H, S, D), or the given static (B*H, S', D) keys / values in that layout."""
    if static is None:
        return t.reshape(B, t.shape[1], H, D).transpose(1, 2)
    if static.shape[0] != B * H:
        raise AssertionError(f"expecting {name}.size(0) of {B * H}, but got {static.shape[0]}")
    if static.shape[2] != D:
        raise AssertionError(f"expecting {name}.size(2) of {D}, but got {static.shape[2]}")
    return static.reshape(B, H, static.shape[1], D)


def _views(fn, tensors):
    """fn of each tensor, computed once for arguments that are the same object, so that the
    results are the same object too (self-attention's single projection looks for that)."""
    out = []
    for i, t in enumerate(tensors):
        j = next((j for j in range(i) if tensors[j] is t), None)
        out.append(fn(t) if j is None else out[j])
    return out


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """As ``torch.nn.functional.multi_head_attention_forward``; see the module docstring."""
    batched = _shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    check_mask_pair(key_padding_mask, "key_padding_mask", attn_mask, "attn_mask")
    if not batched:   # (L, E) -> (L, 1, E), the mask (S,) -> (1, S)
        query, key, value = _views(lambda t: t.unsqueeze(1), (query, key, value))
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.reshape(1, -1) if isinstance(key_padding_mask, Tensor) \
                else np.asarray(key_padding_mask)[None]
    L, B, E = query.shape
    if E != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {E}")
    H = num_heads
    D = E // H
    if D * H != E:
        raise AssertionError(f"embed_dim {E} not divisible by num_heads {H}")
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(f"key's sequence and batch dims {tuple(key.shape[:2])} do not match value's "
                                 f"{tuple(value.shape[:2])}")
        for name, w in (("q", q_proj_weight), ("k", k_proj_weight), ("v", v_proj_weight)):
            if w is None:
                raise AssertionError(f"use_separate_proj_weight is True but {name}_proj_weight is None")
        separate = (q_proj_weight, k_proj_weight, v_proj_weight)
    else:
        if tuple(key.shape) != tuple(value.shape):
            raise AssertionError(f"key shape {list(key.shape)} does not match value shape {list(value.shape)}")
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        separate = None
    if (bias_k is None) != (bias_v is None):
        raise AssertionError("bias_k and bias_v must both be given or both be None")
    if bias_k is not None and (static_k is not None or static_v is not None):
        raise AssertionError(f"bias cannot be added to static {'key' if static_k is not None else 'value'}.")

    q, k, v = _views(lambda t: t.transpose(0, 1), (query, key, value))   # (B, L, E), (B, S, E) views
    q, k, v = _in_projection(q, k, v, E, in_proj_weight, in_proj_bias, separate)
    extra = 0
    if bias_k is not None:
        k = cat([k, bias_k.expand(B, 1, E)], 1)
        v = cat([v, bias_v.expand(B, 1, E)], 1)
        extra += 1
    q = q.reshape(B, L, H, D).transpose(1, 2)                          # (B, H, L, D)
    k, v = _heads(k, static_k, B, H, D, "static_k"), _heads(v, static_v, B, H, D, "static_v")
    if add_zero_attn:
        from ...tensor.factories import zeros
        k = cat([k, zeros(B, H, 1, D, dtype=k.dtype, device=k.device)], 2)
        v = cat([v, zeros(B, H, 1, D, dtype=v.dtype, device=v.device)], 2)
        extra += 1
    S = k.shape[2] - extra                                              # the keys the masks describe
    mask = _merge_masks(attn_mask, key_padding_mask, B, H, L, S, q.dtype)
    if is_causal and attn_mask is not None:
        if key_padding_mask is None and not need_weights:
            mask = None            # the hint: the causal mask replaces attn_mask
        else:
            is_causal = False      # attn_mask (the causal one, by the hint) is used as given
    if extra and mask is not None:
        mask = _pad_keys(mask, extra)
    S += extra

    p_drop = float(dropout_p) if training else 0.0
    if not need_weights:
        # scaled_dot_product_attention's convention: bool True = may attend
        if mask is not None and _data(mask).dtype == np.bool_:
            mask = ~_data(mask)
        out = scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p_drop, is_causal=is_causal)
        weights = None
    else:
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        if is_causal:
            scores = scores.masked_fill(~np.tril(np.ones((L, S), bool)), -math.inf)
        if mask is not None:
            m = _data(mask)
            scores = scores.masked_fill(m, -math.inf) if m.dtype == np.bool_ else scores + mask
        p = scores.softmax(-1)
        if p_drop > 0:
            p = dropout(p, p=p_drop, training=True)
        out = p @ v
        weights = p.mean(dim=1) if average_attn_weights else p
        if not batched:
            weights = weights.squeeze(0)
    out = linear(out.transpose(1, 2).reshape(B, L, E), out_proj_weight, out_proj_bias)   # (B, L, E)
    out = out.transpose(0, 1)                                                            # (L, B, E)
    return (out.squeeze(1) if not batched else out), weights
