"""LSTMs with normalized recurrences, for comparing the two ways of doing it:

- ``LayerNormLSTM`` (Ba, Kiros and Hinton 2016, "Layer Normalization", Section 3.1): LayerNorm on
  the input and the hidden projections of the gates and on the cell state before the output
  tanh. The statistics are each sample's own, so training and evaluation compute the same thing:

      G   = LN(W_hh h_{t-1}; a_h) + LN(W_ih x_t; a_x) + b              (the 4H gates together)
      c_t = sigma(f) * c_{t-1} + sigma(i) * tanh(g)
      h_t = sigma(o) * tanh(LN(c_t; a_c, b_c))

- ``BatchNormLSTM`` (Cooijmans et al. 2016, "Recurrent Batch Normalization"): the same places
  with BatchNorm, whose statistics are kept *per time step* (step t's batch mean and variance in
  training; step t's running averages in evaluation, the last step's beyond ``max_steps``). The
  gains start at 0.1 (the paper's key finding: at 1 the tanh saturates and gradients vanish);
  the projections' shifts are left out (the gate bias b is the one shift).

``NormLSTM(..., norm="layer" | "batch")`` is the common class. Parameters per layer k:
``weight_ih_l{k}`` (4H, I_k), ``weight_hh_l{k}`` (4H, H), ``bias_l{k}`` (4H,) and the norms'
``norm_ih_l{k}``, ``norm_hh_l{k}`` (4H) and ``norm_c_l{k}`` (H). Gate order i, f, g, o, as nn.LSTM.

The input projection of every step is one GEMM and its LayerNorm one call of minidl's LayerNorm
kernels over all (T * B) rows; per step only the hidden projection and its norm run. The gates'
nonlinearities are composed from autograd ops (these are comparison models, not the fast path:
nn.LSTM is). Padded (T, B, I) input only, one direction.
"""
import math

import numpy as np

from ...ops.join import stack
from ...tensor import dtype as dtypes
from ...tensor.tensor import Tensor
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module
from .rnn import same_device, zeros_like_device

NORMS = ("layer", "batch")


class NormLSTM(Module):
    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 norm="layer", eps=1e-5, momentum=0.1, max_steps=256, gamma_init=None, dtype=None):
        super().__init__()
        if norm not in NORMS:
            raise ValueError(f"NormLSTM: norm must be one of {', '.join(NORMS)}, got {norm!r}")
        if hidden_size <= 0 or num_layers <= 0:
            raise ValueError(f"NormLSTM: hidden_size and num_layers must be greater than zero, got "
                             f"hidden_size={hidden_size}, num_layers={num_layers}")
        if not 0 <= dropout <= 1:
            raise ValueError(f"NormLSTM: dropout must be in [0, 1], got {dropout}")
        self.input_size, self.hidden_size, self.num_layers = int(input_size), int(hidden_size), int(num_layers)
        self.batch_first, self.dropout, self.norm = bool(batch_first), float(dropout), norm
        self.eps, self.momentum, self.max_steps = float(eps), float(momentum), int(max_steps)
        self.bias = bool(bias)
        gamma = (0.1 if norm == "batch" else 1.0) if gamma_init is None else float(gamma_init)
        dt = dtypes.to_dtype(dtype) if dtype is not None else dtypes.DEFAULT_FLOAT
        H = self.hidden_size
        for k in range(self.num_layers):
            I_k = self.input_size if k == 0 else H
            self.register_parameter(f"weight_ih_l{k}", Parameter(np.empty((4 * H, I_k), dt)))
            self.register_parameter(f"weight_hh_l{k}", Parameter(np.empty((4 * H, H), dt)))
            self.register_parameter(f"bias_l{k}", Parameter(np.zeros(4 * H, dt)) if bias else None)
            for part, width in (("ih", 4 * H), ("hh", 4 * H), ("c", H)):
                self.register_parameter(f"norm_{part}_l{k}_weight", Parameter(np.full(width, gamma, dt)))
                if part == "c":
                    self.register_parameter(f"norm_{part}_l{k}_bias", Parameter(np.zeros(width, dt)))
                if norm == "batch":
                    self.register_buffer(f"norm_{part}_l{k}_running_mean", _buffer((self.max_steps, width), 0, dt))
                    self.register_buffer(f"norm_{part}_l{k}_running_var", _buffer((self.max_steps, width), 1, dt))
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for k in range(self.num_layers):
            for name in (f"weight_ih_l{k}", f"weight_hh_l{k}", f"bias_l{k}"):
                p = getattr(self, name)
                if p is not None:
                    init.uniform_(p, -stdv, stdv)

    # -----------------------------------------------------------------------------------
    def _norm(self, part, k, x, t):
        """The ``part`` norm of layer k on (rows, width) x; t the time step (BatchNorm's statistics)."""
        w = getattr(self, f"norm_{part}_l{k}_weight")
        b = getattr(self, f"norm_{part}_l{k}_bias", None)
        if self.norm == "layer":
            return F.layer_norm(x, (x.shape[-1],), w, b, eps=self.eps)
        s = min(t, self.max_steps - 1)
        mean = getattr(self, f"norm_{part}_l{k}_running_mean")[s]
        var = getattr(self, f"norm_{part}_l{k}_running_var")[s]
        return F.batch_norm(x, mean, var, w, b, training=self.training and t < self.max_steps,
                            momentum=self.momentum, eps=self.eps)

    def _layer(self, k, x, h, c, start=0):
        """One layer over x (T, B, I_k) from (h, c) (B, H): (outputs (T, B, H), h_T, c_T); x[0] is
        time step ``start`` of the sequence."""
        T, B = x.shape[0], x.shape[1]
        H = self.hidden_size
        if T == 0:   # an empty sequence: no steps, the state passes through (as nn.LSTM)
            return Tensor._wrap(zeros_like_device(x, (0, B, H)), None, 0), h, c
        w_ih, w_hh, bias = getattr(self, f"weight_ih_l{k}"), getattr(self, f"weight_hh_l{k}"), getattr(self,
                                                                                                      f"bias_l{k}")
        gx = F.linear(x.reshape(T * B, x.shape[-1]), w_ih)              # every step's input projection: one GEMM
        if self.norm == "layer":
            gx = self._norm("ih", k, gx, 0).reshape(T, B, 4 * H)        # ... and one LayerNorm call
        else:
            gx = stack([self._norm("ih", k, gx[t * B:(t + 1) * B], start + t) for t in range(T)], 0)
        if bias is not None:
            gx = gx + bias
        outs = []
        for t in range(T):
            g = gx[t] + self._norm("hh", k, F.linear(h, w_hh), start + t)
            i, f, gg, o = g[:, :H].sigmoid(), g[:, H:2 * H].sigmoid(), g[:, 2 * H:3 * H].tanh(), g[:, 3 * H:].sigmoid()
            c = f * c + i * gg
            h = o * self._norm("c", k, c, start + t).tanh()
            outs.append(h)
        return stack(outs, 0), h, c

    def forward(self, input, hx=None, start=0):
        """(output, (h_n, c_n)) as nn.LSTM's. ``start``: the time step of the input's first
        element, for continuing a sequence from ``hx`` one piece at a time (BatchNorm's statistics
        are per time step; LayerNorm's do not depend on it)."""
        if not isinstance(start, int) or isinstance(start, bool) or start < 0:
            raise ValueError(f"{type(self).__name__}: start must be an integer >= 0, got {start!r}")
        if not isinstance(input, Tensor) or input.ndim != 3:
            raise ValueError(f"{type(self).__name__}: Expected input to be 3D (T, B, I) or (B, T, I), got "
                             f"{getattr(input, 'ndim', type(input).__name__)}D instead")
        same_device(type(self).__name__, input, self.named_parameters(),
                    [(f"hx[{i}]", s) for i, s in enumerate(hx or ())])
        x = input.transpose(0, 1) if self.batch_first else input
        if x.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {x.shape[-1]}")
        L, B, H = self.num_layers, x.shape[1], self.hidden_size
        if hx is None:
            h0 = c0 = [Tensor._wrap(zeros_like_device(x, (B, H)), None, 0) for _ in range(L)]
        else:
            h0, c0 = hx
            for i, s in enumerate((h0, c0)):
                if tuple(s.shape) != (L, B, H):
                    raise RuntimeError(f"Expected hidden[{i}] size {(L, B, H)}, got {list(s.shape)}")
            h0, c0 = [h0[k] for k in range(L)], [c0[k] for k in range(L)]
        hs, cs = [], []
        for k in range(L):
            x, h, c = self._layer(k, x, h0[k], c0[k], start)
            hs.append(h)
            cs.append(c)
            if self.dropout > 0 and self.training and k < L - 1:
                x = F.dropout(x, p=self.dropout, training=True)
        out = x.transpose(0, 1) if self.batch_first else x
        return out, (stack(hs, 0), stack(cs, 0))

    def extra_repr(self):
        return f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}, norm={self.norm!r}"


def _buffer(shape, value, dtype):
    from ...tensor.factories import tensor
    return tensor(np.full(shape, value, dtype))


class LayerNormLSTM(NormLSTM):
    """NormLSTM with LayerNorm (Ba et al. 2016, Section 3.1)."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0, eps=1e-5,
                 dtype=None):
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, "layer", eps, dtype=dtype)


class BatchNormLSTM(NormLSTM):
    """NormLSTM with per-time-step BatchNorm, gains initialised to 0.1 (Cooijmans et al. 2016)."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0, eps=1e-5,
                 momentum=0.1, max_steps=256, gamma_init=0.1, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, "batch", eps, momentum,
                         max_steps, gamma_init, dtype)
