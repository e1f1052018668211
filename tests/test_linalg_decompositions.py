"""minidl.linalg's decompositions (qr, eigh, eigvalsh, svd, svdvals, pinv, lstsq, matrix_rank, cond,
householder_product) and the top-level torch.svd/qr/pinverse/geqrf/orgqr: values against NumPy,
gradients by gradcheck in float64 (of losses that do not depend on the signs of eigenvectors or
singular vectors), PyTorch's errors, and PyTorch as the oracle for values and gradients."""
import math

import numpy as np
import pytest

import minidl as md
from minidl.autograd import gradcheck
from minidl.testing import OpSpec, check_forward, check_gradcheck, forward_cases, spec_id

L = md.linalg


def _sym(a):
    return a + a.mT


def _np_sym(a):
    return a + np.swapaxes(a, -1, -2)


def _np_householder(a, tau):
    m, n = a.shape
    q = np.eye(m)[:, :n]
    for i in reversed(range(tau.shape[-1])):
        v = np.concatenate([np.zeros(i), [1.0], a[i + 1:, i]])[:, None]
        q = q - tau[i] * v @ (v.T @ q)
    return q


def _svd_invariants(a, full_matrices=False):
    """S, |U|, |Vh| and the projector U_k U_k^T: determined by A when its singular values are
    distinct (a column's sign is not)."""
    U, S, Vh = L.svd(a, full_matrices=full_matrices)
    k = S.shape[-1]
    return S, U[..., :k].abs(), Vh[..., :k, :].abs(), U[..., :k] @ U[..., :k].mT


def _np_svd_invariants(a, full_matrices=False):
    U, S, Vh = np.linalg.svd(a, full_matrices=full_matrices)
    k = S.shape[-1]
    return S, np.abs(U[..., :k]), np.abs(Vh[..., :k, :]), U[..., :k] @ np.swapaxes(U[..., :k], -1, -2)


def _gaussian(*shapes):
    return lambda rng: tuple(rng.standard_normal(s) for s in shapes)


SPECS = [
    *[OpSpec(f"svd_{'x'.join(map(str, s))}{'_full' if full else ''}", lambda a, f=full: _svd_invariants(a, f),
             lambda a, f=full: _np_svd_invariants(a, f), _gaussian(s))
      for s, full in [((5, 3), False), ((3, 5), False), ((2, 4, 4), False), ((5, 3), True), ((3, 5), True)]],
    OpSpec("svd_reconstructs", lambda a: (lambda r: (r.U * r.S.unsqueeze(-2)) @ r.Vh)(L.svd(a, False)),
           lambda a: a, _gaussian((2, 4, 3))),
    OpSpec("svdvals", L.svdvals, lambda a: np.linalg.svd(a, compute_uv=False), _gaussian((2, 3, 5))),
    *[OpSpec(f"qr_{mode}_{'x'.join(map(str, s))}", lambda a, m=mode: tuple(L.qr(a, m)),
             lambda a, m=mode: np.linalg.qr(a, m), _gaussian(s))
      for s, mode in [((5, 3), "reduced"), ((3, 5), "reduced"), ((2, 4, 4), "reduced"), ((3, 5), "complete")]],
    OpSpec("eigh_L", lambda a: (lambda r: (r.eigenvalues, r.eigenvectors.abs()))(L.eigh(_sym(a))),
           lambda a: (lambda w, v: (w, np.abs(v)))(*np.linalg.eigh(_np_sym(a))), _gaussian((2, 4, 4))),
    OpSpec("eigh_U", lambda a: (lambda r: (r.eigenvalues, r.eigenvectors.abs()))(L.eigh(_sym(a), UPLO="U")),
           lambda a: (lambda w, v: (w, np.abs(v)))(*np.linalg.eigh(_np_sym(a), UPLO="U")), _gaussian((4, 4))),
    OpSpec("eigvalsh", lambda a: L.eigvalsh(_sym(a)), lambda a: np.linalg.eigvalsh(_np_sym(a)), _gaussian((3, 3))),
    *[OpSpec(f"pinv_{'x'.join(map(str, s))}", L.pinv, np.linalg.pinv, _gaussian(s))
      for s in [(5, 3), (3, 5), (2, 3, 3)]],
    OpSpec("pinv_hermitian", lambda a: L.pinv(_sym(a), hermitian=True),
           lambda a: np.linalg.pinv(_np_sym(a), hermitian=True), _gaussian((2, 4, 4))),
    OpSpec("lstsq_tall", lambda a, b: tuple(L.lstsq(a, b, driver="gelsd")[:2]),
           lambda a, b: np.linalg.lstsq(a, b)[:2], _gaussian((6, 3), (6, 2))),
    OpSpec("lstsq_wide", lambda a, b: L.lstsq(a, b).solution, lambda a, b: np.linalg.lstsq(a, b)[0],
           _gaussian((3, 5), (3, 2))),
    *[OpSpec(f"cond_{p}", lambda a, p=p: L.cond(a, p), lambda a, p=p: np.linalg.cond(a, p), _gaussian((2, 4, 4)))
      for p in (None, 2, -2, "fro", "nuc", math.inf, -math.inf, 1, -1)],
    OpSpec("cond_rectangular", L.cond, lambda a: np.linalg.cond(a), _gaussian((5, 3))),
    OpSpec("householder_product", L.householder_product, _np_householder,
           lambda rng: (rng.standard_normal((5, 3)), rng.random(2) + 0.5)),
]


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward_matches_numpy(spec, dtype, device):
    check_forward(spec, dtype, device)


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck(spec):
    assert check_gradcheck(spec)


def test_gradients_of_unused_outputs_and_of_the_eigenvalues_alone():
    a = md.tensor(np.random.default_rng(0).standard_normal((4, 3)), requires_grad=True)
    assert gradcheck(lambda t: L.svd(t, full_matrices=False).S, (a,))
    assert gradcheck(lambda t: L.qr(t).R, (a,))
    assert gradcheck(lambda t: L.qr(t).Q, (a,))
    s = md.tensor(np.random.default_rng(1).standard_normal((3, 3)), requires_grad=True)
    assert gradcheck(lambda t: L.eigh(_sym(t)).eigenvalues, (s,))


def test_svdvals_gradient_is_finite_for_repeated_singular_values():
    a = md.eye(3, dtype=md.float64).requires_grad_(True)
    L.svdvals(a).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), np.eye(3))


# values by hand and PyTorch's result structure -------------------------------------------------------
def test_named_tuples_shapes_and_dtypes():
    a = md.randn(2, 5, 3)
    q, r = L.qr(a)
    assert (q.shape, r.shape) == ((2, 5, 3), (2, 3, 3)) and type(L.qr(a)).__name__ == "linalg_qr"
    assert [t.shape for t in L.qr(a, "complete")] == [(2, 5, 5), (2, 5, 3)]
    q, r = L.qr(a, mode="r")
    assert q.shape == (0,) and r.shape == (2, 3, 3)
    U, S, Vh = L.svd(a)
    assert (U.shape, S.shape, Vh.shape) == ((2, 5, 5), (2, 3), (2, 3, 3)) and U.dtype == md.float32
    assert L.svd(a).Vh is not None and type(L.svd(a)).__name__ == "linalg_svd"
    w, v = L.eigh(md.eye(3))
    assert w.tolist() == [1.0, 1.0, 1.0] and type(L.eigh(md.eye(3))).__name__ == "linalg_eigh"
    assert L.eigh(md.eye(3)).eigenvectors.shape == (3, 3)
    assert L.pinv(a).shape == (2, 3, 5) and L.pinv(md.zeros(0, 4)).shape == (4, 0)


def test_eigh_reads_only_the_named_triangle():
    a = np.array([[2.0, 100.0], [1.0, 3.0]])
    lower = L.eigvalsh(md.tensor(a)).numpy()
    upper = L.eigvalsh(md.tensor(a), UPLO="U").numpy()
    np.testing.assert_allclose(lower, np.linalg.eigvalsh([[2.0, 1.0], [1.0, 3.0]]))
    np.testing.assert_allclose(upper, np.linalg.eigvalsh([[2.0, 100.0], [100.0, 3.0]]))


def test_eigh_gradient_is_symmetric():
    a = md.tensor(np.random.default_rng(2).standard_normal((4, 4)), requires_grad=False)
    s = _sym(a).detach().requires_grad_(True)
    w, v = L.eigh(s)
    (w ** 3).sum().backward()
    g = s.grad.numpy()
    np.testing.assert_allclose(g, g.T, atol=1e-12)


def test_pinv_tolerances_and_rank():
    a = md.tensor(np.diag([4.0, 1.0, 1e-3]))
    np.testing.assert_allclose(L.pinv(a).numpy(), np.diag([0.25, 1.0, 1e3]))
    np.testing.assert_allclose(L.pinv(a, atol=0.01).numpy(), np.diag([0.25, 1.0, 0.0]))
    np.testing.assert_allclose(L.pinv(a, rtol=0.5).numpy(), np.diag([0.25, 0.0, 0.0]))
    np.testing.assert_allclose(L.pinv(a, 0.5).numpy(), np.diag([0.25, 0.0, 0.0]))   # rcond
    np.testing.assert_allclose(md.pinverse(a, 0.5).numpy(), np.diag([0.25, 0.0, 0.0]))
    batch = md.tensor(np.stack([np.diag([4.0, 1.0, 1e-3])] * 2))
    out = L.pinv(batch, atol=md.tensor([0.01, 2.0], dtype=md.float64)).numpy()
    np.testing.assert_allclose(out[1], np.diag([0.25, 0.0, 0.0]))
    assert L.matrix_rank(a).item() == 3 and L.matrix_rank(a, atol=0.01).item() == 2
    assert L.matrix_rank(a, rtol=0.5).item() == 1 and L.matrix_rank(a, 0.01).item() == 2   # tol
    assert L.matrix_rank(md.tensor(np.diag([-5.0, 1.0, 0.0])), hermitian=True).item() == 2
    r = L.matrix_rank(md.zeros(2, 4, 3))
    assert r.dtype == md.int64 and r.tolist() == [0, 0]
    x = np.random.default_rng(3).standard_normal((6, 4)) @ np.random.default_rng(4).standard_normal((4, 5))
    assert L.matrix_rank(md.tensor(x)).item() == np.linalg.matrix_rank(x) == 4


def test_lstsq_drivers_follow_pytorch():
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((6, 3)), rng.standard_normal((6, 2))
    x, res, _, sv = np.linalg.lstsq(a, b)
    A, B = md.tensor(a), md.tensor(b)
    out = L.lstsq(A, B)                       # gelsy: the rank, no residuals or singular values
    assert type(out).__name__ == "linalg_lstsq"
    np.testing.assert_allclose(out.solution.numpy(), x, atol=1e-12)
    assert out.residuals.shape == (0,) and out.rank.item() == 3 and out.singular_values.shape == (0,)
    out = L.lstsq(A, B, driver="gels")        # QR: residuals, no rank
    np.testing.assert_allclose(out.residuals.numpy(), res)
    assert out.rank.shape == (0,) and out.rank.dtype == md.int64 and out.singular_values.shape == (0,)
    for driver in ("gelsd", "gelss"):
        out = L.lstsq(A, B, driver=driver)
        np.testing.assert_allclose(out.residuals.numpy(), res)
        np.testing.assert_allclose(out.singular_values.numpy(), sv)
        assert not out.rank.requires_grad and out.rank.item() == 3
    deficient = md.tensor(np.concatenate([a[:, :2], a[:, :1]], axis=1))
    out = L.lstsq(deficient, B, driver="gelsd")   # rank 2 < n: the minimum-norm solution, no residuals
    assert out.rank.item() == 2 and out.residuals.shape == (0,)
    np.testing.assert_allclose(out.solution.numpy(), np.linalg.pinv(deficient.numpy()) @ b, atol=1e-12)
    small = md.tensor(np.diag([1.0, 1e-3, 1e-8]))
    out = L.lstsq(small, md.ones(3, 1, dtype=md.float64), rcond=1e-5, driver="gelsd")
    assert out.rank.item() == 2 and out.solution.flatten().tolist() == pytest.approx([1.0, 1000.0, 0.0])


def test_lstsq_vectors_and_batches():
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 5))
    out = L.lstsq(md.tensor(a), md.tensor(b), driver="gelsd")
    assert out.solution.shape == (2, 3) and out.residuals.shape == (2, 1) and out.rank.shape == (2,)
    np.testing.assert_allclose(out.solution.numpy()[1], np.linalg.lstsq(a[1], b[1])[0])
    out = L.lstsq(md.tensor(a[:1]), md.tensor(rng.standard_normal((4, 5, 2))), driver="gelsd")
    assert out.solution.shape == (4, 3, 2) and out.residuals.shape == (4, 2)
    assert out.rank.shape == (1,) and out.singular_values.shape == (1, 3)
    A = md.tensor(a[:1], requires_grad=True)
    B = md.tensor(rng.standard_normal((4, 5, 2)), requires_grad=True)
    assert gradcheck(lambda x, y: tuple(L.lstsq(x, y, driver="gels")[:2]), (A, B))


def test_cond_special_values():
    assert L.cond(md.zeros(0, 0)).item() == 0.0 and L.cond(md.zeros(2, 0, 0), 1).tolist() == [0.0, 0.0]
    z = md.zeros(3, 3, dtype=md.float64)
    for p in ("fro", 1, -1, math.inf, -math.inf):
        assert L.cond(z, p).item() == math.inf
    assert math.isnan(L.cond(z).item()) and math.isnan(L.cond(z, "nuc").item())
    singular = md.tensor([[1.0, 2.0], [2.0, 4.0]])
    assert L.cond(singular, 1).item() == math.inf


def test_householder_product_of_geqrf_is_q():
    a = np.random.default_rng(7).standard_normal((2, 5, 3))
    h, tau = md.geqrf(md.tensor(a))
    assert type(md.geqrf(md.tensor(a))).__name__ == "geqrf" and tau.shape == (2, 3)
    q = np.linalg.qr(a)[0]
    np.testing.assert_allclose(L.householder_product(h, tau).numpy(), q, atol=1e-12)
    np.testing.assert_allclose(md.orgqr(h, tau).numpy(), q, atol=1e-12)
    np.testing.assert_allclose(h.orgqr(tau).numpy(), q, atol=1e-12)
    np.testing.assert_allclose(np.triu(h.numpy())[:, :3], np.linalg.qr(a, mode="r"), atol=1e-12)


def test_top_level_svd_qr_and_tensor_methods():
    a = np.random.default_rng(8).standard_normal((5, 3))
    t = md.tensor(a)
    U, S, V = md.svd(t)
    assert type(md.svd(t)).__name__ == "svd" and V.shape == (3, 3)
    np.testing.assert_allclose(((U * S) @ V.mT).numpy(), a, atol=1e-12)
    assert [x.shape for x in md.svd(t, some=False)] == [(5, 5), (3,), (3, 3)]
    U, S, V = t.svd(compute_uv=False)
    assert (U.shape, V.shape) == ((5, 5), (3, 3)) and not U.numpy().any() and not V.numpy().any()
    np.testing.assert_allclose(S.numpy(), np.linalg.svd(a, compute_uv=False))
    q, r = t.qr()
    assert type(md.qr(t)).__name__ == "qr"
    np.testing.assert_allclose((q @ r).numpy(), a, atol=1e-12)
    assert [x.shape for x in md.qr(t, some=False)] == [(5, 5), (5, 3)]
    np.testing.assert_allclose(t.pinverse().numpy(), np.linalg.pinv(a), atol=1e-12)
    assert t.geqrf().tau.shape == (3,)


# errors ---------------------------------------------------------------------------------------------
A53 = md.randn(5, 3)


@pytest.mark.parametrize("call, exc, match", [
    (lambda: L.qr(md.randn(3)), RuntimeError, "linalg.qr: The input tensor A must have at least 2 dimensions"),
    (lambda: L.svd(md.ones(3, 3, dtype=md.int64)), RuntimeError, "Expected a floating point .* Got Long"),
    (lambda: L.svd(md.ones(3, 3, dtype=md.float16)), NotImplementedError, "linalg_svd_cpu.*Half"),
    (lambda: L.qr(A53, mode="x"), RuntimeError, "unrecognized mode 'x'"),
    (lambda: L.eigh(A53), RuntimeError, "square matrices, but they are 5 by 3"),
    (lambda: L.eigvalsh(md.eye(3), UPLO="X"), RuntimeError, "UPLO argument to be 'L' or 'U', but got X"),
    (lambda: L.svd(A53, driver="gesvd"), RuntimeError, "driver=` is only supported on CUDA"),
    (lambda: L.svdvals(md.randn(3)), RuntimeError, "at least 2 dimensions"),
    (lambda: L.pinv(md.randn(3)), RuntimeError, r"linalg.pinv\(Float\{\[3\]\}\): expected a tensor with 2 or more"),
    (lambda: L.pinv(A53, hermitian=True), RuntimeError, "square matrices"),
    (lambda: L.lstsq(A53, md.randn(5, 2, dtype=md.float64)), RuntimeError, "same dtype, but got input's dtype Float"),
    (lambda: L.lstsq(A53, md.randn(4, 2)), RuntimeError, r"input.size\(-2\) should match other.size\(-2\)"),
    (lambda: L.lstsq(A53, md.randn(5, 2), driver="foo"), RuntimeError, "driver` should be one of"),
    (lambda: L.lstsq(md.randn(3), md.randn(3)), RuntimeError, "input must have at least 2 dimensions"),
    (lambda: L.lstsq(A53, md.randn(1, 1, 5, 2)), RuntimeError, "input.dim\\(\\) must be greater or equal"),
    (lambda: L.matrix_rank(md.randn(3)), RuntimeError, "at least 2 dimensions"),
    (lambda: L.cond(A53, 3), RuntimeError, "linalg.cond got an invalid norm type: 3"),
    (lambda: L.cond(A53, "fro"), RuntimeError, r"linalg.cond\(ord=fro\): A must be batches of square matrices"),
    (lambda: L.cond(A53, -math.inf), RuntimeError, r"linalg.cond\(ord=-inf\)"),
    (lambda: L.cond(md.randn(3)), RuntimeError, "linalg.cond: The input tensor must have at least 2 dimensions"),
    (lambda: L.householder_product(md.randn(3, 5), md.randn(2)), RuntimeError, "input.shape\\[-2\\] must be greater"),
    (lambda: L.householder_product(A53, md.randn(4)), RuntimeError, "must be greater than or equal to tau.shape"),
    (lambda: L.householder_product(A53, md.randn(2, 2)), RuntimeError, "batch dimensions of tau"),
    (lambda: L.householder_product(A53, md.randn(2, dtype=md.float64)), RuntimeError, "tau dtype Double does not"),
    (lambda: L.eig(A53), NotImplementedError, "complex numbers"),
    (lambda: L.eigvals(A53), NotImplementedError, "complex numbers"),
])
def test_bad_input_raises_like_pytorch(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_backward_that_pytorch_refuses():
    a = md.randn(4, 3, dtype=md.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="depends on Q, which is not computed when mode='r'"):
        L.qr(a, mode="r").R.sum().backward()
    with pytest.raises(RuntimeError, match="not differentiable when mode='complete' and nrows > ncols"):
        L.qr(a, mode="complete").R.sum().backward()
    with pytest.raises(NotImplementedError, match="derivative for 'geqrf' is not implemented"):
        md.geqrf(a).a.sum().backward()


def test_cuda_tensors_are_refused_naming_the_function_and_device():
    from minidl import backends
    try:
        backends.get("cuda")
    except RuntimeError as exc:
        pytest.skip(f"cuda device unavailable: {exc}")
    x = md.randn(3, 3, device="cuda")
    for name, call in [("linalg.svd", L.svd), ("linalg.qr", L.qr), ("linalg.eigh", L.eigh), ("linalg.pinv", L.pinv),
                       ("linalg.lstsq", lambda t: L.lstsq(t, t)), ("linalg.cond", L.cond)]:
        with pytest.raises(NotImplementedError, match=f"{name} is not implemented for device 'cuda"):
            call(x)


# PyTorch as the oracle --------------------------------------------------------------------------------
def _both(torch, fn_md, fn_torch, arrays):
    tm = [md.tensor(a, requires_grad=True) for a in arrays]
    tt = [torch.tensor(a, requires_grad=True) for a in arrays]
    om, ot = fn_md(*tm), fn_torch(*tt)
    np.testing.assert_allclose(om.detach().numpy(), ot.detach().numpy(), rtol=1e-9, atol=1e-10)
    w = np.random.default_rng(0).standard_normal(tuple(ot.shape))
    (om * md.tensor(w)).sum().backward()
    (ot * torch.tensor(w)).sum().backward()
    for a, b in zip(tm, tt):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-8, atol=1e-10)


def _gauge_free(mod, which):
    """Functions of each decomposition that do not depend on the vectors' signs."""
    return {
        "svd": lambda a: (lambda r: r.U.abs().sum(-2) + (r.Vh.abs() * 2).sum(-1) + r.S ** 2)(
            mod.linalg.svd(a, full_matrices=False)),
        "svd_full": lambda a: (lambda r: (r.U[..., :2] @ r.U[..., :2].mT).sum(-1) + r.S.sum(-1, keepdim=True))(
            mod.linalg.svd(a)),
        "qr": lambda a: (lambda r: r.Q.sum(-1) + (r.R ** 2).sum(-1).sum(-1, keepdim=True))(mod.linalg.qr(a)),
        "eigh": lambda a: (lambda r: r.eigenvectors.abs() * r.eigenvalues.unsqueeze(-2) ** 2)(
            mod.linalg.eigh(a + a.mT)),
        "eigvalsh_U": lambda a: mod.linalg.eigvalsh(a + a.mT, UPLO="U") ** 3,
        "pinv": lambda a: mod.linalg.pinv(a),
        "pinv_hermitian": lambda a: mod.linalg.pinv(a + a.mT, hermitian=True),
        "cond": lambda a: mod.linalg.cond(a),
        "cond_nuc": lambda a: mod.linalg.cond(a[..., :3, :3], "nuc"),
        "svdvals": lambda a: mod.linalg.svdvals(a),
    }[which]


@pytest.mark.parametrize("which", ["svd", "svd_full", "qr", "eigh", "eigvalsh_U", "pinv", "pinv_hermitian", "cond",
                                   "cond_nuc", "svdvals"])
@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (2, 4, 4)])
def test_matches_torch_values_and_gradients(which, shape):
    torch = pytest.importorskip("torch")
    if which in ("eigh", "eigvalsh_U", "pinv_hermitian") and shape[-1] != shape[-2]:
        pytest.skip("a symmetric matrix is square")
    a = np.random.default_rng(9).standard_normal(shape)
    _both(torch, _gauge_free(md, which), _gauge_free(torch, which), [a])


@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
@pytest.mark.parametrize("sa, sb", [((5, 3), (5, 2)), ((3, 5), (3, 2)), ((5, 3), (5,)), ((1, 5, 3), (2, 5, 2))])
def test_lstsq_matches_torch(driver, sa, sb):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(10)
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    _both(torch, lambda x, y: L.lstsq(x, y, driver=driver).solution,
          lambda x, y: torch.linalg.lstsq(x, y, driver=driver).solution, [a, b])
    got, want = L.lstsq(md.tensor(a), md.tensor(b), driver=driver), torch.linalg.lstsq(torch.tensor(a),
                                                                                         torch.tensor(b), driver=driver)
    for field in ("residuals", "rank", "singular_values"):
        g, w = getattr(got, field).numpy(), getattr(want, field).numpy()
        assert g.shape == w.shape and g.dtype == w.dtype, field
        np.testing.assert_allclose(g, w, rtol=1e-9)
    if want.residuals.numel():
        _both(torch, lambda x, y: L.lstsq(x, y, driver=driver).residuals,
              lambda x, y: torch.linalg.lstsq(x, y, driver=driver).residuals, [a, b])


def test_householder_geqrf_and_top_level_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    a, tau = rng.standard_normal((2, 5, 3)), rng.random((2, 3))
    _both(torch, L.householder_product, torch.linalg.householder_product, [a, tau])
    for got, want in zip(md.geqrf(md.tensor(a)), torch.geqrf(torch.tensor(a))):
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-12)
    _both(torch, lambda x: (lambda r: (r.U[..., :3] * r.S.unsqueeze(-2)) @ r.V.mT)(md.svd(x, some=False)),
          lambda x: (lambda r: (r.U[..., :3] * r.S.unsqueeze(-2)) @ r.V.mT)(torch.svd(x, some=False)), [a])
    _both(torch, lambda x: md.pinverse(x, 0.3), lambda x: torch.pinverse(x, 0.3), [a])
    for p in (None, 2, -2, "fro", "nuc", math.inf, -math.inf, 1, -1):
        np.testing.assert_allclose(L.cond(md.tensor(a[:, :3]), p).numpy(),
                                   torch.linalg.cond(torch.tensor(a[:, :3]), p).numpy(), rtol=1e-10)
