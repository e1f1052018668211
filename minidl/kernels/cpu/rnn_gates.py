"""One recurrent step's gate nonlinearities, forward and backward, each a single fused pass.

The math (and the NumPy reference these kernels must equal) is in ``minidl.ops.rnn``: lstm.py,
gru.py, rnn_cell.py. A step of a recurrent layer is two GEMMs' worth of arithmetic (the hidden
projection; the input projection of all steps is one GEMM before the loop) and then a handful
of elementwise operations on the (n, k*H) pre-activations: sigmoids, tanhs, products. In NumPy
those are ten to twenty passes over memory and as many temporaries per step; here they are one
loop that reads each pre-activation once and writes the activations back in place (the
backward needs them, and the pre-activations are not needed again).

Signatures (all arrays C-contiguous rows of the current step's n active sequences):

    lstm_step_forward(gates, hg, c, c_prev_out, c_out, h_out)
        gates (n, 4H): x W_ih^T + b_ih + b_hh in, activations (i, f, g, o) out;
        hg (n, 4H) = h W_hh^T; c (n, H): the cell state, updated in place; c_prev_out, c_out
        receive c_{t-1} and c_t (saved for backward), h_out receives o * tanh(c_t).
    lstm_step_backward(gates, c, c_prev, dy, dh, dc, dgates)
        dh_t = dy + dh; dc (n, H) in: dL/dc_t from step t+1, out: dL/dc_{t-1};
        dgates (n, 4H) out: dL/d(pre-activations).
    gru_step_forward(gates, hg, b_hn, h_prev, ghn_out, h_out)
        gates (n, 3H): x W_ih^T + b_ih in, (r, z, n) out; hg (n, 3H) = h W_hh^T without its bias,
        b_hh (3H,) added here; ghn_out (n, H) receives W_hn h + b_hn (saved for backward).
    gru_step_backward(gates, ghn, h_prev, dy, dh, dgi, dgh)
        dh in: dL/dh_t from step t+1, out: the direct part z * dh_t of dL/dh_{t-1} (the part
        through W_hh, dgh W_hh, is a GEMM the caller adds).
    rnn_step_forward(gates, hg, h_out, relu) / rnn_step_backward(h, dy, dh, dgates, relu)

Float32 arrays use the vectorisable ``exp32`` (sigmoid = 1 / (1 + exp(-x)), tanh = 2 sigmoid(2x)
- 1, absolute error about 1e-7); float64 arrays use libm's exp and tanh. Constants reach the
loops as arguments of the arrays' dtype (``one``), so float32 arithmetic is not promoted to
float64 by a Python literal. The step sizes of a char-LM (n * H = 32 * 256) are below the
parallel threshold, so the loops are serial; larger steps run the parallel variants.
"""
import math

import numpy as np
from numba import njit, prange, types
from numba.extending import overload

from . import _layer_threads
from ._fastexp import exp32

PARALLEL_MIN_ELEMENTS = 1 << 16
_CONTRACT = {"contract"}


def sigmoid_any(x, one):
    return 1.0 / (1.0 + math.exp(-x))


def tanh_any(x, one):
    return math.tanh(x)


@overload(sigmoid_any, inline="always")
def _sigmoid_any(x, one):
    if x == types.float32:
        return lambda x, one: one / (one + exp32(-x))
    return lambda x, one: one / (one + math.exp(-x))


@overload(tanh_any, inline="always")
def _tanh_any(x, one):
    if x == types.float32:
        return lambda x, one: (one + one) / (one + exp32(-(x + x))) - one
    return lambda x, one: math.tanh(x)


def _lstm_fwd_body(gates, hg, c, c_prev_out, c_out, h_out, one, b):
    H = c.shape[1]
    for j in range(H):
        i = sigmoid_any(gates[b, j] + hg[b, j], one)
        f = sigmoid_any(gates[b, H + j] + hg[b, H + j], one)
        g = tanh_any(gates[b, 2 * H + j] + hg[b, 2 * H + j], one)
        o = sigmoid_any(gates[b, 3 * H + j] + hg[b, 3 * H + j], one)
        gates[b, j] = i
        gates[b, H + j] = f
        gates[b, 2 * H + j] = g
        gates[b, 3 * H + j] = o
        cp = c[b, j]
        cn = f * cp + i * g
        c_prev_out[b, j] = cp
        c[b, j] = cn
        c_out[b, j] = cn
        h_out[b, j] = o * tanh_any(cn, one)


def _lstm_bwd_body(gates, c, c_prev, dy, dh, dc, dgates, one, b):
    H = c.shape[1]
    for j in range(H):
        i = gates[b, j]
        f = gates[b, H + j]
        g = gates[b, 2 * H + j]
        o = gates[b, 3 * H + j]
        tc = tanh_any(c[b, j], one)
        dht = dy[b, j] + dh[b, j]
        dct = dc[b, j] + dht * o * (one - tc * tc)
        dgates[b, j] = dct * g * i * (one - i)
        dgates[b, H + j] = dct * c_prev[b, j] * f * (one - f)
        dgates[b, 2 * H + j] = dct * i * (one - g * g)
        dgates[b, 3 * H + j] = dht * tc * o * (one - o)
        dc[b, j] = dct * f


def _gru_fwd_body(gates, hg, bhh, h_prev, ghn_out, h_out, one, b):
    H = h_prev.shape[1]
    for j in range(H):
        r = sigmoid_any(gates[b, j] + hg[b, j] + bhh[j], one)
        z = sigmoid_any(gates[b, H + j] + hg[b, H + j] + bhh[H + j], one)
        ghn = hg[b, 2 * H + j] + bhh[2 * H + j]
        n = tanh_any(gates[b, 2 * H + j] + r * ghn, one)
        gates[b, j] = r
        gates[b, H + j] = z
        gates[b, 2 * H + j] = n
        ghn_out[b, j] = ghn
        h_out[b, j] = (one - z) * n + z * h_prev[b, j]


def _gru_bwd_body(gates, ghn, h_prev, dy, dh, dgi, dgh, one, b):
    H = h_prev.shape[1]
    for j in range(H):
        r = gates[b, j]
        z = gates[b, H + j]
        n = gates[b, 2 * H + j]
        dht = dy[b, j] + dh[b, j]
        dn = dht * (one - z) * (one - n * n)
        dz = dht * (h_prev[b, j] - n) * z * (one - z)
        dr = dn * ghn[b, j] * r * (one - r)
        dgi[b, j] = dr
        dgi[b, H + j] = dz
        dgi[b, 2 * H + j] = dn
        dgh[b, j] = dr
        dgh[b, H + j] = dz
        dgh[b, 2 * H + j] = dn * r
        dh[b, j] = dht * z


def _rnn_fwd_body(gates, hg, h_out, relu, one, b):
    for j in range(h_out.shape[1]):
        v = gates[b, j] + hg[b, j]
        if relu:
            h_out[b, j] = v if v > 0 else v * 0
        else:
            h_out[b, j] = tanh_any(v, one)


def _rnn_bwd_body(h, dy, dh, dgates, relu, one, b):
    for j in range(h.shape[1]):
        d = dy[b, j] + dh[b, j]
        hv = h[b, j]
        if relu:
            dgates[b, j] = d if hv > 0 else d * 0
        else:
            dgates[b, j] = d * (one - hv * hv)


_inline = njit(error_model="numpy", cache=True, inline="always")
_bodies = {name: _inline(fn) for name, fn in (
    ("lstm_fwd", _lstm_fwd_body), ("lstm_bwd", _lstm_bwd_body), ("gru_fwd", _gru_fwd_body),
    ("gru_bwd", _gru_bwd_body), ("rnn_fwd", _rnn_fwd_body), ("rnn_bwd", _rnn_bwd_body))}
_lstm_fwd_row, _lstm_bwd_row = _bodies["lstm_fwd"], _bodies["lstm_bwd"]
_gru_fwd_row, _gru_bwd_row = _bodies["gru_fwd"], _bodies["gru_bwd"]
_rnn_fwd_row, _rnn_bwd_row = _bodies["rnn_fwd"], _bodies["rnn_bwd"]


# One serial and one parallel loop over the rows per kernel (prange is range when serial).
@njit(error_model="numpy", cache=True, fastmath=_CONTRACT)
def _lstm_fwd(gates, hg, c, c_prev_out, c_out, h_out, one):
    for b in range(c.shape[0]):
        _lstm_fwd_row(gates, hg, c, c_prev_out, c_out, h_out, one, b)


@njit(error_model="numpy", cache=True, fastmath=_CONTRACT, parallel=True)
def _lstm_fwd_par(gates, hg, c, c_prev_out, c_out, h_out, one):
    for b in prange(c.shape[0]):
        _lstm_fwd_row(gates, hg, c, c_prev_out, c_out, h_out, one, b)


@njit(error_model="numpy", cache=True, fastmath=_CONTRACT)
def _lstm_bwd(gates, c, c_prev, dy, dh, dc, dgates, one):
    for b in range(c.shape[0]):
        _lstm_bwd_row(gates, c, c_prev, dy, dh, dc, dgates, one, b)


@njit(error_model="numpy", cache=True, fastmath=_CONTRACT, parallel=True)
def _lstm_bwd_par(gates, c, c_prev, dy, dh, dc, dgates, one):
    for b in prange(c.shape[0]):
        _lstm_bwd_row(gates, c, c_prev, dy, dh, dc, dgates, one, b)


@njit(error_model="numpy", cache=True, fastmath=_CONTRACT)
def _gru_fwd(gates, hg, bhh, h_prev, ghn_out, h_out, one):
    for b in range(h_prev.shape[0]):
        _gru_fwd_row(gates, hg, bhh, h_prev, ghn_out, h_out, one, b)


@njit(error_model="numpy", cache=True, fastmath=_CONTRACT, parallel=True)
def _gru_fwd_par(gates, hg, bhh, h_prev, ghn_out, h_out, one):
    for b in prange(h_prev.shape[0]):
        _gru_fwd_row(gates, hg, bhh, h_prev, ghn_out, h_out, one, b)


@njit(error_model="numpy", cache=True, fastmath=_CONTRACT)
def _gru_bwd(gates, ghn, h_prev, dy, dh, dgi, dgh, one):
    for b in range(h_prev.shape[0]):
        _gru_bwd_row(gates, ghn, h_prev, dy, dh, dgi, dgh, one, b)


@njit(error_model="numpy", cache=True, fastmath=_CONTRACT, parallel=True)
def _gru_bwd_par(gates, ghn, h_prev, dy, dh, dgi, dgh, one):
    for b in prange(h_prev.shape[0]):
        _gru_bwd_row(gates, ghn, h_prev, dy, dh, dgi, dgh, one, b)


@njit(error_model="numpy", cache=True, fastmath=_CONTRACT)
def _rnn_fwd(gates, hg, h_out, relu, one):
    for b in range(h_out.shape[0]):
        _rnn_fwd_row(gates, hg, h_out, relu, one, b)


@njit(error_model="numpy", cache=True, fastmath=_CONTRACT, parallel=True)
def _rnn_fwd_par(gates, hg, h_out, relu, one):
    for b in prange(h_out.shape[0]):
        _rnn_fwd_row(gates, hg, h_out, relu, one, b)


@njit(error_model="numpy", cache=True, fastmath=_CONTRACT)
def _rnn_bwd(h, dy, dh, dgates, relu, one):
    for b in range(h.shape[0]):
        _rnn_bwd_row(h, dy, dh, dgates, relu, one, b)


@njit(error_model="numpy", cache=True, fastmath=_CONTRACT, parallel=True)
def _rnn_bwd_par(h, dy, dh, dgates, relu, one):
    for b in prange(h.shape[0]):
        _rnn_bwd_row(h, dy, dh, dgates, relu, one, b)


def _check(name, width, n, H, *arrays):
    """Every array a C-contiguous (n, k H) block of one dtype: Numba checks no bounds."""
    dtype = arrays[0][1].dtype
    for (k, a) in arrays:
        if a.dtype != dtype or a.ndim != 2 or not a.flags.c_contiguous or a.shape != (n, k * H):
            raise ValueError(f"{name}: expected C-contiguous ({n}, {k * H}) {dtype} arrays, got "
                             f"shape {a.shape}, dtype {a.dtype}, contiguous {a.flags.c_contiguous}")
    return dtype.type(1)


def _pick(serial, parallel, size):
    return parallel if _layer_threads.use_parallel(size, PARALLEL_MIN_ELEMENTS) else serial


def lstm_step_forward(gates, hg, c, c_prev_out, c_out, h_out):
    n, H = c.shape
    one = _check("lstm_step_forward", 4, n, H, (4, gates), (4, hg), (1, c), (1, c_prev_out), (1, c_out), (1, h_out))
    _pick(_lstm_fwd, _lstm_fwd_par, n * H)(gates, hg, c, c_prev_out, c_out, h_out, one)


def lstm_step_backward(gates, c, c_prev, dy, dh, dc, dgates):
    n, H = c.shape
    one = _check("lstm_step_backward", 4, n, H, (4, gates), (1, c), (1, c_prev), (1, dy), (1, dh), (1, dc),
                 (4, dgates))
    _pick(_lstm_bwd, _lstm_bwd_par, n * H)(gates, c, c_prev, dy, dh, dc, dgates, one)


def gru_step_forward(gates, hg, bhh, h_prev, ghn_out, h_out):
    n, H = h_prev.shape
    one = _check("gru_step_forward", 3, n, H, (3, gates), (3, hg), (1, h_prev), (1, ghn_out), (1, h_out))
    if bhh.shape != (3 * H,) or bhh.dtype != gates.dtype:
        raise ValueError(f"gru_step_forward: expected a ({3 * H},) {gates.dtype} bias, got {bhh.shape} {bhh.dtype}")
    _pick(_gru_fwd, _gru_fwd_par, n * H)(gates, hg, bhh, h_prev, ghn_out, h_out, one)


def gru_step_backward(gates, ghn, h_prev, dy, dh, dgi, dgh):
    n, H = h_prev.shape
    one = _check("gru_step_backward", 3, n, H, (3, gates), (1, ghn), (1, h_prev), (1, dy), (1, dh), (3, dgi),
                 (3, dgh))
    _pick(_gru_bwd, _gru_bwd_par, n * H)(gates, ghn, h_prev, dy, dh, dgi, dgh, one)


def rnn_step_forward(gates, hg, h_out, relu):
    n, H = h_out.shape
    one = _check("rnn_step_forward", 1, n, H, (1, gates), (1, hg), (1, h_out))
    _pick(_rnn_fwd, _rnn_fwd_par, n * H)(gates, hg, h_out, bool(relu), one)


def rnn_step_backward(h, dy, dh, dgates, relu):
    n, H = h.shape
    one = _check("rnn_step_backward", 1, n, H, (1, h), (1, dy), (1, dh), (1, dgates))
    _pick(_rnn_bwd, _rnn_bwd_par, n * H)(h, dy, dh, dgates, bool(relu), one)
