"""EmbeddingBag: sums, means or maxima of bags of embeddings (``F.embedding_bag``; with
``max_norm`` the rows a forward names are first renormalised in place, as ``F.embedding``),
weight initialised N(0, 1) with the padding row zero, as PyTorch."""
import numpy as np

from ...ops.embedding_bag import MODES
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .linear import _empty
from .module import Module


class EmbeddingBag(Module):
    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                 mode="mean", sparse=False, _weight=None, include_last_offset=False, padding_idx=None, device=None,
                 dtype=None):
        super().__init__()
        if scale_grad_by_freq or sparse:
            raise NotImplementedError("EmbeddingBag: scale_grad_by_freq and sparse gradients are not supported")
        if mode not in MODES:
            raise ValueError(f"mode has to be one of sum, mean or max, got {mode!r}")
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        if padding_idx is not None:
            if not -self.num_embeddings <= padding_idx < self.num_embeddings:
                raise AssertionError(f"padding_idx must be within num_embeddings ({self.num_embeddings}), "
                                     f"got {padding_idx}")
            padding_idx %= self.num_embeddings
        self.mode, self.include_last_offset, self.padding_idx = mode, include_last_offset, padding_idx
        self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse = max_norm, norm_type, False, False
        if _weight is None:
            self.weight = _empty((self.num_embeddings, self.embedding_dim), dtype)
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (self.num_embeddings, self.embedding_dim):
                raise ValueError(f"EmbeddingBag: _weight must have shape [{self.num_embeddings}, "
                                 f"{self.embedding_dim}], got {list(_weight.shape)}")
            self.weight = Parameter(np.asarray(_weight.numpy(force=True) if hasattr(_weight, "numpy") else _weight))
        if device is not None and str(device) != "cpu":
            self.to(device)

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            self.weight._data[self.padding_idx] = 0

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                        mode="mean", sparse=False, include_last_offset=False, padding_idx=None):
        """An EmbeddingBag whose weight is the (num_embeddings, dim) ``embeddings`` (the same memory, as
        PyTorch's), trainable unless ``freeze``; the padding row keeps its given values."""
        if getattr(embeddings, "ndim", np.ndim(embeddings)) != 2:
            raise AssertionError(f"Embeddings parameter is expected to be 2-dimensional, got "
                                 f"{getattr(embeddings, 'ndim', np.ndim(embeddings))} dims")
        rows, cols = embeddings.shape
        bag = cls(rows, cols, max_norm=max_norm, norm_type=norm_type, scale_grad_by_freq=scale_grad_by_freq,
                  mode=mode, sparse=sparse, _weight=embeddings, include_last_offset=include_last_offset,
                  padding_idx=padding_idx)
        bag.weight.requires_grad = not freeze
        return bag

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type, mode=self.mode,
                               per_sample_weights=per_sample_weights, include_last_offset=self.include_last_offset,
                               padding_idx=self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        s += f", max_norm={self.max_norm!r}" if self.max_norm is not None else ""
        s += f", norm_type={self.norm_type!r}" if self.norm_type != 2 else ""
        s += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s
