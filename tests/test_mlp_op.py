"""A Transformer MLP, Linear -> GELU -> Linear, as one op (ops/mlp.py): against NumPy formulas and
gradcheck for both implementations, every subset of gradients against the two ops it replaces,
low-precision inputs, bad arguments, and the zoo's MLP choosing it where it should."""
import numpy as np
import pytest
from test_linear_gelu import np_gelu

import minidl as md
from minidl.ops import mlp as M
from minidl.ops._kernel_switch import implementation
from minidl.ops.linear_gelu import linear_gelu
from minidl.testing import OpSpec, check_forward, check_gradcheck, forward_cases, spec_id
from minidl.zoo.transformer import MLP


def _specs():
    specs = []
    for impl in ("reference", "numba"):
        for approximate in ("none", "tanh"):
            def op(x, w1, b1, w2, b2, impl=impl, approximate=approximate):
                with implementation(impl):
                    return M.linear_gelu_linear(x, w1, b1, w2, b2, approximate)
            specs.append(OpSpec(f"linear_gelu_linear-{impl}-{approximate}", op,
                                lambda x, w1, b1, w2, b2, a=approximate: np_gelu(x @ w1.T + b1, a) @ w2.T + b2,
                                lambda rng: (rng.standard_normal((2, 3, 4)), rng.standard_normal((5, 4)),
                                             rng.standard_normal(5), rng.standard_normal((3, 5)),
                                             rng.standard_normal(3))))
    specs.append(OpSpec("linear_gelu_linear-no-biases", lambda x, w1, w2: M.linear_gelu_linear(x, w1, None, w2),
                        lambda x, w1, w2: np_gelu(x @ w1.T, "none") @ w2.T,
                        lambda rng: (rng.standard_normal((3, 4)), rng.standard_normal((6, 4)),
                                     rng.standard_normal((2, 6)))))
    return specs


SPECS = _specs()


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward_matches_numpy(spec, dtype, device):
    check_forward(spec, dtype, device)


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck(spec):
    assert check_gradcheck(spec)


def _operands(dtype, rows=70):
    """Rows enough for the kernels' region on two threads (300 x 48 hidden features), three dims."""
    rng = np.random.default_rng(1)
    return [rng.standard_normal(s).astype(dtype) for s in ((3, rows, 16), (48, 16), (48,), (8, 48), (8,))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("needs", [(True,) * 5, (True, False, False, True, True), (False, True, True, False, False),
                                   (False, False, False, True, True), (True, True, True, True, False),
                                   (False, False, True, False, False)], ids=str)
def test_each_gradient_is_the_two_ops_gradient(dtype, approximate, needs):
    """linear_gelu then linear, and the one op: the same output and the same gradients for any
    subset of inputs that require grad (the others get none)."""
    arrays = _operands(dtype)
    g = np.random.default_rng(2).standard_normal((3, 70, 8)).astype(dtype)
    results = []
    for fused in (False, True):
        ts = [md.tensor(a, requires_grad=n) for a, n in zip(arrays, needs)]
        if fused:
            y = M.linear_gelu_linear(*ts, approximate=approximate)
        else:
            y = md.nn.functional.linear(linear_gelu(*ts[:3], approximate), ts[3], ts[4])
        y.backward(md.tensor(g))
        results.append([y.detach().numpy()] + [None if t.grad is None else t.grad.numpy() for t in ts])
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    for have, want in zip(*results):
        assert (have is None) == (want is None)
        if have is not None:
            assert have.dtype == dtype
            np.testing.assert_allclose(have, want, **tol)


def test_only_the_second_layer_learning_saves_nothing_of_the_first():
    """With x and fc1 frozen, backward runs fc2's gradients alone; the GELU input is not kept."""
    x, w1, b1, w2, b2 = (md.tensor(a, requires_grad=i >= 3) for i, a in enumerate(_operands(np.float32)))
    y = M.linear_gelu_linear(x, w1, b1, w2, b2, "tanh")
    assert y.grad_fn.saved_tensors[2] is None and y.grad_fn.saved_tensors[5] is None
    y.sum().backward()
    h = np_gelu(_operands(np.float64)[0] @ _operands(np.float64)[1].T + _operands(np.float64)[2], "tanh")
    np.testing.assert_allclose(w2.grad.numpy(), np.ones((3 * 70, 8)).T @ h.reshape(-1, 48), rtol=1e-4)
    np.testing.assert_allclose(b2.grad.numpy(), np.full(8, 3 * 70.0))


@pytest.mark.parametrize("low", [md.float16, md.bfloat16])
def test_low_precision_inputs_compute_in_float32(low):
    """float16/bfloat16 in: float32 products, the output rounded once to the input's dtype; the
    gradients reach float32 leaves through the casts, close to the float32 op's."""
    arrays = _operands(np.float32, rows=5)
    leaves = [md.tensor(a, requires_grad=True) for a in arrays]
    y = M.linear_gelu_linear(*(t.to(low) for t in leaves), approximate="tanh")
    assert y.dtype == low
    wide = [t.detach().to(low).float().numpy() for t in leaves]
    want = np_gelu(wide[0] @ wide[1].T + wide[2], "tanh") @ wide[3].T + wide[4]
    np.testing.assert_allclose(y.float().detach().numpy(), want, rtol=2e-2, atol=2e-2)
    y.float().sum().backward()
    exact = [md.tensor(a, requires_grad=True) for a in arrays]
    M.linear_gelu_linear(*exact, approximate="tanh").sum().backward()
    for leaf, ref in zip(leaves, exact):
        assert leaf.grad.dtype == md.float32
        scale = float(np.abs(ref.grad.numpy()).max())
        np.testing.assert_allclose(leaf.grad.numpy(), ref.grad.numpy(), rtol=5e-2, atol=5e-2 * scale)


def test_bad_inputs():
    x, w1, b1, w2, b2 = (md.tensor(a) for a in _operands(np.float32, rows=2))
    with pytest.raises(ValueError, match="approximate must be 'none' or 'tanh'"):
        M.linear_gelu_linear(x, w1, b1, w2, b2, "erf")
    with pytest.raises(ValueError, match=r"second weight must have shape \[out_features, 48\].*got \[8, 47\]"):
        M.linear_gelu_linear(x, w1, b1, md.randn(8, 47), b2)
    with pytest.raises(ValueError, match=r"second bias must have shape \[8\], got \[7\]"):
        M.linear_gelu_linear(x, w1, b1, w2, md.randn(7))
    with pytest.raises(ValueError, match="does not match weight"):
        M.linear_gelu_linear(md.randn(2, 15), w1, b1, w2, b2)
    with pytest.raises(TypeError, match="dtypes differ"):
        M.linear_gelu_linear(x, w1, b1, w2.double(), b2)


def test_the_zoo_mlp_runs_it_in_float32_and_keeps_the_two_ops_elsewhere():
    md.manual_seed(0)
    mlp = MLP(16, 48, gelu="tanh")
    x = md.randn(3, 70, 16, requires_grad=True)
    assert isinstance(mlp(x).grad_fn, M.LinearGeluLinear)
    with md.autocast("cpu", dtype=md.bfloat16):
        assert not isinstance(mlp(x).grad_fn, M.LinearGeluLinear)
    assert not isinstance(mlp.to(md.bfloat16)(x.to(md.bfloat16)).grad_fn, M.LinearGeluLinear)
    mlp = mlp.float()
    seen = []
    mlp.fc2.register_forward_hook(lambda m, args, out: seen.append(out))
    y = mlp(x)                                            # a hooked fc2 runs as its own layer
    assert len(seen) == 1 and seen[0] is y
