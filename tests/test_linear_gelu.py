"""Linear + GELU with the bias add and the activation fused after the GEMM (ops/linear_gelu.py):
against NumPy formulas and gradcheck for both implementations, the kernels against the
reference in float32 and float64, and the zoo's MLP against the unfused layers."""
import math

import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl.kernels.cpu import bias_gelu as K
from minidl.ops import linear_gelu as L
from minidl.ops._kernel_switch import implementation
from minidl.testing import OpSpec, check_forward, check_gradcheck, forward_cases, spec_id
from minidl.zoo.transformer import MLP

_erf = np.vectorize(math.erf)


def np_gelu(v, approximate):
    if approximate == "tanh":
        return 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))
    return 0.5 * v * (1 + _erf(v / math.sqrt(2)))


def _specs():
    specs = []
    for impl in ("reference", "numba"):
        for approximate in ("none", "tanh"):
            def op(x, w, b, impl=impl, approximate=approximate):
                with implementation(impl):
                    return L.linear_gelu(x, w, b, approximate)
            specs.append(OpSpec(f"linear_gelu-{impl}-{approximate}", op,
                                lambda x, w, b, a=approximate: np_gelu(x @ w.T + b, a),
                                lambda rng: (rng.standard_normal((2, 3, 4)), rng.standard_normal((5, 4)),
                                             rng.standard_normal(5))))
    specs.append(OpSpec("linear_gelu-no-bias", lambda x, w: L.linear_gelu(x, w, None, "tanh"),
                        lambda x, w: np_gelu(x @ w.T, "tanh"),
                        lambda rng: (rng.standard_normal((3, 4)), rng.standard_normal((6, 4)))))
    return specs


SPECS = _specs()


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward_matches_numpy(spec, dtype, device):
    check_forward(spec, dtype, device)


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck(spec):
    assert check_gradcheck(spec)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("rows", [5, 300])     # one thread, and several row chunks
def test_kernels_match_reference(dtype, approximate, rows):
    g = np.random.default_rng(0)
    u, gr = (3 * g.standard_normal((rows, 257))).astype(dtype), g.standard_normal((rows, 257)).astype(dtype)
    b = g.standard_normal(257).astype(dtype)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(K.bias_gelu_forward(u, b, approximate),
                               L.bias_gelu_forward_reference(u, b, approximate), **tol)
    du, db = K.bias_gelu_backward(u, b, gr, approximate)
    rdu, rdb = L.bias_gelu_backward_reference(u, b, gr, approximate)
    np.testing.assert_allclose(du, rdu, **tol)
    np.testing.assert_allclose(db, rdb, rtol=1e-4 if dtype == np.float32 else 1e-11, atol=1e-3)
    assert K.bias_gelu_backward(u, None, gr, approximate, need_db=False)[1] is None


def test_empty_rows():
    u = np.zeros((0, 4), np.float32)
    assert K.bias_gelu_forward(u, np.zeros(4, np.float32), "tanh").shape == (0, 4)
    du, db = K.bias_gelu_backward(u, None, u, "tanh")
    assert du.shape == (0, 4) and np.array_equal(db, np.zeros(4))


@pytest.mark.parametrize("gelu", ["none", "tanh"])
def test_the_mlp_equals_its_unfused_layers(gelu):
    md.manual_seed(0)
    mlp = MLP(8, 32, gelu=gelu)
    x = md.randn(4, 3, 8, requires_grad=True)
    out = []
    for forward in (lambda: mlp(x), lambda: mlp.fc2(mlp.act(mlp.fc1(x)))):
        x.grad = None
        mlp.zero_grad()
        y = forward()
        (y * y).sum().backward()
        out.append([y.detach().numpy().copy(), x.grad.numpy().copy()]
                   + [p.grad.numpy().copy() for p in mlp.parameters()])
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    seen = []
    mlp.act.register_forward_hook(lambda m, args, o: seen.append(o))
    np.testing.assert_allclose(mlp(x).detach().numpy(), out[0][0], rtol=1e-6)   # a hooked activation runs unfused
    assert len(seen) == 1


def test_bad_inputs():
    with pytest.raises(ValueError, match="approximate must be 'none' or 'tanh'"):
        L.linear_gelu(md.randn(2, 3), md.randn(4, 3), None, "erf")
    with pytest.raises(ValueError, match="does not match weight"):
        L.linear_gelu(md.randn(2, 3), md.randn(4, 5))
    with pytest.raises(TypeError, match="dtypes differ"):
        L.linear_gelu(md.randn(2, 3), md.randn(4, 3, dtype=md.float64))
    assert F.gelu   # the functional GELU stays the plain one
