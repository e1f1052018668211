"""ReLU's CPU kernels (one pass forward writing y and the mask, one pass backward) against the
NumPy reference and PyTorch's semantics: NaN and -0.0 pass through, the gradient is g where
y != 0; serial and parallel paths, and the arrays the kernels leave to the reference."""
import numba
import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl.kernels.cpu import relu as k_relu
from minidl.ops import unary
from minidl.testing import OpSpec, check_forward, check_gradcheck, check_implementations

SPEC = OpSpec(name="relu", op=lambda x: F.relu(x), reference=lambda x: np.where(x < 0, 0, x),
              inputs=lambda rng: (rng.standard_normal((4, 5, 6)) + 0.05,),
              implementations={"numba": lambda x: k_relu.relu_forward(x)[0]})


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_relu_forward_and_kernel_match_the_reference(dtype):
    check_forward(SPEC, dtype, "cpu")
    check_implementations(SPEC, dtype)


def test_relu_gradcheck():
    check_gradcheck(SPEC)


EDGES = [-np.inf, -2.5, -1e-30, -0.0, 0.0, 1e-30, 3.0, np.inf, np.nan]


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernels_equal_the_reference_bit_for_bit(monkeypatch, parallel, dtype):
    monkeypatch.setattr(k_relu, "layer_parallel", lambda n: parallel)
    rng = np.random.default_rng(0)
    x = np.concatenate([np.array(EDGES), rng.standard_normal(1000)]).astype(dtype).reshape(1009)
    g = rng.standard_normal(x.shape).astype(dtype)
    y, mask = k_relu.relu_forward(x)
    y_ref, mask_ref = unary.relu_forward_reference(x)
    assert y.dtype == dtype and mask.dtype == np.bool_
    np.testing.assert_array_equal(y.view(np.uint8), y_ref.view(np.uint8))    # -0.0 and NaN bits too
    np.testing.assert_array_equal(mask, mask_ref)
    np.testing.assert_array_equal(k_relu.relu_backward(mask, g), unary.relu_backward_reference(mask, g))


def test_nan_and_negative_zero_as_pytorch():
    x = md.tensor(np.array(EDGES, dtype=np.float32), requires_grad=True)
    y = F.relu(x)
    y.backward(md.tensor(np.arange(1, len(EDGES) + 1, dtype=np.float32)))
    out = y.detach().numpy()
    assert np.signbit(out[3]) and out[3] == 0          # relu(-0.0) is -0.0, as torch.relu
    assert np.isnan(out[-1]) and out[-2] == np.inf and out[0] == 0 and not np.signbit(out[0])
    np.testing.assert_array_equal(x.grad.numpy(), [0, 0, 0, 0, 0, 6, 7, 8, 9])   # grad where y != 0


def test_other_arrays_take_the_reference():
    rng = np.random.default_rng(1)
    strided = rng.standard_normal((6, 8))[:, ::2]
    for x in (strided, np.arange(-3, 4), np.zeros((0, 3), np.float32)):
        y, mask = k_relu.relu_forward(x)
        np.testing.assert_array_equal(y, np.where(x < 0, 0, x))
        assert y.dtype == x.dtype and y.shape == x.shape
        np.testing.assert_array_equal(mask, y != 0)
    t = md.tensor(np.arange(-3, 4))
    np.testing.assert_array_equal(F.relu(t).numpy(), [0, 0, 0, 0, 1, 2, 3])


@pytest.mark.skipif(numba.config.DISABLE_JIT, reason="without the JIT every array takes the reference")
def test_a_large_relu_runs_the_parallel_kernel(monkeypatch):
    """Above the layer kernels' threshold the parallel loop runs (on Numba's pool) and agrees."""
    calls = []
    real = k_relu._forward_parallel
    monkeypatch.setattr(k_relu, "layer_parallel", lambda n: True)
    monkeypatch.setattr(k_relu, "_forward_parallel", lambda *a: calls.append(1) or real(*a))
    x = np.random.default_rng(2).standard_normal((64, 16, 8, 8)).astype(np.float32)
    y, _ = k_relu.relu_forward(x)
    assert calls and np.array_equal(y, np.maximum(x, 0))


@pytest.mark.parametrize("parallel", [False, True])
def test_a_nan_gradient_stays_out_where_the_mask_is_clear(monkeypatch, parallel):
    """dx is 0 where y == 0 even for a NaN (or inf) incoming gradient, as PyTorch's threshold backward."""
    monkeypatch.setattr(k_relu, "layer_parallel", lambda n: parallel)
    mask = np.array([True, False, False, True])
    g = np.array([np.nan, np.nan, np.inf, 2.0], dtype=np.float32)
    for dx in (k_relu.relu_backward(mask, g), unary.relu_backward_reference(mask, g)):
        np.testing.assert_array_equal(dx, [np.nan, 0, 0, 2.0])
