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

from numba import njit, prange, types
from numba.extending import overload

from ._fastexp import exp32_capped, recip_one_plus_exp, recip_one_plus_exp32
from ._numerics import CONTRACT as _CONTRACT
from ._threads import layer_parallel


def sigmoid_any(x, one):
    return 1.0 / (1.0 + math.exp(-x))


def tanh_any(x, one):
    return math.tanh(x)


@overload(sigmoid_any, inline="always")
def _sigmoid_any(x, one):
    if x == types.float32:
        return lambda x, one: recip_one_plus_exp32(-x)
    return lambda x, one: recip_one_plus_exp(-x)


@overload(tanh_any, inline="always")
def _tanh_any(x, one):
    if x == types.float32:
        return lambda x, one: (one + one) / (one + exp32_capped(-(x + x))) - one
    return lambda x, one: math.tanh(x)


# The row bodies are written as short loops that each start at 0 and store to one array (through
# per-gate views of the row): LLVM vectorises such a loop after a cheap run-time overlap check,
# while one loop storing to several arrays, or to several offsets of one array, needs more checks
# than it allows and stays scalar. Measured on one core, (32, 4 * 256) float32 gates: the forward
# body went from 167 to 19 microseconds, the backward from 66 to 12. The row is in L1,
# so the extra passes cost little.

def _lstm_fwd_body(gates, hg, c, c_prev_out, c_out, h_out, one, b):
    H = c.shape[1]
    a, x = gates[b], hg[b]
    a_if, x_if = a[:2 * H], x[:2 * H]
    for k in range(2 * H):
        a_if[k] = sigmoid_any(a_if[k] + x_if[k], one)
    a_g, x_g = a[2 * H:3 * H], x[2 * H:3 * H]
    for j in range(H):
        a_g[j] = tanh_any(a_g[j] + x_g[j], one)
    a_o, x_o = a[3 * H:], x[3 * H:]
    for j in range(H):
        a_o[j] = sigmoid_any(a_o[j] + x_o[j], one)
    a_i, a_f = a[:H], a[H:2 * H]
    cs, cp, co, ho = c[b], c_prev_out[b], c_out[b], h_out[b]
    for j in range(H):
        cp[j] = cs[j]
    for j in range(H):
        co[j] = a_f[j] * cp[j] + a_i[j] * a_g[j]
    for j in range(H):
        cs[j] = co[j]
    for j in range(H):
        ho[j] = a_o[j] * tanh_any(co[j], one)


def _lstm_bwd_body(gates, c, c_prev, dy, dh, dc, dgates, one, b):
    H = c.shape[1]
    a, d = gates[b], dgates[b]
    a_i, a_f, a_g, a_o = a[:H], a[H:2 * H], a[2 * H:3 * H], a[3 * H:]
    d_i, d_f, d_g, d_o = d[:H], d[H:2 * H], d[2 * H:3 * H], d[3 * H:]
    cs, cp, y, hh, dcs = c[b], c_prev[b], dy[b], dh[b], dc[b]
    for j in range(H):
        t = tanh_any(cs[j], one)
        d_o[j] = (y[j] + hh[j]) * t * a_o[j] * (one - a_o[j])
    for j in range(H):          # dc: dL/dc_t in total
        t = tanh_any(cs[j], one)
        dcs[j] = dcs[j] + (y[j] + hh[j]) * a_o[j] * (one - t * t)
    for j in range(H):
        d_i[j] = dcs[j] * a_g[j] * a_i[j] * (one - a_i[j])
    for j in range(H):
        d_f[j] = dcs[j] * cp[j] * a_f[j] * (one - a_f[j])
    for j in range(H):
        d_g[j] = dcs[j] * a_i[j] * (one - a_g[j] * a_g[j])
    for j in range(H):          # dc: on to c_{t-1}, through the forget gate
        dcs[j] = dcs[j] * a_f[j]


def _gru_fwd_body(gates, hg, bhh, h_prev, ghn_out, h_out, one, b):
    H = h_prev.shape[1]
    a, x = gates[b], hg[b]
    a_rz, x_rz, b_rz = a[:2 * H], x[:2 * H], bhh[:2 * H]
    for k in range(2 * H):
        a_rz[k] = sigmoid_any(a_rz[k] + x_rz[k] + b_rz[k], one)
    gn, x_n, b_n = ghn_out[b], x[2 * H:], bhh[2 * H:]
    for j in range(H):
        gn[j] = x_n[j] + b_n[j]
    a_r, a_z, a_n = a[:H], a[H:2 * H], a[2 * H:]
    for j in range(H):
        a_n[j] = tanh_any(a_n[j] + a_r[j] * gn[j], one)
    hp, ho = h_prev[b], h_out[b]
    for j in range(H):
        ho[j] = (one - a_z[j]) * a_n[j] + a_z[j] * hp[j]


def _gru_bwd_body(gates, ghn, h_prev, dy, dh, dgi, dgh, one, b):
    H = h_prev.shape[1]
    a, di, dg = gates[b], dgi[b], dgh[b]
    a_r, a_z, a_n = a[:H], a[H:2 * H], a[2 * H:]
    y, hh, hp, gn = dy[b], dh[b], h_prev[b], ghn[b]
    for j in range(H):          # dh: dL/dh_t in total
        hh[j] = y[j] + hh[j]
    d_n = di[2 * H:]
    for j in range(H):
        d_n[j] = hh[j] * (one - a_z[j]) * (one - a_n[j] * a_n[j])
    d_z = di[H:2 * H]
    for j in range(H):
        d_z[j] = hh[j] * (hp[j] - a_n[j]) * a_z[j] * (one - a_z[j])
    d_r = di[:H]
    for j in range(H):
        d_r[j] = d_n[j] * gn[j] * a_r[j] * (one - a_r[j])
    di_rz, dg_rz = di[:2 * H], dg[:2 * H]
    for k in range(2 * H):
        dg_rz[k] = di_rz[k]
    dg_n = dg[2 * H:]
    for j in range(H):
        dg_n[j] = d_n[j] * a_r[j]
    for j in range(H):          # dh: its direct part, z * dh_t
        hh[j] = hh[j] * a_z[j]


def _rnn_fwd_body(gates, hg, h_out, relu, one, b):
    a, x, ho = gates[b], hg[b], h_out[b]
    if relu:
        for j in range(ho.size):
            v = a[j] + x[j]
            ho[j] = v if v > 0 else v * 0
    else:
        for j in range(ho.size):
            ho[j] = tanh_any(a[j] + x[j], one)


def _rnn_bwd_body(h, dy, dh, dgates, relu, one, b):
    hv, y, hh, d = h[b], dy[b], dh[b], dgates[b]
    if relu:
        for j in range(hv.size):
            d[j] = (y[j] + hh[j]) if hv[j] > 0 else (y[j] + hh[j]) * 0
    else:
        for j in range(hv.size):
            d[j] = (y[j] + hh[j]) * (one - hv[j] * hv[j])


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
    return parallel if layer_parallel(size) else serial


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
