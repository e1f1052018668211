"""Mixed precision at the edges of autocast's tables: bfloat16 through the 3-D max pooling and its
unpooling, softmax's ``dtype=``, the ops PyTorch's CPU autocast leaves in float32 although minidl
composes them of lowered ones (dot, mv, LSTMCell with a float32 state, local_response_norm on 4-D
and 5-D input), and the dtype checks that run before autocast casts (linalg, ctc_loss,
grid_sample). Values are checked against NumPy references; where torch is installed the same
programs run against it."""
import warnings

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.autograd import gradcheck

RNG = np.random.default_rng(11)


def _a(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _bf16(a):
    """``a`` rounded to bfloat16, as a float32 array."""
    return md.tensor(a).bfloat16().float().numpy()


def _ac():
    return md.autocast("cpu", dtype=md.bfloat16)


# ---------------------------------------------------------------------------------------------
# 1. bfloat16 through max_pool3d and max_unpool3d, outside autocast

def test_max_pool3d_bfloat16_values_indices_and_gradient():
    a = _bf16(_a(2, 3, 4, 4, 6))
    x = md.tensor(a).bfloat16().requires_grad_()
    y, idx = F.max_pool3d(x, 2, return_indices=True)
    assert y.dtype == md.bfloat16 and idx.dtype == md.int64
    ref = a.reshape(2, 3, 2, 2, 2, 2, 3, 2).max((3, 5, 7))
    np.testing.assert_array_equal(y.float().detach().numpy(), ref)
    flat = a.reshape(2, 3, -1)
    np.testing.assert_array_equal(np.take_along_axis(flat, idx.numpy().reshape(2, 3, -1), 2).reshape(ref.shape), ref)
    y.sum().backward()
    assert x.grad.dtype == md.bfloat16
    g = np.zeros_like(flat)
    np.put_along_axis(g, idx.numpy().reshape(2, 3, -1), 1.0, 2)
    np.testing.assert_array_equal(x.grad.float().numpy(), g.reshape(a.shape))


def test_max_unpool3d_bfloat16_roundtrip_and_gradient():
    a = _bf16(_a(1, 2, 4, 4, 4))
    x = md.tensor(a).bfloat16()
    y, idx = F.max_pool3d(x, 2, return_indices=True)
    v = y.detach().requires_grad_()
    out = F.max_unpool3d(v, idx, 2)
    assert out.dtype == md.bfloat16 and tuple(out.shape) == a.shape
    ref = np.zeros((1, 2, 64), np.float32)
    np.put_along_axis(ref, idx.numpy().reshape(1, 2, -1), y.float().numpy().reshape(1, 2, -1), 2)
    np.testing.assert_array_equal(out.float().detach().numpy(), ref.reshape(a.shape))
    gout = _bf16(_a(*a.shape))
    out.backward(md.tensor(gout).bfloat16())
    assert v.grad.dtype == md.bfloat16
    np.testing.assert_array_equal(v.grad.float().numpy(),
                                  np.take_along_axis(gout.reshape(1, 2, -1), idx.numpy().reshape(1, 2, -1), 2)
                                  .reshape(y.shape))
    # and through the modules, unbatched
    m, mi = nn.MaxPool3d(2, return_indices=True)(x[0])
    assert nn.MaxUnpool3d(2)(m, mi).dtype == md.bfloat16


def test_max_pool3d_bfloat16_matches_torch():
    torch = pytest.importorskip("torch")
    a = _a(2, 3, 5, 6, 7)
    a[0, 0, 0, 0, 0] = np.nan
    for kw in (dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=2, dilation=2, ceil_mode=True)):
        tx = torch.tensor(a).bfloat16().requires_grad_()
        mx = md.tensor(a).bfloat16().requires_grad_()
        ty, ti = torch.nn.functional.max_pool3d(tx, return_indices=True, **kw)
        my, mi = F.max_pool3d(mx, return_indices=True, **kw)
        g = _a(*ty.shape)
        ty.backward(torch.tensor(g).bfloat16())
        my.backward(md.tensor(g).bfloat16())
        np.testing.assert_array_equal(my.float().detach().numpy(), ty.float().detach().numpy())
        np.testing.assert_array_equal(mi.numpy(), ti.numpy())
        np.testing.assert_array_equal(mx.grad.float().numpy(), tx.grad.float().numpy())
    ty, ti = torch.nn.functional.max_pool3d(torch.tensor(a).bfloat16(), 2, return_indices=True)
    my, mi = F.max_pool3d(md.tensor(a).bfloat16(), 2, return_indices=True)
    tu = torch.nn.functional.max_unpool3d(ty, ti, 2, output_size=a.shape[2:])
    mu = F.max_unpool3d(my, mi, 2, output_size=a.shape[2:])
    assert str(mu.dtype).split(".")[-1] == str(tu.dtype).split(".")[-1] == "bfloat16"
    np.testing.assert_array_equal(mu.float().numpy(), tu.float().numpy())


# ---------------------------------------------------------------------------------------------
# 2. softmax / log_softmax with dtype=

def _np_softmax(a, axis):
    e = np.exp(a - a.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
def test_softmax_dtype_casts_the_input_first(fn):
    a = _a(3, 5)
    x = md.tensor(a).requires_grad_()
    for y in (getattr(F, fn)(x, -1, dtype=md.float64), getattr(F, fn)(x, dim=-1, dtype=md.float64),
              getattr(x, fn)(-1, dtype=md.float64), getattr(md, fn)(x, -1, dtype=md.float64)):
        assert y.dtype == md.float64
        ref = _np_softmax(a.astype(np.float64), -1)
        np.testing.assert_allclose(y.detach().numpy(), ref if fn == "softmax" else np.log(ref), rtol=1e-12)
    y.sum().backward()
    assert x.grad.dtype == md.float32
    # a bfloat16 input computed in float32
    yb = getattr(F, fn)(md.tensor(a).bfloat16(), 1, dtype=md.float32)
    assert yb.dtype == md.float32
    ref = _np_softmax(_bf16(a).astype(np.float64), 1)
    np.testing.assert_allclose(yb.numpy(), ref if fn == "softmax" else np.log(ref), rtol=1e-5, atol=1e-6)
    # PyTorch's implicit dim, with its warning
    with pytest.warns(UserWarning, match="Implicit dimension choice"):
        np.testing.assert_allclose(getattr(F, fn)(md.tensor(a), dtype=md.float64).numpy(),
                                   getattr(F, fn)(md.tensor(a), 1, dtype=md.float64).numpy())
    with pytest.raises(NotImplementedError, match="int64"):
        getattr(F, fn)(x, -1, dtype=md.int64)


def test_softmax_dtype_gradcheck():
    x = md.tensor(RNG.standard_normal((2, 4)), dtype=md.float64, requires_grad=True)
    assert gradcheck(lambda t: F.softmax(t, -1, dtype=md.float64) * md.arange(4.0, dtype=md.float64), (x,))
    assert gradcheck(lambda t: F.log_softmax(t, 0, dtype=md.float64) * md.arange(4.0, dtype=md.float64), (x,))


def test_softmax_dtype_matches_torch():
    torch = pytest.importorskip("torch")
    a, g = _a(4, 6), RNG.standard_normal((4, 6))
    for fn in ("softmax", "log_softmax"):
        tx, mx = torch.tensor(a, requires_grad=True), md.tensor(a, requires_grad=True)
        ty = getattr(torch.nn.functional, fn)(tx, -1, dtype=torch.float64)
        my = getattr(F, fn)(mx, -1, dtype=md.float64)
        ty.backward(torch.tensor(g))
        my.backward(md.tensor(g))
        np.testing.assert_allclose(my.detach().numpy(), ty.detach().numpy(), rtol=1e-12)
        assert mx.grad.dtype == md.float32 and tx.grad.dtype == torch.float32
        np.testing.assert_allclose(mx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# 3. dot and mv keep their inputs' dtype under autocast

def test_dot_and_mv_stay_float32_under_autocast():
    v, w, M = _a(7), _a(7), _a(3, 7)
    with _ac():
        d = md.dot(md.tensor(v), md.tensor(w))
        d2 = md.tensor(v).dot(md.tensor(w))
        mv = md.mv(md.tensor(M), md.tensor(v))
        mv2 = md.tensor(M).mv(md.tensor(v))
        vd = md.vdot(md.tensor(v), md.tensor(w))
        mm = md.matmul(md.tensor(M), md.tensor(v))   # matmul itself is lowered
        db = md.dot(md.tensor(v).bfloat16(), md.tensor(w).bfloat16())
        with pytest.raises(RuntimeError, match="same dtype"):
            md.dot(md.tensor(v), md.tensor(w).bfloat16())
        with pytest.raises(RuntimeError, match="same dtype"):
            md.mv(md.tensor(M), md.tensor(v).bfloat16())
    for t in (d, d2, mv, mv2, vd):
        assert t.dtype == md.float32
    assert mm.dtype == md.bfloat16 and db.dtype == md.bfloat16
    np.testing.assert_allclose(d.numpy(), v.astype(np.float64) @ w, rtol=1e-5)
    np.testing.assert_allclose(mv.numpy(), M.astype(np.float64) @ v, rtol=1e-5, atol=1e-5)
    # the gradients of a float32 dot are float32 and exact
    x = md.tensor(v, requires_grad=True)
    with _ac():
        md.dot(x, md.tensor(w)).backward()
    np.testing.assert_allclose(x.grad.numpy(), w)


def test_dot_mv_dtypes_match_torch():
    torch = pytest.importorskip("torch")
    v, M = _a(5), _a(2, 5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        td, tm = torch.dot(torch.tensor(v), torch.tensor(v)), torch.mv(torch.tensor(M), torch.tensor(v))
    with _ac():
        d, m = md.dot(md.tensor(v), md.tensor(v)), md.mv(md.tensor(M), md.tensor(v))
    assert td.dtype == torch.float32 and tm.dtype == torch.float32
    np.testing.assert_allclose(d.numpy(), td.numpy(), rtol=1e-5)
    np.testing.assert_allclose(m.numpy(), tm.numpy(), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# 4. LSTMCell: the cell state's dtype decides

def _cell_dtypes(lib, nn_, mk):
    lib.manual_seed(0)
    cell = nn_.LSTMCell(3, 4)
    x = mk(_a(2, 3))
    z = mk(np.zeros((2, 4), np.float32))
    cases = {"none": (x, None), "f32": (x, (z, z)), "bf16 x": (x.bfloat16(), (z, z)),
             "bf16": (x, (z.bfloat16(), z.bfloat16())), "h bf16": (x, (z.bfloat16(), z)),
             "c bf16": (x, (z, z.bfloat16())), "unbatched": (x[0], None), "bf16 none": (x.bfloat16(), None)}
    out = {}
    with lib.autocast("cpu", dtype=lib.bfloat16):
        for k, (i, s) in cases.items():
            h, c = cell(i, s)
            out[k] = (str(h.dtype).split(".")[-1], str(c.dtype).split(".")[-1])
        lstm = nn_.LSTM(3, 4)
        y, (h, c) = lstm(mk(_a(5, 2, 3)))
        out["LSTM"] = tuple(str(t.dtype).split(".")[-1] for t in (y, h, c))
    return out


def test_lstm_cell_under_autocast_follows_the_cell_state():
    got = _cell_dtypes(md, nn, md.tensor)
    f32, bf = ("float32", "float32"), ("bfloat16", "bfloat16")
    assert got == {"none": f32, "f32": f32, "bf16 x": f32, "bf16": bf, "h bf16": f32, "c bf16": bf,
                   "unbatched": f32, "bf16 none": bf, "LSTM": ("bfloat16",) * 3}
    # the values are the lowered step's; gradients reach the float32 weights
    md.manual_seed(0)
    cell = nn.LSTMCell(3, 4)
    x = _a(2, 3)
    with _ac():
        h, c = cell(md.tensor(x))
    (h.sum() + c.sum()).backward()
    assert cell.weight_ih.grad.dtype == md.float32
    h32, c32 = cell(md.tensor(x))
    np.testing.assert_allclose(h.detach().numpy(), h32.detach().numpy(), atol=3e-2)
    np.testing.assert_allclose(c.detach().numpy(), c32.detach().numpy(), atol=3e-2)


def test_lstm_cell_dtypes_match_torch():
    torch = pytest.importorskip("torch")
    try:
        want = _cell_dtypes(torch, torch.nn, torch.tensor)
    except RuntimeError as e:   # torch's oneDNN LSTM lacks bfloat16 on some CPUs: no oracle there
        if "primitive descriptor" not in str(e):
            raise
        pytest.skip("this CPU's oneDNN has no bfloat16 LSTM for torch")
    assert _cell_dtypes(md, nn, md.tensor) == want


# ---------------------------------------------------------------------------------------------
# 5. checks that ask autocast first: linalg, ctc_loss, grid_sample

def _spd(n):
    a = _a(n, n)
    return _bf16(a @ a.T + n * np.eye(n, dtype=np.float32))


def test_linalg_on_bfloat16_runs_in_float32_under_autocast():
    A, S, B = _bf16(_a(4, 4) + 4 * np.eye(4, dtype=np.float32)), _spd(4), _bf16(_a(4, 2))
    a, s, b = (md.tensor(v).bfloat16() for v in (A, S, B))
    with _ac():
        inv = md.linalg.inv(a)
        inv2 = md.inverse(a)
        U, Sv, Vh = md.linalg.svd(a)
        sv = md.linalg.svdvals(a)
        Q, R = md.linalg.qr(a)
        L = md.linalg.cholesky(s)
        w, V = md.linalg.eigh(s)
        ev = md.linalg.eigvalsh(s)
        X = md.linalg.solve(a, b)
        X2 = md.linalg.solve(a.float(), b)      # mixed: both cast to float32
        Xl = md.linalg.lstsq(a, b).solution
        with pytest.raises(RuntimeError, match="Low precision"):
            md.linalg.det(a)                    # no autocast rule in PyTorch either
    for t in (inv, inv2, U, Sv, Vh, sv, Q, R, L, w, V, ev, X, X2, Xl):
        assert t.dtype == md.float32
    A64, S64 = A.astype(np.float64), S.astype(np.float64)
    np.testing.assert_allclose(inv.numpy(), np.linalg.inv(A64), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(sv.numpy(), np.linalg.svd(A64, compute_uv=False), rtol=1e-5)
    np.testing.assert_allclose(L.numpy(), np.linalg.cholesky(S64), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ev.numpy(), np.linalg.eigvalsh(S64), rtol=1e-5)
    np.testing.assert_allclose((Q @ R).numpy(), A64, atol=1e-5)
    np.testing.assert_allclose(X.numpy(), np.linalg.solve(A64, B), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(Xl.numpy(), np.linalg.solve(A64, B), rtol=1e-4, atol=1e-4)
    # the gradient comes back to the bfloat16 input
    ag = md.tensor(A).bfloat16().requires_grad_()
    with _ac():
        md.linalg.inv(ag).sum().backward()
    assert ag.grad.dtype == md.bfloat16
    # outside autocast the low-precision input is refused, as PyTorch
    with pytest.raises(RuntimeError, match="Low precision"):
        md.linalg.inv(a)
    with pytest.raises(NotImplementedError, match="linalg_svd_cpu"):
        md.linalg.svd(a)
    with pytest.raises(RuntimeError, match="float and double"):
        md.linalg.lstsq(a, b)
    with pytest.raises(RuntimeError, match="same dtype"):
        md.linalg.solve(a.float(), b)


def test_linalg_autocast_dtypes_match_torch():
    torch = pytest.importorskip("torch")
    A, S, B = _a(3, 3) + 3 * np.eye(3, dtype=np.float32), _spd(3), _a(3, 2)
    calls = {"inv": lambda m, a, s, b: [m.linalg.inv(a)], "svd": lambda m, a, s, b: list(m.linalg.svd(a)),
             "qr": lambda m, a, s, b: list(m.linalg.qr(a)), "cholesky": lambda m, a, s, b: [m.linalg.cholesky(s)],
             "eigh": lambda m, a, s, b: [m.linalg.eigh(s)[0]], "solve": lambda m, a, s, b: [m.linalg.solve(a, b)],
             "lstsq": lambda m, a, s, b: [m.linalg.lstsq(a, b).solution]}
    for name, f in calls.items():
        res = []
        for m in (torch, md):
            with m.autocast("cpu", dtype=m.bfloat16):
                res.append(f(m, *(m.tensor(v).bfloat16() for v in (A, S, B))))
        for t, mt in zip(*res):
            assert t.dtype == torch.float32 and mt.dtype == md.float32, name
        if name in ("inv", "cholesky", "eigh", "solve", "lstsq"):
            np.testing.assert_allclose(res[1][0].numpy(), res[0][0].numpy(), rtol=1e-4, atol=1e-5)


def _ctc_inputs():
    T, N, C, S = 6, 2, 4, 3
    lp = np.log(_np_softmax(_a(T, N, C), -1)).astype(np.float32)
    return lp, RNG.integers(1, C, (N, S)), np.full(N, T), np.full(N, S)


def test_ctc_loss_bfloat16_under_autocast():
    lp, tg, il, tl = _ctc_inputs()
    args = (md.tensor(tg), md.tensor(il), md.tensor(tl))
    x = md.tensor(lp).bfloat16().requires_grad_()
    with _ac():
        loss = F.ctc_loss(x, *args)
    assert loss.dtype == md.float32
    np.testing.assert_allclose(loss.item(), F.ctc_loss(md.tensor(_bf16(lp)), *args).item(), rtol=1e-6)
    loss.backward()
    assert x.grad.dtype == md.bfloat16
    with pytest.raises(NotImplementedError, match="bfloat16"):
        F.ctc_loss(md.tensor(lp).bfloat16(), *args)
    torch = pytest.importorskip("torch")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        tl_ = torch.nn.functional.ctc_loss(torch.tensor(lp).bfloat16(), *(torch.tensor(v) for v in (tg, il, tl)))
    assert tl_.dtype == torch.float32
    np.testing.assert_allclose(loss.item(), tl_.item(), rtol=1e-5)


def test_grid_sample_mixed_dtypes_under_autocast():
    x, g = _a(1, 2, 4, 4), np.clip(_a(1, 3, 3, 2), -1, 1)
    ref = F.grid_sample(md.tensor(x), md.tensor(_bf16(g)), align_corners=False).numpy()
    with _ac():
        y = F.grid_sample(md.tensor(x), md.tensor(g).bfloat16(), align_corners=False)
        y2 = F.grid_sample(md.tensor(x).bfloat16(), md.tensor(g), align_corners=False)
        with pytest.raises(RuntimeError, match="same dtype"):   # float64 is never cast
            F.grid_sample(md.tensor(x).double(), md.tensor(g).bfloat16(), align_corners=False)
    assert y.dtype == md.float32 and y2.dtype == md.float32
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-6)
    with pytest.raises(RuntimeError, match="same dtype"):
        F.grid_sample(md.tensor(x), md.tensor(g).bfloat16(), align_corners=False)
    torch = pytest.importorskip("torch")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ty = torch.nn.functional.grid_sample(torch.tensor(x), torch.tensor(g).bfloat16(), align_corners=False)
    assert ty.dtype == torch.float32
    np.testing.assert_allclose(y.numpy(), ty.numpy(), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# 6. local_response_norm under autocast

def _np_lrn(a, n, alpha, beta, k):
    sq = np.pad(a.astype(np.float64) ** 2, [(0, 0), (n // 2, (n - 1) // 2)] + [(0, 0)] * (a.ndim - 2))
    s = sum(sq[:, i:i + a.shape[1]] for i in range(n))
    return a / (k + alpha / n * s) ** beta


@pytest.mark.parametrize("shape", [(2, 5, 3, 3), (2, 5, 2, 3, 3)])
def test_local_response_norm_under_autocast(shape):
    dtype = "float32"
    a = _bf16(_a(*shape))
    x = md.tensor(a).bfloat16().requires_grad_()
    with _ac():
        y = F.local_response_norm(x, 3, alpha=0.5)
    assert str(y.dtype).split(".")[-1] == dtype
    np.testing.assert_allclose(y.float().detach().numpy(), _np_lrn(a, 3, 0.5, 0.75, 1.0), rtol=1e-2, atol=1e-2)
    y.sum().backward()
    assert x.grad.dtype == md.bfloat16
    assert F.local_response_norm(md.tensor(a).bfloat16(), 3).dtype == md.bfloat16   # outside autocast
    with _ac():   # a 3-D input goes through avg_pool2d in PyTorch, which has no rule
        assert F.local_response_norm(md.tensor(a.reshape(2, 5, -1)).bfloat16(), 3).dtype == md.bfloat16
    torch = pytest.importorskip("torch")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ty = torch.nn.functional.local_response_norm(torch.tensor(a).bfloat16(), 3, alpha=0.5)
    assert str(ty.dtype).split(".")[-1] == dtype
    np.testing.assert_allclose(y.float().detach().numpy(), ty.float().numpy(), rtol=1e-2, atol=1e-2)
