"""MultiheadAttention with PyTorch's parameters, masks and forward signature.

    mha = nn.MultiheadAttention(embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                                add_zero_attn=False, kdim=None, vdim=None, batch_first=True)
    out, w = mha(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                 average_attn_weights=True, is_causal=False)

``batch_first`` defaults to True here (PyTorch: False; minidl's API contract, for the zoo's
batch-first Transformers): inputs are (B, L, E), or (L, B, E) with ``batch_first=False``. Every
other argument is PyTorch's, with its default and in its order. Parameters (so a PyTorch state_dict loads as
is): ``in_proj_weight`` (3E, E) = [W_q; W_k; W_v] when key and value have E features, else
``q_proj_weight`` (E, E), ``k_proj_weight`` (E, kdim), ``v_proj_weight`` (E, vdim) (and
``in_proj_weight`` None); ``in_proj_bias`` (3E,); ``out_proj`` (NonDynamicallyQuantizableLinear(E,
E), a Linear); with ``add_bias_kv``, ``bias_k`` and ``bias_v`` (1, 1, E). Init as PyTorch: xavier_uniform_ on the
projection weights, zero biases, out_proj.weight with Linear's default, xavier_normal_ on bias_k /
bias_v.

For each head h (head_dim D = E / H):
    Q_h = query W_q,h^T + b_q,h,  K_h = key W_k,h^T + b_k,h,  V_h = value W_v,h^T + b_v,h
    head_h = softmax(Q_h K_h^T / sqrt(D) + M) V_h,    out = concat_h(head_h) W_o^T + b_o

Extra keys, as PyTorch: ``add_bias_kv`` appends one learned key/value pair (bias_k, bias_v) to
every sequence's projected keys and values, ``add_zero_attn`` then appends a key and a value of
zeros (score 0 for every query); both are visible to every query (the masks are padded with
"allowed" for them), so S grows by one for each and the weights are (B, L, S + extra).

forward is ``F.multi_head_attention_forward`` called with these parameters (with
``batch_first`` the inputs are passed as sequence-first views, as PyTorch does); that
function's docstring describes the masks, ``is_causal`` and the two computation paths.
"""
import numpy as np

from ...tensor import dtype as dtypes
from ..functional.multi_head_attention import _views, multi_head_attention_forward, same_kind_masks
from ..parameter import Parameter
from .module import Module


def _empty(shape, dtype):
    return Parameter(np.zeros(shape, dtype=dtypes.to_dtype(dtype) if dtype is not None else dtypes.DEFAULT_FLOAT))


class MultiheadAttention(Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=True, device=None, dtype=None):
        super().__init__()
        from .linear import NonDynamicallyQuantizableLinear
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
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, dtype=dtype)
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
        key_padding_mask, attn_mask = same_kind_masks(key_padding_mask, "key_padding_mask", attn_mask, "attn_mask",
                                                      query.dtype)
        swap = self.batch_first and query.ndim == 3
        if swap:   # (B, L, E) -> the function's (L, B, E), as views; a shared argument stays shared
            query, key, value = _views(lambda t: t.transpose(0, 1), (query, key, value))
        out, weights = multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias,
            self.bias_k, self.bias_v, self.add_zero_attn, self.dropout, self.out_proj.weight, self.out_proj.bias,
            training=self.training, key_padding_mask=key_padding_mask, need_weights=need_weights,
            attn_mask=attn_mask, use_separate_proj_weight=not self._qkv_same_embed_dim,
            q_proj_weight=self.q_proj_weight, k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight,
            average_attn_weights=average_attn_weights, is_causal=is_causal)
        return (out.transpose(0, 1) if swap else out), weights
