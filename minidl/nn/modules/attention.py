"""MultiheadAttention with PyTorch's parameters, masks and forward signature.

    mha = nn.MultiheadAttention(embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                                add_zero_attn=False, kdim=None, vdim=None, batch_first=True)
    out, w = mha(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                 average_attn_weights=True, is_causal=False)

``batch_first`` defaults to True here (PyTorch: False); every other argument is PyTorch's, in
PyTorch's order. Parameters (so a PyTorch state_dict loads as is): ``in_proj_weight`` (3E, E) =
[W_q; W_k; W_v] when key and value have E features, else ``q_proj_weight`` (E, E),
``k_proj_weight`` (E, kdim), ``v_proj_weight`` (E, vdim) (and ``in_proj_weight`` None);
``in_proj_bias`` (3E,); ``out_proj`` (Linear(E, E)); with ``add_bias_kv``, ``bias_k`` and
``bias_v`` (1, 1, E). Init as PyTorch: xavier_uniform_ on the projection weights, zero biases,
out_proj.weight with Linear's default, xavier_normal_ on bias_k / bias_v.

For each head h (head_dim D = E / H):
    Q_h = query W_q,h^T + b_q,h,  K_h = key W_k,h^T + b_k,h,  V_h = value W_v,h^T + b_v,h
    head_h = softmax(Q_h K_h^T / sqrt(D) + M) V_h,    out = concat_h(head_h) W_o^T + b_o

Extra keys, as PyTorch: ``add_bias_kv`` appends one learned key/value pair (bias_k, bias_v) to
every sequence's projected keys and values, ``add_zero_attn`` then appends a key and a value of
zeros (score 0 for every query); both are visible to every query (the masks are padded with
"allowed" for them), so S grows by one for each and the weights are (B, L, S + extra).

Masks use PyTorch's MultiheadAttention convention (the opposite of scaled_dot_product_attention's):
a bool ``attn_mask`` (L, S) or (B*H, L, S) / ``key_padding_mask`` (B, S) is True where attention
is NOT allowed; a float mask is added to the scores. ``is_causal`` is PyTorch's hint that
``attn_mask`` is the causal mask: without a key_padding_mask and with need_weights=False the
causal mask replaces ``attn_mask``, otherwise ``attn_mask`` is used as given. (PyTorch requires
the mask with the hint; here it may be omitted, and the causal mask then applies.)

need_weights=False runs the fused ``scaled_dot_product_attention`` op (a fully masked query
row then gives 0, not NaN). need_weights=True runs PyTorch's explicit path (softmax, dropout,
matmul as separate differentiable ops) so the returned weights (averaged over heads when
``average_attn_weights``, as PyTorch's default) are differentiable; there, as in PyTorch, a
fully masked row gives NaN.
"""
import math

import numpy as np

from ...ops.attention import scaled_dot_product_attention
from ...ops.join import cat
from ...tensor import dtype as dtypes
from ...tensor.tensor import Tensor
from ..parameter import Parameter
from .module import Module


def _empty(shape, dtype):
    return Parameter(np.zeros(shape, dtype=dtypes.to_dtype(dtype) if dtype is not None else dtypes.DEFAULT_FLOAT))


class MultiheadAttention(Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=True, device=None, dtype=None):
        super().__init__()
        from .linear import Linear
        if embed_dim <= 0 or num_heads <= 0:   # PyTorch's check and message
            raise ValueError(f"MultiheadAttention: embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        if embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible by "
                             f"num_heads ({num_heads})")
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.dropout, self.batch_first = float(dropout), batch_first
        if self._qkv_same_embed_dim:
            self.in_proj_weight = _empty((3 * embed_dim, embed_dim), dtype)
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = _empty((embed_dim, embed_dim), dtype)
            self.k_proj_weight = _empty((embed_dim, self.kdim), dtype)
            self.v_proj_weight = _empty((embed_dim, self.vdim), dtype)
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = _empty(3 * embed_dim, dtype)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        if add_bias_kv:
            self.bias_k, self.bias_v = _empty((1, 1, embed_dim), dtype), _empty((1, 1, embed_dim), dtype)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = bool(add_zero_attn)
        self._reset_parameters()
        if device is not None and str(device) != "cpu":
            self.to(device)

    def _reset_parameters(self):
        from .. import init
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    # -----------------------------------------------------------------------------------
    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        from .. import functional as F
        batched = query.ndim == 3
        if not batched:
            if query.ndim != 2:
                raise ValueError(f"MultiheadAttention: query must be (L, E) or 3-D, got shape {list(query.shape)}")
            if key.ndim != 2 or value.ndim != 2:
                raise ValueError(f"MultiheadAttention: for unbatched (2-D) query, key and value must be 2-D, got "
                                 f"key {list(key.shape)} and value {list(value.shape)}")
            query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.reshape(1, -1) if isinstance(key_padding_mask, Tensor) \
                    else np.asarray(key_padding_mask)[None]
        elif not self.batch_first:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        B, L, E = query.shape
        S = key.shape[1]
        if E != self.embed_dim or key.shape[-1] != self.kdim or value.shape[-1] != self.vdim:
            raise ValueError(f"MultiheadAttention: expected query, key and value with {self.embed_dim}, {self.kdim} "
                             f"and {self.vdim} features, got query {list(query.shape)}, key {list(key.shape)}, "
                             f"value {list(value.shape)} (batch-first view)")
        if key.shape[:2] != value.shape[:2] or key.shape[0] != B:
            raise ValueError(f"MultiheadAttention: key {list(key.shape)} and value {list(value.shape)} must share "
                             f"batch and length, and match query's batch {B}")
        H, D = self.num_heads, self.head_dim

        q, k, v = self._project(query, key, value)          # (B, L, E), (B, S, E), (B, S, E)
        k, v, extra = self._extra_keys(k, v)                 # (B, S + extra, E)
        mask = _merge_masks(attn_mask, key_padding_mask, B, H, L, S, q.dtype)
        if is_causal and attn_mask is not None:
            if key_padding_mask is None and not need_weights:
                mask = None            # the hint: the causal mask replaces attn_mask
            else:
                is_causal = False      # attn_mask (the causal one, by the hint) is used as given
        if extra and mask is not None:
            mask = _pad_keys(mask, extra)
        S += extra
        q = q.reshape(B, L, H, D).transpose(1, 2)           # (B, H, L, D)
        k = k.reshape(B, S, H, D).transpose(1, 2)
        v = v.reshape(B, S, H, D).transpose(1, 2)

        dropout_p = self.dropout if self.training else 0.0
        if not need_weights:
            # scaled_dot_product_attention's convention: bool True = may attend
            if mask is not None and _data(mask).dtype == np.bool_:
                mask = ~_data(mask)
            out = scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal)
            weights = None
        else:
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
            if is_causal:
                scores = scores.masked_fill(~np.tril(np.ones((L, S), bool)), -math.inf)
            if mask is not None:
                m = _data(mask)
                scores = scores.masked_fill(m, -math.inf) if m.dtype == np.bool_ else scores + mask
            p = scores.softmax(-1)
            if dropout_p > 0:
                p = F.dropout(p, p=dropout_p, training=True)
            out = p @ v
            weights = p.mean(dim=1) if average_attn_weights else p
            if not batched:
                weights = weights.squeeze(0)
        out = out.transpose(1, 2).reshape(B, L, E)
        out = self.out_proj(out)
        if not batched:
            out = out.squeeze(0)
        elif not self.batch_first:
            out = out.transpose(0, 1)
        return out, weights

    def _project(self, query, key, value):
        from .. import functional as F
        E = self.embed_dim
        b = self.in_proj_bias
        bq, bk, bv = (None, None, None) if b is None else (b[:E], b[E:2 * E], b[2 * E:])
        if not self._qkv_same_embed_dim:
            return (F.linear(query, self.q_proj_weight, bq), F.linear(key, self.k_proj_weight, bk),
                    F.linear(value, self.v_proj_weight, bv))
        w = self.in_proj_weight
        if query is key and key is value:  # self-attention: one (E -> 3E) matmul
            qkv = F.linear(query, w, b)
            return qkv[..., :E], qkv[..., E:2 * E], qkv[..., 2 * E:]
        return F.linear(query, w[:E], bq), F.linear(key, w[E:2 * E], bk), F.linear(value, w[2 * E:], bv)

    def _extra_keys(self, k, v):
        """k, v (B, S, E) with bias_k / bias_v appended (add_bias_kv), then a zero key and value
        (add_zero_attn), and how many keys were appended."""
        from ...tensor.factories import zeros
        B, _, E = k.shape
        extra = 0
        if self.bias_k is not None:
            k = cat([k, self.bias_k.expand(B, 1, E)], 1)
            v = cat([v, self.bias_v.expand(B, 1, E)], 1)
            extra += 1
        if self.add_zero_attn:
            k = cat([k, zeros(B, 1, E, dtype=k.dtype, device=k.device)], 1)
            v = cat([v, zeros(B, 1, E, dtype=v.dtype, device=v.device)], 1)
            extra += 1
        return k, v, extra


def _data(m):
    return m._data if isinstance(m, Tensor) else np.asarray(m)


def _pad_keys(mask, extra):
    """The merged mask with ``extra`` trailing keys every query may attend to (False / 0)."""
    if isinstance(mask, Tensor):
        from ...tensor.factories import zeros
        return cat([mask, zeros(*mask.shape[:-1], extra, dtype=mask.dtype, device=mask.device)], -1)
    mask = np.asarray(mask)
    return np.concatenate([mask, np.zeros(mask.shape[:-1] + (extra,), mask.dtype)], -1)


def _merge_masks(attn_mask, key_padding_mask, B, H, L, S, dtype):
    """One mask broadcastable to (B, H, L, S) in MHA's convention: a bool array (True = masked
    out) when both masks are bool, else a float Tensor/array to add to the scores."""
    parts = []
    if attn_mask is not None:
        m = attn_mask
        shape = tuple(m.shape)
        if shape == (L, S):
            pass
        elif shape == (B * H, L, S):
            m = m.reshape(B, H, L, S)
        else:
            raise ValueError(f"MultiheadAttention: attn_mask must have shape {(L, S)} or {(B * H, L, S)}, "
                             f"got {list(shape)}")
        parts.append(m)
    if key_padding_mask is not None:
        m = key_padding_mask
        if tuple(m.shape) != (B, S):
            raise ValueError(f"MultiheadAttention: key_padding_mask must have shape {(B, S)}, got {list(m.shape)}")
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
