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
"none" (exact, erf) or "tanh" (the approximation GPT-2 used; cheaper on the CPU).
Attention (``SelfAttention``) packs W_q, W_k, W_v in one (3d, d) Linear and runs the fused
``F.scaled_dot_product_attention``; optional rotary embeddings rotate q and k.
"""
import numpy as np

from .. import nn
from ..nn import functional as F
from ..ops.heads import split_heads

NORM_POSITIONS = ("pre", "post", "deepnorm")
NORM_KINDS = ("layer", "rms", "scale", "batch")


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


class SelfAttention(nn.Module):
    """Multi-head self-attention over (B, T, d): packed qkv projection, fused SDPA, output
    projection. ``rotary`` (a RotaryEmbedding for head_dim) rotates q and k."""

    def __init__(self, d_model, n_heads, dropout=0.0, bias=True, causal=False, rotary=None):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"SelfAttention: d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.d_model, self.n_heads, self.head_dim = d_model, n_heads, d_model // n_heads
        self.causal, self.dropout = causal, float(dropout)
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.proj = nn.Linear(d_model, d_model, bias=bias)
        self.rotary = rotary

    def forward(self, x, key_padding_mask=None):
        B, T, d = x.shape
        H, D = self.n_heads, self.head_dim
        q, k, v = split_heads(self.qkv(x), 3, H)                          # (B, H, T, D) each
        if self.rotary is not None:
            q, k = self.rotary(q), self.rotary(k)
        mask = None
        if key_padding_mask is not None:  # SDPA's bool convention: True = may attend
            mask = ~_raw_mask(key_padding_mask).reshape(B, 1, 1, T)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=self.causal,
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.proj(y.transpose(1, 2).reshape(B, T, d))


class MLP(nn.Module):
    def __init__(self, d_model, d_ff, bias=True, gelu="none"):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_ff, bias=bias)
        self.act = nn.GELU(approximate=gelu)
        self.fc2 = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class TransformerBlock(nn.Module):
    """One block: self-attention and MLP sublayers with residuals, norms placed by
    ``norm_position``. For "deepnorm", pass ``deepnorm=(alpha, beta)`` (see
    ``deepnorm_constants``); alpha scales the residual, beta the init."""

    def __init__(self, d_model, n_heads, d_ff=None, dropout=0.0, norm_position="pre", norm="layer",
                 causal=False, bias=True, rotary=None, deepnorm=None, gelu="none"):
        super().__init__()
        if norm_position not in NORM_POSITIONS:
            raise ValueError(f"unknown norm_position {norm_position!r}; expected one of {', '.join(NORM_POSITIONS)}")
        if norm_position == "deepnorm" and deepnorm is None:
            raise ValueError("TransformerBlock: norm_position='deepnorm' needs deepnorm=(alpha, beta); "
                             "see deepnorm_constants()")
        self.norm_position = norm_position
        self.alpha = float(deepnorm[0]) if norm_position == "deepnorm" else 1.0
        self.attn = SelfAttention(d_model, n_heads, dropout, bias, causal, rotary)
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
            x = x + self.drop(self.attn(self.norm1(x, kpm), kpm))
            return x + self.drop(self.mlp(self.norm2(x, kpm)))
        a = self.alpha
        r = x if a == 1.0 else x * a
        x = self.norm1(r + self.drop(self.attn(x, kpm)), kpm)
        r = x if a == 1.0 else x * a
        return self.norm2(r + self.drop(self.mlp(x)), kpm)

    def extra_repr(self):
        return f"norm_position={self.norm_position!r}" + (f", alpha={self.alpha:.4g}" if self.alpha != 1.0 else "")


def _xavier_normal(shape, gain, dtype):
    """nn.init.xavier_normal_ values for one (fan_out, fan_in) block of a packed weight."""
    from ..tensor.factories import zeros
    t = zeros(*shape, dtype=dtype)
    nn.init.xavier_normal_(t, gain=gain)
    return t.numpy()


def make_blocks(n_layers, d_model, n_heads, d_ff=None, dropout=0.0, norm_position="pre", norm="layer",
                causal=False, bias=True, rotary=None, role=None, gelu="none", deepnorm=None):
    """A ModuleList of ``n_layers`` blocks. For "deepnorm" the (alpha, beta) come from the depth
    as an encoder-only (``role="encoder"``, default unless causal) or decoder-only stack
    (``role="decoder"``, default when causal); pass ``deepnorm=(alpha, beta)`` to override, e.g.
    ``deepnorm_constants(N, M)["encoder"]`` for the encoder of an N + M encoder-decoder."""
    if norm_position == "deepnorm" and deepnorm is None:
        role = role or ("decoder" if causal else "encoder")
        if role not in ("encoder", "decoder"):
            raise ValueError(f"make_blocks: role must be 'encoder' or 'decoder', got {role!r}")
        consts = deepnorm_constants(n_layers if role == "encoder" else 0, n_layers if role == "decoder" else 0)
        deepnorm = consts[role]
    return nn.ModuleList([TransformerBlock(d_model, n_heads, d_ff, dropout, norm_position, norm, causal, bias,
                                           rotary, deepnorm, gelu) for _ in range(n_layers)])
