"""RNN, LSTM, GRU and their cells with PyTorch's arguments, parameter names, gate order and
initialisation, so a PyTorch state_dict loads as is and gives the same outputs.

    lstm = nn.LSTM(input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                   dropout=0.0, bidirectional=False, proj_size=0)
    output, (h_n, c_n) = lstm(x, (h0, c0))       # x (T, B, I), (B, T, I) or (T, I); or a PackedSequence

Parameters of layer k (suffix ``_reverse`` for the backward direction): ``weight_ih_l{k}``
(gates * H, I_k), ``weight_hh_l{k}`` (gates * H, P), ``bias_ih_l{k}``, ``bias_hh_l{k}`` (gates * H,)
and, for an LSTM with ``proj_size`` P > 0, ``weight_hr_l{k}`` (P, H); gates = 4 (i, f, g, o),
3 (r, z, n) or 1, I_0 = input_size and I_k = P * directions beyond, P = H without a projection.
Every parameter starts U(-1/sqrt(H), 1/sqrt(H)), as PyTorch.

Each (layer, direction) is one Function over the whole sequence (minidl.ops.rnn: the derivation,
the loop over time, the fused gate kernels), on the device of its input: ``lstm.to("cuda")`` runs
the same loop on cuda arrays with the cuda gate kernels. Dropout, when given, applies to every
layer's output but the last, in training mode only.
"""
import math
import numbers
import warnings

import numpy as np

from ...autograd import autocast_state
from ...backends import namespace_of
from ...ops.join import cat, stack
from ...ops.rnn import GRULayer, LSTMLayer, RNNLayer
from ...tensor import dtype as dtypes
from ...tensor.size import check_sizes
from ...tensor.tensor import Tensor
from .. import functional as F
from .. import init
from ..parameter import Parameter
from ..utils.rnn import PackedSequence
from .module import Module

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _param(shape, dtype):
    return Parameter(np.empty(shape, dtype=dtypes.to_dtype(dtype) if dtype is not None else dtypes.DEFAULT_FLOAT))


class RNNInputDtypeError(dtypes.DtypeMismatchError, ValueError):
    """An input to an RNN/LSTM/GRU stack in another dtype than its weights: PyTorch's ValueError,
    and minidl's DtypeMismatchError (a RuntimeError and a TypeError) as for any other layer."""


def _check_dtypes(name, x, params, states, stack=False):
    if autocast_state.state.on and autocast_state.casts(name, "cpu" if type(x._data) is np.ndarray else "cuda"):
        return   # autocast casts the input, weights and states to one dtype (minidl/amp/policy.py)
    for pname, t in list(params) + list(states):
        if isinstance(t, Tensor) and t.dtype != x.dtype:
            if stack and pname == "weight_ih_l0":
                raise RNNInputDtypeError(f"RNN input dtype ({x.dtype}) does not match weight dtype ({t.dtype}). "
                                         f"Convert input: input.to({t.dtype}), or convert model: model.to({x.dtype})")
            raise dtypes.DtypeMismatchError(f"{name}: input must have the type {t.dtype} of {pname}, got {x.dtype}")


def same_device(name, x, params, states):
    """Input, parameters and states on one device, or PyTorch's RuntimeError naming the two."""
    for kind, tensors in (("parameter", params), ("hidden", states)):
        for what, t in tensors:
            if isinstance(t, Tensor) and t.device != x.device:
                raise RuntimeError(f"{name}: Input and {kind} tensors are not at the same device, found input "
                                   f"tensor at {x.device} and {kind} tensor {what} at {t.device}")


def zeros_like_device(x, shape):
    """A zero state of x's dtype on x's device (a raw array: the layers take it as is)."""
    return namespace_of(x._data).zeros(shape, x.dtype)


def _raw(t):
    return t._data if isinstance(t, Tensor) else t


def _run_layer(mode, x, p, h0, c0, batch_sizes, reverse):
    """One direction of one layer: (output (N, P), h_n, c_n or None)."""
    if mode == "LSTM":
        return LSTMLayer.apply(x, p["weight_ih"], p["weight_hh"], p.get("bias_ih"), p.get("bias_hh"),
                               p.get("weight_hr"), h0, c0, batch_sizes, reverse)
    if mode == "GRU":
        y, h = GRULayer.apply(x, p["weight_ih"], p["weight_hh"], p.get("bias_ih"), p.get("bias_hh"), h0,
                              batch_sizes, reverse)
    else:
        y, h = RNNLayer.apply(x, p["weight_ih"], p["weight_hh"], p.get("bias_ih"), p.get("bias_hh"), h0,
                              batch_sizes, reverse, mode == "RNN_RELU")
    return y, h, None


class RNNBase(Module):
    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool)) or not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}")
        for what, v in (("input_size", input_size), ("hidden_size", hidden_size), ("num_layers", num_layers),
                        ("proj_size", proj_size)):
            if not isinstance(v, numbers.Integral) or isinstance(v, bool):
                raise TypeError(f"{what} should be of type int, got: {type(v).__name__}")
        if input_size <= 0:
            raise ValueError(f"input_size must be greater than zero, got input_size={input_size}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        self.mode, self.input_size, self.hidden_size = mode, int(input_size), int(hidden_size)
        self.num_layers, self.bias, self.batch_first = int(num_layers), bool(bias), bool(batch_first)
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bool(bidirectional), int(proj_size)
        D = 2 if bidirectional else 1
        G, H = _GATES[mode], self.hidden_size
        P = self.proj_size or H
        self._flat_weights_names = []
        for layer in range(self.num_layers):
            for direction in range(D):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                shapes = [("weight_ih", (G * H, self.input_size if layer == 0 else P * D)),
                          ("weight_hh", (G * H, P))]
                if bias:
                    shapes += [("bias_ih", (G * H,)), ("bias_hh", (G * H,))]
                if self.proj_size:
                    shapes.append(("weight_hr", (P, H)))
                for name, shape in shapes:
                    setattr(self, name + suffix, _param(shape, dtype))
                    self._flat_weights_names.append(name + suffix)
        self.reset_parameters()
        if device is not None and str(device) != "cpu":
            self.to(device)

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -stdv, stdv)

    def flatten_parameters(self):
        """PyTorch packs the weights for cuDNN here; minidl's layers read them as they are."""

    @property
    def _flat_weights(self):
        """The parameters in ``_flat_weights_names`` order (layer, direction, then w_ih, w_hh, b_ih,
        b_hh, w_hr), as PyTorch keeps them."""
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        D = 2 if self.bidirectional else 1
        per = len(self._flat_weights_names) // (self.num_layers * D)
        names = self._flat_weights_names
        return [[getattr(self, n) for n in names[i:i + per]] for i in range(0, len(names), per)]

    def _layer_params(self, layer, direction):
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        out = {}
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr"):
            p = getattr(self, name + suffix, None)
            if p is not None:
                out[name] = p
        return out

    def _name(self):
        return {"RNN_TANH": "RNN", "RNN_RELU": "RNN"}.get(self.mode, self.mode)

    # -----------------------------------------------------------------------------------
    def forward(self, input, hx=None):
        name = self._name()
        packed = isinstance(input, PackedSequence)
        if packed:
            data, bs_t, sorted_indices, unsorted_indices = input
            batch_sizes = bs_t.numpy(force=True).astype(np.int64)
            B, batched = (int(batch_sizes[0]) if batch_sizes.size else 0), True
            if data.ndim != 2:
                raise ValueError(f"{name}: Expected the packed data to be 2D (N, input_size), got {data.ndim}D")
            x = data
        else:
            if not isinstance(input, Tensor):
                raise TypeError(f"{name}: input must be a Tensor or a PackedSequence, got {type(input).__name__}")
            if input.ndim not in (2, 3):
                raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.ndim}D instead")
            batched = input.ndim == 3
            x = input if batched else input.unsqueeze(1)
            if self.batch_first and batched:
                x = x.transpose(0, 1)
            T, B = x.shape[0], x.shape[1]
            batch_sizes = np.full(T, B, np.int64)
            sorted_indices = unsorted_indices = None
        if x.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {x.shape[-1]}")
        if not packed:
            x = x.reshape(T * B, self.input_size)
        given = list(hx) if isinstance(hx, (tuple, list)) else [hx]
        same_device(name, x, self.named_parameters(), [(f"hx[{i}]", s) for i, s in enumerate(given)])
        h0, c0 = self._initial_states(hx, x, B, batched, sorted_indices)
        _check_dtypes(name, x, self.named_parameters(), [("hx", h0), ("cx", c0)], stack=True)

        D = 2 if self.bidirectional else 1
        h_n, c_n = [], []
        layer_in = x
        for layer in range(self.num_layers):
            outs = []
            for d in range(D):
                k = layer * D + d
                y, h, c = _run_layer(self.mode, layer_in, self._layer_params(layer, d), _pick(h0, k),
                                     None if c0 is None else _pick(c0, k), batch_sizes, d == 1)
                outs.append(y)
                h_n.append(h)
                c_n.append(c)
            layer_in = outs[0] if D == 1 else cat(outs, dim=1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                layer_in = F.dropout(layer_in, p=self.dropout, training=True)
        h_n = stack(h_n, 0)
        c_n = stack(c_n, 0) if self.mode == "LSTM" else None
        if packed:
            output = PackedSequence(layer_in, bs_t, sorted_indices, unsorted_indices)
            if unsorted_indices is not None:
                idx = unsorted_indices.numpy(force=True)
                h_n = h_n[:, idx]
                c_n = None if c_n is None else c_n[:, idx]
        else:
            output = layer_in.reshape(T, B, layer_in.shape[-1])
            if not batched:
                output, h_n = output.squeeze(1), h_n.squeeze(1)
                c_n = None if c_n is None else c_n.squeeze(1)
            elif self.batch_first:
                output = output.transpose(0, 1)
        return output, ((h_n, c_n) if self.mode == "LSTM" else h_n)

    def _initial_states(self, hx, x, B, batched, sorted_indices):
        """(h0, c0) as (layers * directions, B, .) Tensors or zero arrays, checked, in sorted order."""
        D = 2 if self.bidirectional else 1
        L, H, P = self.num_layers, self.hidden_size, self.proj_size or self.hidden_size
        lstm = self.mode == "LSTM"
        h_shape, c_shape = (L * D, B, P), (L * D, B, H)
        if hx is None:
            h0 = zeros_like_device(x, h_shape)
            return h0, (zeros_like_device(x, c_shape) if lstm else None)
        if lstm:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError(f"LSTM: hx must be a tuple (h_0, c_0), got {type(hx).__name__}")
            states = list(hx)
        else:
            if not isinstance(hx, Tensor):
                raise TypeError(f"{self._name()}: hx must be a Tensor, got {type(hx).__name__}")
            states = [hx]
        want = 3 if batched else 2
        dims = [s.ndim for s in states]
        if any(d != want for d in dims):
            kind = "batched 3-D" if batched else "unbatched 2-D"
            if lstm:
                got = ", ".join(f"{d}-D" for d in dims)
                raise RuntimeError(f"For {kind} input, hx and cx should also be {want}-D but got ({got}) tensors")
            raise RuntimeError(f"For {kind} input, hx should also be {want}-D but got {dims[0]}-D tensor")
        if not batched:
            states = [s.unsqueeze(1) for s in states]
        if sorted_indices is not None:
            idx = sorted_indices.numpy(force=True)
            states = [s[:, idx] for s in states]
        for i, (s, shape) in enumerate(zip(states, (h_shape, c_shape))):
            if tuple(s.shape) != shape:
                which = f"hidden[{i}] size" if lstm else "hidden size"
                raise RuntimeError(f"Expected {which} {shape}, got {list(s.shape)}")
        return states[0], (states[1] if lstm else None)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        for what, default in (("bias", True), ("batch_first", False), ("dropout", 0.0), ("bidirectional", False)):
            if getattr(self, what) != default:
                s += f", {what}={getattr(self, what)}"
        return s


def _pick(states, k):
    return states[k] if isinstance(states, Tensor) else namespace_of(states).ascontiguousarray(states[k])


class RNN(RNNBase):
    """Elman RNN: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (or relu)."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size, num_layers,
                         bias, batch_first, dropout, bidirectional, 0, device, dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """LSTM with PyTorch's gate order (i, f, g, o) and optional output projection ``proj_size``."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device, dtype)


class GRU(RNNBase):
    """GRU with PyTorch's gate order (r, z, n), the reset gate applied to W_hn h + b_hn."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0,
                         device, dtype)


# ------------------------------------------------------------------------------------- cells
class RNNCellBase(Module):
    """One step: weight_ih (gates * H, I), weight_hh (gates * H, H), bias_ih, bias_hh (gates * H,)."""

    _mode = None

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = int(input_size), int(hidden_size), bool(bias)
        check_sizes(type(self).__name__, input_size=self.input_size, hidden_size=self.hidden_size)
        G, H = _GATES[self._mode], self.hidden_size
        self.weight_ih = _param((G * H, self.input_size), dtype)
        self.weight_hh = _param((G * H, H), dtype)
        if bias:
            self.bias_ih, self.bias_hh = _param((G * H,), dtype), _param((G * H,), dtype)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()
        if device is not None and str(device) != "cpu":
            self.to(device)

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for p in self.parameters():
            init.uniform_(p, -stdv, stdv)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _prepare(self, input, states):
        """(batched input (B, I), states as (B, H) Tensors or zero arrays, batched?) after PyTorch's checks."""
        name = type(self).__name__
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: input must be a Tensor, got {type(input).__name__}")
        if input.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        for s in states:
            if s is not None and s.ndim not in (1, 2):
                raise ValueError(f"{name}: Expected hidden to be 1D or 2D, got {s.ndim}D instead")
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        if x.shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {x.shape[1]} expected {self.input_size}")
        B = x.shape[0]
        same_device(name, x, self.named_parameters(), [(f"hidden{i}", s) for i, s in enumerate(states)])
        out = []
        for i, s in enumerate(states):
            if s is None:
                out.append(zeros_like_device(x, (B, self.hidden_size)))
                continue
            s = s if batched or s.ndim == 2 else s.unsqueeze(0)
            if s.shape[0] != B:
                raise RuntimeError(f"Input batch size {B} doesn't match hidden{i} batch size {s.shape[0]}")
            if s.shape[1] != self.hidden_size:
                raise RuntimeError(f"hidden{i} has inconsistent hidden_size: got {s.shape[1]}, "
                                   f"expected {self.hidden_size}")
            out.append(s)
        _check_dtypes(name, x, self.named_parameters(), [(f"hidden{i}", s) for i, s in enumerate(out)])
        return x, out, batched

    def _params(self):
        return {"weight_ih": self.weight_ih, "weight_hh": self.weight_hh, "bias_ih": self.bias_ih,
                "bias_hh": self.bias_hh}


class RNNCell(RNNCellBase):
    _mode = "RNN_TANH"

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__(input_size, hidden_size, bias, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        x, (h0,), batched = self._prepare(input, [hx])
        mode = "RNN_RELU" if self.nonlinearity == "relu" else "RNN_TANH"
        y, _, _ = _run_layer(mode, x, self._params(), h0, None, (x.shape[0],), False)
        return y if batched else y.squeeze(0)


class GRUCell(RNNCellBase):
    _mode = "GRU"

    def forward(self, input, hx=None):
        x, (h0,), batched = self._prepare(input, [hx])
        y, _, _ = _run_layer("GRU", x, self._params(), h0, None, (x.shape[0],), False)
        return y if batched else y.squeeze(0)


class LSTMCell(RNNCellBase):
    _mode = "LSTM"

    def forward(self, input, hx=None):
        states = [None, None] if hx is None else list(hx)
        if len(states) != 2:
            raise TypeError(f"LSTMCell: hx must be a tuple (h_0, c_0), got {len(states)} values")
        x, (h0, c0), batched = self._prepare(input, states)
        _, h, c = _run_layer("LSTM", x, self._params(), h0, c0, (x.shape[0],), False)
        h, c = _cell_state_dtype(h, c, _raw(c0).dtype)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


def _cell_state_dtype(h, c, state_dtype):
    """(h', c') in the dtype PyTorch's CPU LSTMCell gives them under autocast. Its cell is linears
    (lowered) and pointwise ops: the gates come out in the low dtype and c' = f c + i g promotes them
    with the cell state c, so h' and c' are float32 for a float32 c (the zero state made when none
    is given has the input's dtype) or one of the other 2-byte dtype; the step itself runs lowered."""
    low = h._data.dtype
    if state_dtype == low or low not in _LOW_DTYPES or type(h._data) is not np.ndarray:
        return h, c
    if not (autocast_state.state.on and autocast_state.casts("LSTMCell", "cpu")):
        return h, c
    if state_dtype not in _LOW_DTYPES + (np.dtype(np.float32),):
        return h, c
    return h.to(dtypes.float32), c.to(dtypes.float32)


_LOW_DTYPES = tuple(d.dtype for d in dtypes._LOW)
