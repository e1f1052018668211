"""GPT: a decoder-only Transformer language model (Radford et al. 2018/2019), small enough
to train on a laptop CPU.

    model = GPT(vocab_size=96, block_size=64, n_layer=4, n_head=4, d_model=128)
    logits, loss = model(idx, targets)          # idx, targets (B, T) int64; loss: mean NLL in nats
    out = model.generate(idx, max_new_tokens=200, temperature=0.8, top_k=10)

token embedding + position (learned, sinusoidal, or rotary inside attention) -> dropout ->
n_layer causal TransformerBlocks -> final LayerNorm (for pre-norm) -> linear head to vocab
logits. The MLP's GELU is GPT-2's tanh approximation by default (``gelu="none"``: exact).
Init as GPT-2: N(0, 0.02^2) for Linear and Embedding weights, zero biases, and the
residual output projections (attention ``proj`` and MLP ``fc2``) N(0, (0.02/sqrt(2 n_layer))^2)
so the residual stream's variance does not grow with depth (not for "deepnorm", which has
its own init). ``tie_weights`` shares the embedding matrix with the head. ``qk_norm`` ("layer"
or "rms") normalizes each head's queries and keys (see zoo/transformer.py). The blocks run
through ``run_blocks``, which fuses each residual add with the norm that reads it.
"""
import math

import numpy as np

from .. import nn, random
from ..autograd import grad_mode
from ..nn import functional as F
from ..tensor.tensor import Tensor
from .transformer import SeqNorm, make_blocks, run_blocks

POSITIONS = ("learned", "sinusoidal", "rotary")


class GPT(nn.Module):
    def __init__(self, vocab_size, block_size, n_layer=4, n_head=4, d_model=128, d_ff=None, dropout=0.0,
                 norm_position="pre", norm="layer", pos="learned", bias=True, tie_weights=False, gelu="tanh",
                 qk_norm=None):
        super().__init__()
        if pos not in POSITIONS:
            raise ValueError(f"GPT: unknown pos {pos!r}; expected one of {', '.join(POSITIONS)}")
        if norm == "batch":
            raise ValueError("GPT: norm='batch' would let batch statistics leak later tokens into earlier "
                             "positions (not causal); use 'layer', 'rms' or 'scale'")
        self.vocab_size, self.block_size, self.n_layer, self.pos = vocab_size, block_size, n_layer, pos
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        rotary = None
        if pos == "learned":
            self.pos_emb = nn.LearnedPositionalEmbedding(block_size, d_model)
        elif pos == "sinusoidal":
            self.pos_emb = nn.SinusoidalPositionalEncoding(d_model, max_len=block_size)
        else:
            rotary = nn.RotaryEmbedding(d_model // n_head, max_len=block_size)
        self.drop = nn.Dropout(dropout)
        self.blocks = make_blocks(n_layer, d_model, n_head, d_ff, dropout, norm_position, norm, causal=True,
                                  bias=bias, rotary=rotary, role="decoder", gelu=gelu, qk_norm=qk_norm)
        self.ln_f = SeqNorm(norm, d_model) if norm_position == "pre" else None
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self._init_weights(norm_position)
        if tie_weights:
            self.head.weight = self.tok_emb.weight

    def _init_weights(self, norm_position):
        with grad_mode.no_grad():
            self.tok_emb.weight.normal_(0.0, 0.02)
            self.head.weight.normal_(0.0, 0.02)
            if norm_position == "deepnorm":
                return
            resid_std = 0.02 / math.sqrt(2 * self.n_layer)
            for blk in self.blocks:
                for lin in (blk.attn.qkv, blk.mlp.fc1):
                    lin.weight.normal_(0.0, 0.02)
                for lin in (blk.attn.proj, blk.mlp.fc2):
                    lin.weight.normal_(0.0, resid_std)
                for lin in (blk.attn.qkv, blk.mlp.fc1, blk.attn.proj, blk.mlp.fc2):
                    if lin.bias is not None:
                        lin.bias.zero_()

    def forward(self, idx, targets=None):
        """(logits (B, T, vocab), loss or None): mean cross-entropy over every position."""
        idx = _ids(idx)
        B, T = idx.shape
        if T > self.block_size:
            raise ValueError(f"GPT: sequence length {T} exceeds block_size {self.block_size}")
        x = self.tok_emb(idx)
        if self.pos != "rotary":
            x = self.pos_emb(x)
        x = run_blocks(self.blocks, self.drop(x), None, self.ln_f)
        logits = self.head(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(B * T, self.vocab_size), _ids(targets).reshape(B * T))
        return logits, loss

    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        """Extend idx (B, T) by ``max_new_tokens`` sampled tokens, each from
        softmax(logits[:, -1] / temperature) restricted to the ``top_k`` most likely (all when
        None), conditioning on the last ``block_size`` tokens. Draws from minidl.random's
        generator, so ``md.manual_seed(s)`` makes it reproducible. temperature=0 is greedy."""
        def next_logits(ids):
            return self(Tensor._wrap(ids[:, -self.block_size:], None, 0))[0]
        return sample_tokens(self, idx, max_new_tokens, temperature, top_k, next_logits)

    def num_parameters(self):
        return sum(p.numel() for p in self.parameters())


def sample_tokens(model, idx, max_new_tokens, temperature, top_k, next_logits):
    """The language models' ``generate``: the prompt idx (T,) or (B, T) extended by
    ``max_new_tokens`` tokens, each drawn by ``_sample`` from the last position of
    ``next_logits(ids)`` (logits (B, T', vocab) for the int64 ids (B, T) so far), in eval mode
    without gradients; the model's training mode is restored afterwards."""
    ids = _ids(idx).numpy(force=True).astype(np.int64)
    if ids.ndim == 1:
        ids = ids[None]
    if ids.ndim != 2 or ids.shape[1] == 0:
        raise ValueError(f"{type(model).__name__}.generate: expected a prompt of shape (T,) or (B, T) with at "
                         f"least one token (T >= 1) to condition on, got shape {tuple(_ids(idx).shape)}")
    was_training = model.training
    model.eval()
    rng = random.generator()
    try:
        with grad_mode.no_grad():
            for _ in range(int(max_new_tokens)):
                last = next_logits(ids).numpy(force=True)[:, -1, :].astype(np.float64)
                ids = np.concatenate([ids, _sample(last, temperature, top_k, rng)[:, None]], axis=1)
    finally:
        model.train(was_training)
    return Tensor._wrap(ids, None, 0)


def _sample(logits, temperature, top_k, rng):
    """One token per row of logits (B, V), by inverse-CDF sampling with one uniform draw per row."""
    if temperature == 0:
        return logits.argmax(axis=-1)
    z = logits / float(temperature)
    if top_k is not None and top_k < z.shape[-1]:
        kth = np.sort(z, axis=-1)[:, -int(top_k)][:, None]
        z = np.where(z < kth, -np.inf, z)
    p = np.exp(z - z.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    u = rng.random(len(p))[:, None]
    out = (np.cumsum(p, axis=-1) < u).sum(axis=-1)
    return np.minimum(out, p.shape[-1] - 1)


def _ids(x):
    if isinstance(x, Tensor):
        if x.dtype.kind not in "iu":
            raise TypeError(f"GPT: token ids must be integers, got {x.dtype}")
        return x
    a = np.asarray(x)
    if a.dtype.kind not in "iu":
        raise TypeError(f"GPT: token ids must be integers, got {a.dtype}")
    return Tensor._wrap(a.astype(np.int64), None, 0)
