"""Ops at IEEE's special points (1/0, log 0, sqrt(-1), inf * 0, exp overflow, -inf rows) return
PyTorch's inf / NaN values silently, forward and backward, as PyTorch does: no NumPy
RuntimeWarning (so none becomes an error under ``warnings.simplefilter("error")``), and the
user's own NumPy error state is neither consulted nor changed."""
import math
import warnings

import numpy as np
import pytest

import minidl as md

INF, NAN = math.inf, math.nan


def _cases():
    """name -> (inputs, fn(lib, F, *tensors), forward values that IEEE arithmetic fixes)."""
    return {
        "div by zero": ([[1.0, 0.0, -1.0]], lambda lib, F, x: x / 0, [INF, NAN, -INF]),
        "div by tensor": ([[1.0, -1.0], [0.0, 0.0]], lambda lib, F, x, y: x / y, [INF, -INF]),
        "reciprocal": ([[0.0, 2.0]], lambda lib, F, x: x.reciprocal(), [INF, 0.5]),
        "log": ([[0.0, -1.0, 1.0]], lambda lib, F, x: x.log(), [-INF, NAN, 0.0]),
        "exp overflow": ([[1000.0, 0.0]], lambda lib, F, x: x.exp(), [INF, 1.0]),
        "pow pole": ([[0.0, -1.0, 4.0]], lambda lib, F, x: x ** -0.5, [INF, NAN, 0.5]),
        "sqrt": ([[-1.0, 0.0, 4.0]], lambda lib, F, x: x.sqrt(), [NAN, 0.0, 2.0]),
        "rsqrt": ([[0.0, -1.0, 4.0]], lambda lib, F, x: lib.rsqrt(x), [INF, NAN, 0.5]),
        "tanh large": ([[1e4, -1e4]], lambda lib, F, x: x.tanh(), [1.0, -1.0]),
        "sigmoid large": ([[1e4, -1e4]], lambda lib, F, x: x.sigmoid(), [1.0, 0.0]),
        "log_softmax -inf row": ([[[-INF, -INF], [0.0, 0.0]]], lambda lib, F, x: F.log_softmax(x, dim=1),
                                 [[NAN, NAN], [-math.log(2), -math.log(2)]]),
        "logsumexp -inf row": ([[[-INF, -INF], [0.0, 0.0]]], lambda lib, F, x: lib.logsumexp(x, dim=1),
                               [-INF, math.log(2)]),
        "cross_entropy -inf logit": ([[[-INF, 0.0], [1e4, -1e4]]],
                                     lambda lib, F, x: F.cross_entropy(x, lib.tensor([0, 1])), INF),
        "mse on inf": ([[INF, 1.0]], lambda lib, F, x: F.mse_loss(x, lib.tensor([INF, 1.0])), NAN),
        "norm of zero row": ([[[0.0, 0.0], [3.0, 4.0]]], lambda lib, F, x: x.norm(dim=1), [0.0, 5.0]),
        "vector_norm of zero row": ([[[0.0, 0.0], [3.0, 4.0]]],
                                    lambda lib, F, x: lib.linalg.vector_norm(x, dim=1), [0.0, 5.0]),
        "normalize zero row": ([[[0.0, 0.0], [3.0, 4.0]]], lambda lib, F, x: F.normalize(x, dim=1),
                               [[0.0, 0.0], [0.6, 0.8]]),
    }


def _run(lib, F, name):
    """Forward and backward (a ones cotangent) with every warning an error: values and grads."""
    inputs, fn, _ = _cases()[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        xs = [lib.tensor(v, requires_grad=True) for v in inputs]
        y = fn(lib, F, *xs)
        y.backward(lib.ones_like(y))
    return y.detach().numpy(), [x.grad.numpy() for x in xs]


@pytest.mark.parametrize("name", list(_cases()))
def test_special_points_are_silent_and_give_ieee_values(name):
    out, grads = _run(md, md.nn.functional, name)
    np.testing.assert_array_equal(out, np.asarray(_cases()[name][2], dtype=np.float32))
    assert all(g is not None for g in grads)


@pytest.mark.parametrize("name", list(_cases()))
def test_values_and_gradients_match_torch(name):
    torch = pytest.importorskip("torch")
    out, grads = _run(md, md.nn.functional, name)
    t_out, t_grads = _run(torch, torch.nn.functional, name)
    np.testing.assert_allclose(out, t_out, rtol=1e-6, atol=1e-6, equal_nan=True)
    for g, tg in zip(grads, t_grads):
        np.testing.assert_allclose(g, tg, rtol=1e-5, atol=1e-6, equal_nan=True)


def test_known_gradients_at_the_special_points():
    """Torch-free checks of a few backward values fixed by the derivative formulas."""
    _, (g,) = _run(md, md.nn.functional, "log")
    np.testing.assert_array_equal(g, [INF, -1.0, 1.0])                     # 1 / x
    _, (g,) = _run(md, md.nn.functional, "sqrt")
    assert np.isnan(g[0]) and g[1] == INF and g[2] == 0.25                 # 1 / (2 sqrt x)
    _, (g,) = _run(md, md.nn.functional, "exp overflow")
    np.testing.assert_array_equal(g, [INF, 1.0])                           # e**x
    _, (g,) = _run(md, md.nn.functional, "norm of zero row")
    np.testing.assert_allclose(g, [[0.0, 0.0], [0.6, 0.8]], rtol=1e-6)     # 0 at the kink, as PyTorch


def test_the_users_numpy_error_state_is_left_alone():
    before = np.geterr()
    with np.errstate(all="raise"):            # the user's NumPy code asks for errors
        y = md.tensor([1.0, 0.0], requires_grad=True)
        z = (y / 0).log()
        z.backward(md.ones_like(z))           # minidl's ops still compute silently
        assert np.geterr()["divide"] == "raise"
        with pytest.raises(FloatingPointError):
            np.float64(1.0) / np.zeros(1)     # the user's own NumPy code still raises
    assert np.geterr() == before
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeWarning):
            np.log(np.zeros(1))               # nothing global was silenced at import
