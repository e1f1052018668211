"""One recurrent step's gate nonlinearities on cuda, forward and backward (the math:
minidl/ops/rnn/lstm.py, gru.py, rnn_cell.py; the CPU twins and their signatures:
minidl/kernels/cpu/rnn_gates.py). Every (row, unit) pair is independent, so each kernel is one
thread per element of the (n, H) state that reads that unit's k gate pre-activations and writes
their activations back in place: a single pass over memory per step, as on the CPU.

Arguments are contiguous CudaArrays (the step's rows of the packed buffers); they reach the
kernels as flat device buffers, indexed row * width + unit.
"""
import math

from numba import cuda

from ._common import grid_for
from .bfloat16 import is_bfloat16


@cuda.jit(device=True)
def _sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


@cuda.jit
def _lstm_fwd(gates, hg, c, c_prev_out, c_out, h_out, n, H):
    k = cuda.grid(1)
    if k >= n * H:
        return
    b, j = k // H, k % H
    g0 = b * 4 * H + j
    i = _sigmoid(gates[g0] + hg[g0])
    f = _sigmoid(gates[g0 + H] + hg[g0 + H])
    g = math.tanh(gates[g0 + 2 * H] + hg[g0 + 2 * H])
    o = _sigmoid(gates[g0 + 3 * H] + hg[g0 + 3 * H])
    gates[g0], gates[g0 + H], gates[g0 + 2 * H], gates[g0 + 3 * H] = i, f, g, o
    cp = c[k]
    cn = f * cp + i * g
    c_prev_out[k] = cp
    c[k] = cn
    c_out[k] = cn
    h_out[k] = o * math.tanh(cn)


@cuda.jit
def _lstm_bwd(gates, c, c_prev, dy, dh, dc, dgates, n, H):
    k = cuda.grid(1)
    if k >= n * H:
        return
    b, j = k // H, k % H
    g0 = b * 4 * H + j
    i, f, g, o = gates[g0], gates[g0 + H], gates[g0 + 2 * H], gates[g0 + 3 * H]
    tc = math.tanh(c[k])
    dht = dy[k] + dh[k]
    dct = dc[k] + dht * o * (1.0 - tc * tc)
    dgates[g0] = dct * g * i * (1.0 - i)
    dgates[g0 + H] = dct * c_prev[k] * f * (1.0 - f)
    dgates[g0 + 2 * H] = dct * i * (1.0 - g * g)
    dgates[g0 + 3 * H] = dht * tc * o * (1.0 - o)
    dc[k] = dct * f


@cuda.jit
def _gru_fwd(gates, hg, bhh, h_prev, ghn_out, h_out, n, H):
    k = cuda.grid(1)
    if k >= n * H:
        return
    b, j = k // H, k % H
    g0 = b * 3 * H + j
    r = _sigmoid(gates[g0] + hg[g0] + bhh[j])
    z = _sigmoid(gates[g0 + H] + hg[g0 + H] + bhh[H + j])
    ghn = hg[g0 + 2 * H] + bhh[2 * H + j]
    nn = math.tanh(gates[g0 + 2 * H] + r * ghn)
    gates[g0], gates[g0 + H], gates[g0 + 2 * H] = r, z, nn
    ghn_out[k] = ghn
    h_out[k] = (1.0 - z) * nn + z * h_prev[k]


@cuda.jit
def _gru_bwd(gates, ghn, h_prev, dy, dh, dgi, dgh, n, H):
    k = cuda.grid(1)
    if k >= n * H:
        return
    b, j = k // H, k % H
    g0 = b * 3 * H + j
    r, z, nn = gates[g0], gates[g0 + H], gates[g0 + 2 * H]
    dht = dy[k] + dh[k]
    dn = dht * (1.0 - z) * (1.0 - nn * nn)
    dz = dht * (h_prev[k] - nn) * z * (1.0 - z)
    dr = dn * ghn[k] * r * (1.0 - r)
    dgi[g0], dgi[g0 + H], dgi[g0 + 2 * H] = dr, dz, dn
    dgh[g0], dgh[g0 + H], dgh[g0 + 2 * H] = dr, dz, dn * r
    dh[k] = dht * z


@cuda.jit
def _rnn_fwd(gates, hg, h_out, relu, m):
    k = cuda.grid(1)
    if k >= m:
        return
    v = gates[k] + hg[k]
    if relu:
        h_out[k] = v if v > 0 else 0.0
    else:
        h_out[k] = math.tanh(v)


@cuda.jit
def _rnn_bwd(h, dy, dh, dgates, relu, m):
    k = cuda.grid(1)
    if k >= m:
        return
    d = dy[k] + dh[k]
    if relu:
        dgates[k] = d if h[k] > 0 else 0.0
    else:
        dgates[k] = d * (1.0 - h[k] * h[k])


def _flat(name, a, shape):
    """The contiguous CudaArray ``a`` of ``shape`` as its flat device buffer."""
    if is_bfloat16(a.dtype):   # the recurrent ops hand their kernels float32 (ops/low_precision.py)
        raise TypeError(f"{name}: bfloat16 on cuda reaches the gate kernels only as float32 (the recurrent "
                        f"layers compute bfloat16 in float32); got a bfloat16 array of shape {tuple(a.shape)}")
    if tuple(a.shape) != tuple(shape) or not a.is_contiguous():
        raise ValueError(f"{name}: expected a contiguous array of shape {tuple(shape)}, got shape {tuple(a.shape)}")
    return a._buf[a._off:a._off + a.size]


def _launch(kernel, m, *args):
    if m:
        blocks, threads = grid_for(m)
        kernel[blocks, threads](*args)


def lstm_step_forward(gates, hg, c, c_prev_out, c_out, h_out):
    n, H = c.shape
    f = lambda a, k: _flat("lstm_step_forward", a, (n, k * H))  # noqa: E731
    _launch(_lstm_fwd, n * H, f(gates, 4), f(hg, 4), f(c, 1), f(c_prev_out, 1), f(c_out, 1), f(h_out, 1), n, H)


def lstm_step_backward(gates, c, c_prev, dy, dh, dc, dgates):
    n, H = c.shape
    f = lambda a, k: _flat("lstm_step_backward", a, (n, k * H))  # noqa: E731
    _launch(_lstm_bwd, n * H, f(gates, 4), f(c, 1), f(c_prev, 1), f(dy, 1), f(dh, 1), f(dc, 1), f(dgates, 4), n, H)


def gru_step_forward(gates, hg, bhh, h_prev, ghn_out, h_out):
    n, H = h_prev.shape
    f = lambda a, k: _flat("gru_step_forward", a, (n, k * H))  # noqa: E731
    b = _flat("gru_step_forward", bhh, (3 * H,))
    _launch(_gru_fwd, n * H, f(gates, 3), f(hg, 3), b, f(h_prev, 1), f(ghn_out, 1), f(h_out, 1), n, H)


def gru_step_backward(gates, ghn, h_prev, dy, dh, dgi, dgh):
    n, H = h_prev.shape
    f = lambda a, k: _flat("gru_step_backward", a, (n, k * H))  # noqa: E731
    _launch(_gru_bwd, n * H, f(gates, 3), f(ghn, 1), f(h_prev, 1), f(dy, 1), f(dh, 1), f(dgi, 3), f(dgh, 3), n, H)


def rnn_step_forward(gates, hg, h_out, relu):
    shape = h_out.shape
    f = lambda a: _flat("rnn_step_forward", a, shape)  # noqa: E731
    _launch(_rnn_fwd, h_out.size, f(gates), f(hg), f(h_out), bool(relu), h_out.size)


def rnn_step_backward(h, dy, dh, dgates, relu):
    shape = h.shape
    f = lambda a: _flat("rnn_step_backward", a, shape)  # noqa: E731
    _launch(_rnn_bwd, h.size, f(h), f(dy), f(dh), f(dgates), bool(relu), h.size)
