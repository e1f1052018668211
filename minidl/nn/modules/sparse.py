"""Embedding: a lookup table of num_embeddings vectors, initialised N(0, 1) (the padding row zero);
with ``max_norm`` the rows a forward selects are first renormalised in place (``F.embedding``)."""
from ...autograd import grad_mode
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .linear import _empty
from .module import Module


class Embedding(Module):
    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, device=None, dtype=None):
        super().__init__()
        if scale_grad_by_freq or sparse:
            raise NotImplementedError("Embedding: scale_grad_by_freq and sparse are not supported")
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        if self.num_embeddings < 0 or self.embedding_dim < 0:
            raise RuntimeError(f"Embedding: num_embeddings and embedding_dim must be non-negative, got "
                               f"num_embeddings={num_embeddings}, embedding_dim={embedding_dim}")
        if padding_idx is not None:
            if not -self.num_embeddings <= padding_idx < self.num_embeddings:
                raise ValueError(f"Embedding: padding_idx {padding_idx} must be within num_embeddings "
                                 f"({self.num_embeddings})")
            padding_idx %= self.num_embeddings
        self.padding_idx = padding_idx
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if _weight is None:
            self.weight = _empty((self.num_embeddings, self.embedding_dim), dtype)
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (self.num_embeddings, self.embedding_dim):
                raise ValueError(f"Embedding: _weight of shape {list(_weight.shape)} does not match "
                                 f"({self.num_embeddings}, {self.embedding_dim})")
            self.weight = Parameter(_weight, requires_grad=not _freeze)
        if device is not None and str(device) != "cpu":
            self.to(device)

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with grad_mode.no_grad():
                self.weight._data[self.padding_idx] = 0

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, sparse=False):
        import numpy as np
        data = embeddings.numpy(force=True).copy() if hasattr(embeddings, "numpy") else np.array(embeddings)
        rows, dim = data.shape
        return cls(rows, dim, padding_idx=padding_idx, max_norm=max_norm, norm_type=norm_type,
                   scale_grad_by_freq=scale_grad_by_freq, sparse=sparse, _weight=data, _freeze=freeze)

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        s += f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        s += f", max_norm={self.max_norm}" if self.max_norm is not None else ""
        return s + (f", norm_type={self.norm_type}" if self.norm_type != 2 else "")
