"""A small Vision Transformer (Dosovitskiy et al. 2021) for the 8x8 digits.

    model = ViT(image_size=8, patch_size=2, in_channels=1, num_classes=10)
    logits = model(images)                      # images (B, C, H, W)

The image is cut into non-overlapping p x p patches (a reshape and a permute, no
convolution): (B, C, H, W) -> (B, H/p * W/p, C*p*p), each patch linearly embedded, a learned
[CLS] token prepended, learned position embeddings added, then encoder blocks (no mask) and
a final norm; the head reads the [CLS] token (pool="cls") or the mean of the patch tokens
(pool="mean").
"""
import numpy as np

from .. import nn
from ..autograd import grad_mode
from ..nn.parameter import Parameter
from .. import ops
from .transformer import SeqNorm, make_blocks, run_blocks


class ViT(nn.Module):
    def __init__(self, image_size=8, patch_size=2, in_channels=1, num_classes=10, d_model=64, n_layer=2,
                 n_head=4, d_ff=None, dropout=0.0, norm_position="pre", norm="layer", pool="cls",
                 gelu="none", qk_norm=None):
        super().__init__()
        if image_size % patch_size:
            raise ValueError(f"ViT: image_size {image_size} is not a multiple of patch_size {patch_size}")
        if pool not in ("cls", "mean"):
            raise ValueError(f"ViT: pool must be 'cls' or 'mean', got {pool!r}")
        self.image_size, self.patch_size, self.in_channels, self.pool = image_size, patch_size, in_channels, pool
        self.n_patches = (image_size // patch_size) ** 2
        self.patch_embed = nn.Linear(in_channels * patch_size ** 2, d_model)
        self.cls_token = Parameter(np.zeros((1, 1, d_model), np.float32))
        self.pos_emb = nn.LearnedPositionalEmbedding(self.n_patches + 1, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = make_blocks(n_layer, d_model, n_head, d_ff, dropout, norm_position, norm, role="encoder",
                                  gelu=gelu, qk_norm=qk_norm)
        self.norm = SeqNorm(norm, d_model) if norm_position == "pre" else None
        self.head = nn.Linear(d_model, num_classes)
        with grad_mode.no_grad():
            self.cls_token.normal_(0.0, 0.02)

    def patchify(self, x):
        """(B, C, H, W) -> (B, N, C*p*p), patches in row-major order, each flattened (C, p, p)."""
        B, C, Hh, W = x.shape
        if C != self.in_channels or Hh != self.image_size or W != self.image_size:
            raise ValueError(f"ViT: expected images (B, {self.in_channels}, {self.image_size}, {self.image_size}), "
                             f"got {list(x.shape)}")
        p = self.patch_size
        x = x.reshape(B, C, Hh // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
        return x.reshape(B, self.n_patches, C * p * p)

    def forward(self, x):
        B = x.shape[0]
        tokens = self.patch_embed(self.patchify(x))
        cls = self.cls_token.expand(B, 1, self.cls_token.shape[-1])
        x = self.drop(self.pos_emb(ops.cat([cls, tokens], dim=1)))
        x = run_blocks(self.blocks, x, None, self.norm)
        h = x[:, 0] if self.pool == "cls" else x[:, 1:].mean(dim=1)
        return self.head(h)
