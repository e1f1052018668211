"""PyTorch's further tensor functions: arranging (movedim, the stacks, tensor_split, take, rot90,
diff, cross, kron, tensordot, diag_embed...), index writes (index_copy, masked_scatter, put,
scatter_reduce), statistics (nansum, cummax, logcumsumexp, quantile, cov, histc, bincount,
searchsorted...), bitwise logic, dtype promotion queries, and the dtype rules of full, clamp,
sum and softmax. Values by hand or NumPy, gradients by gradcheck in float64, PyTorch's results
where it is installed."""
import numpy as np
import pytest

import minidl as md
from minidl.autograd import gradcheck

RNG = np.random.default_rng(7)
A = RNG.standard_normal((3, 4))


def _x(shape=(3, 4), seed=0):
    return md.tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=True)


# dtype rules ------------------------------------------------------------------------------------
def test_full_infers_its_dtype_from_the_fill_value():
    assert md.full((2,), 3).dtype == md.int64
    assert md.full((2,), True).dtype == md.bool
    assert md.full((2,), 1.5).dtype == md.float32
    assert md.full((2,), 3, dtype=md.float64).dtype == md.float64


def test_clamping_an_integer_tensor_at_a_float_bound_promotes_it():
    i = md.tensor([3, 1, -2])
    assert i.clamp(min=0.5).tolist() == [3.0, 1.0, 0.5] and i.clamp(min=0.5).dtype == md.float32
    assert i.clamp(0, 2).tolist() == [2, 1, 0] and i.clamp(0, 2).dtype == md.int64


def test_sum_mean_and_softmax_take_a_dtype_and_integer_sums_are_int64():
    i32 = md.tensor([1, 2], dtype=md.int32)
    assert i32.sum().dtype == md.int64 and md.tensor([True, True]).sum().item() == 2
    assert i32.sum(dtype=md.float32).dtype == md.float32
    assert md.ones(3).mean(dtype=md.float64).dtype == md.float64
    assert md.ones(2, 3).softmax(1, dtype=md.float64).dtype == md.float64
    assert md.ones(2, 3).log_softmax(-1, md.float64).dtype == md.float64


def test_selections_along_the_only_dim_of_a_vector_give_zero_dim_indices():
    x = md.tensor([1.0, 3.0, 2.0, 3.0])
    for result in (x.max(0), x.min(0), x.kthvalue(2), x.median(0), x.mode()):
        assert result.values.shape == () and result.indices.shape == ()
    assert x.max(0).indices.item() == 1 and x.mode().indices.item() == 3


def test_activations_of_a_zero_dim_tensor_keep_its_shape():
    x = md.tensor(0.5, requires_grad=True)
    for f in (md.nn.functional.gelu, md.nn.functional.relu, md.nn.functional.silu):
        y = f(x)
        y.backward()
        assert y.shape == () and x.grad.shape == ()
        x.grad = None


# bitwise logic ----------------------------------------------------------------------------------
def test_bitwise_operators_on_integers_and_bools():
    assert (md.tensor([1, 2]) & md.tensor([3, 1])).tolist() == [1, 0]
    assert (md.tensor([5, 2]) | 8).tolist() == [13, 10]
    assert (md.tensor([5, 2]) ^ 3).tolist() == [6, 1]
    assert (~md.tensor([5, -1])).tolist() == [-6, 0]
    assert (~md.tensor([True, False])).tolist() == [False, True]
    assert (md.tensor([5, 2]) << 2).tolist() == [20, 8] and (md.tensor([-5, 8]) >> 1).tolist() == [-3, 4]
    assert (3 & md.tensor([1, 2])).tolist() == [1, 2]
    m = md.tensor([True, False]) & True
    assert m.dtype == md.bool and m.tolist() == [True, False]
    assert (md.tensor([True]) & 3).tolist() == [1]
    assert md.bitwise_not(md.tensor([0, 1], dtype=md.uint8)).tolist() == [255, 254]


def test_bitwise_logic_refuses_floats():
    with pytest.raises(TypeError, match="integer or bool"):
        md.tensor([1.0]) & md.tensor([1.0])
    with pytest.raises(TypeError, match="integer or bool"):
        ~md.tensor([1.0])


# arranging ---------------------------------------------------------------------------------------
def test_movedim_and_stacks():
    assert md.movedim(md.ones(2, 3, 4), (0, 1), (2, 0)).shape == (3, 4, 2)
    assert md.ones(2, 3, 4).moveaxis(-1, 0).shape == (4, 2, 3)
    assert md.hstack([md.ones(3), md.zeros(2)]).tolist() == [1, 1, 1, 0, 0]
    assert md.vstack([md.ones(2, 3), md.zeros(3)]).shape == (3, 3)
    assert md.dstack([md.ones(2, 3), md.zeros(2, 3)]).shape == (2, 3, 2)
    assert md.column_stack([md.ones(3), md.zeros(3, 2)]).shape == (3, 3)
    assert md.atleast_3d(md.ones(3)).shape == (1, 3, 1) and md.atleast_2d(md.tensor(1.0)).shape == (1, 1)


def test_tensor_split_by_sections_and_by_indices():
    x = md.arange(7)
    assert [t.tolist() for t in x.tensor_split(3)] == [[0, 1, 2], [3, 4], [5, 6]]
    assert [t.tolist() for t in x.tensor_split([1, 5])] == [[0], [1, 2, 3, 4], [5, 6]]
    assert [t.tolist() for t in x.tensor_split([5, 1])] == [[0, 1, 2, 3, 4], [], [1, 2, 3, 4, 5, 6]]
    m = md.ones(2, 5)
    parts = m.tensor_split(2, 1)
    assert [p.shape for p in parts] == [(2, 3), (2, 2)] and np.shares_memory(parts[1].numpy(), m.numpy())


def test_select_take_and_take_along_dim():
    x = md.tensor(A)
    assert np.array_equal(x.select(0, -1).numpy(), A[-1])
    assert np.array_equal(x.take(md.tensor([[0, 11], [3, 4]])).numpy(), A.reshape(-1)[[[0, 11], [3, 4]]])
    idx = np.array([[0], [2], [1]])
    assert np.array_equal(x.take_along_dim(md.tensor(idx), 1).numpy(), np.take_along_axis(A, idx, 1))
    row = np.array([[0, 1]])       # broadcast over the rows
    assert np.array_equal(x.take_along_dim(md.tensor(row), 1).numpy(), A[:, :2])
    with pytest.raises(IndexError):
        x.select(1, 4)


def test_rotations_flips_diff_and_trace():
    x = md.tensor(A)
    for k in (-1, 0, 1, 2, 3, 5):
        assert np.array_equal(x.rot90(k).numpy(), np.rot90(A, k))
    assert np.array_equal(x.rot90(1, (1, 0)).numpy(), np.rot90(A, 1, (1, 0)))
    assert np.array_equal(x.fliplr().numpy(), A[:, ::-1]) and np.array_equal(x.flipud().numpy(), A[::-1])
    assert np.array_equal(x.flip(0, 1).numpy(), A[::-1, ::-1])
    assert np.allclose(x.diff().numpy(), np.diff(A))
    assert np.allclose(x.diff(2, 0).numpy(), np.diff(A, 2, 0))
    got = x.diff(dim=1, prepend=md.zeros(3, 1, dtype=md.float64), append=md.ones(3, 2, dtype=md.float64))
    assert np.allclose(got.numpy(), np.diff(A, axis=1, prepend=0, append=np.ones((3, 2))))
    assert md.tensor([True, False, False]).diff().tolist() == [True, False]
    assert x[:, :3].trace().item() == pytest.approx(np.trace(A[:, :3]))


def test_products():
    a, b = A[:, :3], A[:, 1:]
    assert np.allclose(md.cross(md.tensor(a), md.tensor(b), dim=1).numpy(), np.cross(a, b))
    assert np.allclose(md.kron(md.tensor(A[:2, :2]), md.tensor(A[1:, :3])).numpy(), np.kron(A[:2, :2], A[1:, :3]))
    assert np.allclose(md.tensordot(md.tensor(A), md.tensor(A), dims=([1], [1])).numpy(), A @ A.T)
    assert md.tensordot(md.ones(2, 3, 4), md.ones(3, 4, 5)).shape == (2, 5)
    assert md.tensordot(md.ones(2, 3), md.ones(4, 5), 0).shape == (2, 3, 4, 5)
    assert np.allclose(md.inner(md.tensor(A), md.tensor(A)).numpy(), A @ A.T)
    v = np.arange(4.0)
    assert np.allclose(md.mv(md.tensor(A), md.tensor(v)).numpy(), A @ v)
    assert np.allclose(md.addmv(md.ones(3, dtype=md.float64), md.tensor(A), md.tensor(v), beta=0.5, alpha=2).numpy(),
                       0.5 + 2 * A @ v)
    assert np.allclose(md.addr(md.zeros(2, 3), md.ones(2), md.arange(3.0), alpha=3).numpy(),
                       3 * np.outer([1, 1], [0, 1, 2]))
    bd = md.block_diag(md.ones(2, 2), md.tensor(5.0), md.arange(3.0))
    assert bd.shape == (4, 6) and bd[2, 2].item() == 5.0 and bd[3, 3:].tolist() == [0, 1, 2] and bd[0, 2:].sum() == 0
    assert md.cartesian_prod(md.arange(2), md.arange(3)).tolist() == [[i, j] for i in range(2) for j in range(3)]
    assert md.combinations(md.arange(4), 3).tolist() == [[0, 1, 2], [0, 1, 3], [0, 2, 3], [1, 2, 3]]


def test_diag_embed_diagflat_and_triangle_indices():
    v = A[:2, :3]
    e = md.diag_embed(md.tensor(v))
    assert e.shape == (2, 3, 3) and np.array_equal(e.numpy()[1], np.diag(v[1]))
    assert np.array_equal(md.diag_embed(md.tensor(v), 1).numpy()[0], np.diag(v[0], 1))
    assert np.array_equal(md.diag_embed(md.tensor(v), 1, -1, -2).numpy()[0], np.diag(v[0], 1).T)
    assert np.array_equal(md.diagflat(md.tensor(A[:2, :2])).numpy(), np.diagflat(A[:2, :2]))
    assert md.tril_indices(3, 4, 1).tolist() == [list(i) for i in np.tril_indices(3, 1, 4)]
    assert md.triu_indices(4, 3, -1).tolist() == [list(i) for i in np.triu_indices(4, -1, 3)]


def test_index_writes_return_a_new_tensor_and_their_in_place_forms_write():
    x = md.tensor(A)
    out = x.index_copy(1, md.tensor([3, 0]), md.ones(3, 2, dtype=md.float64))
    assert out[:, [0, 3]].tolist() == [[1.0, 1.0]] * 3 and np.array_equal(x.numpy(), A)
    ms = x.masked_scatter(x > 0, md.arange(12.0).double())
    expected = A.copy()
    expected[A > 0] = np.arange((A > 0).sum())
    assert np.array_equal(ms.numpy(), expected)
    assert x.put(md.tensor([0, 0]), md.tensor([9.0, 8.0]).double(), accumulate=True)[0, 0].item() == \
        pytest.approx(A[0, 0] + 17)
    y = md.tensor(A.copy())
    y.put_(md.tensor([1]), md.tensor([7.0]).double())
    y.index_copy_(0, md.tensor([2]), md.zeros(1, 4, dtype=md.float64))
    assert y[0, 1].item() == 7.0 and y[2].tolist() == [0.0] * 4


@pytest.mark.parametrize("reduce,include_self,expected", [
    ("sum", True, [[6.0, 1.0, 1.0], [1.0, 10.0, 1.0]]),
    ("sum", False, [[5.0, 1.0, 1.0], [1.0, 9.0, 1.0]]),
    ("mean", True, [[2.0, 1.0, 1.0], [1.0, 10 / 3, 1.0]]),
    ("mean", False, [[2.5, 1.0, 1.0], [1.0, 4.5, 1.0]]),
    ("prod", True, [[6.0, 1.0, 1.0], [1.0, 20.0, 1.0]]),
    ("amax", True, [[3.0, 1.0, 1.0], [1.0, 5.0, 1.0]]),
    ("amin", False, [[2.0, 1.0, 1.0], [1.0, 4.0, 1.0]]),
])
def test_scatter_reduce_values(reduce, include_self, expected):
    out = md.ones(2, 3).scatter_reduce(1, md.tensor([[0, 0], [1, 1]]), md.tensor([[2.0, 3.0], [4.0, 5.0]]), reduce,
                                       include_self=include_self)
    assert np.allclose(out.numpy(), expected)


@pytest.mark.parametrize("reduce", ["sum", "mean", "prod", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_gradients(reduce, include_self):
    idx = md.tensor([[0, 2, 0, 1], [1, 1, 3, 1], [2, 0, 2, 2]])
    src = md.tensor(np.random.default_rng(3).standard_normal((3, 4)), requires_grad=True)
    x = _x((3, 5), seed=4)
    assert gradcheck(lambda a, s: a.scatter_reduce(1, idx, s, reduce, include_self=include_self), (x, src))


def test_scatter_reduce_prod_gradient_with_zero_factors():
    idx = md.tensor([[0, 0, 1]])
    src = md.tensor([[0.0, 3.0, 0.0]], dtype=md.float64, requires_grad=True)
    x = md.tensor([[2.0, 5.0]], dtype=md.float64, requires_grad=True)
    assert gradcheck(lambda a, s: a.scatter_reduce(1, idx, s, "prod"), (x, src))


def test_scatter_reduce_ties_share_the_gradient():
    src = md.tensor([[2.0, 2.0]], requires_grad=True)
    x = md.tensor([[2.0]], requires_grad=True)
    x.scatter_reduce(1, md.tensor([[0, 0]]), src, "amax").sum().backward()
    assert np.allclose(src.grad.numpy(), [[1 / 3, 1 / 3]]) and np.allclose(x.grad.numpy(), [[1 / 3]])


# statistics -------------------------------------------------------------------------------------
def test_nan_reductions_and_aminmax():
    n = A.copy()
    n[0, 1] = np.nan
    x = md.tensor(n)
    assert np.allclose(x.nansum(1).numpy(), np.nansum(n, 1))
    assert np.allclose(x.nanmean(1).numpy(), np.nanmean(n, 1))
    lo, hi = md.tensor(A).aminmax(dim=0)
    assert np.array_equal(lo.numpy(), A.min(0)) and np.array_equal(hi.numpy(), A.max(0))


def test_cummax_takes_the_latest_index_on_ties_and_keeps_a_nan():
    values, indices = md.tensor([1.0, 3.0, 3.0, 2.0, 5.0]).cummax(0)
    assert values.tolist() == [1, 3, 3, 3, 5] and indices.tolist() == [0, 1, 2, 2, 4]
    values, indices = md.tensor([1.0, float("nan"), 3.0]).cummax(0)
    assert np.isnan(values.numpy()[1:]).all() and indices.tolist() == [0, 1, 1]
    assert md.tensor([3.0, 1.0, 2.0]).cummin(0).indices.tolist() == [0, 1, 1]


def test_logcumsumexp_is_exact_across_large_gaps():
    x = md.tensor([-1000.0, 0.0, 1000.0], requires_grad=True)
    y = x.logcumsumexp(0)
    assert y.tolist() == [-1000.0, 0.0, 1000.0]
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0]
    assert np.allclose(md.tensor(A).logcumsumexp(1).numpy(), np.logaddexp.accumulate(A, 1))


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile_matches_numpy(interpolation):
    q = [0.1, 0.45, 1.0]
    got = md.tensor(A).quantile(md.tensor(q, dtype=md.float64), dim=1, interpolation=interpolation)
    assert np.allclose(got.numpy(), np.quantile(A, q, axis=1, method=interpolation))
    n = A.copy()
    n[1, 2] = np.nan
    assert np.isnan(md.tensor(n).quantile(0.5, 1).numpy()[1])
    assert np.allclose(md.tensor(n).nanquantile(0.5, 1).numpy(), np.nanquantile(n, 0.5, axis=1))


def test_cov_corrcoef_and_renorm():
    x = md.tensor(A)
    assert np.allclose(x.cov().numpy(), np.cov(A))
    fw, aw = np.array([1, 2, 1, 3]), np.array([0.5, 1.0, 2.0, 1.0])
    assert np.allclose(x.cov(correction=0, fweights=md.tensor(fw)).numpy(), np.cov(A, fweights=fw, ddof=0))
    assert np.allclose(x.cov(aweights=md.tensor(aw)).numpy(), np.cov(A, aweights=aw))
    assert np.allclose(x.corrcoef().numpy(), np.corrcoef(A))
    r = x.renorm(2, 0, 1.0).numpy()
    norms = np.linalg.norm(A, axis=1)
    assert np.allclose(np.linalg.norm(r, axis=1), np.minimum(norms, 1.0), atol=1e-6)


def test_counting_functions():
    assert md.tensor(A).histc(4, -1, 1).tolist() == np.histogram(A, 4, (-1, 1))[0].tolist()
    assert md.bincount(md.tensor([0, 2, 2, 5]), minlength=8).tolist() == [1, 0, 2, 0, 0, 1, 0, 0]
    assert md.bincount(md.tensor([0, 2, 2]), weights=md.tensor([0.5, 1.0, 2.0])).tolist() == [0.5, 0.0, 3.0]
    s = md.searchsorted(md.tensor([[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]]), md.tensor([[3.0], [7.0]]), right=True)
    assert s.tolist() == [[2], [3]] and s.dtype == md.int64
    assert md.bucketize(md.tensor([[1.0, 6.0]]), md.tensor([1.0, 3.0, 5.0])).tolist() == [[0, 3]]
    v, inv, cnt = md.unique_consecutive(md.tensor([1, 1, 2, 2, 3, 1]), return_inverse=True, return_counts=True)
    assert v.tolist() == [1, 2, 3, 1] and inv.tolist() == [0, 0, 1, 1, 2, 3] and cnt.tolist() == [2, 2, 1, 1]
    assert np.allclose(md.logspace(0, 3, 4, base=2).numpy(), [1, 2, 4, 8])


def test_dtype_queries():
    assert md.promote_types(md.int64, md.float16) == md.float16
    assert md.promote_types(md.uint8, md.int8) == md.int16
    assert md.result_type(md.tensor([1, 2]), 1.5) == md.float32
    assert md.result_type(md.tensor([1.0]), md.tensor(1.0, dtype=md.float64)) == md.float32
    assert md.result_type(md.tensor([1], dtype=md.int32), md.tensor(1)) == md.int32
    assert md.can_cast(md.float64, md.float16) and not md.can_cast(md.float32, md.int32)
    assert not md.can_cast(md.int64, md.bool) and md.can_cast(md.bool, md.uint8)


def test_view_as_another_dtype_shares_the_bytes():
    x = md.tensor([1.0, 2.0])
    bits = x.view(md.int32)
    assert bits.tolist() == np.array([1.0, 2.0], np.float32).view(np.int32).tolist()
    assert x.view(md.float16).shape == (4,)
    bits[0] = 0
    assert x.tolist() == [0.0, 2.0]


# gradients of the compositions ------------------------------------------------------------------
GRADS = {
    "movedim": lambda t: t.movedim(0, 1) * 2,
    "tensor_split": lambda t: t.tensor_split(3, 1)[1] * 3,
    "take_along_dim": lambda t: t.take_along_dim(md.tensor([[0, 1]]), 1),
    "take": lambda t: t.take(md.tensor([0, 5, 5])),
    "rot90": lambda t: t.rot90(3) * md.arange(12.0).double().reshape(4, 3),
    "diff": lambda t: t.diff(2, 1),
    "trace": lambda t: t[:, :3].trace(),
    "cross": lambda t: md.cross(t[:, :3], t[:, 1:], dim=1),
    "kron": lambda t: md.kron(t[:2, :2], t[1:, :3]),
    "tensordot": lambda t: md.tensordot(t, t, dims=([1], [1])),
    "diag_embed": lambda t: md.diag_embed(t[:2], 1),
    "index_copy": lambda t: t.index_copy(1, md.tensor([3, 0]), t[:, 1:3] * 2),
    "masked_scatter": lambda t: t.masked_scatter(md.tensor([True, False, True, False]), t.reshape(-1) * 3),
    "nansum": lambda t: t.nansum(1),
    "cummax": lambda t: t.cummax(1).values,
    "quantile": lambda t: t.quantile(0.3, 1),
    "cov": lambda t: t.cov(),
    "corrcoef": lambda t: t.corrcoef(),
    "block_diag": lambda t: md.block_diag(t[:2, :2], t[2]),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_gradients(name):
    assert gradcheck(GRADS[name], (_x(),))


# PyTorch's results -------------------------------------------------------------------------------
TORCH_CASES = [
    "lib.movedim(lib.ones(2, 3, 4), (0, 1), (2, 0)).shape", "[t.tolist() for t in lib.arange(7).tensor_split([5, 1])]",
    "lib.tensor(A).rot90(1, (1, 0))", "lib.tensor(A).diff(2, 0)", "lib.kron(lib.tensor([1., 2.]), lib.ones(2, 2))",
    "lib.diag_embed(lib.tensor(A[:2, :3]), -1, 0, 2)", "lib.diag_embed(lib.tensor(A[:2, :3]), 2, -1, -2)",
    "lib.tensor(A).masked_scatter(lib.tensor([True, False, True, False]), lib.arange(12.).double())",
    "lib.tensor(A).cummin(1)", "lib.tensor(A).quantile(0.45, 1, interpolation='nearest')",
    "lib.tensor(A).cov(aweights=lib.tensor([0.5, 1., 2., 1.], dtype=lib.float64))", "lib.tensor(A).renorm(1, 1, 0.5)",
    "lib.tensor(A).histc(5)", "lib.unique_consecutive(lib.tensor([[1, 1], [1, 1], [2, 3]]), dim=0, return_counts=True)",
    "lib.full((2, 3), 2.).scatter_reduce(0, lib.tensor([[0, 1, 0]]), lib.tensor([[2., 3., 4.]]), 'prod')",
    "lib.zeros(2, 3, dtype=lib.int64).scatter_reduce(1, lib.tensor([[0, 0]]), lib.tensor([[-2, -3]]), 'amin', "
    "include_self=False)", "lib.result_type(lib.tensor([True]), 2)", "lib.promote_types(lib.bfloat16, lib.float16)",
    "lib.tensor([-5, 8]) >> 1", "lib.tensor(A).where(lib.tensor(A) > 0, -1.)",
]


def _plain(v, torch):
    if isinstance(v, (torch.Tensor, md.Tensor)):
        a = v.detach().numpy()
        return str(v.dtype).split(".")[-1], tuple(v.shape), np.round(a.astype(float), 6).tolist()
    if isinstance(v, (tuple, list)):
        return tuple(_plain(x, torch) for x in v)
    if isinstance(v, (torch.dtype, md.dtype)):
        return str(v).split(".")[-1]
    return tuple(v) if type(v).__name__ in ("Size",) else v


@pytest.mark.parametrize("case", TORCH_CASES)
def test_as_pytorch(case):
    torch = pytest.importorskip("torch")
    expected = _plain(eval(case, {"lib": torch, "A": A}), torch)
    assert _plain(eval(case, {"lib": md, "A": A}), torch) == expected


@pytest.mark.parametrize("reduce", ["sum", "mean", "prod", "amax", "amin"])
def test_scatter_reduce_gradients_as_pytorch(reduce):
    torch = pytest.importorskip("torch")
    idx = np.array([[0, 2, 0, 1], [1, 1, 3, 1]])
    src = np.array([[1.0, 2.0, 1.0, -1.0], [3.0, 3.0, 0.5, 2.0]])
    x0 = np.array([[1.0, 2.0, 3.0, 1.0, 0.0], [3.0, -1.0, 2.0, 0.5, 1.0]])
    cot = np.random.default_rng(5).standard_normal((2, 5))
    grads = []
    for lib in (torch, md):
        x, s = lib.tensor(x0, requires_grad=True), lib.tensor(src, requires_grad=True)
        out = x.scatter_reduce(1, lib.tensor(idx), s, reduce, include_self=False)
        (out * lib.tensor(cot)).sum().backward()
        grads.append((out.detach().numpy(), x.grad.numpy(), s.grad.numpy()))
    for t, m in zip(*grads):
        assert np.allclose(t, m)


# in-place forms, random fills, aliases -----------------------------------------------------------
def test_in_place_forms_write_the_function_result_and_keep_the_history():
    x = md.tensor([[1.5, -2.5], [0.3, 4.0]], dtype=md.float64)
    assert x.clone().abs_().tolist() == [[1.5, 2.5], [0.3, 4.0]]
    assert x.clone().floor_().tolist() == [[1.0, -3.0], [0.0, 4.0]]
    assert x.clone().gt_(1).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert x.clone().tril_().tolist() == [[1.5, 0.0], [0.3, 4.0]]
    assert np.allclose(x.clone().cumsum_(0).numpy(), np.cumsum(x.numpy(), 0))
    a = md.tensor([1.0, 2.0], requires_grad=True)
    b = a * 1
    assert b.sin_() is b
    b.sum().backward()
    assert np.allclose(a.grad.numpy(), np.cos([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="leaf"):
        md.ones(2, requires_grad=True).sin_()


def test_random_fills_draw_from_their_distributions():
    md.manual_seed(0)
    z = md.empty(20000)
    assert abs(z.exponential_(2.0).mean().item() - 0.5) < 0.03 and z.min().item() >= 0
    assert abs(z.log_normal_(0.0, 0.5).log().std().item() - 0.5) < 0.03
    assert abs(z.cauchy_().median().item()) < 0.05
    g = z.geometric_(0.5)
    assert g.min().item() == 1 and abs(g.mean().item() - 2.0) < 0.1
    r = z.random_(3, 7)
    assert set(np.unique(r.numpy()).tolist()) == {3.0, 4.0, 5.0, 6.0}
    assert set(np.unique(md.empty(1000).random_(2).numpy()).tolist()) == {0.0, 1.0}
    with pytest.raises(RuntimeError, match="lambda"):
        z.exponential_(0.0)


def test_fill_diagonal():
    y = md.zeros(5, 3)
    y.fill_diagonal_(5.0, wrap=True)
    expected = np.zeros((5, 3))
    np.fill_diagonal(expected, 5.0, wrap=True)
    assert np.array_equal(y.numpy(), expected)
    with pytest.raises(RuntimeError):
        md.zeros(3).fill_diagonal_(1.0)


def test_aliases_and_storage_queries():
    x = md.tensor([[1.5, -2.5], [0.3, 4.0]], dtype=md.float64)
    assert x.greater(0).tolist() == [[True, False], [True, True]] and md.less_equal(x, 0.3).tolist()[1] == [True, False]
    assert md.swapdims(x, 0, 1).tolist() == x.t().tolist() and x.H.tolist() == x.t().tolist()
    assert x.byte().dtype == md.uint8 and x.char().dtype == md.int8 and x.short().dtype == md.int16
    assert x.is_signed() and not x.byte().is_signed() and x.get_device() == -1 and x.ndimension() == 2
    assert x[1].storage_offset() == 2 and x.is_pinned() is False and x.pin_memory() is x
    assert md.dist(x, md.zeros(2, 2)).item() == pytest.approx(np.linalg.norm(x.numpy()))
    assert [t.shape for t in md.hsplit(md.ones(2, 4), 2)] == [(2, 2), (2, 2)]
    assert [t.shape for t in md.vsplit(md.ones(4, 2), [1])] == [(1, 2), (3, 2)]
    assert md.ones(2, 3).sum_to_size(1, 3).tolist() == [[2.0, 2.0, 2.0]]
    assert md.log10(md.tensor([100.0])).item() == pytest.approx(2.0)
    assert x.msort().tolist() == [[0.3, -2.5], [1.5, 4.0]]
    assert md.argwhere(md.tensor([0, 3, 0, 1])).tolist() == [[1], [3]]
    with pytest.raises(RuntimeError, match="divisible"):
        md.hsplit(md.ones(2, 3), 2)
    pts = md.tensor([[0.0, 1.0], [3.0, 5.0]])
    assert md.pdist(pts).tolist() == [5.0] and md.threshold(pts, 1.0, -1.0).tolist() == [[-1, -1], [3, 5]]
    assert pts.hardshrink(1.0).tolist() == [[0.0, 0.0], [3.0, 5.0]]


def test_norm_layers_follow_the_default_dtype():
    previous = md.get_default_dtype()
    md.set_default_dtype(md.float64)
    try:
        layers = (md.nn.LayerNorm(4), md.nn.RMSNorm(4), md.nn.GroupNorm(2, 4), md.nn.BatchNorm1d(4))
        for m in layers:
            assert {t.dtype for t in m.parameters()} == {md.float64}
        assert layers[3].running_mean.dtype == md.float64
        assert md.nn.TransformerEncoderLayer(8, 2, 16)(md.randn(3, 2, 8)).dtype == md.float64
    finally:
        md.set_default_dtype(previous)
