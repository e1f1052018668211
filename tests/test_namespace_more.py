"""md.asarray, broadcast_shapes / broadcast_tensors, concat, is_complex, trapezoid /
cumulative_trapezoid / gradient, histogram, poisson, randint_like, empty_strided,
set_printoptions, get/set_default_device and optim.Adafactor: values against NumPy, gradients
against finite differences, bad input, and PyTorch where it is installed."""
import numpy as np
import pytest

import minidl as md
import minidl.optim as optim
from minidl.autograd import gradcheck
from minidl.testing import OpSpec, check_forward, check_gradcheck, forward_cases, spec_id


@pytest.fixture(autouse=True)
def _default_printing():
    yield
    md.set_printoptions(profile="default")


# asarray ------------------------------------------------------------------------------------------
def test_asarray_shares_numpy_memory_unless_a_copy_is_asked_or_needed():
    a = np.arange(4.0)
    t = md.asarray(a)
    a[0] = 9.0
    assert t.dtype == md.float64 and t[0].item() == 9.0          # shared
    c = md.asarray(a, copy=True)
    a[1] = 7.0
    assert c[1].item() == 1.0                                     # copied
    f = md.asarray(a, dtype=md.float32)
    a[2] = 5.0
    assert f.dtype == md.float32 and f[2].item() == 2.0           # converted, so copied
    view = np.zeros((3, 4))[:, ::2]
    s = md.asarray(view)
    view[0, 0] = 3.0
    assert s[0, 0].item() == 3.0
    assert md.asarray([1, 2.5]).tolist() == [1.0, 2.5] and md.asarray([1, 2]).dtype == md.int64
    assert md.asarray(np.float64(3.0)).dtype == md.float64


def test_asarray_of_a_tensor_is_it_or_a_detached_alias():
    x = md.ones(3)
    assert md.asarray(x) is x
    w = md.ones(3, requires_grad=True)
    assert md.asarray(w, requires_grad=True) is w
    alias = md.asarray(w)
    assert not alias.requires_grad and alias.is_leaf and np.shares_memory(alias.detach().numpy(), w.detach().numpy())
    leaf = md.asarray(w * 2, requires_grad=True)
    assert leaf.requires_grad and leaf.is_leaf
    copy = md.asarray(w, copy=True)
    assert not np.shares_memory(copy.detach().numpy(), w.detach().numpy()) and copy.tolist() == [1.0, 1.0, 1.0]
    assert md.asarray(w, dtype=md.float64).dtype == md.float64


@pytest.mark.parametrize("call, exc, match", [
    (lambda: md.asarray(np.arange(3.0), dtype=md.float32, copy=False), ValueError, "can't alias"),
    (lambda: md.asarray([1.0, 2.0], copy=False), ValueError, "arbitrary sequence"),
    (lambda: md.asarray(md.ones(2), dtype=md.float64, copy=False), ValueError, "can't alias tensor"),
    (lambda: md.asarray(np.arange(3.0).astype(">f8"), copy=False), ValueError, "byte order"),
    (lambda: md.asarray(np.ones(2, np.complex64)), TypeError, "unsupported dtype"),
    (lambda: md.asarray([1, 2], requires_grad=True), RuntimeError, "floating point"),
])
def test_asarray_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# broadcasting, concat, is_complex ----------------------------------------------------------------
def test_broadcast_shapes_and_tensors():
    for shapes in [((2, 1), (3,), 1, ()), ((4, 1, 3), (5, 1)), ()]:
        assert md.broadcast_shapes(*shapes) == np.broadcast_shapes(*[(s,) if isinstance(s, int) else s
                                                                     for s in shapes])
    assert isinstance(md.broadcast_shapes((2, 1)), md.Size)
    a, b = md.tensor([[1.0], [2.0]]), md.tensor([10.0, 20.0, 30.0])
    x, y = md.broadcast_tensors(a, b)
    ref = np.broadcast_arrays(a.numpy(), b.numpy())
    assert np.array_equal(x.numpy(), ref[0]) and np.array_equal(y.numpy(), ref[1])
    assert md.broadcast_tensors() == ()
    gradcheck(lambda p, q: md.broadcast_tensors(p, q), [md.randn(3, 1, dtype=md.float64, requires_grad=True),
                                                       md.randn(4, dtype=md.float64, requires_grad=True)])


@pytest.mark.parametrize("call, exc, match", [
    (lambda: md.broadcast_shapes((2, 3), (4,)), RuntimeError, "Mismatching argument at index 1"),
    (lambda: md.broadcast_shapes((2, -1)), ValueError, "negative length"),
    (lambda: md.broadcast_shapes((2.0,)), TypeError, "tuple of ints"),
    (lambda: md.broadcast_tensors(md.ones(2, 3), md.ones(4)), RuntimeError, "does not broadcast"),
    (lambda: md.broadcast_tensors([md.ones(1)]), TypeError, "expected Tensor"),
    (lambda: md.is_complex(np.ones(1)), TypeError, "must be Tensor"),
])
def test_broadcast_and_is_complex_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_concat_aliases_and_is_complex():
    a, b = md.ones(1, 2), md.zeros(1, 2)
    assert md.concat([a, b]).tolist() == md.cat([a, b]).tolist()
    assert md.concatenate((a, b), dim=1).tolist() == [[1.0, 1.0, 0.0, 0.0]]
    assert md.concat([a, b], axis=1).shape == (1, 4)
    assert md.is_complex(a) is False and a.is_complex() is False


# integration and differentiation of samples -------------------------------------------------------
def _cumtrapz(y, x=None, dx=1.0, axis=-1):
    """The running trapezoidal rule; ``x`` broadcastable to ``y``."""
    if x is not None:
        dx = np.diff(np.moveaxis(np.broadcast_to(x, y.shape), axis, -1), axis=-1)
    y = np.moveaxis(y, axis, -1)
    return np.moveaxis(np.cumsum(dx * (y[..., 1:] + y[..., :-1]) / 2, axis=-1), -1, axis)


def _coords(rng, n):
    return np.cumsum(rng.random(n) + 0.2)


INTEGRATION_SPECS = [
    OpSpec("trapezoid", lambda y: md.trapezoid(y), lambda y: np.trapezoid(y), lambda r: (r.standard_normal((3, 5)),)),
    OpSpec("trapezoid_dx_dim0", lambda y: md.trapezoid(y, dx=0.3, dim=0),
           lambda y: np.trapezoid(y, dx=0.3, axis=0), lambda r: (r.standard_normal((4, 3)),)),
    OpSpec("trapezoid_x", lambda y, x: md.trapezoid(y, x), lambda y, x: np.trapezoid(y, x),
           lambda r: (r.standard_normal((2, 5)), _coords(r, 5))),
    OpSpec("trapz_x_2d_dim0", lambda y, x: md.trapz(y, x, dim=0), lambda y, x: np.trapezoid(y, x, axis=0),
           lambda r: (r.standard_normal((4, 3)), np.cumsum(r.random((4, 3)) + 0.2, axis=0))),
    OpSpec("cumulative_trapezoid", lambda y: md.cumulative_trapezoid(y), lambda y: _cumtrapz(y),
           lambda r: (r.standard_normal((3, 5)),)),
    OpSpec("cumulative_trapezoid_x_dim0", lambda y, x: md.cumulative_trapezoid(y, x, dim=0),
           lambda y, x: _cumtrapz(y, x[:, None], axis=0), lambda r: (r.standard_normal((4, 3)), _coords(r, 4))),
    OpSpec("cumulative_trapezoid_dx", lambda y: md.cumulative_trapezoid(y, dx=2.5), lambda y: _cumtrapz(y, dx=2.5),
           lambda r: (r.standard_normal((6,)),)),
]
for _eo in (1, 2):
    INTEGRATION_SPECS += [
        OpSpec(f"gradient_eo{_eo}", lambda f, e=_eo: md.gradient(f, edge_order=e),
               lambda f, e=_eo: tuple(np.gradient(f, edge_order=e)), lambda r: (r.standard_normal((4, 5)),)),
        OpSpec(f"gradient_spacing_eo{_eo}", lambda f, e=_eo: md.gradient(f, spacing=[0.5, 2.0], edge_order=e),
               lambda f, e=_eo: tuple(np.gradient(f, 0.5, 2.0, edge_order=e)), lambda r: (r.standard_normal((3, 4)),)),
        OpSpec(f"gradient_coordinates_eo{_eo}",
               lambda f, c, e=_eo: md.gradient(f, spacing=(c,), dim=1, edge_order=e),
               lambda f, c, e=_eo: (np.gradient(f, c, axis=1, edge_order=e),),
               lambda r: (r.standard_normal((3, 6)), _coords(r, 6))),
    ]


@pytest.mark.parametrize("spec", INTEGRATION_SPECS, ids=spec_id)
def test_integration_gradcheck(spec):
    assert check_gradcheck(spec)


@pytest.mark.parametrize("spec,dtype,device", forward_cases(INTEGRATION_SPECS))
def test_integration_forward(spec, dtype, device):
    check_forward(spec, dtype, device)


def test_integration_dtypes_and_edge_cases():
    ints = md.arange(4)
    assert md.trapezoid(ints).dtype == md.float32 and md.trapezoid(ints).item() == 4.5
    assert md.trapezoid(md.ones(2, 0)).tolist() == [0.0, 0.0]
    assert md.cumulative_trapezoid(md.ones(2, 1)).shape == (2, 0)
    assert md.gradient(md.tensor(1.0)) == ()
    (g,) = md.gradient(ints ** 2, spacing=2)
    assert g.dtype == md.float32 and np.allclose(g.numpy(), np.gradient(np.arange(4) ** 2, 2))
    (g,) = md.gradient(md.arange(12.0).reshape(3, 4), dim=-1, spacing=md.tensor(2.0))
    assert np.allclose(g.numpy(), 0.5)


@pytest.mark.parametrize("call, exc, match", [
    (lambda: md.trapezoid(md.ones(2, 3), md.tensor([0.0, 1.0])), RuntimeError, "one `x` value for each"),
    (lambda: md.trapezoid(md.ones(3), md.ones(3), dx=2.0), TypeError, "not both"),
    (lambda: md.trapezoid(md.ones(3), 2.0), TypeError, "must be Tensor"),
    (lambda: md.trapezoid(md.tensor(1.0)), IndexError, "out of range"),
    (lambda: md.trapezoid(md.ones(3, dtype=md.bool)), RuntimeError, "bool"),
    (lambda: md.cumulative_trapezoid(md.ones(3), dx=True), RuntimeError, "real number"),
    (lambda: md.gradient(md.ones(3, 4), spacing=[2.0]), RuntimeError, "list of length equal to 'self.dim"),
    (lambda: md.gradient(md.ones(3, 4), spacing=[2.0, 1.0], dim=1), RuntimeError, "same length"),
    (lambda: md.gradient(md.ones(3), edge_order=3), RuntimeError, "edge_order=1 and edge_order=2"),
    (lambda: md.gradient(md.ones(2), edge_order=2), RuntimeError, "at least edge_order\\+1"),
    (lambda: md.gradient(md.ones(3, dtype=md.uint8)), RuntimeError, "uint8"),
    (lambda: md.gradient(md.ones(3, 4), dim=[0, 0]), RuntimeError, "appears multiple times"),
    (lambda: md.gradient(md.ones(3, 4), spacing=(md.ones(3, 1),), dim=0), RuntimeError, "one dimension"),
    (lambda: md.gradient(md.ones(3, 4), spacing=(md.ones(2),), dim=0), RuntimeError, "one value per sample"),
])
def test_integration_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# histogram ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_histogram_matches_numpy(dtype):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 25)).astype(dtype)
    w = rng.random((4, 25)).astype(dtype)
    for bins, kwargs in [(7, {}), (5, dict(range=(-1.0, 1.5))), (4, dict(weight=w, density=True)),
                         (6, dict(range=(-2, 2), density=True))]:
        t_kwargs = {k: md.tensor(v) if k == "weight" else v for k, v in kwargs.items()}
        hist, edges = md.histogram(md.tensor(x), bins, **t_kwargs)
        ref_hist, ref_edges = np.histogram(x, bins, **{"weights" if k == "weight" else k: v
                                                       for k, v in kwargs.items()})
        assert hist.dtype == edges.dtype == md.tensor(x).dtype
        np.testing.assert_allclose(edges.numpy(), ref_edges, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(hist.numpy(), ref_hist, rtol=1e-5)
    edges = md.tensor([-1.0, 0.0, 0.5, 3.0], dtype=md.float64)
    hist, out_edges = md.tensor(x.astype(np.float64)).histogram(edges)
    assert np.array_equal(hist.numpy(), np.histogram(x, edges.numpy())[0]) and out_edges.tolist() == edges.tolist()
    assert md.histogram(md.ones(3), 2).bin_edges.tolist() == [0.5, 1.0, 1.5]     # a single value: widened
    assert md.histogram(md.ones(0), 2).bin_edges.tolist() == [0.0, 0.5, 1.0]
    assert md.histogram(md.tensor([0.0, 1.0, 2.0, 3.0]), md.tensor([0.0, 1.0, 3.0])).hist.tolist() == [1.0, 3.0]


@pytest.mark.parametrize("call, exc, match", [
    (lambda: md.histogram(md.arange(4), 2), NotImplementedError, "floating point"),
    (lambda: md.histogram(md.ones(3), 0), RuntimeError, "bins must be > 0"),
    (lambda: md.histogram(md.ones(3), 2, range=(3.0, 0.0)), RuntimeError, "min should not exceed max"),
    (lambda: md.histogram(md.tensor([1.0, float("nan")]), 2), RuntimeError, "not finite"),
    (lambda: md.histogram(md.ones(3), 2, weight=md.ones(2)), RuntimeError, "same shape"),
    (lambda: md.histogram(md.ones(3), 2, weight=md.ones(3, dtype=md.float64)), RuntimeError, "same dtype"),
    (lambda: md.histogram(md.ones(3), md.ones(2, 2)), RuntimeError, "one dimension"),
    (lambda: md.histogram(md.ones(3), md.ones(2, dtype=md.float64)), RuntimeError, "same dtype"),
    (lambda: md.histogram(md.ones(3), md.tensor([0.0, 2.0]), range=(0, 1)), TypeError, "range cannot be given"),
    (lambda: md.histogram(md.ones(3), 2.5), TypeError, "bins"),
])
def test_histogram_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# random factories -----------------------------------------------------------------------------------
def test_poisson_draws_from_the_rates_with_a_zero_gradient():
    md.manual_seed(0)
    rates = md.tensor([0.0, 0.5, 4.0, 30.0], dtype=md.float64)
    draws = np.stack([md.poisson(rates).numpy() for _ in range(400)])
    assert (draws[:, 0] == 0).all() and (draws == np.round(draws)).all()
    np.testing.assert_allclose(draws.mean(0)[1:], rates.numpy()[1:], rtol=0.15)
    np.testing.assert_allclose(draws.var(0)[1:], rates.numpy()[1:], rtol=0.35)
    a = md.poisson(md.full((5,), 3.0), md.Generator().manual_seed(1))
    b = md.poisson(md.full((5,), 3.0), md.Generator().manual_seed(1))
    assert a.tolist() == b.tolist() and a.dtype == md.float32 and md.poisson(md.tensor(2.0)).shape == ()
    r = md.tensor([3.0, 1.0], requires_grad=True)
    s = md.poisson(r)
    assert s.requires_grad
    s.sum().backward()
    assert r.grad.tolist() == [0.0, 0.0]


def test_randint_like_and_empty_strided():
    x = md.ones(50, 4)
    r = md.randint_like(x, 5)
    assert r.shape == x.shape and r.dtype == md.float32 and set(np.unique(r.numpy())) <= set(range(5))
    r = md.randint_like(md.ones(200, dtype=md.int32), 3, 5)
    assert r.dtype == md.int32 and set(np.unique(r.numpy())) == {3, 4}
    assert md.randint_like(x, high=2, dtype=md.int64).dtype == md.int64
    assert md.randint_like(x, 0, 5, requires_grad=True).requires_grad
    g1, g2 = md.Generator().manual_seed(3), md.Generator().manual_seed(3)
    assert md.randint_like(x, 9, generator=g1).tolist() == md.randint_like(x, 9, generator=g2).tolist()
    e = md.empty_strided((2, 3), (1, 2))
    assert e.shape == (2, 3) and e.stride() == (1, 2) and e.dtype == md.float32
    assert md.empty_strided((2, 3), (0, 1)).stride() == (0, 1)
    assert md.empty_strided((), ()).shape == () and md.empty_strided((0, 3), (5, 7)).shape == (0, 3)
    assert md.empty_strided((2,), (1,), dtype=md.int32, requires_grad=False).dtype == md.int32
    assert (md.empty_strided((2, 3), (1, 2)) + 1).tolist() == [[1.0] * 3] * 2


@pytest.mark.parametrize("call, exc, match", [
    (lambda: md.poisson(md.tensor([-1.0])), RuntimeError, "non-negative"),
    (lambda: md.poisson(md.tensor([float("nan")])), RuntimeError, "non-negative"),
    (lambda: md.poisson(md.tensor([1])), NotImplementedError, "floating point"),
    (lambda: md.poisson(md.tensor([float("inf")])), RuntimeError, "too large"),
    (lambda: md.randint_like(md.ones(2), 5, 3), RuntimeError, "from=5 >= to=3"),
    (lambda: md.randint_like(md.ones(2), 5.5), TypeError, "high"),
    (lambda: md.randint_like(md.ones(2, dtype=md.uint8), 300), RuntimeError, "out of bounds"),
    (lambda: md.randint_like(md.ones(2, dtype=md.int64), 5, requires_grad=True), RuntimeError, "floating point"),
    (lambda: md.empty_strided((2, 3), (1,)), RuntimeError, "must match dimensionality"),
    (lambda: md.empty_strided((2, 3), (-1, 1)), RuntimeError, "non-negative"),
    (lambda: md.empty_strided((-2, 3), (3, 1)), RuntimeError, "negative dimension"),
    (lambda: md.empty_strided(3, 1), TypeError, "tuples of ints"),
])
def test_random_factories_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# process-wide settings ------------------------------------------------------------------------------
def test_set_printoptions_changes_repr():
    x = md.tensor([1 / 3, 2.0])
    assert repr(x) == "tensor([0.3333, 2.0000])"
    md.set_printoptions(precision=2)
    assert repr(x) == "tensor([0.33, 2.00])"
    md.set_printoptions(sci_mode=True)
    assert repr(x) == "tensor([3.33e-01, 2.00e+00])"        # precision stays, sci_mode is per call
    md.set_printoptions(profile="default", sci_mode=False)
    assert repr(md.tensor([1e-8, 1.0])) == "tensor([0.0000, 1.0000])"
    md.set_printoptions(profile="default")
    assert repr(md.tensor([1e-8, 1.0])) == "tensor([1.0000e-08, 1.0000e+00])"
    md.set_printoptions(threshold=5, edgeitems=1)
    assert repr(md.arange(10)) == "tensor([0,  ..., 9])"
    md.set_printoptions(profile="full")
    assert "..." not in repr(md.arange(2000))
    md.set_printoptions(profile="short")
    assert repr(md.arange(2000)).startswith("tensor([   0,    1,  ...,")
    md.set_printoptions(profile="default", linewidth=30)
    assert max(len(line) for line in repr(md.arange(20)).splitlines()) <= 30
    with pytest.raises(TypeError, match="precision"):
        md.set_printoptions(precision="4")


def test_default_device_is_the_cpu():
    assert md.get_default_device() == md.device("cpu") and md.zeros(1).device == md.get_default_device()
    md.set_default_device("cpu")
    md.set_default_device(None)
    with pytest.raises(NotImplementedError, match="set_default_device\\('cuda'\\)"):
        md.set_default_device("cuda")
    with pytest.raises(RuntimeError, match="device type"):
        md.set_default_device("gpu")


# Adafactor ------------------------------------------------------------------------------------------
def _adafactor_reference(params, grads_fn, steps, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
                         weight_decay=0.0, maximize=False):
    """The algorithm as written in the paper's factored form, in float64 NumPy."""
    params = [p.copy() for p in params]
    row = [np.zeros(p.shape[:-1] + (1,)) if p.ndim > 1 else None for p in params]
    col = [np.zeros(p.shape[:-2] + (1,) + p.shape[-1:]) if p.ndim > 1 else None for p in params]
    var = [np.zeros(p.shape) for p in params]
    eps1 = np.finfo(np.float64).eps if eps[0] is None else eps[0]
    for t in range(1, steps + 1):
        grads = grads_fn(params)
        for i, (p, g) in enumerate(zip(params, grads)):
            g = -g if maximize else g
            w = t ** beta2_decay
            alpha = max(eps[1], np.sqrt(np.mean(p ** 2))) * min(lr, t ** -0.5)
            p *= 1 - lr * weight_decay
            if p.ndim > 1:
                row[i] += w * ((g ** 2).mean(-1, keepdims=True) - row[i])
                col[i] += w * ((g ** 2).mean(-2, keepdims=True) - col[i])
                v = row[i] * col[i] / np.maximum(row[i].mean(-2, keepdims=True), eps1)
            else:
                var[i] += w * (g ** 2 - var[i])
                v = var[i]
            u = g / np.sqrt(np.maximum(v, eps1 ** 2))
            p -= alpha / max(1.0, np.sqrt(np.mean(u ** 2)) / d) * u
    return params


def _quadratic_grads(params):
    return [2 * (p - 0.3) * (1 + i) + 0.3 * p ** 2 for i, p in enumerate(params)]


def _loss(ps):
    return sum(((p - 0.3) ** 2 * (1 + i)).sum() + (p ** 3).sum() * 0.1 for i, p in enumerate(ps))


ADAFACTOR_CASES = [{}, dict(lr=0.05, weight_decay=0.1), dict(maximize=True, eps=(1e-30, 1e-3), d=2.0, beta2_decay=-0.5)]
SHAPES = [(4, 5), (6,), (2, 3, 4), ()]


@pytest.mark.parametrize("kwargs", ADAFACTOR_CASES)
def test_adafactor_matches_the_numpy_reference(kwargs):
    rng = np.random.default_rng(0)
    init = [rng.standard_normal(s) for s in SHAPES]
    params = [md.tensor(a, requires_grad=True) for a in init]
    opt = optim.Adafactor(params, **kwargs)
    for _ in range(20):
        opt.zero_grad()
        (-_loss(params) if kwargs.get("maximize") else _loss(params)).backward()
        opt.step()
    sign = -1 if kwargs.get("maximize") else 1
    ref = _adafactor_reference(init, lambda ps: [sign * g for g in _quadratic_grads(ps)], 20, **kwargs)
    for p, r in zip(params, ref):
        np.testing.assert_allclose(p.detach().numpy(), r, rtol=1e-10, atol=1e-12)
    state = opt.state[params[0]]
    assert state["step"] == 20 and state["row_var"].shape == (4, 1) and state["col_var"].shape == (1, 5)
    assert "variance" in opt.state[params[1]] and opt.state[params[2]]["col_var"].shape == (2, 1, 4)


def test_adafactor_state_dict_round_trip_and_bad_hyperparameters():
    rng = np.random.default_rng(1)
    a, b = (md.tensor(rng.standard_normal((3, 4)), requires_grad=True) for _ in range(2))
    opts = [optim.Adafactor([a]), optim.Adafactor([b])]
    for p, opt in zip((a, b), opts):
        for _ in range(3):
            opt.zero_grad()
            (p ** 2).sum().backward()
            opt.step()
    fresh = optim.Adafactor([b])
    fresh.load_state_dict(opts[0].state_dict())
    assert fresh.state[b]["step"] == 3 and np.array_equal(fresh.state[b]["row_var"], opts[0].state[a]["row_var"])
    assert set(fresh.param_groups[0]) == {"params", "lr", "beta2_decay", "eps", "d", "weight_decay", "foreach",
                                          "maximize"}
    p = [md.ones(2, requires_grad=True)]
    for kwargs, match in [(dict(lr=-1.0), "learning rate"), (dict(beta2_decay=0.5), "beta2_decay should be <= 0"),
                          (dict(eps=(-1.0, 1e-3)), "epsilon1"), (dict(eps=(None, -1.0)), "epsilon2"),
                          (dict(d=0.5), "Clipping threshold d"), (dict(weight_decay=-1.0), "weight_decay")]:
        with pytest.raises(ValueError, match=match):
            optim.Adafactor(p, **kwargs)


# on the GPU (numba's simulator in CI) ---------------------------------------------------------------
def test_cuda_gradient_histogram_and_adafactor():
    from minidl import backends
    try:
        backends.get("cuda")
    except RuntimeError as exc:
        pytest.skip(f"cuda device unavailable: {exc}")
    f = np.arange(12.0).reshape(3, 4) ** 2
    g = md.gradient(md.tensor(f, device="cuda"), edge_order=2)[1]
    assert g.device == "cuda" and np.allclose(g.cpu().numpy(), np.gradient(f, axis=1, edge_order=2))
    hist, edges = md.histogram(md.tensor(f, device="cuda"), 3)
    assert hist.device == "cuda" and np.array_equal(hist.cpu().numpy(), np.histogram(f, 3)[0])
    w = md.tensor(f / 100, device="cuda", requires_grad=True)
    w_cpu = md.tensor(f / 100, requires_grad=True)
    for p in (w, w_cpu):
        opt = optim.Adafactor([p], weight_decay=0.1)
        for _ in range(2):
            opt.zero_grad()
            (p ** 2).sum().backward()
            opt.step()
    np.testing.assert_allclose(w.detach().cpu().numpy(), w_cpu.detach().cpu().numpy(), rtol=1e-12)
    c = md.cumulative_trapezoid(md.tensor(f, device="cuda"))   # cumsum's scan kernel on the device
    assert c.device == "cuda" and np.allclose(c.cpu().numpy(), md.cumulative_trapezoid(md.tensor(f)).cpu().numpy())


# against PyTorch ------------------------------------------------------------------------------------
def _torch_pair(torch, array):
    grad = array.dtype.kind == "f"
    return md.tensor(array, requires_grad=grad), torch.tensor(array, requires_grad=grad)


TORCH_CASES = [
    ("trapezoid", lambda L, y: L.trapezoid(y), [(3, 5)]),
    ("trapezoid_x", lambda L, y, x: L.trapezoid(y, x), [(3, 5), "x5"]),
    ("trapz_dx", lambda L, y: L.trapz(y, dx=2.0, dim=0), [(3, 5)]),
    ("cumulative_trapezoid_x", lambda L, y, x: L.cumulative_trapezoid(y, x, dim=0), [(4, 3), "x4"]),
    ("gradient", lambda L, f: L.gradient(f), [(4, 5, 3)]),
    ("gradient_eo2_spacing", lambda L, f: L.gradient(f, spacing=[0.5, 2.0, 3.0], edge_order=2), [(4, 5, 3)]),
    ("gradient_coordinates", lambda L, f, c: L.gradient(f, spacing=(c,), dim=-2, edge_order=2), [(3, 5, 2), "x5"]),
    ("gradient_int", lambda L, f: L.gradient(f, spacing=2), ["int"]),
    ("broadcast_tensors", lambda L, a, b: L.broadcast_tensors(a, b), [(3, 1), (4,)]),
]


@pytest.mark.parametrize("name, fn, shapes", TORCH_CASES, ids=[c[0] for c in TORCH_CASES])
def test_matches_torch_values_and_gradients(name, fn, shapes):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    arrays = [np.cumsum(rng.random(int(s[1:])) + 0.2) if isinstance(s, str) and s[0] == "x" else
              np.arange(12).reshape(3, 4) ** 2 if s == "int" else rng.standard_normal(s) for s in shapes]
    pairs = [_torch_pair(torch, a) for a in arrays]
    ours, theirs = fn(md, *[p[0] for p in pairs]), fn(torch, *[p[1] for p in pairs])
    ours, theirs = (ours, theirs) if isinstance(ours, tuple) else ((ours,), (theirs,))
    assert len(ours) == len(theirs)
    for o, t in zip(ours, theirs):
        assert o.shape == tuple(t.shape) and str(o.dtype).split(".")[1] == str(t.dtype).split(".")[1]
        np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), rtol=1e-12, atol=1e-12)
    if not theirs[0].requires_grad:
        return
    cots = [rng.standard_normal(tuple(t.shape)) for t in theirs]
    sum((o * md.tensor(c)).sum() for o, c in zip(ours, cots)).backward()
    sum((t * torch.tensor(c)).sum() for t, c in zip(theirs, cots)).backward()
    for m, t in pairs:
        if t.requires_grad:
            np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_histogram_and_broadcast_shapes_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    for dtype in (np.float32, np.float64):
        for n in (1, 7, 40):
            x, w = rng.standard_normal(n).astype(dtype), rng.random(n).astype(dtype)
            for bins in (1, 3, 10):
                for kwargs in ({}, dict(range=(-1.0, 1.5), density=True)):
                    ours = md.histogram(md.tensor(x), bins, weight=md.tensor(w), **kwargs)
                    theirs = torch.histogram(torch.tensor(x), bins, weight=torch.tensor(w), **kwargs)
                    assert np.array_equal(ours.bin_edges.numpy(), theirs.bin_edges.numpy())   # PyTorch's linspace
                    np.testing.assert_allclose(ours.hist.numpy(), theirs.hist.numpy(), rtol=1e-5)
    for shapes in [((2, 1), (3,), 1, ()), ((5, 1, 4), (3, 1))]:
        assert tuple(md.broadcast_shapes(*shapes)) == tuple(torch.broadcast_shapes(*shapes))


def test_printing_matches_torch():
    torch = pytest.importorskip("torch")
    small, long, mixed = [1e-8, 1.0, 123456.0], list(range(2000)), [0.25, 2.5e9]
    cases = [({}, [small]), (dict(sci_mode=True), [small, long, mixed]), (dict(precision=2, sci_mode=True), [long]),
             (dict(threshold=5, edgeitems=2, sci_mode=True), [small, long]), (dict(linewidth=40), [small])]
    try:
        for opts, values in cases:
            md.set_printoptions(profile="default", **opts)
            torch.set_printoptions(profile="default", **opts)
            for v in values:
                assert repr(md.tensor(v, dtype=md.float32)) == repr(torch.tensor(v, dtype=torch.float32)), opts
    finally:
        torch.set_printoptions(profile="default")


@pytest.mark.parametrize("kwargs", ADAFACTOR_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_adafactor_matches_torch_over_20_steps(kwargs, dtype):
    torch = pytest.importorskip("torch")
    if not hasattr(torch.optim, "Adafactor"):
        pytest.skip("torch.optim.Adafactor needs PyTorch 2.5")
    rng = np.random.default_rng(4)
    init = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    ours = [md.tensor(a, requires_grad=True) for a in init]
    theirs = [torch.tensor(a, requires_grad=True) for a in init]
    opts = optim.Adafactor(ours, **kwargs), torch.optim.Adafactor(theirs, **kwargs)
    for _ in range(20):
        for params, opt in zip((ours, theirs), opts):
            opt.zero_grad()
            _loss(params).backward()
            opt.step()
    tol = 1e-5 if dtype == "float32" else 1e-12
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)
    ts = opts[1].state_dict()["state"]
    for i, state in opts[0].state_dict()["state"].items():
        assert set(state) == set(ts[i])
        for k in set(state) - {"step"}:
            np.testing.assert_allclose(state[k], ts[i][k].numpy(), rtol=tol * 10, atol=tol)


def test_no_name_is_in_two_namespace_tables():
    """Each md.X comes from one table, and each t.X: a name given twice would silently take one of
    them (a name may be a module function in one table and a method in another, as asin_ is)."""
    from minidl import _namespace
    for kinds in (("BOTH", "MODULE_ONLY"), ("BOTH", "METHODS_ONLY")):
        seen = {}
        for kind in kinds:
            for table in _namespace._TABLES:
                for name in getattr(table, kind):
                    assert name not in seen, f"{name} is in {seen[name]} and in {table.__name__}.{kind}"
                    seen[name] = f"{table.__name__}.{kind}"
