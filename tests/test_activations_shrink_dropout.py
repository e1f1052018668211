"""hardshrink, softshrink, threshold, rrelu, alpha_dropout / feature_alpha_dropout, channel_shuffle,
Softmax2d and pdist: NumPy references and gradcheck through OpSpec, the random ones checked by
their structure and statistics under a fixed seed, PyTorch as the oracle for values, gradients
(at the kinks too), module reprs and the errors for bad arguments."""
import math

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.autograd import gradcheck
from minidl.testing import OpSpec, check_forward, check_gradcheck, forward_cases, spec_id

SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
ALPHA_P = -SELU_ALPHA * SELU_SCALE   # alpha' = -1.7580993408473766


def _softshrink(x, lambd=0.5):
    return np.where(x > lambd, x - lambd, np.where(x < -lambd, x + lambd, 0.0))


def _pdist(x, p):
    n = x.shape[0]
    out = []
    for i in range(n):
        for j in range(i + 1, n):
            d = np.abs(x[i] - x[j])
            out.append((d != 0).sum() if p == 0 else d.max() if p == math.inf else (d ** p).sum() ** (1 / p))
    return np.array(out, dtype=np.float64).reshape(-1)


def _channel_shuffle(x, g):
    n, c = x.shape[:2]
    return np.stack([x[:, (k % g) * (c // g) + k // g] for k in range(c)], axis=1)


def _softmax2d(x):
    e = np.exp(x - x.max(axis=-3, keepdims=True))
    return e / e.sum(axis=-3, keepdims=True)


def _spread(rng, shape=(3, 5)):   # values away from the kinks at +-0.5, +-0.3, 0.2: gradcheck's differences
    x = rng.uniform(-2, 2, shape)
    return (np.where(np.abs(np.abs(x) - 0.4) < 0.15, x + 0.4, x),)


SPECS = [
    OpSpec("hardshrink", F.hardshrink, lambda x: np.where(np.abs(x) > 0.5, x, 0.0), _spread),
    OpSpec("hardshrink_lambd", lambda x: F.hardshrink(x, lambd=0.3), lambda x: np.where(np.abs(x) > 0.3, x, 0.0),
           _spread),
    OpSpec("softshrink", F.softshrink, _softshrink, _spread),
    OpSpec("softshrink_lambd", lambda x: F.softshrink(x, 0.3), lambda x: _softshrink(x, 0.3), _spread),
    OpSpec("threshold", lambda x: F.threshold(x, 0.2, -3.0), lambda x: np.where(x <= 0.2, -3.0, x), _spread),
    OpSpec("rrelu_eval", F.rrelu, lambda x: np.where(x > 0, x, (1 / 8 + 1 / 3) / 2 * x), _spread),
    OpSpec("rrelu_eval_bounds", lambda x: F.rrelu(x, 0.1, 0.5), lambda x: np.where(x > 0, x, 0.3 * x), _spread),
    OpSpec("channel_shuffle", lambda x: F.channel_shuffle(x, 3), lambda x: _channel_shuffle(x, 3),
           lambda rng: (rng.standard_normal((2, 6, 2, 3)),)),
    OpSpec("channel_shuffle_3d", lambda x: F.channel_shuffle(x, 2), lambda x: _channel_shuffle(x, 2),
           lambda rng: (rng.standard_normal((2, 4, 5)),)),
    OpSpec("softmax2d", lambda x: nn.Softmax2d()(x), _softmax2d, lambda rng: (rng.standard_normal((2, 3, 2, 2)),)),
    OpSpec("softmax2d_3d", lambda x: nn.Softmax2d()(x), _softmax2d, lambda rng: (rng.standard_normal((3, 2, 4)),)),
]
SPECS += [OpSpec(f"pdist_p{p}", lambda x, p=p: F.pdist(x, p), lambda x, p=p: _pdist(x, p),
                 lambda rng: (rng.standard_normal((5, 4)),)) for p in (0, 0.5, 1, 1.5, 2, 3, math.inf)]
SPECS.append(OpSpec("pdist_default", F.pdist, lambda x: _pdist(x, 2), lambda rng: (rng.standard_normal((4, 3)),)))


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward_matches_numpy_reference(spec, dtype, device):
    check_forward(spec, dtype, device)


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck(spec):
    assert check_gradcheck(spec)


def test_pdist_gradient_is_zero_at_zero_distance():
    x = md.tensor([[1.0, 2.0], [1.0, 2.0], [4.0, 6.0]], requires_grad=True)
    for p in (0.5, 1.5, 2.0, 3.0):
        x.grad = None
        F.pdist(x, p)[0].backward()   # the pair (0, 1) with distance 0
        assert np.all(np.isfinite(x.grad.numpy())) and np.all(x.grad.numpy() == 0), p
    assert F.pdist(md.randn(1, 3)).shape == (0,) and F.pdist(md.randn(4, 0)).numpy().tolist() == [0.0] * 6


# the random ones: rrelu in training, alpha dropout ---------------------------------------------

def _seeded(f, seed=7):
    def g(*args):
        md.manual_seed(seed)
        return f(*args)
    return g


def test_rrelu_training_draws_a_slope_per_element_in_bounds_and_backward_uses_it():
    lower, upper = 0.1, 0.4
    xa = -np.random.default_rng(0).uniform(0.5, 2.0, 20000)
    x = md.tensor(xa, requires_grad=True)
    md.manual_seed(3)
    y = F.rrelu(x, lower, upper, training=True)
    slopes = y.detach().numpy() / xa
    assert slopes.min() >= lower and slopes.max() <= upper
    assert abs(slopes.mean() - (lower + upper) / 2) < 0.01 and abs(slopes.std() - (upper - lower) / 12 ** 0.5) < 0.01
    assert len(np.unique(slopes)) > 10000                 # one draw per element, not one shared slope
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), slopes, rtol=1e-12)
    md.manual_seed(3)
    again = F.rrelu(md.tensor(xa), lower, upper, True)
    np.testing.assert_array_equal(again.numpy(), y.detach().numpy())   # the seed fixes it
    pos = md.tensor([0.5, 2.0, 3.0], requires_grad=True)
    F.rrelu(pos, training=True).sum().backward()
    assert pos.grad.numpy().tolist() == [1.0, 1.0, 1.0]


def test_rrelu_module_draws_in_training_and_uses_the_mean_slope_in_eval():
    m = nn.RReLU(0.1, 0.3)
    md.manual_seed(0)
    x = md.full((1000,), -1.0)
    assert len(np.unique(m(x).numpy())) > 100
    m.eval()
    np.testing.assert_allclose(m(x).numpy(), -0.2, rtol=1e-6)


def test_rrelu_training_gradcheck_with_fixed_slopes():
    x = md.tensor(np.random.default_rng(1).standard_normal((3, 4)), requires_grad=True)
    assert gradcheck(_seeded(lambda x: F.rrelu(x, 0.05, 0.6, training=True)), (x,))


def _alpha_coefficients(p):
    a = 1 / math.sqrt((1 - p) * (1 + p * ALPHA_P ** 2))
    return a, -a * ALPHA_P * p


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_alpha_dropout_keeps_mean_zero_and_variance_one_on_selu_normalised_input(p):
    md.manual_seed(11)
    x = md.tensor(np.random.default_rng(2).standard_normal(400000))
    y = F.alpha_dropout(x, p, training=True).numpy()
    # the standard errors are ~0.002 (mean) and ~0.003 (variance); 0.02 is many of them
    assert abs(y.mean()) < 0.02 and abs(y.var() - 1) < 0.02
    a, b = _alpha_coefficients(p)
    dropped = np.isclose(y, a * ALPHA_P + b, rtol=0, atol=1e-6)
    assert abs(dropped.mean() - p) < 0.01
    np.testing.assert_allclose(y[~dropped], a * x.numpy()[~dropped] + b, rtol=1e-5, atol=1e-6)


def test_feature_alpha_dropout_drops_whole_channels_and_keeps_the_statistics():
    p = 0.3
    md.manual_seed(5)
    xa = np.random.default_rng(3).standard_normal((200, 400, 3, 3))
    x = md.tensor(xa, requires_grad=True)
    y = F.feature_alpha_dropout(x, p, training=True)
    ya = y.detach().numpy()
    a, b = _alpha_coefficients(p)
    dropped = np.all(np.isclose(ya, a * ALPHA_P + b, atol=1e-12), axis=(2, 3))
    kept = np.all(np.isclose(ya, a * xa + b, atol=1e-12), axis=(2, 3))
    assert np.all(dropped ^ kept) and abs(dropped.mean() - p) < 0.01
    assert abs(ya.mean()) < 0.02 and abs(ya.var() - 1) < 0.02
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.where(kept[:, :, None, None], a, 0.0) + 0 * xa)


def test_alpha_dropout_backward_is_the_kept_scale_and_gradchecks():
    md.manual_seed(0)
    x = md.randn(50, 40, requires_grad=True)
    y = F.alpha_dropout(x, 0.2, training=True)
    y.sum().backward()
    a, _ = _alpha_coefficients(0.2)
    values = np.unique(x.grad.numpy())
    assert values.dtype == np.float32 and len(values) == 2 and values[0] == 0 and np.isclose(values[1], a, rtol=1e-6)
    x64 = md.tensor(np.random.default_rng(0).standard_normal((2, 3, 4)), requires_grad=True)
    assert gradcheck(_seeded(lambda x: F.alpha_dropout(x, 0.4, True)), (x64,))
    assert gradcheck(_seeded(lambda x: F.feature_alpha_dropout(x, 0.4, True)), (x64,))


@pytest.mark.parametrize("fn", [F.alpha_dropout, F.feature_alpha_dropout])
def test_alpha_dropout_eval_p0_p1_and_inplace(fn):
    x = md.randn(4, 3, 2)
    assert fn(x) is x and fn(x, 0.5, training=False) is x and fn(x, 0.0, training=True) is x
    assert np.all(fn(x, 1.0, training=True).numpy() == 0)    # PyTorch's input * 0
    z = md.randn(4, 3, 2)
    before = z.numpy().copy()
    md.manual_seed(1)
    out = fn(z, 0.5, True, inplace=True)
    md.manual_seed(1)
    assert out is z and np.array_equal(z.numpy(), fn(md.tensor(before), 0.5, True).numpy())
    module = (nn.AlphaDropout if fn is F.alpha_dropout else nn.FeatureAlphaDropout)(0.5)
    assert not np.array_equal(module(x).numpy(), x.numpy()) and module.eval()(x) is x


def test_alpha_dropout_on_cuda_matches_the_formula():
    pytest.importorskip("numba")
    from minidl import backends
    try:
        backends.get("cuda")
    except RuntimeError as exc:
        pytest.skip(str(exc))
    p = 0.4
    xa = np.random.default_rng(0).standard_normal((3, 4, 2))
    a, b = _alpha_coefficients(p)
    for fn in (F.alpha_dropout, F.feature_alpha_dropout):
        y = fn(md.tensor(xa, dtype=md.float32, device="cuda"), p, True).to("cpu").numpy()
        assert np.all(np.isclose(y, a * xa + b, atol=1e-5) | np.isclose(y, a * ALPHA_P + b, atol=1e-5))
    x = md.tensor(xa, device="cuda", requires_grad=True)
    F.rrelu(x, 0.1, 0.2, training=True).sum().backward()
    g = x.grad.to("cpu").numpy()
    assert np.all(g[xa > 0] == 1) and np.all((g[xa < 0] >= 0.1) & (g[xa < 0] <= 0.2))


# in place --------------------------------------------------------------------------------------

@pytest.mark.parametrize("call,underscore", [
    (lambda x, **kw: F.threshold(x, 0.1, 9.0, **kw), lambda x: F.threshold_(x, 0.1, 9.0)),
    (lambda x, **kw: F.rrelu(x, 0.2, 0.3, **kw), lambda x: F.rrelu_(x, 0.2, 0.3)),
    (lambda x, **kw: F.rrelu(x, 0.2, 0.3, True, **kw), lambda x: F.rrelu_(x, 0.2, 0.3, True)),
])
def test_inplace_and_underscore_forms_overwrite_the_input_with_the_out_of_place_result(call, underscore):
    xa = np.random.default_rng(0).standard_normal((3, 4))
    md.manual_seed(4)
    expected = call(md.tensor(xa)).numpy()
    for f in (lambda x: call(x, inplace=True), underscore):
        x = md.tensor(xa)
        md.manual_seed(4)
        assert f(x) is x and x._version == 1
        np.testing.assert_allclose(x.numpy(), expected, rtol=1e-12)
    w = md.tensor(np.ones((3, 4)), requires_grad=True)
    assert gradcheck(_seeded(lambda w: call(w * md.tensor(xa), inplace=True)), (w,))


# PyTorch as the oracle -------------------------------------------------------------------------

EDGES = np.array([-3.0, -0.5, -0.4999, -0.3, -0.2, 0.0, 0.2, 0.3, 0.5, 0.5001, 2.0, np.nan])
TORCH_CALLS = [
    ("hardshrink", (), {}), ("hardshrink", (0.3,), {}), ("hardshrink", (), {"lambd": -1.0}), ("softshrink", (), {}),
    ("softshrink", (0.2,), {}), ("softshrink", (), {"lambd": 0.0}), ("threshold", (0.2, -5.0), {}),
    ("threshold", (), {"threshold": 0.5, "value": 0.5}), ("rrelu", (), {}), ("rrelu", (0.3, 0.3), {}),
]


@pytest.mark.parametrize("name,args,kw", TORCH_CALLS, ids=[f"{n}{a}{kw}" for n, a, kw in TORCH_CALLS])
def test_matches_torch_values_and_gradients(name, args, kw):
    torch = pytest.importorskip("torch")
    x, tx = md.tensor(EDGES, requires_grad=True), torch.tensor(EDGES, requires_grad=True)
    y, ty = getattr(F, name)(x, *args, **kw), getattr(torch.nn.functional, name)(tx, *args, **kw)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12, atol=0)
    v = np.linspace(-1, 2, EDGES.size)
    y.backward(md.tensor(v))
    ty.backward(torch.tensor(v))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=0)


def test_threshold_on_integers_matches_torch():
    torch = pytest.importorskip("torch")
    a = np.array([-2, 0, 1, 2, 3])
    y = F.threshold(md.tensor(a), 1.5, 7)
    assert y.dtype == md.int64 and y.numpy().tolist() == torch.nn.functional.threshold(torch.tensor(a), 1.5, 7).tolist()


@pytest.mark.parametrize("p", [0, 0.5, 1, 1.5, 2, 3, math.inf])
def test_pdist_matches_torch_with_ties_and_zero_distances(p):
    torch = pytest.importorskip("torch")
    a = np.array([[0.0, 1.0, 2.0], [0.0, 1.0, 2.0], [3.0, 5.0, 2.0], [3.0, 2.0, -1.0], [1.0, -1.0, 0.5]])
    x, tx = md.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = F.pdist(x, p), torch.nn.functional.pdist(tx, p)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12)
    v = np.arange(1.0, 11.0)
    y.backward(md.tensor(v))
    ty.backward(torch.tensor(v))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-15)


def test_channel_shuffle_and_softmax2d_match_torch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(0).standard_normal((2, 6, 3, 2))
    g = np.random.default_rng(1).standard_normal(a.shape)
    for ours, theirs in [(nn.ChannelShuffle(2), torch.nn.ChannelShuffle(2)), (nn.Softmax2d(), torch.nn.Softmax2d())]:
        x, tx = md.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        y, ty = ours(x), theirs(tx)
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12)
        y.backward(md.tensor(g))
        ty.backward(torch.tensor(g))
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


def _affine_map(x, y, grad):
    """(a, b, dropped value) of y = a x + b where kept (where grad = a), one constant where dropped (grad = 0)."""
    kept = grad != 0
    assert 0 < kept.mean() < 1 and np.ptp(y[~kept]) < 1e-12 and np.ptp(grad[kept]) < 1e-12
    a, b = np.polyfit(x[kept], y[kept], 1)
    np.testing.assert_allclose(y[kept], a * x[kept] + b, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(grad[kept], a, rtol=1e-9)
    return a, b, y[~kept][0]


@pytest.mark.parametrize("p", [0.2, 0.5])
def test_alpha_dropout_matches_torchs_affine_map_and_gradient(p):
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(0).standard_normal(20000)
    torch.manual_seed(0)
    tx = torch.tensor(a, requires_grad=True)
    ty = torch.nn.functional.alpha_dropout(tx, p, training=True)
    ty.sum().backward()
    md.manual_seed(0)
    x = md.tensor(a, requires_grad=True)
    y = F.alpha_dropout(x, p, training=True)
    y.sum().backward()
    np.testing.assert_allclose(_affine_map(a, y.detach().numpy(), x.grad.numpy()),
                               _affine_map(a, ty.detach().numpy(), tx.grad.numpy()), rtol=1e-9)


MODULES = [("Hardshrink", ()), ("Hardshrink", (0.2,)), ("Softshrink", ()), ("Softshrink", (1.0,)),
           ("Threshold", (0.1, 20)), ("Threshold", (0.1, 20.0, True)), ("RReLU", ()), ("RReLU", (0.1, 0.3, True)),
           ("AlphaDropout", ()), ("AlphaDropout", (0.2, True)), ("FeatureAlphaDropout", (0.3,)),
           ("ChannelShuffle", (3,)), ("Softmax2d", ())]


@pytest.mark.parametrize("name,args", MODULES, ids=[f"{n}{a}" for n, a in MODULES])
def test_modules_match_torch_repr_and_eval_output(name, args):
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(0).standard_normal((2, 6, 4))
    ours, theirs = getattr(nn, name)(*args).eval(), getattr(torch.nn, name)(*args).eval()
    assert repr(ours) == repr(theirs)
    np.testing.assert_allclose(ours(md.tensor(a)).numpy(), theirs(torch.tensor(a)).numpy(), rtol=1e-12)


# bad arguments ---------------------------------------------------------------------------------

@pytest.mark.parametrize("call,exc,match", [
    (lambda: F.softshrink(md.randn(3), -1.0), RuntimeError, r"lambda must be in range \[0, .*but found -1"),
    (lambda: nn.Softshrink(-0.5)(md.randn(3)), RuntimeError, "lambda must be in range"),
    (lambda: F.rrelu(md.randn(3), 0.5, 0.1), RuntimeError, "Lower bound should be less than or equal to the upper"),
    (lambda: F.rrelu(md.randn(3), 0.5, 0.1, True), RuntimeError, "Lower bound should be less than or equal"),
    (lambda: F.hardshrink(md.tensor([1, 2])), NotImplementedError, "hardshrink: .*int64"),
    (lambda: F.softshrink(md.tensor([1, 2])), NotImplementedError, "softshrink: .*int64"),
    (lambda: F.rrelu(md.tensor([1, 2])), NotImplementedError, "rrelu: .*int64"),
    (lambda: F.threshold(md.tensor([True]), 0, 1), NotImplementedError, "threshold: .*bool"),
    (lambda: F.alpha_dropout(md.randn(3), 1.5), ValueError, "probability has to be between 0 and 1, but got 1.5"),
    (lambda: F.feature_alpha_dropout(md.randn(3), -0.1), ValueError, "between 0 and 1, but got -0.1"),
    (lambda: nn.AlphaDropout(1.5), ValueError, "between 0 and 1, but got 1.5"),
    (lambda: F.feature_alpha_dropout(md.randn(3), 0.5, True), RuntimeError,
     "Feature dropout requires at least 2 dimensions in the input"),
    (lambda: F.alpha_dropout(md.tensor([1, 2]), 0.5, True), RuntimeError, "can't be cast"),
    (lambda: F.channel_shuffle(md.randn(3, 4), 2), RuntimeError, r"expects input with > 2 dims, .*sizes \[3, 4\]"),
    (lambda: F.channel_shuffle(md.randn(2, 4, 3), 0), RuntimeError, "groups to divide channels in must be positive"),
    (lambda: F.channel_shuffle(md.randn(2, 4, 3), 3), RuntimeError, "Got 4 channels and 3 groups"),
    (lambda: F.channel_shuffle(md.randn(2, 4, 3), 2.0), TypeError, "must be int, not float"),
    (lambda: F.pdist(md.randn(3)), RuntimeError, "pdist only supports 2D tensors, got: 1D"),
    (lambda: F.pdist(md.randn(3, 4, 5)), RuntimeError, "pdist only supports 2D tensors, got: 3D"),
    (lambda: F.pdist(md.randn(3, 4), -1), RuntimeError, "pdist only supports non-negative p values"),
    (lambda: F.pdist(md.ones(3, 4, dtype=md.int64)), RuntimeError, "pdist only supports floating-point dtypes"),
    (lambda: nn.Softmax2d()(md.randn(2, 3)), ValueError, "Softmax2d: expected input to be 3D or 4D, got 2D instead"),
])
def test_bad_arguments_raise_torchs_exception_and_message(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
