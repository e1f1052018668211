"""torch.linalg's solve / determinant / inverse / factorisation family (det, slogdet, inv, solve,
solve_triangular, cholesky, lu_factor, lu, lu_solve, matrix_exp, matrix_power, multi_dot, ...) and
their top-level and Tensor-method forms: values against NumPy in float32 and float64, gradients
by gradcheck in float64, PyTorch's errors for singular and malformed input, and values and
gradients against PyTorch where it is installed."""
import numpy as np
import pytest

import minidl as md
from minidl.autograd import gradcheck
from minidl.testing import OpSpec, check_forward, check_gradcheck, forward_cases, spec_id

L = md.linalg
N = 3


def well(rng, shape):
    """Random matrices with the identity's multiple added: well conditioned, det > 0 as a rule."""
    return rng.standard_normal(shape) + shape[-1] * np.eye(shape[-1])


def spd(x):
    """x x^T + n I, symmetric positive-definite, for a Tensor or an array."""
    n = x.shape[-1]
    if isinstance(x, np.ndarray):
        return x @ np.swapaxes(x, -1, -2) + n * np.eye(n)
    return x @ x.mT + n * md.eye(n, dtype=x.dtype)


def expm_reference(a):
    """exp(A): Taylor series of A / 2^8 to 20 terms, squared 8 times."""
    a = a / 256.0
    out = term = np.broadcast_to(np.eye(a.shape[-1]), a.shape).copy()
    for k in range(1, 20):
        term = term @ a / k
        out = out + term
    for _ in range(8):
        out = out @ out
    return out


def mT(a):
    return np.swapaxes(a, -1, -2)


SPECS = [
    OpSpec("det", L.det, np.linalg.det, lambda rng: (well(rng, (2, N, N)),)),
    OpSpec("det_unbatched", lambda a: a.det(), np.linalg.det, lambda rng: (rng.standard_normal((N, N)),)),
    OpSpec("slogdet_logabsdet", lambda a: L.slogdet(a).logabsdet, lambda a: np.linalg.slogdet(a)[1],
           lambda rng: (rng.standard_normal((2, N, N)),)),
    OpSpec("logdet", md.logdet, lambda a: np.log(np.linalg.det(a)), lambda rng: (well(rng, (2, N, N)),)),
    OpSpec("inv", L.inv, np.linalg.inv, lambda rng: (well(rng, (2, N, N)),)),
    OpSpec("inverse_method", lambda a: a.inverse(), np.linalg.inv, lambda rng: (well(rng, (N, N)),)),
    OpSpec("solve_matrix_broadcast", L.solve, np.linalg.solve,
           lambda rng: (well(rng, (N, N)), rng.standard_normal((2, N, 2)))),
    OpSpec("solve_vectors", L.solve, lambda a, b: np.linalg.solve(a, b[..., None])[..., 0],
           lambda rng: (well(rng, (2, N, N)), rng.standard_normal((2, N)))),
    OpSpec("solve_left_false", lambda a, b: L.solve(a, b, left=False), lambda a, b: mT(np.linalg.solve(mT(a), mT(b))),
           lambda rng: (well(rng, (2, N, N)), rng.standard_normal((2, 4, N)))),
    OpSpec("matrix_exp", L.matrix_exp, expm_reference, lambda rng: (rng.standard_normal((2, N, N)),)),
    OpSpec("matrix_exp_large_norm", lambda a: a.matrix_exp(), expm_reference,
           lambda rng: (4 * rng.standard_normal((N, N)),),
           tolerances={"float32": (1e-3, 1e-4)}),
    OpSpec("cholesky", lambda x: L.cholesky(spd(x)), lambda x: np.linalg.cholesky(spd(x)),
           lambda rng: (rng.standard_normal((2, N, N)),)),
    OpSpec("cholesky_upper", lambda x: L.cholesky(spd(x), upper=True), lambda x: mT(np.linalg.cholesky(spd(x))),
           lambda rng: (rng.standard_normal((N, N)),)),
    OpSpec("cholesky_solve", lambda b, c: md.cholesky_solve(b, c.tril()),
           lambda b, c: np.linalg.solve(np.tril(c) @ mT(np.tril(c)), b),
           lambda rng: (rng.standard_normal((2, N, 2)), well(rng, (N, N)))),
    OpSpec("cholesky_solve_upper", lambda b, c: b.cholesky_solve(c.triu(), upper=True),
           lambda b, c: np.linalg.solve(mT(np.triu(c)) @ np.triu(c), b),
           lambda rng: (rng.standard_normal((N, 2)), well(rng, (2, N, N)))),
    OpSpec("cholesky_inverse", lambda c: md.cholesky_inverse(c.tril()),
           lambda c: np.linalg.inv(np.tril(c) @ mT(np.tril(c))),
           lambda rng: (well(rng, (2, N, N)),)),
    OpSpec("matrix_power_5", lambda a: L.matrix_power(a, 5), lambda a: np.linalg.matrix_power(a, 5),
           lambda rng: (rng.standard_normal((2, N, N)) / 2,)),
    OpSpec("matrix_power_neg", lambda a: a.matrix_power(-2), lambda a: np.linalg.matrix_power(a, -2),
           lambda rng: (well(rng, (N, N)),)),
    OpSpec("multi_dot", lambda a, b, c, d: L.multi_dot([a, b, c, d]), lambda *t: np.linalg.multi_dot(t),
           lambda rng: (rng.standard_normal(3), rng.standard_normal((3, 6)), rng.standard_normal((6, 2)),
                        rng.standard_normal((2, 4)))),
    OpSpec("tensorinv", lambda a: L.tensorinv(a, ind=1), lambda a: np.linalg.tensorinv(a, ind=1),
           lambda rng: (well(rng, (6, 6)).reshape(6, 2, 3),)),
    OpSpec("tensorsolve", L.tensorsolve, np.linalg.tensorsolve,
           lambda rng: (well(rng, (6, 6)).reshape(2, 3, 6), rng.standard_normal((2, 3)))),
    OpSpec("vander", lambda x: L.vander(x, N=5), lambda x: np.stack([np.vander(r, 5, increasing=True) for r in x]),
           lambda rng: (rng.standard_normal((2, 4)),)),
    OpSpec("vecdot", L.vecdot, lambda x, y: (x * y).sum(-1),
           lambda rng: (rng.standard_normal((2, 3)), rng.standard_normal(3))),
    OpSpec("cross", L.cross, np.cross, lambda rng: (rng.standard_normal((2, 3)), rng.standard_normal((1, 3)))),
]
for _upper in (False, True):
    for _left in (True, False):
        for _unit in (False, True):
            SPECS.append(OpSpec(
                f"solve_triangular_upper{int(_upper)}_left{int(_left)}_unit{int(_unit)}",
                lambda a, b, u=_upper, lf=_left, un=_unit: L.solve_triangular(a, b, upper=u, left=lf, unitriangular=un),
                lambda a, b, u=_upper, lf=_left, un=_unit: _tri_reference(a, b, u, lf, un),
                lambda rng, lf=_left: (well(rng, (2, N, N)), rng.standard_normal((N, 2) if lf else (2, N)))))
for _left in (True, False):
    for _adjoint in (False, True):
        SPECS.append(OpSpec(
            f"lu_solve_of_lu_factor_left{int(_left)}_adjoint{int(_adjoint)}",
            lambda a, b, lf=_left, ad=_adjoint: L.lu_solve(*L.lu_factor(a), b, left=lf, adjoint=ad),
            lambda a, b, lf=_left, ad=_adjoint: _lu_solve_reference(a, b, lf, ad),
            lambda rng, lf=_left: (rng.standard_normal((2, N, N)), rng.standard_normal((N, 2) if lf else (2, N)))))


def _tri_reference(a, b, upper, left, unit):
    t = np.triu(a) if upper else np.tril(a)
    if unit:
        idx = np.arange(a.shape[-1])
        t[..., idx, idx] = 1
    b = np.broadcast_to(b, t.shape[:-2] + b.shape[-2:])
    return np.linalg.solve(t, b) if left else mT(np.linalg.solve(mT(t), mT(b)))


def _lu_solve_reference(a, b, left, adjoint):
    a = mT(a) if adjoint else a
    b = np.broadcast_to(b, a.shape[:-2] + b.shape[-2:])
    return np.linalg.solve(a, b) if left else mT(np.linalg.solve(mT(a), mT(b)))


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward_matches_numpy(spec, dtype, device):
    check_forward(spec, dtype, device)


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck(spec):
    assert check_gradcheck(spec)


# the LU family: properties, since NumPy has no LU to compare with -------------------------------------
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 5), (2, 5, 3)])
def test_lu_reconstructs_with_partial_pivoting(shape):
    a = np.random.default_rng(0).standard_normal(shape)
    P, Lo, U = L.lu(md.tensor(a))
    k = min(shape[-2:])
    assert P.shape == shape[:-2] + (shape[-2],) * 2 and Lo.shape == shape[:-1] + (k,)
    assert U.shape == shape[:-2] + (k, shape[-1])
    np.testing.assert_allclose((P @ Lo @ U).numpy(), a, atol=1e-12)
    assert np.array_equal(np.triu(Lo.numpy(), 1), np.zeros_like(Lo.numpy()))
    assert np.array_equal(np.tril(U.numpy(), -1), np.zeros_like(U.numpy()))
    assert np.all(np.abs(Lo.numpy()) <= 1)    # partial pivoting: the largest pivot of each column
    LU, piv = L.lu_factor(md.tensor(a))
    assert piv.dtype == md.int32 and piv.shape == shape[:-2] + (k,)
    for got, want in zip(md.lu_unpack(LU, piv), (P, Lo, U)):
        assert np.array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 5), (5, 3)])
def test_lu_and_lu_factor_gradcheck(shape):
    a = md.tensor(np.random.default_rng(1).standard_normal(shape), requires_grad=True)
    assert gradcheck(lambda t: tuple(L.lu(t))[1:], (a,))
    assert gradcheck(lambda t: L.lu_factor(t).LU, (a,))


def test_lu_solve_gradcheck_in_the_packed_factor():
    lu = md.tensor(np.random.default_rng(2).standard_normal((2, N, N)) + 3 * np.eye(N), requires_grad=True)
    piv = md.tensor(np.array([[2, 3, 3], [1, 2, 3]], np.int32))
    b = md.tensor(np.random.default_rng(3).standard_normal((N, 2)), requires_grad=True)
    for left, adjoint in ((True, False), (True, True), (False, False), (False, True)):
        rhs = b if left else b.mT
        assert gradcheck(lambda f, r: L.lu_solve(f, piv, r, left=left, adjoint=adjoint), (lu, rhs))


def test_lu_solve_and_the_older_names():
    rng = np.random.default_rng(4)
    a, b = well(rng, (N, N)), rng.standard_normal((N, 2))
    LU, piv = md.lu(md.tensor(a))
    np.testing.assert_allclose(md.lu_solve(md.tensor(b), LU, piv).numpy(), np.linalg.solve(a, b), rtol=1e-10)
    np.testing.assert_allclose(md.tensor(b).lu_solve(LU, piv).numpy(), np.linalg.solve(a, b), rtol=1e-10)
    x, coef = md.triangular_solve(md.tensor(b), md.tensor(a), upper=False, transpose=True)
    np.testing.assert_allclose(x.numpy(), np.linalg.solve(np.tril(a).T, b), rtol=1e-10)
    assert np.array_equal(coef.numpy(), a)
    np.testing.assert_allclose(md.chain_matmul(md.tensor(a), md.tensor(b)).numpy(), a @ b)
    np.testing.assert_allclose(md.vander(md.tensor([1.0, 2.0, 3.0])).numpy(), np.vander([1.0, 2.0, 3.0]))
    sign, logabs = md.tensor(-a).slogdet()
    np.testing.assert_allclose([sign.item(), logabs.item()], np.linalg.slogdet(-a))


# singular matrices: errors, and the info of the *_ex forms --------------------------------------------
SINGULAR = np.array([[1.0, 2.0], [2.0, 4.0]])
BATCH = np.stack([np.eye(2), SINGULAR])


def test_singular_matrix_errors_name_the_batch_element():
    assert issubclass(L.LinAlgError, RuntimeError)
    with pytest.raises(L.LinAlgError, match=r"linalg.inv: \(Batch element 1\): The diagonal element 2 is zero"):
        L.inv(md.tensor(BATCH))
    with pytest.raises(L.LinAlgError, match=r"^linalg.inv: The diagonal element 2 is zero"):
        md.inverse(md.tensor(SINGULAR))
    with pytest.raises(L.LinAlgError, match=r"linalg.solve: \(Batch element 1\): The solver failed because the input"):
        L.solve(md.tensor(BATCH), md.ones(2, 2, dtype=md.float64))
    with pytest.raises(L.LinAlgError, match=r"U\[2,2\] is zero"):
        L.lu_factor(md.tensor(SINGULAR))
    with pytest.raises(L.LinAlgError, match=r"linalg.inv"):
        L.matrix_power(md.tensor(SINGULAR), -1)
    not_pd = np.stack([np.eye(3), np.diag([1.0, 1.0, -1.0])])
    with pytest.raises(L.LinAlgError, match=r"\(Batch element 1\).*not positive-definite \(the leading minor of order "
                                            r"3 is not positive-definite\)"):
        L.cholesky(md.tensor(not_pd))
    with pytest.raises(RuntimeError, match="order 1"):
        md.tensor(-np.eye(2)).cholesky()


def test_ex_forms_report_info_instead_of_raising():
    inv, info = L.inv_ex(md.tensor(BATCH))
    assert info.dtype == md.int32 and info.tolist() == [0, 2]
    np.testing.assert_array_equal(inv.numpy()[0], np.eye(2))
    assert not np.isfinite(inv.numpy()[1]).all()
    x, info = L.solve_ex(md.tensor(BATCH), md.ones(2, 2, dtype=md.float64))
    assert info.tolist() == [0, 2] and x.numpy()[0].tolist() == [1.0, 1.0]
    factor, info = L.cholesky_ex(md.tensor(np.diag([4.0, 1.0, -1.0])))
    assert info.item() == 3 and factor.numpy()[:2, :2].tolist() == [[2.0, 0.0], [0.0, 1.0]]
    LU, piv, info = L.lu_factor_ex(md.tensor(SINGULAR))
    assert info.item() == 2 and piv.tolist() == [2, 2] and LU.numpy().tolist() == [[2.0, 4.0], [0.5, 0.0]]
    with pytest.raises(L.LinAlgError, match="linalg.inv_ex"):
        L.inv_ex(md.tensor(SINGULAR), check_errors=True)
    with pytest.raises(L.LinAlgError, match="linalg.cholesky_ex"):
        L.cholesky_ex(md.tensor(-np.eye(2)), check_errors=True)
    sign, logabs = L.slogdet(md.tensor(SINGULAR))
    assert sign.item() == 0 and logabs.item() == -np.inf
    assert md.logdet(md.tensor(SINGULAR)).item() == -np.inf and np.isnan(md.logdet(md.tensor(-np.eye(3))).item())


def test_det_gradient_of_a_singular_matrix_is_the_cofactor_matrix():
    a = md.tensor(SINGULAR, requires_grad=True)
    L.det(a).backward()
    np.testing.assert_allclose(a.grad.numpy(), [[4.0, -2.0], [-2.0, 1.0]], atol=1e-12)
    b = md.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 1.0, 1.0]], dtype=md.float64, requires_grad=True)  # rank 2
    assert gradcheck(L.det, (b,))
    c = md.tensor(np.ones((3, 3)), requires_grad=True)   # rank 1: every cofactor is 0
    L.det(c).backward()
    np.testing.assert_allclose(c.grad.numpy(), np.zeros((3, 3)), atol=1e-12)


def test_solve_triangular_with_a_zero_on_the_diagonal_gives_inf_not_an_error():
    x = L.solve_triangular(md.tensor([[0.0, 1.0], [0.0, 1.0]]), md.ones(2, 1), upper=True)
    assert not np.isfinite(x.numpy()).all()


# malformed input -----------------------------------------------------------------------------
@pytest.mark.parametrize("fn, name", [(L.det, "linalg.det"), (L.inv, "linalg.inv"), (L.slogdet, "linalg.slogdet"),
                                      (L.cholesky, "linalg.cholesky"), (L.matrix_exp, "linalg.matrix_exp"),
                                      (lambda a: L.matrix_power(a, 2), "linalg.matrix_power")])
def test_non_square_and_non_float_input(fn, name):
    with pytest.raises(RuntimeError, match=f"{name}: A must be batches of square matrices, but they are 2 by 3"):
        fn(md.zeros(4, 2, 3))
    with pytest.raises(RuntimeError, match=f"{name}: The input tensor A must have at least 2 dimensions"):
        fn(md.zeros(3))
    if name != "linalg.matrix_power":   # integer powers of integer matrices are fine
        with pytest.raises(RuntimeError, match="Expected a floating point or complex tensor as input. Got Long"):
            fn(md.ones(3, 3, dtype=md.int64))
        with pytest.raises(RuntimeError, match="Low precision dtypes not supported. Got Half"):
            fn(md.ones(3, 3, dtype=md.float16))


def test_solve_shape_and_dtype_errors():
    A = md.eye(3, dtype=md.float64)
    with pytest.raises(RuntimeError, match=r"linalg.solve: Incompatible shapes of A and B for the equation AX = B "
                                           r"\(3x3 and 2x2\)"):
        L.solve(A, md.ones(2, 2, dtype=md.float64))
    with pytest.raises(RuntimeError, match=r"XA = B \(3x3 and 3x1\)"):
        L.solve(A, md.ones(3, dtype=md.float64), left=False)
    with pytest.raises(RuntimeError, match="must match the size of tensor b"):
        L.solve(A.expand(2, 3, 3), md.ones(3, 3, 3, dtype=md.float64))
    with pytest.raises(RuntimeError, match="Expected A and B to have the same dtype, but found A of type Double and B "
                                           "of type Float"):
        L.solve(A, md.ones(3))
    with pytest.raises(RuntimeError, match="linalg.solve_triangular: The input tensor B must have at least 2"):
        L.solve_triangular(A, md.ones(3, dtype=md.float64), upper=True)
    with pytest.raises(RuntimeError, match="Incompatible matrix sizes for cholesky_solve"):
        md.cholesky_solve(md.ones(2, 2, dtype=md.float64), A)
    LU, piv = L.lu_factor(A)
    with pytest.raises(RuntimeError, match="pivots should be a Tensor of scalar type int32"):
        L.lu_solve(LU, piv.to(md.int64), md.ones(3, 1, dtype=md.float64))
    with pytest.raises(RuntimeError, match="LU without pivoting is not implemented on the CPU"):
        L.lu_factor(A, pivot=False)
    with pytest.raises(RuntimeError, match=r"Expected tensor with 2 or more dimensions. Got size: \[3\]"):
        L.lu_factor(md.ones(3, dtype=md.float64))


def test_composite_function_errors():
    a23 = md.ones(2, 3)
    with pytest.raises(RuntimeError, match="expected at least 2 tensors but got 1"):
        L.multi_dot([a23])
    with pytest.raises(RuntimeError, match="the first tensor must be 1D or 2D but got 3D"):
        L.multi_dot([md.ones(2, 2, 2), a23])
    with pytest.raises(RuntimeError, match="tensor 1 must be 2D but got 1D"):
        L.multi_dot([a23, md.ones(3), a23])
    with pytest.raises(RuntimeError, match=r"tensors 0 and 1 with shapes \[2, 3\] and \[2, 3\] cannot be multiplied"):
        L.multi_dot([a23, a23])
    with pytest.raises(RuntimeError, match="inputs dimension 0 must have length 3. Got 2 and 2"):
        L.cross(a23, a23, dim=0)
    with pytest.raises(RuntimeError, match=r"prod\(self.shape\[ind:\]\) == prod\(self.shape\[:ind\]\), but got 32 "):
        L.tensorinv(md.ones(4, 6, 8, 4), ind=2)
    with pytest.raises(RuntimeError, match="strictly positive integer for 'ind'"):
        L.tensorinv(md.ones(4, 4), ind=0)
    with pytest.raises(RuntimeError, match="N must be greater than 1"):
        L.vander(md.tensor(1.0))


def test_float32_stays_float32_and_matrix_power_zero_is_connected():
    a = md.tensor(well(np.random.default_rng(5), (N, N)).astype(np.float32), requires_grad=True)
    for out in (L.det(a), L.inv(a), L.solve(a, md.ones(N)), L.cholesky(spd(a)), L.matrix_exp(a), L.lu(a).U,
                L.slogdet(a).logabsdet):
        assert out.dtype == md.float32
    eye = L.matrix_power(a, 0)
    assert eye.requires_grad and np.array_equal(eye.detach().numpy(), np.eye(N))
    eye.sum().backward()
    assert np.array_equal(a.grad.numpy(), np.zeros((N, N)))


def test_tensor_methods_and_linalg_aliases_are_installed():
    for name in ("det", "logdet", "slogdet", "inverse", "cholesky", "cholesky_solve", "cholesky_inverse",
                 "matrix_power", "matrix_exp", "lu", "lu_solve", "triangular_solve"):
        assert callable(getattr(md, name)) and callable(getattr(md.Tensor, name)), name
    for name in ("lu_unpack", "chain_matmul", "vander"):
        assert callable(getattr(md, name)) and not hasattr(md.Tensor, name), name
    a = md.tensor(well(np.random.default_rng(6), (N, N)))
    assert L.matmul(a, a).numpy().tolist() == (a @ a).numpy().tolist()
    assert L.diagonal(a, offset=1).numpy().tolist() == np.diagonal(a.numpy(), 1).tolist()


# against PyTorch ---------------------------------------------------------------------------
def _torch_cases():
    sym = lambda lib: (lambda x: x @ x.mT + N * lib.eye(N, dtype=lib.float64))   # noqa: E731
    return [
        ("det", lambda m: m.linalg.det, ((2, N, N),)),
        ("slogdet", lambda m: m.linalg.slogdet, ((2, N, N),)),
        ("inv", lambda m: m.linalg.inv, ((2, N, N),)),
        ("solve", lambda m: m.linalg.solve, ((N, N), (2, N, 2))),
        ("solve_right", lambda m: lambda a, b: m.linalg.solve(a, b, left=False), ((2, N, N), (4, N))),
        ("solve_triangular", lambda m: lambda a, b: m.linalg.solve_triangular(a, b, upper=False, left=False),
         ((2, N, N), (4, N))),
        ("cholesky", lambda m: lambda x: m.linalg.cholesky(sym(m)(x), upper=True), ((2, N, N),)),
        ("cholesky_solve", lambda m: m.cholesky_solve, ((N, 2), (2, N, N))),
        ("cholesky_inverse", lambda m: lambda x: m.cholesky_inverse(x, upper=True), ((N, N),)),
        ("lu_factor_wide", lambda m: lambda x: m.linalg.lu_factor(x).LU, ((2, 3, 5),)),
        ("lu_tall", lambda m: lambda x: tuple(m.linalg.lu(x)), ((5, 3),)),
        ("lu_solve_adjoint", lambda m: lambda a, b: m.linalg.lu_solve(*m.linalg.lu_factor(a), b, adjoint=True),
         ((2, N, N), (N, 2))),
        ("matrix_exp", lambda m: m.linalg.matrix_exp, ((2, N, N),)),
        ("matrix_power", lambda m: lambda a: m.linalg.matrix_power(a, -3), ((N, N),)),
        ("multi_dot", lambda m: lambda a, b, c: m.linalg.multi_dot([a, b, c]), ((4,), (4, 2), (2, 5))),
        ("tensorsolve", lambda m: lambda a, b: m.linalg.tensorsolve(a, b, dims=(0,)), ((6, 2, 3), (2, 3))),
        ("logdet", lambda m: m.logdet, ((N, N),)),
    ]


@pytest.mark.parametrize("name, fn, shapes", _torch_cases(), ids=[c[0] for c in _torch_cases()])
def test_values_and_gradients_match_torch(name, fn, shapes):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    arrays = [well(rng, s) if len(s) >= 2 and s[-1] == s[-2] else rng.standard_normal(s) for s in shapes]
    ms = [md.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    om, ot = fn(md)(*ms), fn(torch)(*ts)
    om, ot = (tuple(om), tuple(ot)) if isinstance(ot, tuple) else ((om,), (ot,))
    weights = [rng.standard_normal(tuple(o.shape)) for o in ot]
    for o, p in zip(om, ot):
        np.testing.assert_allclose(o.detach().numpy(), p.detach().numpy(), rtol=1e-9, atol=1e-11)
    sum((o * md.tensor(w)).sum() for o, w in zip(om, weights) if o.requires_grad).backward()
    sum((o * torch.tensor(w)).sum() for o, w in zip(ot, weights) if o.requires_grad).backward()
    for m, t in zip(ms, ts):
        np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), rtol=1e-8, atol=1e-10)


def test_empty_matrices_and_batches():
    a = md.zeros(2, 0, 0, dtype=md.float64, requires_grad=True)
    assert L.det(a).tolist() == [1.0, 1.0] and L.inv(a).shape == (2, 0, 0) and L.lu(a).U.shape == (2, 0, 0)
    L.det(a).sum().backward()
    assert a.grad.shape == (2, 0, 0)
    b = md.zeros(0, 3, 3, dtype=md.float64)
    assert L.lu_factor(b).pivots.shape == (0, 3) and L.cholesky(b).shape == (0, 3, 3)
