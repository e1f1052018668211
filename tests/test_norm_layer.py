"""Norms over the trailing features: LayerNorm, RMSNorm, ScaleNorm, FixNorm.

Both implementations (NumPy reference and Numba kernels, switched with
minidl.ops.normalization.implementation) are checked against plain NumPy formulas and with
float64 gradcheck; the kernels are checked against the reference in float32 and float64,
forward and backward; plus large-mean float32 accuracy, float16 in/out, module behaviour,
error messages and, when installed, PyTorch as an oracle."""
import os
import subprocess
import sys

import numba
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.kernels.cpu import layer_norm as kln
from minidl.kernels.cpu import rms_norm as krms
from minidl.kernels.cpu import scale_norm as kscale
from minidl.ops import normalization as N
from minidl.testing import OpSpec, check_forward, check_gradcheck, forward_cases, spec_id

IMPLS = ("reference", "numba")


# independent NumPy formulas (not the package's reference code) -----------------------------
def np_layer_norm(x, k, w=None, b=None, eps=1e-5):
    axes = tuple(range(x.ndim - k, x.ndim))
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    return y * (1 if w is None else w) + (0 if b is None else b)


def np_rms_norm(x, k, w=None, eps=1e-6):
    axes = tuple(range(x.ndim - k, x.ndim))
    y = x / np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)
    return y * (1 if w is None else w)


def np_scale_norm(x, g, eps=1e-5):
    return g * x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), eps)


def _with(impl, fn):
    def run(*args):
        with N.implementation(impl):
            return fn(*args)
    return run


def _specs(impl):
    s = []
    for shape, ns in [((3, 5), (5,)), ((2, 3, 4), (3, 4)), ((4, 7), (7,)), ((4, 1), (1,)), ((5,), (5,))]:
        k = len(ns)
        tag = "x".join(map(str, shape))
        s.append(OpSpec(f"layer_norm-{impl}-affine-{tag}",
                        _with(impl, lambda x, w, b, ns=ns: F.layer_norm(x, ns, w, b)),
                        lambda x, w, b, k=k: np_layer_norm(x, k, w, b),
                        lambda g, shape=shape, ns=ns: (g.standard_normal(shape), g.standard_normal(ns),
                                                       g.standard_normal(ns))))
        s.append(OpSpec(f"layer_norm-{impl}-plain-{tag}", _with(impl, lambda x, ns=ns: F.layer_norm(x, ns)),
                        lambda x, k=k: np_layer_norm(x, k), lambda g, shape=shape: (g.standard_normal(shape),)))
        s.append(OpSpec(f"rms_norm-{impl}-affine-{tag}",
                        _with(impl, lambda x, w, ns=ns: F.rms_norm(x, ns, w, eps=1e-6)),
                        lambda x, w, k=k: np_rms_norm(x, k, w),
                        lambda g, shape=shape, ns=ns: (g.standard_normal(shape), g.standard_normal(ns))))
        s.append(OpSpec(f"rms_norm-{impl}-plain-{tag}", _with(impl, lambda x, ns=ns: F.rms_norm(x, ns, eps=1e-6)),
                        lambda x, k=k: np_rms_norm(x, k), lambda g, shape=shape: (g.standard_normal(shape),)))
    s.append(OpSpec(f"layer_norm-{impl}-weight-only", _with(impl, lambda x, w: F.layer_norm(x, (6,), w)),
                    lambda x, w: np_layer_norm(x, 1, w), lambda g: (g.standard_normal((3, 6)), g.standard_normal(6))))
    for shape in [(3, 5), (2, 3, 4), (4, 1)]:
        tag = "x".join(map(str, shape))
        s.append(OpSpec(f"scale_norm-{impl}-{tag}", _with(impl, lambda x, g: F.scale_norm(x, g)),
                        np_scale_norm, lambda g, shape=shape: (g.standard_normal(shape), np.array([1.7]))))
        s.append(OpSpec(f"fix_norm-{impl}-{tag}", _with(impl, lambda x: F.scale_norm(x, 2.5)),
                        lambda x: np_scale_norm(x, 2.5), lambda g, shape=shape: (g.standard_normal(shape),)))
    # rows whose norm is below eps take the clamp branch (there dx = g / eps * dy)
    s.append(OpSpec(f"scale_norm-{impl}-clamped", _with(impl, lambda x, g: F.scale_norm(x, g, eps=1.0)),
                    lambda x, g: np_scale_norm(x, g, eps=1.0),
                    lambda g: (np.concatenate([0.1 * g.standard_normal((2, 4)), 3 + g.standard_normal((2, 4))]),
                               np.array([0.8]))))
    return s


SPECS = _specs("reference") + _specs("numba")


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck(spec):
    assert check_gradcheck(spec)


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward(spec, dtype, device):
    check_forward(spec, dtype, device)


# kernels against the reference, float32 and float64, forward and backward ------------------
TOL = {np.float32: dict(rtol=2e-5, atol=2e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}


def _data(dtype, n=37, d=29, seed=0):
    g = np.random.default_rng(seed)
    return [g.standard_normal(s).astype(dtype) for s in ((n, d), (d,), (d,), (n, d))]


@pytest.mark.parametrize("stream", [False, True], ids=["store", "stream"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_kernel_matches_reference(dtype, affine, stream):
    x, w, b, dy = _data(dtype)
    w, b = (w, b) if affine else (None, None)
    y, mean, rstd = kln.layer_norm_forward(x, w, b, 1e-5, stream=stream)
    y_ref, mean_ref, rstd_ref = N.layer_norm_forward_reference(x, w, b, 1e-5)
    assert y.dtype == dtype
    np.testing.assert_allclose(y, y_ref, **TOL[dtype])
    np.testing.assert_allclose(mean, mean_ref, **TOL[dtype])
    np.testing.assert_allclose(rstd, rstd_ref, **TOL[dtype])
    dx, dw, db = kln.layer_norm_backward(dy, x, mean, rstd, w, stream=stream)
    dx_ref, dw_ref, db_ref = N.layer_norm_backward_reference(dy, x, mean_ref, rstd_ref, w)
    assert dx.dtype == dtype
    for a, e in ((dx, dx_ref), (dw, dw_ref), (db, db_ref)):
        np.testing.assert_allclose(a, e, **TOL[dtype])
    # only some gradients asked for: the others are None and the rest unchanged
    dx2, dw2, db2 = kln.layer_norm_backward(dy, x, mean, rstd, w, True, False, False)
    assert dw2 is None and db2 is None
    np.testing.assert_array_equal(dx2, dx)
    dx3, dw3, db3 = kln.layer_norm_backward(dy, x, mean, rstd, w, False, True, True)
    assert dx3 is None
    np.testing.assert_array_equal(dw3, dw)
    np.testing.assert_array_equal(db3, db)


@pytest.mark.parametrize("stream", [False, True], ids=["store", "stream"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("affine", [True, False])
def test_rms_norm_kernel_matches_reference(dtype, affine, stream):
    x, w, _, dy = _data(dtype, seed=1)
    w = w if affine else None
    y, rstd = krms.rms_norm_forward(x, w, 1e-6, stream=stream)
    y_ref, rstd_ref = N.rms_norm_forward_reference(x, w, 1e-6)
    np.testing.assert_allclose(y, y_ref, **TOL[dtype])
    np.testing.assert_allclose(rstd, rstd_ref, **TOL[dtype])
    dx, dw = krms.rms_norm_backward(dy, x, rstd, w, stream=stream)
    dx_ref, dw_ref = N.rms_norm_backward_reference(dy, x, rstd_ref, w)
    np.testing.assert_allclose(dx, dx_ref, **TOL[dtype])
    np.testing.assert_allclose(dw, dw_ref, **TOL[dtype])


@pytest.mark.parametrize("stream", [False, True], ids=["store", "stream"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scale_norm_kernel_matches_reference(dtype, stream):
    x, _, _, dy = _data(dtype, seed=2)
    x[3] = 0  # a clamped row
    y, inv = kscale.scale_norm_forward(x, 1.3, 1e-5, stream=stream)
    y_ref, inv_ref = N.scale_norm_forward_reference(x, 1.3, 1e-5)
    np.testing.assert_allclose(y, y_ref, **TOL[dtype])
    np.testing.assert_allclose(inv, inv_ref, **TOL[dtype])
    dx, dg = kscale.scale_norm_backward(dy, x, inv, 1.3, 1e-5, stream=stream)
    dx_ref, dg_ref = N.scale_norm_backward_reference(dy, x, inv_ref, 1.3, 1e-5)
    np.testing.assert_allclose(dx, dx_ref, rtol=TOL[dtype]["rtol"], atol=TOL[dtype]["atol"] / 1e-5)
    np.testing.assert_allclose(dg, dg_ref, **TOL[dtype])
    np.testing.assert_allclose(dx[3], 1.3 / 1e-5 * dy[3], rtol=1e-6)   # clamp branch: no radial term


def test_streamed_rows_of_every_alignment():
    """Streaming stores: rows whose start falls anywhere relative to a 64-byte line (head and
    tail handled by scalar stores), and rows shorter than one vector."""
    g = np.random.default_rng(9)
    for d in (1, 3, 17, 33, 100):
        x = g.standard_normal((7, d)).astype(np.float32)
        y, _, _ = kln.layer_norm_forward(x, None, None, 1e-5, stream=True)
        np.testing.assert_allclose(y, np_layer_norm(x.astype(np.float64), 1), atol=2e-5)


def test_partial_sums_over_many_chunks_and_flushes():
    """dgamma over more rows than one flush block, uneven chunks: equals the float64 sum."""
    g = np.random.default_rng(3)
    x, dy = g.standard_normal((203, 8)), g.standard_normal((203, 8))
    w = g.standard_normal(8)
    _, mean, rstd = kln.layer_norm_forward(x, w, None, 1e-5)
    _, dw, db = kln.layer_norm_backward(dy, x, mean, rstd, w)
    xhat = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(dw, (dy * xhat).sum(0), rtol=1e-12)
    np.testing.assert_allclose(db, dy.sum(0), rtol=1e-12)


# numerics -------------------------------------------------------------------------------
@pytest.mark.parametrize("impl", IMPLS)
def test_large_mean_float32_is_accurate(impl):
    """1e3 + 1e-2 * randn in float32: the output matches float64 math on the same inputs."""
    g = np.random.default_rng(4)
    x32 = (1e3 + 1e-2 * g.standard_normal((16, 300))).astype(np.float32)
    dy32 = g.standard_normal((16, 300)).astype(np.float32)
    expected = np_layer_norm(x32.astype(np.float64), 1)
    with N.implementation(impl):
        x = md.tensor(x32, requires_grad=True)
        y = F.layer_norm(x, (300,))
        y.backward(gradient=md.tensor(dy32))
    assert np.abs(y.detach().numpy() - expected).max() < 1e-5
    xf = x32.astype(np.float64)
    xhat = (xf - xf.mean(1, keepdims=True)) / np.sqrt(xf.var(1, keepdims=True) + 1e-5)
    rstd = 1 / np.sqrt(xf.var(1, keepdims=True) + 1e-5)
    dx = rstd * (dy32 - dy32.mean(1, keepdims=True) - xhat * (dy32 * xhat).mean(1, keepdims=True))
    np.testing.assert_allclose(x.grad.numpy(), dx, rtol=1e-3, atol=1e-3 * np.abs(dx).max())


def test_kernel_statistics_float32_precision():
    """float32 rows of every kind (zero mean, large mean, constant, one far outlier first):
    mean and rstd to float32 precision, as the float64 reference computes them."""
    g = np.random.default_rng(10)
    x = g.standard_normal((6, 768)).astype(np.float32)
    x[1] = 1e3 + 1e-2 * x[1]
    x[2] = 5.0
    x[3] = 1e3 + 1e-2 * x[3]
    x[3, 0] = 0.0
    x[4] = 1e-3 * x[4]
    x[5, 0] = 1e4
    _, mean, rstd = kln.layer_norm_forward(x, None, None, 1e-5)
    _, mean_ref, rstd_ref = N.layer_norm_forward_reference(x, None, None, 1e-5)
    # compiled, the row sums are SIMD trees of partial sums; as plain Python (NUMBA_DISABLE_JIT=1)
    # they run one float32 add after another, whose rounding grows with the row length
    rtol = 1e-5 if numba.config.DISABLE_JIT else 3e-7
    np.testing.assert_allclose(rstd, rstd_ref, rtol=rtol)
    np.testing.assert_allclose(mean, mean_ref, rtol=rtol, atol=1e-9)


@pytest.mark.parametrize("impl", IMPLS)
def test_float16_in_float16_out_with_float32_accumulation(impl):
    g = np.random.default_rng(5)
    x16 = (3 + g.standard_normal((8, 64))).astype(np.float16)
    w16 = (1 + 0.1 * g.standard_normal(64)).astype(np.float16)
    with N.implementation(impl):
        x = md.tensor(x16, requires_grad=True)
        w = md.tensor(w16, requires_grad=True)
        y = F.layer_norm(x, (64,), w)
        y.backward(gradient=md.tensor(np.ones((8, 64), np.float16)))
        r = F.rms_norm(md.tensor(x16), (64,))
    assert y.dtype == np.float16 and x.grad.dtype == np.float16 and w.grad.dtype == np.float16
    assert r.dtype == np.float16
    # float16 arithmetic would be off by many float16 ulps; computed wide and rounded once it is not
    exact = np_layer_norm(x16.astype(np.float64), 1, w16.astype(np.float64))
    err = np.abs(y.detach().numpy().astype(np.float64) - exact).max()
    assert err <= 2 * np.abs(np.spacing(exact.astype(np.float16))).max()
    np.testing.assert_allclose(r.numpy().astype(np.float64),
                               np_rms_norm(x16.astype(np.float64), 1, eps=float(np.finfo(np.float16).eps)),
                               rtol=2e-3, atol=2e-3)


def test_rms_norm_default_eps_is_machine_epsilon():
    x = np.full((1, 4), 1e-5)
    for dt in (np.float32, np.float64):
        y = F.rms_norm(md.tensor(x.astype(dt)), (4,))
        np.testing.assert_allclose(y.numpy(), np_rms_norm(x, 1, eps=float(np.finfo(dt).eps)), rtol=1e-5)


def test_non_contiguous_input():
    g = np.random.default_rng(6)
    a = g.standard_normal((6, 4))
    x = md.tensor(a, requires_grad=True)
    y = F.layer_norm(x.transpose(0, 1), (6,))
    y.backward(gradient=md.tensor(np.ones((4, 6))))
    np.testing.assert_allclose(y.detach().numpy(), np_layer_norm(a.T, 1), atol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), 0, atol=1e-12)   # a constant cotangent is normalized away


def test_input_grad_is_the_kernels_output_uncopied(monkeypatch):
    """dx is allocated in x's shape and written by the kernel; the engine keeps it as .grad."""
    seen = {}
    original = kln.layer_norm_backward

    def spy(*args, **kwargs):
        seen["dx"] = kwargs["dx_out"]
        return original(*args, **kwargs)
    monkeypatch.setattr(kln, "layer_norm_backward", spy)
    x = md.randn(3, 4, 5, requires_grad=True)
    F.layer_norm(x, (5,)).backward(gradient=md.randn(3, 4, 5))
    assert np.shares_memory(x.grad.numpy(), seen["dx"]) and x.grad.numpy().base is None


# modules ----------------------------------------------------------------------------------
def test_layer_norm_module_parameters_and_modes():
    m = nn.LayerNorm((3, 4))
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]
    assert m.weight.shape == (3, 4) and np.all(m.weight.detach().numpy() == 1) and np.all(m.bias.detach().numpy() == 0)
    assert repr(m) == "LayerNorm((3, 4), eps=1e-05, elementwise_affine=True, bias=True)"
    assert list(m.state_dict()) == ["weight", "bias"]
    x = md.randn(2, 3, 4)
    y_train = m(x).detach().numpy()
    m.eval()
    np.testing.assert_array_equal(m(x).detach().numpy(), y_train)
    assert nn.LayerNorm(4, bias=False).bias is None
    assert list(nn.LayerNorm(4, bias=False).state_dict()) == ["weight"]
    plain = nn.LayerNorm(4, elementwise_affine=False)
    assert plain.weight is None and list(plain.parameters()) == []


def test_layer_norm_module_trains_its_parameters():
    m = nn.LayerNorm(5)
    x = md.randn(4, 5)
    dy = np.random.default_rng(7).standard_normal((4, 5)).astype(np.float32)
    m(x).backward(gradient=md.tensor(dy))
    xhat = np_layer_norm(x.numpy().astype(np.float64), 1)
    np.testing.assert_allclose(m.weight.grad.numpy(), (dy * xhat).sum(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(m.bias.grad.numpy(), dy.sum(0), rtol=1e-5)


def test_rms_scale_fix_norm_modules():
    r = nn.RMSNorm(6)
    assert [n for n, _ in r.named_parameters()] == ["weight"] and r.eps is None
    assert repr(r) == "RMSNorm((6,), eps=None, elementwise_affine=True)"
    assert list(nn.RMSNorm(6, elementwise_affine=False).parameters()) == []
    s = nn.ScaleNorm(16)
    assert [n for n, _ in s.named_parameters()] == ["scale"]
    assert s.scale.shape == (1,) and s.scale.detach().numpy()[0] == pytest.approx(4.0)
    f = nn.FixNorm(16)
    assert list(f.parameters()) == [] and f.radius == pytest.approx(4.0)
    x = md.randn(3, 16)
    # at initialisation ScaleNorm and FixNorm agree, and each row has root mean square 1
    np.testing.assert_allclose(s(x).detach().numpy(), f(x).detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(np.sqrt((s(x).detach().numpy() ** 2).mean(-1)), 1, rtol=1e-5)
    s(x).backward(gradient=md.ones(3, 16))
    assert s.scale.grad.shape == (1,)


# errors -----------------------------------------------------------------------------------
def test_errors_name_expected_and_actual_shapes():
    with pytest.raises(RuntimeError, match=r"expected input with shape \[\*, 5\], but got input of size \[2, 4\]"):
        nn.LayerNorm(5)(md.randn(2, 4))
    with pytest.raises(RuntimeError, match=r"expected input with shape \[\*, 3, 4\].*\[2, 4, 3\]"):
        F.layer_norm(md.randn(2, 4, 3), (3, 4))
    with pytest.raises(RuntimeError, match=r"\[\*, 8\].*\[8\]|\[8\].*\[\*, 8\]"):
        nn.RMSNorm(8)(md.randn(3))
    with pytest.raises(RuntimeError, match=r"expected weight of shape \[4\].*got weight of shape \[5\]"):
        F.layer_norm(md.randn(2, 4), (4,), md.ones(5))
    with pytest.raises(RuntimeError, match=r"last dim 6.*\[2, 5\]"):
        nn.ScaleNorm(6)(md.randn(2, 5))
    with pytest.raises(RuntimeError, match=r"scale with one element"):
        F.scale_norm(md.randn(2, 5), md.ones(2))
    with pytest.raises(TypeError, match="floating point"):
        F.layer_norm(md.tensor([[1, 2]]), (2,))


def test_implementation_switch():
    before = N.get_implementation()
    with N.implementation("reference"):
        assert N.get_implementation() == "reference"
        assert not N.use_kernel(np.zeros(2))
        with N.implementation("numba"):
            assert N.use_kernel(np.zeros(2))
    assert N.get_implementation() == before
    with pytest.raises(ValueError, match="expected one of .*got 'cuda'"):
        N.set_implementation("cuda")
    assert N.get_implementation() == before


def test_kernels_run_without_jit():
    """NUMBA_DISABLE_JIT=1: the kernels run as plain Python and still agree."""
    code = ("import numpy as np, minidl as md, minidl.nn.functional as F\n"
            "from minidl.autograd import gradcheck\n"
            "g = np.random.default_rng(0)\n"
            "x = md.tensor(g.standard_normal((3, 4)), requires_grad=True)\n"
            "w = md.tensor(g.standard_normal(4), requires_grad=True)\n"
            "assert gradcheck(lambda x, w: F.layer_norm(x, (4,), w, w), [x, w])\n"
            "assert gradcheck(lambda x, w: F.rms_norm(x, (4,), w), [x, w])\n"
            "assert gradcheck(lambda x, w: F.scale_norm(x, w[:1]), [x, w])\n")
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]


# PyTorch as an oracle -----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("which", ["layer", "rms"])
def test_against_pytorch(dtype, which):
    torch = pytest.importorskip("torch")
    g = np.random.default_rng(8)
    x = g.standard_normal((4, 3, 10)).astype(dtype)
    w = (1 + 0.3 * g.standard_normal((3, 10))).astype(dtype)
    b = g.standard_normal((3, 10)).astype(dtype)
    dy = g.standard_normal((4, 3, 10)).astype(dtype)
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    mx, mw, mb = (md.tensor(a, requires_grad=True) for a in (x, w, b))
    if which == "layer":
        ty = torch.nn.functional.layer_norm(tx, (3, 10), tw, tb)
        my = F.layer_norm(mx, (3, 10), mw, mb)
        pairs = [(mx, tx), (mw, tw), (mb, tb)]
    else:
        ty = torch.nn.functional.rms_norm(tx, (3, 10), tw)
        my = F.rms_norm(mx, (3, 10), mw)
        pairs = [(mx, tx), (mw, tw)]
    ty.backward(torch.tensor(dy))
    my.backward(gradient=md.tensor(dy))
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(my.detach().numpy(), ty.detach().numpy(), **tol)
    for m, t in pairs:
        np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), **tol)
