"""Positional encodings: learned, sinusoidal (added to the token embeddings) and rotary
(applied to queries and keys inside attention).

All take batch-first inputs (B, T, D) (rotary: (..., T, head_dim)) and positions
0..T-1 (plus ``offset``).
"""
import numpy as np

from ...ops.rotary import apply_rotary
from ...tensor.tensor import Tensor
from ..parameter import Parameter
from .module import Module


def _check_len(T, max_len, name):
    if T > max_len:
        raise ValueError(f"{name}: sequence length {T} exceeds max_len={max_len}")


class LearnedPositionalEmbedding(Module):
    """x + W[offset:offset+T], W (max_len, D) learned, initialised N(0, 0.02^2) as GPT-2."""

    def __init__(self, max_len, embedding_dim):
        super().__init__()
        self.max_len, self.embedding_dim = max_len, embedding_dim
        self.weight = Parameter(np.zeros((max_len, embedding_dim), np.float32))
        self.reset_parameters()

    def reset_parameters(self):
        from ... import no_grad
        with no_grad():
            self.weight.normal_(0.0, 0.02)

    def forward(self, x, offset=0):
        T = x.shape[-2]
        _check_len(offset + T, self.max_len, type(self).__name__)
        return x + self.weight[offset:offset + T]

    def extra_repr(self):
        return f"{self.max_len}, {self.embedding_dim}"


def sinusoidal_table(max_len, dim, base=10000.0):
    """PE[t, 2i] = sin(t / base^(2i/dim)), PE[t, 2i+1] = cos(t / base^(2i/dim))
    (Vaswani et al. 2017, section 3.5)."""
    pos = np.arange(max_len, dtype=np.float64)[:, None]
    inv = base ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)
    pe = np.zeros((max_len, dim))
    pe[:, 0::2] = np.sin(pos * inv)
    pe[:, 1::2] = np.cos(pos * inv[: dim // 2])
    return pe


class SinusoidalPositionalEncoding(Module):
    """x + PE[offset:offset+T] with the fixed table of ``sinusoidal_table`` (a non-persistent
    buffer: it is recomputed, not saved)."""

    def __init__(self, embedding_dim, max_len=4096, base=10000.0):
        super().__init__()
        self.embedding_dim, self.max_len = embedding_dim, max_len
        self.register_buffer("pe", Tensor._wrap(sinusoidal_table(max_len, embedding_dim, base).astype(np.float32),
                                                None, 0), persistent=False)

    def forward(self, x, offset=0):
        T = x.shape[-2]
        _check_len(offset + T, self.max_len, type(self).__name__)
        return x + self.pe[offset:offset + T].to(x.dtype)

    def extra_repr(self):
        return f"{self.embedding_dim}, max_len={self.max_len}"


class RotaryEmbedding(Module):
    """RoPE for one head's features: ``rope(q)``, ``rope(k)`` rotate (..., T, head_dim) by
    angle t * theta_i, theta_i = base^(-2i/head_dim) (see minidl.ops.rotary for the math)."""

    def __init__(self, head_dim, max_len=4096, base=10000.0):
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"RotaryEmbedding: head_dim must be even, got {head_dim}")
        self.head_dim, self.max_len, self.base = head_dim, max_len, base
        theta = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
        ang = np.arange(max_len, dtype=np.float64)[:, None] * theta[None, :]
        ang = np.concatenate([ang, ang], axis=1)
        self._cos, self._sin = np.cos(ang), np.sin(ang)  # float64 tables, cast per call

    def forward(self, x, offset=0):
        T = x.shape[-2]
        _check_len(offset + T, self.max_len, type(self).__name__)
        if x.shape[-1] != self.head_dim:
            raise ValueError(f"RotaryEmbedding: expected last dim {self.head_dim}, got shape {list(x.shape)}")
        cos, sin = self._tables(x)
        return apply_rotary(x, cos[offset:offset + T], sin[offset:offset + T])

    def _tables(self, x):
        """The cos/sin tables where x lives: on a device, copied up once per (device, dtype) and
        kept (slicing a device table is a view), so a step does not upload them again."""
        if x.device == "cpu":
            return self._cos, self._sin
        cache = self.__dict__.setdefault("_device_tables", {})
        key = (x.device, np.dtype(x.dtype))
        if key not in cache:
            from ...backends import get
            backend = get(x.device)
            cache[key] = tuple(backend.from_host(t.astype(key[1])) for t in (self._cos, self._sin))
        return cache[key]

    def extra_repr(self):
        return f"{self.head_dim}, max_len={self.max_len}, base={self.base}"
