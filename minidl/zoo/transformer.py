"""The Transformer block, with the norm's placement and kind as choices.

    block = TransformerBlock(d_model=128, n_heads=4, norm_position="pre", norm="layer", causal=True)
    y = block(x, key_padding_mask=None)          # x (B, T, d_model); mask (B, T), True = padding

Norm placement (f is the attention or the MLP sublayer, each with dropout on its output):
- "pre"      x + f(LN(x))            (GPT-2; stable without warm-up; the model adds a final LN)
- "post"     LN(x + f(x))            (the original Transformer, Vaswani et al. 2017)
- "deepnorm" LN(alpha * x + f(x))    (DeepNet, Wang et al. 2022, "DeepNet: Scaling Transformers
  to 1,000 Layers", arXiv:2203.00555): Post-LN with the residual up-weighted by alpha and the
  sublayers' initial weights scaled down by beta, which bounds the model update and lets
  Post-LN train deep. The constants for N encoder / M decoder layers (the paper's Figure 2):

      encoder-only (N):        alpha = (2N)^(1/4),               beta = (8N)^(-1/4)
      decoder-only (M):        alpha = (2M)^(1/4),               beta = (8M)^(-1/4)
      encoder-decoder, encoder: alpha = 0.81 (N^4 M)^(1/16),      beta = 0.87 (N^4 M)^(-1/16)
      encoder-decoder, decoder: alpha = (3M)^(1/4),               beta = (12M)^(-1/4)

  Initialisation (the paper's pseudocode): xavier_normal_(w, gain=beta) for the MLP's two
  weights and the value and output projections, xavier_normal_(w, gain=1) for query and key.

Norm kind: "layer" (LayerNorm), "rms" (RMSNorm), "scale" (ScaleNorm), "batch" (BatchNorm1d over
(B, d_model, T) whose statistics skip padded positions, given the padding mask). Batch norm mixes
positions of the whole batch, so a causal model with it is not causal during training (its
statistics include later tokens); use it for encoders.

The MLP is Linear(d, d_ff) -> GELU -> Linear(d_ff, d), d_ff = 4 d by default; ``gelu`` is
"none" (exact, erf) or "tanh" (the approximation GPT-2 used; cheaper on the CPU). The first
Linear's bias and the GELU run as one pass after its GEMM (``ops.linear_gelu``), and in float32
and float64 the whole MLP is one op (``ops.mlp``), whose backward runs GELU's on the rows of the
second Linear's product while they are in cache.
Attention (``SelfAttention``) packs W_q, W_k, W_v in one (3d, d) Linear and runs the fused
``F.scaled_dot_product_attention``; optional rotary embeddings rotate q and k. ``qk_norm``
("layer" or "rms") normalizes each head's queries and keys over the head's features before the
dot product (Dehghani et al. 2023, "Scaling Vision Transformers to 22 Billion Parameters";
Wortsman et al. 2023, "Small-scale proxies for large-scale Transformer training
instabilities"): a normalized head's queries and keys have norm about sqrt(D) times the norms'
gains, so the attention logits q.k / sqrt(D) are bounded by those gains instead of growing with
the projection weights, which is what lets training survive larger learning rates.
The two norms (``attn.q_norm``, ``attn.k_norm``, of size head_dim, shared by the heads) exist only
with the option, so the state_dict names of a model without it are unchanged.

Residual adds fused with the next norm. In a Pre-LN stack every residual add x + f(...) is
read by one norm (the next sublayer's, or the model's final one), and the two run as one op,
``SeqNorm.add_forward`` (``F.add_layer_norm`` / ``F.add_rms_norm`` for "layer" and "rms"): one
pass over memory each way instead of an add, a norm and, in backward, an add of the two
gradients of the sum (as llm.c's fused residual kernel). ``run_blocks`` carries the last add
of one block into the next block's first norm; the values are those of the plain composition
(tests/test_residual_norm.py). A module with hooks runs unfused, so its hooks see what they
always saw.
"""
import numpy as np

from .. import nn
from ..autograd import autocast_state
from ..nn import functional as F
from ..ops.heads import split_heads
from ..ops.linear_gelu import linear_gelu
from ..ops.mlp import linear_gelu_linear
from .norms import hooked as _hooked

NORM_POSITIONS = ("pre", "post", "deepnorm")
_WIDE = (np.float32, np.float64)    # the dtypes the MLP runs as one op in
NORM_KINDS = ("layer", "rms", "scale", "batch")
QK_NORMS = (None, "layer", "rms")


def deepnorm_constants(n_encoder_layers=0, n_decoder_layers=0):
    """{"encoder": (alpha, beta), "decoder": (alpha, beta)} for the given depths (DeepNet,
    Figure 2); a part with zero layers is omitted. Encoder-only: N > 0, M = 0."""
    N, M = int(n_encoder_layers), int(n_decoder_layers)
    if N < 0 or M < 0 or N + M == 0:
        raise ValueError(f"deepnorm_constants: need a positive number of layers, got N={N}, M={M}")
    out = {}
    if N and not M:
        out["encoder"] = ((2 * N) ** 0.25, (8 * N) ** -0.25)
    elif M and not N:
        out["decoder"] = ((2 * M) ** 0.25, (8 * M) ** -0.25)
    else:
        out["encoder"] = (0.81 * (N ** 4 * M) ** (1 / 16), 0.87 * (N ** 4 * M) ** (-1 / 16))
        out["decoder"] = ((3 * M) ** 0.25, (12 * M) ** -0.25)
    return out


def _raw_mask(m):
    """A mask's array where it lives (a device array stays on its device); lists become ndarrays."""
    if hasattr(m, "_data"):
        return m._data
    return m if hasattr(m, "dtype") and hasattr(m, "shape") else np.asarray(m)


class SeqNorm(nn.Module):
    """A norm over the features of (B, T, d) inputs, chosen by name (see the module docstring);
    ``forward(x, key_padding_mask=None)``: the mask (B, T), True = padding, matters only to "batch"."""

    def __init__(self, kind, d_model):
        super().__init__()
        if kind not in NORM_KINDS:
            raise ValueError(f"unknown norm {kind!r}; expected one of {', '.join(NORM_KINDS)}")
        self.kind = kind
        if kind == "layer":
            self.norm = nn.LayerNorm(d_model)
        elif kind == "rms":
            self.norm = nn.RMSNorm(d_model)
        elif kind == "scale":
            self.norm = nn.ScaleNorm(d_model)
        else:
            self.norm = nn.BatchNorm1d(d_model)

    def forward(self, x, key_padding_mask=None):
        if self.kind != "batch":
            return self.norm(x)
        valid = None
        if key_padding_mask is not None:
            valid = ~_raw_mask(key_padding_mask)
        return self.norm(x.transpose(1, 2), mask=valid).transpose(1, 2)

    def add_forward(self, x, r, key_padding_mask=None, keep_sum=True):
        """(x + r, this norm of x + r), or only the norm when ``keep_sum`` is False: one fused op
        for "layer" and "rms" (``F.add_layer_norm``, ``F.add_rms_norm``), an add and the norm
        otherwise or when this module or its norm has hooks."""
        n = self.norm
        if self.kind in ("layer", "rms") and not (_hooked(self) or _hooked(n)):
            if self.kind == "layer":
                return F.add_layer_norm(x, r, n.normalized_shape, n.weight, n.bias, n.eps, return_sum=keep_sum)
            return F.add_rms_norm(x, r, n.normalized_shape, n.weight, n.eps, return_sum=keep_sum)
        s = x + r
        y = self(s, key_padding_mask)
        return (s, y) if keep_sum else y


class SelfAttention(nn.Module):
    """Multi-head self-attention over (B, T, d): packed qkv projection, fused SDPA, output
    projection. ``rotary`` (a RotaryEmbedding for head_dim) rotates q and k; ``qk_norm``
    ("layer", "rms" or None) normalizes them per head first (see the module docstring)."""

    def __init__(self, d_model, n_heads, dropout=0.0, bias=True, causal=False, rotary=None, qk_norm=None):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"SelfAttention: d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        if qk_norm not in QK_NORMS:
            raise ValueError(f"SelfAttention: unknown qk_norm {qk_norm!r}; expected None, 'layer' or 'rms'")
        self.d_model, self.n_heads, self.head_dim = d_model, n_heads, d_model // n_heads
        self.causal, self.dropout, self.qk_norm = causal, float(dropout), qk_norm
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.proj = nn.Linear(d_model, d_model, bias=bias)
        self.rotary = rotary
        if qk_norm is not None:
            make = nn.LayerNorm if qk_norm == "layer" else nn.RMSNorm
            self.q_norm, self.k_norm = make(self.head_dim), make(self.head_dim)

    def forward(self, x, key_padding_mask=None):
        B, T, d = x.shape
        H = self.n_heads
        q, k, v = split_heads(self.qkv(x), 3, H)                          # (B, H, T, D) each
        if self.qk_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rotary is not None:
            q, k = self.rotary(q), self.rotary(k)
        mask = None
        if key_padding_mask is not None:  # SDPA's bool convention: True = may attend
            mask = ~_raw_mask(key_padding_mask).reshape(B, 1, 1, T)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=self.causal,
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.proj(y.transpose(1, 2).reshape(B, T, d))


class MLP(nn.Module):
    """fc2(gelu(fc1(x))) as one op (``ops.mlp``: GELU's backward on the rows of fc2's backward
    product while they are in cache) for float32 and float64 outside autocast; elsewhere fc1's
    bias add and the GELU as one pass after fc1's GEMM (``ops.linear_gelu``), then fc2; and as the
    three layers when one of them has hooks."""

    def __init__(self, d_model, d_ff, bias=True, gelu="none"):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_ff, bias=bias)
        self.act = nn.GELU(approximate=gelu)
        self.fc2 = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x):
        if _hooked(self.fc1) or _hooked(self.act):
            return self.fc2(self.act(self.fc1(x)))
        fc1, fc2, approximate = self.fc1, self.fc2, self.act.approximate
        if _hooked(fc2) or autocast_state.state.on or x.dtype not in _WIDE or fc2.weight.dtype != x.dtype:
            return fc2(linear_gelu(x, fc1.weight, fc1.bias, approximate))
        return linear_gelu_linear(x, fc1.weight, fc1.bias, fc2.weight, fc2.bias, approximate)


class TransformerBlock(nn.Module):
    """One block: self-attention and MLP sublayers with residuals, norms placed by
    ``norm_position``. For "deepnorm", pass ``deepnorm=(alpha, beta)`` (see
    ``deepnorm_constants``); alpha scales the residual, beta the init."""

    def __init__(self, d_model, n_heads, d_ff=None, dropout=0.0, norm_position="pre", norm="layer",
                 causal=False, bias=True, rotary=None, deepnorm=None, gelu="none", qk_norm=None):
        super().__init__()
        if norm_position not in NORM_POSITIONS:
            raise ValueError(f"unknown norm_position {norm_position!r}; expected one of {', '.join(NORM_POSITIONS)}")
        if norm_position == "deepnorm" and deepnorm is None:
            raise ValueError("TransformerBlock: norm_position='deepnorm' needs deepnorm=(alpha, beta); "
                             "see deepnorm_constants()")
        self.norm_position = norm_position
        self.alpha = float(deepnorm[0]) if norm_position == "deepnorm" else 1.0
        self.attn = SelfAttention(d_model, n_heads, dropout, bias, causal, rotary, qk_norm)
        self.mlp = MLP(d_model, d_ff or 4 * d_model, bias, gelu)
        self.norm1 = SeqNorm(norm, d_model)
        self.norm2 = SeqNorm(norm, d_model)
        self.drop = nn.Dropout(dropout)
        if norm_position == "deepnorm":
            self.deepnorm_init(float(deepnorm[1]))

    def deepnorm_init(self, beta):
        """DeepNet init: xavier_normal_ with gain beta on the MLP, value and output projections,
        gain 1 on query and key (each (d, d) block of the packed qkv weight on its own)."""
        d = self.attn.d_model
        w = self.attn.qkv.weight
        for i, gain in enumerate((1.0, 1.0, beta)):
            w._data[i * d:(i + 1) * d] = _xavier_normal((d, d), gain, w.dtype)
        for lin in (self.attn.proj, self.mlp.fc1, self.mlp.fc2):
            lin.weight._data[...] = _xavier_normal(lin.weight.shape, beta, lin.weight.dtype)
        for lin in (self.attn.qkv, self.attn.proj, self.mlp.fc1, self.mlp.fc2):
            if lin.bias is not None:
                lin.bias._data[...] = 0

    def forward(self, x, key_padding_mask=None):
        kpm = key_padding_mask
        if self.norm_position == "pre":
            h, m = self.residual_forward(x, None, kpm)
            return h + m
        a = self.alpha
        r = x if a == 1.0 else x * a
        x = self.norm1.add_forward(r, self.drop(self.attn(x, kpm)), kpm, keep_sum=False)
        r = x if a == 1.0 else x * a
        return self.norm2.add_forward(r, self.drop(self.mlp(x)), kpm, keep_sum=False)

    def residual_forward(self, x, r=None, key_padding_mask=None):
        """A Pre-LN block applied to the residual stream x + r (x alone when r is None), its
        output returned as the pair (h, m) whose sum it is: x + attn(norm1(x)) = h, and
        m = mlp(norm2(h)). The caller fuses h + m into the norm that reads it (``run_blocks``);
        each norm here reads a sum made in the same op."""
        kpm = key_padding_mask
        if r is None:
            h, n = x, self.norm1(x, kpm)
        else:
            h, n = self.norm1.add_forward(x, r, kpm)
        h, n = self.norm2.add_forward(h, self.drop(self.attn(n, kpm)), kpm)
        return h, self.drop(self.mlp(n))

    def extra_repr(self):
        return f"norm_position={self.norm_position!r}" + (f", alpha={self.alpha:.4g}" if self.alpha != 1.0 else "")


def _xavier_normal(shape, gain, dtype):
    """nn.init.xavier_normal_ values for one (fan_out, fan_in) block of a packed weight."""
    from ..tensor.factories import zeros
    t = zeros(*shape, dtype=dtype)
    nn.init.xavier_normal_(t, gain=gain)
    return t.numpy(force=True)


def run_blocks(blocks, x, key_padding_mask=None, final_norm=None):
    """x through ``blocks`` and then ``final_norm`` (a SeqNorm, or None): the values of
    ``for blk in blocks: x = blk(x, key_padding_mask)`` followed by ``final_norm(x, key_padding_mask)``,
    with each Pre-LN block's last residual add fused into the norm that reads its sum, the next
    block's first norm or ``final_norm`` (see the module docstring). A block with hooks is
    called as a module, so that its hooks run."""
    r = None
    for blk in blocks:
        if blk.norm_position == "pre" and not _hooked(blk):
            x, r = blk.residual_forward(x, r, key_padding_mask)
        else:
            x, r = blk(x if r is None else x + r, key_padding_mask), None
    if final_norm is None:
        return x if r is None else x + r
    if r is None:
        return final_norm(x, key_padding_mask)
    return final_norm.add_forward(x, r, key_padding_mask, keep_sum=False)


def make_blocks(n_layers, d_model, n_heads, d_ff=None, dropout=0.0, norm_position="pre", norm="layer",
                causal=False, bias=True, rotary=None, role=None, gelu="none", deepnorm=None, qk_norm=None):
    """A ModuleList of ``n_layers`` blocks. For "deepnorm" the (alpha, beta) come from the depth
    as an encoder-only (``role="encoder"``, default unless causal) or decoder-only stack
    (``role="decoder"``, default when causal); pass ``deepnorm=(alpha, beta)`` to override, e.g.
    ``deepnorm_constants(N, M)["encoder"]`` for the encoder of an N + M encoder-decoder.
    ``qk_norm``: see SelfAttention."""
    if norm_position == "deepnorm" and deepnorm is None:
        role = role or ("decoder" if causal else "encoder")
        if role not in ("encoder", "decoder"):
            raise ValueError(f"make_blocks: role must be 'encoder' or 'decoder', got {role!r}")
        consts = deepnorm_constants(n_layers if role == "encoder" else 0, n_layers if role == "decoder" else 0)
        deepnorm = consts[role]
    return nn.ModuleList([TransformerBlock(d_model, n_heads, d_ff, dropout, norm_position, norm, causal, bias,
                                           rotary, deepnorm, gelu, qk_norm) for _ in range(n_layers)])
