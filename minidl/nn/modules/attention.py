"""MultiheadAttention with PyTorch's parameters, masks and forward signature.

    out, w = mha(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                 is_causal=False)

Parameters (so a PyTorch state_dict loads as is): ``in_proj_weight`` (3E, E) = [W_q; W_k; W_v],
``in_proj_bias`` (3E,), ``out_proj`` (Linear(E, E)). Init as PyTorch: xavier_uniform_ on
in_proj_weight, zero biases, out_proj.weight with Linear's default.

For each head h (head_dim D = E / H):
    Q_h = query W_q,h^T + b_q,h,  K_h = key W_k,h^T + b_k,h,  V_h = value W_v,h^T + b_v,h
    head_h = softmax(Q_h K_h^T / sqrt(D) + M) V_h,    out = concat_h(head_h) W_o^T + b_o

Masks use PyTorch's MultiheadAttention convention (the opposite of scaled_dot_product_attention's):
a bool ``attn_mask`` (L, S) or (B*H, L, S) / ``key_padding_mask`` (B, S) is True where attention
is NOT allowed; a float mask is added to the scores. ``is_causal=True`` masks keys after the
query (with or without an ``attn_mask``; PyTorch requires the mask as well, here it is optional).

need_weights=False runs the fused ``scaled_dot_product_attention`` op (a fully masked query
row then gives 0, not NaN). need_weights=True runs PyTorch's explicit path (softmax, dropout,
matmul as separate differentiable ops) so the returned weights (averaged over heads when
``average_attn_weights``, as PyTorch's default) are differentiable; there, as in PyTorch, a
fully masked row gives NaN.
"""
import math

import numpy as np

from ...ops.attention import scaled_dot_product_attention
from ...tensor.tensor import Tensor
from ..parameter import Parameter
from .module import Module


class MultiheadAttention(Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, batch_first=True):
        super().__init__()
        from .linear import Linear
        if embed_dim <= 0 or num_heads <= 0:   # PyTorch's check and message
            raise ValueError(f"MultiheadAttention: embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        if embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible by "
                             f"num_heads ({num_heads})")
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.dropout, self.batch_first = float(dropout), batch_first
        self.in_proj_weight = Parameter(np.zeros((3 * embed_dim, embed_dim), np.float32))
        if bias:
            self.in_proj_bias = Parameter(np.zeros(3 * embed_dim, np.float32))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias)
        self._reset_parameters()

    def _reset_parameters(self):
        from .. import init
        init.xavier_uniform_(self.in_proj_weight)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)

    def extra_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}"

    # -----------------------------------------------------------------------------------
    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                is_causal=False, average_attn_weights=True):
        from .. import functional as F
        batched = query.ndim == 3
        if not batched:
            if query.ndim != 2:
                raise ValueError(f"MultiheadAttention: query must be (L, E) or 3-D, got shape {list(query.shape)}")
            query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
            if key_padding_mask is not None:
                key_padding_mask = _data(key_padding_mask)[None]
        elif not self.batch_first:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        B, L, E = query.shape
        S = key.shape[1]
        if E != self.embed_dim or key.shape[-1] != E or value.shape[-1] != E:
            raise ValueError(f"MultiheadAttention: expected embed_dim {self.embed_dim}, got query {list(query.shape)}, "
                             f"key {list(key.shape)}, value {list(value.shape)} (batch-first view)")
        if key.shape[:2] != value.shape[:2] or key.shape[0] != B:
            raise ValueError(f"MultiheadAttention: key {list(key.shape)} and value {list(value.shape)} must share "
                             f"batch and length, and match query's batch {B}")
        H, D = self.num_heads, self.head_dim

        q, k, v = self._project(query, key, value)          # (B, L|S, E) each
        q = q.reshape(B, L, H, D).transpose(1, 2)           # (B, H, L, D)
        k = k.reshape(B, S, H, D).transpose(1, 2)
        v = v.reshape(B, S, H, D).transpose(1, 2)

        mask = _merge_masks(attn_mask, key_padding_mask, B, H, L, S, q.dtype)
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
        w, b = self.in_proj_weight, self.in_proj_bias
        if query is key and key is value:  # self-attention: one (E -> 3E) matmul
            qkv = F.linear(query, w, b)
            return qkv[..., :E], qkv[..., E:2 * E], qkv[..., 2 * E:]
        bq, bk, bv = (None, None, None) if b is None else (b[:E], b[E:2 * E], b[2 * E:])
        return F.linear(query, w[:E], bq), F.linear(key, w[E:2 * E], bk), F.linear(value, w[2 * E:], bv)


def _data(m):
    return m._data if isinstance(m, Tensor) else np.asarray(m)


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
