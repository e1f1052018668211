"""A Transformer encoder classifier for variable-length sequences padded into a batch.

    model = TransformerEncoderClassifier(vocab_size=30, num_classes=2, max_len=64, pad_idx=0)
    logits = model(idx, key_padding_mask=None)   # idx (B, T) int64; mask (B, T) True = padding

The padding mask follows nn.MultiheadAttention's convention (True = padding, ignored); when it
is not given it is ``idx == pad_idx``. Padded positions are ignored by attention (their keys
are masked), by masked BatchNorm's statistics (norm="batch"), and by the pooling: a masked
mean over the real tokens, h = sum_t m_t x_t / sum_t m_t, m = not padding. With a per-token
norm ("layer", "rms", "scale") the real tokens' outputs and the logits therefore do not depend
on how much padding follows them (tests/test_transformer.py checks this).
"""
import numpy as np

from .. import nn
from ..backends import get as get_backend
from ..backends import namespace_of
from ..tensor.tensor import Tensor
from .transformer import SeqNorm, make_blocks, run_blocks


class TransformerEncoderClassifier(nn.Module):
    def __init__(self, vocab_size, num_classes, max_len, d_model=64, n_head=4, n_layer=2, d_ff=None,
                 dropout=0.1, norm_position="pre", norm="layer", pos="sinusoidal", pad_idx=0, gelu="none",
                 qk_norm=None):
        super().__init__()
        self.pad_idx = pad_idx
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        rotary = None
        if pos == "learned":
            self.pos_emb = nn.LearnedPositionalEmbedding(max_len, d_model)
        elif pos == "sinusoidal":
            self.pos_emb = nn.SinusoidalPositionalEncoding(d_model, max_len=max_len)
        elif pos == "rotary":
            self.pos_emb = None
            rotary = nn.RotaryEmbedding(d_model // n_head, max_len=max_len)
        else:
            raise ValueError(f"unknown pos {pos!r}; expected 'learned', 'sinusoidal' or 'rotary'")
        self.drop = nn.Dropout(dropout)
        self.blocks = make_blocks(n_layer, d_model, n_head, d_ff, dropout, norm_position, norm, causal=False,
                                  rotary=rotary, role="encoder", gelu=gelu, qk_norm=qk_norm)
        self.norm = SeqNorm(norm, d_model) if norm_position == "pre" else None
        self.head = nn.Linear(d_model, num_classes)

    def encode(self, idx, key_padding_mask=None):
        """(per-token features (B, T, d), padding mask (B, T) as a bool array on idx's device)."""
        on_device = isinstance(idx, Tensor) and idx.device != "cpu"
        ids = idx._data if on_device else (idx.numpy(force=True) if isinstance(idx, Tensor) else np.asarray(idx))
        xp = namespace_of(ids)   # a device's ids stay there: the mask is computed beside them
        if key_padding_mask is None:
            kpm = ids == self.pad_idx if self.pad_idx is not None else xp.zeros(ids.shape, bool)
        else:
            if on_device and isinstance(key_padding_mask, Tensor) and key_padding_mask.device == idx.device:
                kpm = key_padding_mask._data
            else:
                kpm = (key_padding_mask.numpy(force=True) if isinstance(key_padding_mask, Tensor)
                       else np.asarray(key_padding_mask))
                if on_device:   # a host mask is copied up, like the batch itself
                    kpm = get_backend(idx.device).from_host(kpm)
            if kpm.shape != ids.shape or kpm.dtype != np.bool_:
                raise ValueError(f"key_padding_mask must be a bool array of shape {ids.shape}, "
                                 f"got {kpm.dtype} {kpm.shape}")
        x = self.tok_emb(idx if isinstance(idx, Tensor) else Tensor._wrap(ids.astype(np.int64), None, 0))
        if self.pos_emb is not None:
            x = self.pos_emb(x)
        return run_blocks(self.blocks, self.drop(x), kpm, self.norm), kpm

    def forward(self, idx, key_padding_mask=None):
        x, kpm = self.encode(idx, key_padding_mask)
        valid = (~kpm).astype(x.dtype)[:, :, None]                  # (B, T, 1)
        count = namespace_of(valid).maximum(valid.sum(axis=1), 1.0)  # (B, 1); an all-padding row pools to 0
        pooled = (x * valid).sum(dim=1) / count
        return self.head(pooled)
