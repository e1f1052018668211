"""The special functions (lgamma, digamma, erfc, erfinv, i0, polygamma, zeta, nextafter and what is
built on them: mvlgamma, the Gamma-family distributions), the strided views (unfold, as_strided,
diagonal, trace, diag_embed), embedding_bag and the margin losses on the "cuda" device (CUDA
simulator): the CPU's values and gradients in float32 and float64, the device functions against
references computed here from Python's math module, indices checked before any kernel runs."""
import math

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl import backends

try:
    backends.get("cuda")
except RuntimeError as exc:   # pragma: no cover - only without numba.cuda
    pytest.skip(f"cuda device unavailable: {exc}", allow_module_level=True)

from minidl.backends.cuda import CUDA_NUMPY as xp  # noqa: E402
from minidl.backends.cuda import CudaArray  # noqa: E402

from test_cuda_core import check, rnd  # noqa: E402

DTYPES = [np.float32, np.float64]
ATOL = {np.float32: 2e-5, np.float64: 1e-10}


def dev(a):
    return CudaArray.from_host(np.asarray(a, np.float64))


def on_device(name, a, *more):
    return getattr(xp, name)(dev(a), *(dev(m) for m in more)).copy_to_host()


def positive(*shape, seed=0):
    return np.random.default_rng(seed).uniform(0.3, 4.0, shape)


# the device functions against references from Python's math -------------------------------------

X = np.array([-3.7, -1.3, -0.4, 0.05, 0.5, 1.0, 2.5, 7.9, 10.0, 31.5, 170.2])


def test_lgamma_and_erfc_are_the_math_modules():
    np.testing.assert_allclose(on_device("lgamma", X), [math.lgamma(v) for v in X], rtol=1e-14)
    np.testing.assert_allclose(on_device("erfc", X / 4), [math.erfc(v / 4) for v in X], rtol=1e-14)


def test_digamma_and_trigamma_are_lgammas_derivatives():
    h, f = 1e-4, math.lgamma   # five-point central differences: error O(h**4)
    d1 = [(f(v - 2 * h) - 8 * f(v - h) + 8 * f(v + h) - f(v + 2 * h)) / (12 * h) for v in X]
    np.testing.assert_allclose(on_device("digamma", X), d1, rtol=1e-9, atol=1e-9)
    d2 = [(-f(v - 2 * h) + 16 * f(v - h) - 30 * f(v) + 16 * f(v + h) - f(v + 2 * h)) / (12 * h * h) for v in X]
    np.testing.assert_allclose(on_device("trigamma", X), d2, rtol=1e-5, atol=1e-5)


def hurwitz(s, q, terms=2000):
    """sum_k (q + k)**-s: the first terms, then Euler-Maclaurin's integral and two corrections."""
    w = q + terms
    head = math.fsum((q + k) ** -s for k in range(terms))
    return head + w ** (1 - s) / (s - 1) + 0.5 * w ** -s + s * w ** (-s - 1) / 12


@pytest.mark.parametrize("n", [1, 2, 3])
def test_polygamma_is_the_hurwitz_series(n):
    q = np.array([0.3, 1.0, 2.5, 12.0])
    want = [(-1) ** (n + 1) * math.factorial(n) * hurwitz(n + 1, v) for v in q]
    np.testing.assert_allclose(xp.polygamma(n, dev(q)).copy_to_host(), want, rtol=1e-11)
    np.testing.assert_allclose(on_device("zeta", np.full(4, n + 1.0), q),
                               [hurwitz(n + 1, v) for v in q], rtol=1e-11)


def test_erfinv_inverts_erf_to_float64():
    y = np.array([-0.999999, -0.7, -0.5, -1e-3, 0.0, 1e-8, 0.3, 0.51, 0.9, 1 - 1e-9, 1 - 2 ** -52])
    v = on_device("erfinv", y)
    np.testing.assert_allclose([math.erf(t) for t in v[:-2]], y[:-2], rtol=2e-16, atol=1e-17)
    np.testing.assert_allclose([math.erfc(t) for t in v[-2:]], 1 - y[-2:], rtol=1e-13)   # the tail, by erfc
    special = on_device("erfinv", np.array([1.0, -1.0, 1.5, np.nan]))
    np.testing.assert_array_equal(special, [np.inf, -np.inf, np.nan, np.nan])


def test_i0_and_i1_are_their_power_series():
    x = np.array([-12.0, -1.0, 0.0, 0.5, 3.0, 29.0, 35.0, 60.0])

    def series(v, n):   # sum_k (v/2)**(2k+n) / (k! (k+n)!), term by term
        terms = [(v / 2) ** n / math.factorial(n)]
        for k in range(1, 200):
            terms.append(terms[-1] * (v / 2) ** 2 / (k * (k + n)))
        return math.fsum(terms)
    np.testing.assert_allclose(on_device("i0", x), [series(v, 0) for v in x], rtol=1e-13)
    np.testing.assert_allclose(on_device("i1", x), [series(v, 1) for v in x], rtol=1e-13)


def test_poles_and_infinities_are_the_cpus():
    v = np.array([0.0, -0.0, -2.0, -np.inf, np.inf, np.nan, 1e-300, 800.0])
    for name, fn in (("lgamma", md.lgamma), ("digamma", md.digamma), ("i0", md.i0), ("erfc", md.erfc),
                     ("polygamma1", lambda t: md.polygamma(1, t)), ("polygamma2", lambda t: md.polygamma(2, t))):
        got = fn(md.tensor(v, device="cuda")).cpu().numpy()
        np.testing.assert_allclose(got, fn(md.tensor(v)).numpy(), rtol=1e-14, err_msg=name)


def test_nextafter_steps_one_float_of_each_dtype():
    a = np.array([1.0, 0.0, -0.0, 1e-310, 5e-324, -1.0, np.inf, -np.inf, 0.5, np.nan, 3.0, 2.0])
    b = np.array([2.0, -1.0, 1.0, 0.0, 0.0, -2.0, 0.0, 0.0, 0.0, 1.0, 3.0, 1.0])
    for dt in DTYPES:
        got = md.nextafter(md.tensor(a.astype(dt), device="cuda"), md.tensor(b.astype(dt), device="cuda"))
        assert got.device == "cuda" and got.dtype == md.tensor(a.astype(dt)).dtype
        np.testing.assert_array_equal(got.cpu().numpy(), np.nextafter(a.astype(dt), b.astype(dt)))


# the ops on cuda against the CPU ----------------------------------------------------------------

UNARY = {   # name: (fn, input)
    "lgamma": (md.lgamma, np.array([[-2.5, 0.3, 1.7], [4.0, 9.5, 25.0]])),
    "digamma": (md.digamma, np.array([[-2.5, 0.3, 1.7], [4.0, 9.5, 25.0]])),
    "erfc": (md.erfc, rnd(2, 3)),
    "erfinv": (md.erfinv, np.array([[-0.9, -0.2, 0.0], [0.4, 0.75, 0.999]])),
    "i0": (md.i0, rnd(2, 3) * 4),
    "i1": (md.special.i1, np.array([[-3.0, 0.0, 0.4], [1.5, 7.0, 40.0]])),
    "polygamma2": (lambda t: md.polygamma(2, t), positive(2, 3)),
    "polygamma3": (lambda t: t.polygamma(3), positive(2, 3)),
    "mvlgamma": (lambda t: md.mvlgamma(t, 3), positive(2, 3) + 1.5),
    "zeta_q": (lambda t: md.special.zeta(3.0, t), positive(2, 3)),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_special_functions_match_cpu(name, dtype):
    fn, x = UNARY[name]
    check(fn, x.astype(dtype), atol=ATOL[dtype])


def test_special_functions_of_integers_and_empty_inputs():
    check(md.lgamma, np.array([1, 2, 5]), grad=False)
    for fn in (md.lgamma, md.digamma, md.erfinv, md.i0, lambda t: md.polygamma(2, t)):
        check(fn, np.zeros((0, 3)))


@pytest.mark.parametrize("name", ["lgamma", "digamma", "i0", "erfinv"])
def test_double_backward_on_cuda_matches_cpu(name):
    x = positive(3) / 5
    hs = []
    for d in ("cpu", "cuda"):
        t = md.tensor(x, device=d, requires_grad=True)
        (g,) = md.autograd.grad(getattr(md, name)(t).sum(), t, create_graph=True)
        (h,) = md.autograd.grad(g.sum(), t)
        hs.append(h)
    assert hs[1].device == "cuda"
    np.testing.assert_allclose(hs[1].cpu().numpy(), hs[0].cpu().numpy(), rtol=1e-12)


DISTRIBUTIONS = {   # name: (build from parameters, value, parameters)
    "gamma": (lambda a, b: md.distributions.Gamma(a, b), positive(3, seed=1), (positive(3), positive(3, seed=2))),
    "beta": (lambda a, b: md.distributions.Beta(a, b), np.array([0.2, 0.5, 0.9]), (positive(3), positive(3, seed=2))),
    "dirichlet": (lambda c: md.distributions.Dirichlet(c), np.array([[0.2, 0.5, 0.3], [0.1, 0.1, 0.8]]),
                  (positive(2, 3),)),
    "poisson": (lambda r: md.distributions.Poisson(r), np.array([0.0, 2.0, 5.0]), (positive(3),)),
    "student_t": (lambda df, loc: md.distributions.StudentT(df, loc), rnd(3), (positive(3) + 1, rnd(3, seed=3))),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(DISTRIBUTIONS))
def test_distribution_log_prob_and_entropy_match_cpu(name, dtype):
    build, value, params = DISTRIBUTIONS[name]
    v = value.astype(dtype)
    check(lambda *ps: build(*ps).log_prob(md.tensor(v, device=ps[0].device)), *[p.astype(dtype) for p in params],
          atol=ATOL[dtype] * 10)
    if name in ("gamma", "beta", "dirichlet"):
        check(lambda *ps: build(*ps).entropy(), *[p.astype(dtype) for p in params], atol=ATOL[dtype] * 10)


@pytest.mark.parametrize("name", ["normal", "log_normal", "kumaraswamy"])
def test_rsample_gradients_match_cpu(name):
    build = {"normal": md.distributions.Normal, "log_normal": md.distributions.LogNormal,
             "kumaraswamy": md.distributions.Kumaraswamy}[name]
    ps = (positive(3), positive(3, seed=2))

    def run(*params):
        md.manual_seed(7)
        return build(*params).rsample((2,))
    check(run, *ps)
    if name == "kumaraswamy":   # its entropy has digamma in it
        check(lambda a, b: build(a, b).entropy(), *ps)


# strided views ----------------------------------------------------------------------------------

STRIDED = {   # name: (fn, input)
    "unfold": (lambda x: x.unfold(1, 2, 1), rnd(3, 4)),
    "unfold_step_gap": (lambda x: x.unfold(0, 2, 3), rnd(7, 2)),
    "unfold_twice_transposed": (lambda x: x.t().unfold(0, 2, 2).unfold(1, 3, 1), rnd(5, 4)),
    "unfold_empty_window": (lambda x: x.unfold(1, 0, 1), rnd(3, 4)),
    "unfold_0d": (lambda x: x.unfold(0, 1, 1), np.array(1.5)),
    "as_strided": (lambda x: x.as_strided((2, 2), (1, 2)), rnd(3, 4)),
    "as_strided_overlap_offset": (lambda x: x.as_strided((3, 3), (0, 1), 2), rnd(3, 4)),
    "as_strided_of_slice": (lambda x: x[1:].as_strided((2, 3), (4, 1)), rnd(3, 4)),
    "as_strided_of_expand": (lambda x: x.expand(3, 4).as_strided((2, 2), (1, 1)), rnd(1, 4)),
    "as_strided_empty": (lambda x: x.as_strided((0, 2), (1, 1)), rnd(3, 4)),
    "diagonal": (lambda x: x.diagonal(1), rnd(3, 4)),
    "diagonal_dims": (lambda x: x.diagonal(-1, 2, 0), rnd(3, 4, 2)),
    "diagonal_empty": (lambda x: x.diagonal(5), rnd(3, 4)),
    "trace": (lambda x: x.trace(), rnd(3, 4)),
    "diag_embed": (lambda x: md.diag_embed(x, 1, 0, 2), rnd(3, 4)),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(STRIDED))
def test_strided_views_match_cpu(name, dtype):
    fn, x = STRIDED[name]
    check(fn, x.astype(dtype), atol=ATOL[dtype])


def test_strided_views_share_the_device_memory():
    x = md.tensor(np.arange(12.0).reshape(3, 4), device="cuda")
    x.diagonal().mul_(0)
    u = x.unfold(1, 2, 2)
    s = x.as_strided((2,), (5,), 1)
    x[0, 1] = 100.0
    want = np.arange(12.0).reshape(3, 4)
    want[[0, 1, 2], [0, 1, 2]] = 0
    want[0, 1] = 100.0
    np.testing.assert_array_equal(x.cpu().numpy(), want)
    np.testing.assert_array_equal(u.cpu().numpy(), want.reshape(3, 2, 2))
    np.testing.assert_array_equal(s.cpu().numpy(), [100.0, want[1, 2]])
    assert u._data._buf is x._data._buf


def test_as_strided_refuses_a_geometry_beyond_the_device_storage():
    x = md.tensor(rnd(3, 3), device="cuda")
    with pytest.raises(RuntimeError, match="out of bounds for storage of size 72"):
        x.as_strided((3, 3), (3, 1), 1)
    with pytest.raises(RuntimeError, match="Negative strides"):
        x.as_strided((2,), (-1,))
    with pytest.raises(ValueError, match="reaches elements"):
        xp.strided_view(x._data, (4,), (3,))


# embedding_bag --------------------------------------------------------------------------------

def _bag(mode, **kw):
    def fn(w, *psw):
        idx = md.tensor(np.array([0, 2, 2, 4, 1, 3]), device=w.device)
        off = md.tensor(np.array([0, 2, 2, 5]), device=w.device)
        return F.embedding_bag(idx, w, off, mode=mode, per_sample_weights=psw[0] if psw else None, **kw)
    return fn


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_matches_cpu(mode, dtype):
    w = rnd(5, 3).astype(dtype)
    check(_bag(mode), w, atol=ATOL[dtype])
    check(_bag(mode, padding_idx=2, include_last_offset=True), w, atol=ATOL[dtype])
    check(lambda t: F.embedding_bag(md.tensor(np.array([[0, 4, 1], [3, 3, 3]]), device=t.device), t, mode=mode), w,
          atol=ATOL[dtype])
    check(lambda t: F.embedding_bag(md.tensor(np.zeros(0, np.int64), device=t.device), t,
                                    md.tensor(np.array([0, 0]), device=t.device), mode=mode), w)


def test_embedding_bag_per_sample_weights_and_module():
    check(_bag("sum"), rnd(5, 3), rnd(6, seed=4))
    md.manual_seed(0)
    mc = nn.EmbeddingBag(5, 3, mode="max")
    mg = nn.EmbeddingBag(5, 3, mode="max").to("cuda")
    mg.load_state_dict(mc.state_dict())
    for m, d in ((mc, "cpu"), (mg, "cuda")):
        m(md.tensor(np.array([[0, 1], [4, 1]]), device=d)).square().sum().backward()
    assert mg.weight.grad.device == "cuda"
    np.testing.assert_allclose(mg.weight.grad.cpu().numpy(), mc.weight.grad.cpu().numpy(), atol=1e-6)


def test_embedding_bag_checks_indices_and_devices_before_any_kernel():
    w = md.tensor(rnd(5, 3), device="cuda")
    with pytest.raises(IndexError, match="index out of range"):
        F.embedding_bag(md.tensor(np.array([0, 5]), device="cuda"), w, md.tensor(np.array([0]), device="cuda"))
    with pytest.raises(RuntimeError, match="same device"):
        F.embedding_bag(md.tensor(np.array([0, 1])), w, md.tensor(np.array([0]), device="cuda"))


# margin losses and local_response_norm -----------------------------------------------------------

def _on(x, a):
    return md.tensor(np.array(a), device=x.device)


LOSSES = {   # name: (fn, input)
    "multi_margin": (lambda x, r: F.multi_margin_loss(x, _on(x, [0, 2, 3]), reduction=r), rnd(3, 4)),
    "multi_margin_p2_weight": (lambda x, r: F.multi_margin_loss(x, _on(x, [1, 1, 0]), p=2, margin=0.6,
                                                                weight=_on(x, [1.0, 2.0, 0.5, 3.0]).to(x.dtype),
                                                                reduction=r), rnd(3, 4)),
    "multi_margin_1d": (lambda x, r: F.multi_margin_loss(x, _on(x, [2]), reduction=r), rnd(4)),
    "multi_margin_empty": (lambda x, r: F.multi_margin_loss(x, _on(x, np.zeros(0, np.int64)), reduction=r),
                           rnd(0, 4)),
    "multilabel_margin": (lambda x, r: F.multilabel_margin_loss(x, _on(x, [[0, 2, -1, 1], [3, 3, 1, -1],
                                                                           [-1, 0, 0, 0]]), reduction=r), rnd(3, 4)),
    "multilabel_margin_1d": (lambda x, r: F.multilabel_margin_loss(x, _on(x, [1, 0, -1, 2]), reduction=r), rnd(4)),
    "multilabel_soft_margin": (lambda x, r: F.multilabel_soft_margin_loss(
        x, _on(x, [[0.0, 1, 1, 0], [1, 0, 0, 1], [0, 0, 0, 0]]).to(x.dtype), weight=_on(x, [1.0, 0.5, 2.0, 1.0])
        .to(x.dtype), reduction=r), rnd(3, 4) * 20),
    "soft_margin": (lambda x, r: F.soft_margin_loss(x, _on(x, np.sign(rnd(3, 4, seed=2))).to(x.dtype), reduction=r),
                    rnd(3, 4)),
}


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_margin_losses_match_cpu(name, reduction):
    fn, x = LOSSES[name]
    for dt in DTYPES:
        check(lambda t: fn(t, reduction), x.astype(dt), atol=ATOL[dt])


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_local_response_norm_matches_cpu(dtype):
    check(lambda x: F.local_response_norm(x, 3, alpha=0.1, beta=0.75, k=1.5), rnd(2, 5, 3).astype(dtype),
          atol=ATOL[dtype])
    check(lambda x: nn.LocalResponseNorm(2)(x), rnd(1, 3, 2, 2).astype(dtype), atol=ATOL[dtype])


def test_margin_loss_targets_are_checked_on_the_host_first():
    x = md.tensor(rnd(3, 4), device="cuda")
    for bad in ([0, 4, 1], [0, -1, 1]):
        with pytest.raises(RuntimeError, match="target out of range"):
            F.multi_margin_loss(x, md.tensor(np.array(bad), device="cuda"))
    with pytest.raises(RuntimeError, match="target out of range"):
        F.multilabel_margin_loss(x, md.tensor(np.array([[0, 4, -1, 0]] * 3), device="cuda"))
    with pytest.raises(RuntimeError, match="same device"):
        F.multi_margin_loss(x, md.tensor(np.array([0, 1, 2])))
