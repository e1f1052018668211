"""1 / (1 + e^t) with e^t capped (kernels/cpu/_fastexp.py): the logistic sigmoid inside
tanh-GELU and the recurrent gates, at inputs that saturate it.

Past t = 80 the quotient is below 2e-35 either way; the cap keeps e^t finite, so saturated
values take the same arithmetic as any others. What is asserted: the values against float64
(exact up to 2e-35 where saturated), NaN passing through, and tanh-GELU and the gates over
saturated inputs giving finite results equal to their references."""
import math

import numpy as np
import pytest
from numba import njit

import minidl as md
import minidl.nn.functional as F
from minidl.kernels.cpu._fastexp import exp32_capped, recip_one_plus_exp, recip_one_plus_exp32
from minidl.kernels.cpu.rnn_gates import sigmoid_any, tanh_any

T = [-1e30, -100.0, -80.0, -1.0, 0.0, 1.0, 30.0, 79.0, 80.0, 81.0, 88.0, 89.0, 700.0, 1e30, np.inf]


@njit(error_model="numpy")
def _recip32(t, out):
    for i in range(t.size):
        out[i] = recip_one_plus_exp32(t[i])


@njit(error_model="numpy")
def _recip64(t, out):
    for i in range(t.size):
        out[i] = recip_one_plus_exp(t[i])


@njit(error_model="numpy")
def _gates(x, one, sig, tnh):
    for i in range(x.size):
        sig[i] = sigmoid_any(x[i], one)
        tnh[i] = tanh_any(x[i], one)


def _exact(t):
    """1 / (1 + e^t) in float64, without overflow."""
    return np.array([math.exp(-v) / (math.exp(-v) + 1) if v > 0 else 1 / (1 + math.exp(v)) for v in t])


@pytest.mark.parametrize("dtype, kernel, floor", [(np.float32, _recip32, 2e-35), (np.float64, _recip64, 1e-300)])
def test_the_quotient_is_exact_up_to_the_cap(dtype, kernel, floor):
    t = np.array(T, dtype)
    out = np.empty_like(t)
    kernel(t, out)
    assert np.all(np.isfinite(out)) and np.all(out >= 0)
    np.testing.assert_allclose(out, _exact(t.astype(np.float64)), rtol=2e-7 if dtype == np.float32 else 1e-15,
                               atol=floor)


def test_nan_passes_through():
    out = np.empty(2, np.float32)
    _recip32(np.array([np.nan, -np.nan], np.float32), out)
    assert np.isnan(out).all()
    assert np.isnan(exp32_capped.py_func(np.float32(np.nan)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_gates_saturate_to_their_limits(dtype):
    x = np.array([-1e30, -200.0, -45.0, -1.0, 0.0, 1.0, 45.0, 200.0, 1e30], dtype)
    sig, tnh = np.empty_like(x), np.empty_like(x)
    _gates(x, dtype(1), sig, tnh)
    want_sig = _exact(-x.astype(np.float64))
    np.testing.assert_allclose(sig, want_sig, rtol=1e-6, atol=2e-35)
    np.testing.assert_allclose(tnh, np.tanh(x.astype(np.float64)), rtol=1e-6, atol=1e-7)
    assert tnh[0] == -1 and tnh[-1] == 1 and sig[-1] == 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tanh_gelu_of_saturated_inputs_matches_its_reference(dtype):
    v = np.concatenate([np.linspace(-1e4, 1e4, 4001), np.linspace(-40, 40, 4001)]).astype(dtype)
    x = md.tensor(v, requires_grad=True)
    y = F.gelu(x, approximate="tanh")
    g = np.random.default_rng(0).standard_normal(v.shape).astype(dtype)
    y.backward(md.tensor(g))
    v64 = v.astype(np.float64)
    u = math.sqrt(2 / math.pi) * (v64 + 0.044715 * v64 ** 3)
    s = _exact(-2 * u)
    want = v64 * s
    dwant = g * (s + 2 * v64 * s * (1 - s) * math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * v64 ** 2))
    got, dgot = y.detach().numpy(), x.grad.numpy()
    assert np.all(np.isfinite(got)) and np.all(np.isfinite(dgot))
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got, want, **tol)
    np.testing.assert_allclose(dgot, dwant, **tol)
