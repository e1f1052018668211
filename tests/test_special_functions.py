"""minidl.special (torch.special) and the top-level special functions (md.igamma/igammac,
md.polygamma, md.mvlgamma, md.gcd/lcm, md.nextafter): forward against NumPy references that use
other algorithms than the ops (power series, quadrature of integral representations, bisection,
numpy.polynomial, identities such as Wronskians and recurrences), backward by gradcheck in float64,
PyTorch's special points, errors and dtypes, and comparisons against scipy.special (to 1e-12
relative in float64) and PyTorch (values and gradients) where those are installed."""
import math

import numpy as np
import pytest

import minidl as md
import minidl.special as S
from minidl.autograd import gradcheck
from minidl.testing import OpSpec, check_forward, check_gradcheck, forward_cases, spec_id

_erfc = np.vectorize(math.erfc, otypes=[np.float64])
_lgamma = np.vectorize(math.lgamma, otypes=[np.float64])
_fact = np.vectorize(lambda k: float(math.factorial(int(k))), otypes=[np.float64])


def _ndtr(x):
    return 0.5 * _erfc(-x / math.sqrt(2))


def _ndtri_bisect(p):
    lo, hi = np.full(p.shape, -40.0), np.full(p.shape, 40.0)
    for _ in range(90):
        mid = (lo + hi) / 2
        below = _ndtr(mid) < p
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return (lo + hi) / 2


def _bessel_i_series(x, order):
    """I_order(x) = sum_k (x/2)**(2k + order) / (k! (k + order)!)."""
    k = np.arange(120.0)[:, None]
    h = x[None, :] / 2
    with np.errstate(all="ignore"):
        terms = np.exp((2 * k + order) * np.log(np.abs(h)) - _lgamma(k + 1) - _lgamma(k + order + 1))
    out = terms.sum(0) * np.sign(x) ** order
    return np.where(x == 0, 1.0 if order == 0 else 0.0, out)


def _bessel_j_quadrature(x, n):
    """J_n(x) = 1/(2 pi) int_0^{2 pi} cos(n t - x sin t) dt: the trapezoid rule is spectrally exact for it."""
    t = np.linspace(0, 2 * np.pi, 4096, endpoint=False)[:, None]
    return np.cos(n * t - x[None, :] * np.sin(t)).mean(0)


def _bessel_k_quadrature(x, nu):
    """K_nu(x) = int_0^inf e**(-x cosh t) cosh(nu t) dt (trapezoid on a double-exponentially decaying integrand)."""
    t = np.linspace(0, 12, 6001)[:, None]
    f = np.exp(-x[None, :] * np.cosh(t)) * np.cosh(nu * t)
    h = t[1, 0] - t[0, 0]
    return h * (f.sum(0) - 0.5 * f[0])


def _hurwitz(s, q, terms=2000):
    """sum_{k<K} (q + k)**-s plus the Euler-Maclaurin tail at w = q + K (three terms)."""
    k = np.arange(terms, dtype=np.float64)[:, None]
    direct = ((q[None, :] + k) ** -s[None, :]).sum(0)
    w = q + terms
    return direct + w ** (1 - s) / (s - 1) + 0.5 * w ** -s + s / 12 * w ** (-s - 1)


def _polygamma_ref(n, x):
    if n == 0:
        raise ValueError
    return (-1) ** (n + 1) * math.factorial(n) * _hurwitz(np.full(x.shape, n + 1.0), x)


def _gammainc_series(a, x):
    """P(a, x) = x**a e**-x sum_k x**k / Gamma(a + k + 1), by logs (300 terms)."""
    k = np.arange(300.0)[:, None]
    logs = (a + k) * np.log(x) - x - _lgamma(a + k + 1)
    return np.exp(logs).sum(0)


def _unit(rng, n, lo, hi):
    return rng.uniform(lo, hi, n)


SPECS = [
    OpSpec("ndtr", S.ndtr, _ndtr, lambda r: (_unit(r, 7, -6, 6),)),
    OpSpec("log_ndtr", S.log_ndtr, lambda x: np.log(_ndtr(x)), lambda r: (_unit(r, 7, -6, 6),)),
    OpSpec("erfcx", S.erfcx, lambda x: np.exp(x * x) * _erfc(x), lambda r: (_unit(r, 7, -3, 5),)),
    OpSpec("ndtri", S.ndtri, _ndtri_bisect, lambda r: (np.concatenate([_unit(r, 5, 0.01, 0.99), [1e-3, 0.9999]]),),
           tolerances={"float32": (1e-4, 1e-3)}),
    OpSpec("entr", S.entr, lambda x: -x * np.log(x), lambda r: (_unit(r, 7, 0.05, 4),)),
    OpSpec("i0e", S.i0e, lambda x: _bessel_i_series(x, 0) * np.exp(-np.abs(x)), lambda r: (_unit(r, 7, -12, 12),)),
    OpSpec("i1", S.i1, lambda x: _bessel_i_series(x, 1), lambda r: (_unit(r, 7, -12, 12),)),
    OpSpec("i1e", S.i1e, lambda x: _bessel_i_series(x, 1) * np.exp(-np.abs(x)), lambda r: (_unit(r, 7, -12, 12),)),
    OpSpec("polygamma1", lambda x: S.polygamma(1, x), lambda x: _polygamma_ref(1, x), lambda r: (_unit(r, 6, 0.3, 9),)),
    OpSpec("polygamma3", lambda x: md.polygamma(3, x), lambda x: _polygamma_ref(3, x),
           lambda r: (_unit(r, 6, 0.3, 9),)),
    OpSpec("multigammaln", lambda x: S.multigammaln(x, 3),
           lambda x: sum(_lgamma(x - i / 2) for i in range(3)) + 1.5 * math.log(math.pi),
           lambda r: (_unit(r, 6, 1.2, 9),)),
    OpSpec("zeta", lambda x, q: S.zeta(x, q), _hurwitz, lambda r: (_unit(r, 6, 1.5, 6), _unit(r, 6, 0.2, 5)),
           grad_inputs=[1]),
    OpSpec("xlog1py", S.xlog1py, lambda x, y: x * np.log1p(y),
           lambda r: (r.standard_normal((2, 3)), _unit(r, 3, -0.9, 3))),
    OpSpec("gammainc", S.gammainc, _gammainc_series, lambda r: (_unit(r, 6, 0.3, 8), _unit(r, 6, 0.1, 12)),
           grad_inputs=[1]),
    OpSpec("gammaincc", md.igammac, lambda a, x: 1 - _gammainc_series(a, x), lambda r: (_unit(r, 6, 0.3, 8),
                                                                                       _unit(r, 6, 0.1, 6)),
           grad_inputs=[1]),
]


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward_matches_numpy_reference(spec, dtype, device):
    check_forward(spec, dtype, device)


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck(spec):
    assert check_gradcheck(spec)


# ---- the functions without a gradient ------------------------------------------------------------
def test_bessel_j_and_y_against_quadrature_and_the_wronskian():
    x = np.concatenate([np.linspace(0.01, 4.9, 40), np.linspace(5.1, 60, 40)])
    t = md.tensor(x, dtype=md.float64)
    j0, j1 = S.bessel_j0(t).numpy(), S.bessel_j1(t).numpy()
    np.testing.assert_allclose(j0, _bessel_j_quadrature(x, 0), atol=1e-14)
    np.testing.assert_allclose(j1, _bessel_j_quadrature(x, 1), atol=1e-14)
    np.testing.assert_allclose(S.bessel_j1(-t).numpy(), -j1)   # J1 is odd, J0 even
    np.testing.assert_allclose(S.bessel_j0(-t).numpy(), j0)
    y0, y1 = S.bessel_y0(t).numpy(), S.bessel_y1(t).numpy()
    np.testing.assert_allclose(j1 * y0 - j0 * y1, 2 / (np.pi * x), rtol=1e-12)   # DLMF 10.5.2
    h = 1e-5   # Y0' = -Y1
    fd = (S.bessel_y0(t + h).numpy() - S.bessel_y0(t - h).numpy()) / (2 * h)
    np.testing.assert_allclose(fd[x > 0.5], -y1[x > 0.5], atol=1e-8, rtol=1e-7)
    special = md.tensor([0.0, -1.0, math.inf, math.nan], dtype=md.float64)
    np.testing.assert_array_equal(S.bessel_y0(special).numpy()[:2], [-math.inf, math.nan])
    np.testing.assert_array_equal(S.bessel_y1(special).numpy()[:2], [-math.inf, math.nan])
    assert S.bessel_j0(md.tensor([0.0])).item() == 1.0


def test_modified_bessel_functions_against_series_and_quadrature():
    x = np.linspace(0.05, 30, 50)
    t = md.tensor(x, dtype=md.float64)
    np.testing.assert_allclose(S.modified_bessel_i0(t).numpy(), _bessel_i_series(x, 0), rtol=1e-13)
    np.testing.assert_allclose(S.modified_bessel_i1(t).numpy(), _bessel_i_series(x, 1), rtol=1e-13)
    k0, k1 = _bessel_k_quadrature(x, 0), _bessel_k_quadrature(x, 1)
    np.testing.assert_allclose(S.modified_bessel_k0(t).numpy(), k0, rtol=1e-12)
    np.testing.assert_allclose(S.modified_bessel_k1(t).numpy(), k1, rtol=1e-12)
    np.testing.assert_allclose(S.scaled_modified_bessel_k0(t).numpy(), k0 * np.exp(x), rtol=1e-12)
    np.testing.assert_allclose(S.scaled_modified_bessel_k1(t).numpy(), k1 * np.exp(x), rtol=1e-12)
    edge = S.modified_bessel_k0(md.tensor([0.0, -1.0], dtype=md.float64)).numpy()
    np.testing.assert_array_equal(edge, [math.inf, math.nan])
    np.testing.assert_allclose(S.i0(t).numpy(), S.modified_bessel_i0(t).numpy(), rtol=1e-14)


def test_airy_ai_and_spherical_bessel():
    x = np.linspace(0.2, 12, 30)
    # Ai(x) = sqrt(x / 3) K_{1/3}(2/3 x**1.5) / pi for x > 0 (DLMF 9.6.1)
    ref = np.sqrt(x / 3) * _bessel_k_quadrature(2 / 3 * x ** 1.5, 1 / 3) / np.pi
    np.testing.assert_allclose(S.airy_ai(md.tensor(x, dtype=md.float64)).numpy(), ref, rtol=1e-12)
    # on the oscillating side, Ai'' = x Ai
    z, h = np.linspace(-9, 1.5, 40), 1e-4
    ai = lambda v: S.airy_ai(md.tensor(v, dtype=md.float64)).numpy()   # noqa: E731
    np.testing.assert_allclose((ai(z + h) - 2 * ai(z) + ai(z - h)) / h ** 2, z * ai(z), atol=1e-6)
    assert ai(np.array([0.0]))[0] == pytest.approx(0.355028053887817239, rel=1e-15)
    np.testing.assert_array_equal(ai(np.array([200.0, math.inf, -math.inf, math.nan])),
                                  [0, math.nan, math.nan, math.nan])
    v = np.array([-7.0, -0.3, 1e-3, 0.49, 0.51, 40.0])
    np.testing.assert_allclose(S.spherical_bessel_j0(md.tensor(v, dtype=md.float64)).numpy(), np.sin(v) / v, rtol=1e-15)
    np.testing.assert_array_equal(S.spherical_bessel_j0(md.tensor([0.0, math.inf])).numpy(), [1.0, 0.0])


def _polynomial_references(x):
    from numpy.polynomial import chebyshev, hermite, hermite_e, laguerre, legendre
    t = np.arccos(np.clip(x, -1, 1))
    basis = lambda n: np.eye(n + 1)[n]   # noqa: E731  (the coefficients of p_n in its own basis)
    return {
        "chebyshev_polynomial_t": lambda n: chebyshev.chebval(x, basis(n)),
        "chebyshev_polynomial_u": lambda n: np.sin((n + 1) * t) / np.sin(t),
        "chebyshev_polynomial_v": lambda n: np.cos((n + 0.5) * t) / np.cos(t / 2),
        "chebyshev_polynomial_w": lambda n: np.sin((n + 0.5) * t) / np.sin(t / 2),
        "hermite_polynomial_h": lambda n: hermite.hermval(x, basis(n)),
        "hermite_polynomial_he": lambda n: hermite_e.hermeval(x, basis(n)),
        "laguerre_polynomial_l": lambda n: laguerre.lagval(x, basis(n)),
        "legendre_polynomial_p": lambda n: legendre.legval(x, basis(n)),
    }


@pytest.mark.parametrize("n", [0, 1, 2, 5, 7, 12])
def test_orthogonal_polynomials_against_numpy_polynomial(n):
    x = np.linspace(-0.95, 0.95, 23)
    refs = _polynomial_references(x)
    t = md.tensor(x, dtype=md.float64)
    for name, ref in refs.items():
        out = getattr(S, name)(t, n)
        assert not out.requires_grad
        np.testing.assert_allclose(out.numpy(), ref(n), rtol=1e-11, atol=1e-11, err_msg=name)
    xs = (x + 1) / 2   # the shifted ones: p*(x) = p(2x - 1)
    for kind in "tuvw":
        np.testing.assert_allclose(getattr(S, f"shifted_chebyshev_polynomial_{kind}")(md.tensor(xs, dtype=md.float64),
                                                                                      n).numpy(),
                                   refs[f"chebyshev_polynomial_{kind}"](n), rtol=1e-9, atol=1e-9)


def test_polynomial_degrees_and_end_points():
    x = md.tensor([1.0, -1.0, 0.3], dtype=md.float64)
    assert S.chebyshev_polynomial_t(x, md.tensor([3.7, 3.0, -1.0], dtype=md.float64)).tolist() == [1.0, -1.0, 0.0]
    assert S.chebyshev_polynomial_u(x, 4).tolist()[:2] == [5.0, 5.0]
    assert S.legendre_polynomial_p(x, 3).tolist()[:2] == [1.0, -1.0]
    assert S.laguerre_polynomial_l(md.tensor([0.0]), 9).item() == 1.0
    assert math.isnan(S.hermite_polynomial_h(md.tensor([0.5], dtype=md.float64), 600).item())
    assert S.chebyshev_polynomial_t(md.tensor([1, 2]), 2).dtype == md.float32


# ---- special points, errors, dtypes, namespaces ------------------------------------------------
def test_special_points_as_pytorch():
    f64 = lambda *v: md.tensor(list(v), dtype=md.float64)   # noqa: E731
    np.testing.assert_array_equal(S.entr(f64(-1.0, 0.0, math.inf)).numpy(), [-math.inf, 0.0, -math.inf])
    np.testing.assert_array_equal(S.ndtri(f64(0.0, 1.0, -0.1, 1.5)).numpy(), [-math.inf, math.inf, math.nan, math.nan])
    np.testing.assert_array_equal(S.erfcx(f64(-math.inf, math.inf, -30.0)).numpy(), [math.inf, 0.0, math.inf])
    z = S.zeta(f64(1.0, 0.5, 2.0, 2.5), f64(1.0, 1.0, -2.0, -2.5)).numpy()
    np.testing.assert_array_equal(z, [math.inf, math.nan, math.inf, math.nan])
    assert S.zeta(2.0, f64(1.0)).item() == pytest.approx(math.pi ** 2 / 6, rel=1e-15)
    p = S.gammainc(f64(0.0, 1.0, 0.0, 2.0, -1.0), f64(1.0, 0.0, 0.0, math.inf, 1.0)).numpy()
    np.testing.assert_array_equal(p, [1.0, 0.0, math.nan, 1.0, math.nan])
    assert S.xlog1py(f64(0.0), f64(-1.0)).item() == 0.0 and math.isnan(S.xlog1py(f64(0.0), f64(math.nan)).item())
    assert S.polygamma(2, f64(1.0)).item() == pytest.approx(-2 * 1.2020569031595942854, rel=1e-14)   # -2 zeta(3)


def test_gradients_at_special_points_and_the_missing_derivatives():
    x = md.tensor([0.0, 2.0], dtype=md.float64, requires_grad=True)
    S.entr(x).sum().backward()
    assert x.grad.numpy()[0] == math.inf
    x = md.tensor([0.0, -1.5], dtype=md.float64, requires_grad=True)
    S.i1(x).sum().backward()
    assert x.grad.numpy()[0] == 0.5
    a = md.tensor([0.0], dtype=md.float64, requires_grad=True)
    y = md.tensor([-1.0], dtype=md.float64, requires_grad=True)
    S.xlog1py(a, y).sum().backward()
    assert a.grad.item() == 0.0
    s = md.tensor([2.0], dtype=md.float64, requires_grad=True)
    with pytest.raises(NotImplementedError, match="derivative for 'zeta'"):
        S.zeta(s, md.tensor([1.5], dtype=md.float64)).backward()
    with pytest.raises(NotImplementedError, match="igamma: input"):
        md.igamma(s, md.tensor([1.5], dtype=md.float64)).backward()
    b = md.tensor([1.0], dtype=md.float64, requires_grad=True)
    c = md.tensor([2.0], dtype=md.float64, requires_grad=True)
    md.nextafter(b, c).sum().backward()
    assert b.grad.item() == 1.0 and c.grad.item() == 0.0
    for fn in (S.bessel_j0, S.modified_bessel_k1, S.airy_ai, S.spherical_bessel_j0):
        assert not fn(md.tensor([0.5], requires_grad=True)).requires_grad


def test_bad_inputs():
    x = md.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="negative n"):
        S.polygamma(-1, x)
    with pytest.raises(TypeError, match="'n' must be int"):
        md.polygamma(1.5, x)
    with pytest.raises(RuntimeError, match="p has to be greater than or equal to 1"):
        md.mvlgamma(x, 0)
    with pytest.raises(NotImplementedError, match="gcd"):
        md.gcd(x, x)
    with pytest.raises(TypeError, match="must be Tensor"):
        md.gcd(md.tensor([4]), 6)
    with pytest.raises(NotImplementedError, match="nextafter"):
        md.nextafter(md.tensor([1]), md.tensor([2]))
    with pytest.raises(NotImplementedError, match="igamma"):
        md.igamma(md.tensor([1]), md.tensor([2]))
    with pytest.raises(TypeError):
        S.zeta("a", x)


def test_dtypes_and_top_level_forms():
    ints = md.tensor([1, 2, 3])
    for fn in (S.ndtr, S.i0e, S.i1, S.entr, S.erfcx, S.bessel_j0, lambda t: S.polygamma(1, t), S.gammaln):
        assert fn(ints).dtype == md.float32
    assert S.zeta(ints, md.tensor([1.0], dtype=md.float64)).dtype == md.float64
    assert S.ndtr(md.tensor([0.5], dtype=md.float32)).dtype == md.float32
    assert md.gcd(md.tensor([4, -6, 0]), md.tensor([6, 4, 0])).tolist() == [2, 2, 0]
    assert md.lcm(md.tensor([4, -6, 0]), md.tensor([6, 4, 0])).tolist() == [12, 12, 0]
    assert md.tensor([2.0]).polygamma(1).item() == pytest.approx(math.pi ** 2 / 6 - 1, rel=1e-6)
    assert md.tensor([3.2], dtype=md.float64).mvlgamma(2).item() == pytest.approx(
        math.lgamma(3.2) + math.lgamma(2.7) + 0.5 * math.log(math.pi), rel=1e-14)
    nxt = md.tensor([1.0], dtype=md.float64).nextafter(md.tensor([2.0], dtype=md.float64)).item()
    assert nxt == np.nextafter(1.0, 2.0)
    assert md.special is S and md.special.expit is md.sigmoid and S.gammaln is md.lgamma and S.psi is md.digamma


def test_inplace_methods():
    t = md.tensor([4, -6, 9])
    assert t.gcd_(md.tensor([6, 4, 3])) is t and t.tolist() == [2, 2, 3]
    t.lcm_(md.tensor([3, 3, 3]))
    assert t.tolist() == [6, 6, 3]
    u = md.tensor([2.0, 3.0], dtype=md.float64)
    u.polygamma_(1)
    np.testing.assert_allclose(u.numpy(), _polygamma_ref(1, np.array([2.0, 3.0])), rtol=1e-12)
    v = md.tensor([1.0, 2.0], dtype=md.float64)
    v.igamma_(md.tensor([1.0, 1.0], dtype=md.float64))
    np.testing.assert_allclose(v.numpy(), [1 - math.exp(-1), 1 - 2 * math.exp(-1)], rtol=1e-14)
    w = md.tensor([3.2], dtype=md.float64)
    w.mvlgamma_(1)
    assert w.item() == pytest.approx(math.lgamma(3.2), rel=1e-15)
    q = md.tensor([1.0], dtype=md.float64)
    q.nextafter_(md.tensor([0.0], dtype=md.float64))
    assert q.item() == np.nextafter(1.0, 0.0)


def test_cuda_tensors_are_refused_by_name():
    if not md.cuda.is_available():
        pytest.skip("no CUDA device (nor the simulator)")
    x = md.tensor([0.5, 1.0]).cuda()
    with pytest.raises(NotImplementedError, match="ndtr.*cuda"):
        S.ndtr(x)
    with pytest.raises(NotImplementedError, match="bessel_j0.*cuda"):
        S.bessel_j0(x)


# ---- against scipy.special ------------------------------------------------------------------------
def _close(ours, theirs, rtol=1e-12, atol=1e-300):   # (SciPy flushes some results to 0 before the subnormals)
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    finite = np.isfinite(theirs)
    np.testing.assert_array_equal(ours[~finite & ~np.isnan(theirs)], theirs[~finite & ~np.isnan(theirs)])
    np.testing.assert_allclose(ours[finite], theirs[finite], rtol=rtol, atol=atol)


def test_against_scipy():
    ss = pytest.importorskip("scipy.special")
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-40, 40, 400), rng.uniform(-3, 3, 200), 10 ** rng.uniform(-8, 2.5, 100),
                        [0.0, -0.0, 2.0, 5.0, 8.0, 2.09, -2.09, 103.0, -700.0, 700.0, math.inf, -math.inf, math.nan]])
    t = md.tensor(x, dtype=md.float64)
    with np.errstate(all="ignore"):
        for name, ref, atol in [("i0e", ss.i0e, 0), ("i1", ss.i1, 0), ("i1e", ss.i1e, 0), ("ndtr", ss.ndtr, 0),
                                ("log_ndtr", ss.log_ndtr, 0), ("entr", ss.entr, 0),
                                ("bessel_j0", ss.j0, 1e-15), ("bessel_j1", ss.j1, 1e-15), ("bessel_y0", ss.y0, 1e-15),
                                ("bessel_y1", ss.y1, 1e-15), ("modified_bessel_i0", ss.i0, 0),
                                ("modified_bessel_i1", ss.i1, 0), ("modified_bessel_k0", ss.k0, 0),
                                ("modified_bessel_k1", ss.k1, 0), ("scaled_modified_bessel_k0", ss.k0e, 0),
                                ("scaled_modified_bessel_k1", ss.k1e, 0), ("airy_ai", lambda v: ss.airy(v)[0], 1e-13),
                                ("spherical_bessel_j0", lambda v: ss.spherical_jn(0, v), 1e-16)]:
            if name == "spherical_bessel_j0":
                sel = np.isfinite(x)
                _close(getattr(S, name)(md.tensor(x[sel], dtype=md.float64)).numpy(), ref(x[sel]), atol=atol)
                continue
            _close(getattr(S, name)(t).numpy(), ref(x), atol=max(atol, 1e-300))
        # erfcx: scipy rounds x**2 before exponentiating (a relative error of x**2 ulps); compare where that is small
        sel = x > -6
        _close(S.erfcx(md.tensor(x[sel], dtype=md.float64)).numpy(), ss.erfcx(x[sel]))
        p = np.concatenate([rng.uniform(0, 1, 300), 10 ** rng.uniform(-300, -1, 100),
                            1 - 10 ** rng.uniform(-15, -1, 100),
                            [0.0, 1.0, -0.5, 2.0, math.nan]])
        _close(S.ndtri(md.tensor(p, dtype=md.float64)).numpy(), ss.ndtri(p))
        s, q = rng.uniform(1, 30, 300), rng.uniform(-10, 40, 300)
        s[:20], q[:20] = np.round(s[:20]), np.round(q[:20]) - 12   # integer x, including q at the poles
        _close(S.zeta(md.tensor(s, dtype=md.float64), md.tensor(q, dtype=md.float64)).numpy(), ss.zeta(s, q),
               rtol=1e-13)
        xp = rng.uniform(0.05, 20, 100)
        for n in (0, 1, 2, 5):
            _close(S.polygamma(n, md.tensor(xp, dtype=md.float64)).numpy(), ss.polygamma(n, xp), rtol=1e-12)
        _close(S.multigammaln(md.tensor(xp + 3, dtype=md.float64), 4).numpy(), ss.multigammaln(xp + 3, 4))
        a, z = 10 ** rng.uniform(-3, 2, 800), 10 ** rng.uniform(-3, 2.5, 800)
        a[:5], z[:5] = [0.0, 1.0, 2.0, math.inf, -1.0], [1.0, 0.0, math.inf, 1.0, 1.0]
        for name, ref in (("gammainc", ss.gammainc), ("gammaincc", ss.gammaincc)):
            _close(getattr(S, name)(md.tensor(a, dtype=md.float64), md.tensor(z, dtype=md.float64)).numpy(),
                   ref(a, z), rtol=3e-12, atol=1e-300)
        y = rng.uniform(-0.99, 5, 50)
        _close(S.xlog1py(md.tensor(xp[:50], dtype=md.float64), md.tensor(y, dtype=md.float64)).numpy(),
               ss.xlog1py(xp[:50], y))


# ---- against PyTorch -------------------------------------------------------------------------------
_TORCH_UNARY = ["ndtr", "ndtri", "log_ndtr", "erfcx", "entr", "i0e", "i1", "i1e"]
_TORCH_NOGRAD = {  # PyTorch's own kernels for these lose digits (its J/Y rational functions drop a term)
    "bessel_j0": 1e-6, "bessel_j1": 1e-6, "bessel_y0": 1e-6, "bessel_y1": 1e-6, "modified_bessel_i0": 0,
    "modified_bessel_i1": 0, "modified_bessel_k0": 0, "modified_bessel_k1": 0, "scaled_modified_bessel_k0": 0,
    "scaled_modified_bessel_k1": 0, "spherical_bessel_j0": 0, "airy_ai": 1e-5}


def _torch_pair(torch, values, requires_grad=True):
    return (md.tensor(values, dtype=md.float64, requires_grad=requires_grad),
            torch.tensor(values, dtype=torch.float64, requires_grad=requires_grad))


@pytest.mark.parametrize("name", _TORCH_UNARY)
def test_unary_against_torch(name):
    torch = pytest.importorskip("torch")
    values = [0.13, 0.5, 0.87] if name == "ndtri" else [-7.5, -1.2, 0.0, 0.4, 2.5, 9.0]
    a, b = _torch_pair(torch, values)
    ya, yb = getattr(S, name)(a), getattr(torch.special, name)(b)
    # PyTorch's ndtr, (1 + erf(x/sqrt 2))/2, keeps only absolute accuracy in the lower tail
    np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), rtol=1e-13, atol=1e-16)
    ya.sum().backward()
    yb.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12, atol=1e-300)
    assert getattr(S, name)(md.tensor([1.0, 2.0])).dtype == md.float32


@pytest.mark.parametrize("name", sorted(_TORCH_NOGRAD))
def test_nondifferentiable_against_torch(name):
    torch = pytest.importorskip("torch")
    values = [-20.0, -3.0, -0.5, 0.0, 0.25, 1.5, 4.0, 7.0, 30.0]
    a, b = _torch_pair(torch, values, requires_grad=False)
    ours, theirs = getattr(S, name)(a).numpy(), getattr(torch.special, name)(b).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-12 if not _TORCH_NOGRAD[name] else 1e-3,
                               atol=_TORCH_NOGRAD[name])


def test_two_operand_and_parametrised_against_torch():
    torch = pytest.importorskip("torch")
    x, tx = _torch_pair(torch, [0.4, 1.3, 2.7, 6.0])
    q, tq = _torch_pair(torch, [0.7, 1.1, 3.0, 0.2])
    cases = [(lambda u, v: S.zeta(u + 1.5, v), lambda u, v: torch.special.zeta(u + 1.5, v), [1]),
             (S.xlog1py, torch.special.xlog1py, [0, 1]),
             (S.gammainc, torch.special.gammainc, [1]), (md.igammac, torch.igammac, [1]),
             (lambda u, v: S.polygamma(2, v), lambda u, v: torch.special.polygamma(2, v), [1]),
             (lambda u, v: S.multigammaln(v + 2, 3), lambda u, v: torch.special.multigammaln(v + 2, 3), [1]),
             (lambda u, v: S.polygamma(0, v), lambda u, v: torch.special.polygamma(0, v), [1])]
    for ours_fn, torch_fn, grads in cases:
        for t in (x, q, tx, tq):
            t.grad = None
        first, tfirst = (x, tx) if 0 in grads else (x.detach(), tx.detach())
        ours, theirs = ours_fn(first, q), torch_fn(tfirst, tq)
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12)
        ours.sum().backward()
        theirs.sum().backward()
        for i in grads:
            np.testing.assert_allclose((x, q)[i].grad.numpy(), (tx, tq)[i].grad.numpy(), rtol=1e-8)
    for n in range(0, 10):
        for name in ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
                     "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
                     "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
                     "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"]:
            v = [-1.0, -0.6, 0.0, 0.3, 1.0, 1.7]
            ours = getattr(S, name)(md.tensor(v, dtype=md.float64), n).numpy()
            theirs = getattr(torch.special, name)(torch.tensor(v, dtype=torch.float64), n).numpy()
            np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12, err_msg=f"{name} n={n}")
    ints = [4, -6, 0, 15]
    for fn in ("gcd", "lcm"):
        ours = getattr(md, fn)(md.tensor(ints), md.tensor([6, 4, 0, 10])).numpy()
        theirs = getattr(torch, fn)(torch.tensor(ints), torch.tensor([6, 4, 0, 10])).numpy()
        np.testing.assert_array_equal(ours, theirs)


def test_gradcheck_nextafter_and_xlog1py_broadcast():
    a = md.tensor(np.linspace(-1, 1, 3), dtype=md.float64, requires_grad=True)
    b = md.tensor([[0.3], [2.0]], dtype=md.float64, requires_grad=True)
    assert gradcheck(S.xlog1py, (a.detach().requires_grad_(True), b))
    assert md.nextafter(a, md.tensor([5.0], dtype=md.float64)).shape == (3,)
