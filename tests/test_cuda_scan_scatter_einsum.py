"""einsum / bilinear, the scans (cumsum, cumprod, prod, logcumsumexp) and the indexed writes
(scatter, scatter_add, scatter_reduce, index_add, index_fill, index_copy) on the "cuda" device
(CUDA simulator): the CPU's values and gradients in float32 and float64, duplicate indices
combined as on the CPU, out-of-range indices refused before any kernel runs, empty inputs."""
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


def ix(*rows):
    return np.array(rows, dtype=np.int64)


# einsum and bilinear ----------------------------------------------------------------------------

EINSUM = {   # equation: operand shapes
    "ij,jk->ik": [(2, 3), (3, 4)],
    "bij,bjk->bik": [(2, 2, 3), (2, 3, 2)],
    "ij->": [(2, 3)],
    "ij->ji": [(2, 3)],
    "i,j->ij": [(3,), (2,)],
    "ijk,k->ji": [(2, 3, 4), (4,)],
    "ij,ij->i": [(2, 3), (2, 3)],
    "ik,k,kj->": [(2, 3), (3,), (3, 2)],
    "ij,kj": [(2, 3), (1, 3)],   # implicit output, a size-1 index
}


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("eq", sorted(EINSUM))
def test_einsum_matches_cpu(eq, dtype):
    arrays = [rnd(*s, seed=k).astype(dtype) for k, s in enumerate(EINSUM[eq])]
    check(lambda *ts: md.einsum(eq, *ts), *arrays, atol=ATOL[dtype])


def test_einsum_diagonal_and_empty_operands():
    check(lambda a: md.einsum("ii->i", a), rnd(3, 3), grad=False)
    check(lambda a, b: md.einsum("ij,jk->ik", a, b), rnd(2, 0), rnd(0, 3, seed=1))
    check(lambda a, b: md.einsum("ij,jk->ik", a, b), rnd(0, 2), rnd(2, 3, seed=1))


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_bilinear_matches_cpu(dtype):
    a = [rnd(*s, seed=k).astype(dtype) for k, s in enumerate([(2, 3), (2, 4), (2, 3, 4), (2,)])]
    check(F.bilinear, *a, atol=ATOL[dtype])
    check(lambda x1, x2, w: F.bilinear(x1, x2, w), rnd(2, 1, 3), rnd(2, 1, 2, seed=1), rnd(3, 3, 2, seed=2))


def test_bilinear_module_on_cuda_matches_cpu_parameter_grads():
    md.manual_seed(0)
    mc = nn.Bilinear(3, 2, 4)
    mg = nn.Bilinear(3, 2, 4).to("cuda")
    mg.load_state_dict(mc.state_dict())
    x1, x2 = rnd(2, 3).astype(np.float32), rnd(2, 2, seed=1).astype(np.float32)
    ys = []
    for m, dev in ((mc, "cpu"), (mg, "cuda")):
        y = m(md.tensor(x1, device=dev), md.tensor(x2, device=dev))
        (y * y).sum().backward()
        ys.append(y)
    assert ys[1].device == "cuda"
    np.testing.assert_allclose(ys[1].detach().cpu().numpy(), ys[0].detach().cpu().numpy(), atol=1e-5)
    for pc, pg in zip(mc.parameters(), mg.parameters()):
        assert isinstance(pg.grad._data, CudaArray)
        np.testing.assert_allclose(pg.grad.cpu().numpy(), pc.grad.cpu().numpy(), atol=1e-5)


# scans ----------------------------------------------------------------------------------------

SCANS = {
    "cumsum": lambda x, d: x.cumsum(d),
    "cumprod": lambda x, d: x.cumprod(d),
    "prod": lambda x, d: x.prod(d),
    "prod_keepdim": lambda x, d: x.prod(d, keepdim=True),
    "logcumsumexp": lambda x, d: x.logcumsumexp(d),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("name", sorted(SCANS))
def test_scan_along_any_dim_matches_cpu(name, dim, dtype):
    fn = SCANS[name]
    check(lambda x: fn(x, dim), rnd(2, 3, 2).astype(dtype), atol=ATOL[dtype])


@pytest.mark.parametrize("name", ["cumprod", "prod"])
def test_products_with_zeros_have_the_cpus_gradients(name):
    x = rnd(3, 4)
    x[0, 1] = 0.0                  # one zero in a row
    x[1, 0] = x[1, 2] = 0.0        # two zeros in a row
    x[2, 3] = 0.0                  # a zero at the end
    check(lambda t: SCANS[name](t, 1), x)
    check(lambda t: SCANS[name](t, 0), x)
    check(lambda t: t.prod(), x[:2, :2])   # the product of everything, with zeros


def test_prod_of_all_and_integer_scans_and_logcumsumexp_extremes():
    check(lambda t: t.prod(), rnd(2, 3))
    check(lambda t: t.cumsum(0) * 2 + t.prod(1).sum(), ix([1, -2, 3], [4, 5, -6]), grad=False)
    big = np.array([[1000.0, 0.0, -1000.0], [-np.inf, -np.inf, 1.0]])
    check(lambda t: t.logcumsumexp(1), big, grad=False)
    check(lambda t: t.logcumsumexp(1), np.array([[1000.0, 0.0, -1000.0]]))


def test_scans_of_empty_inputs():
    for fn in (lambda t: t.cumsum(0), lambda t: t.cumprod(1), lambda t: t.logcumsumexp(0), lambda t: t.prod(0),
               lambda t: t.prod(1), lambda t: t.prod()):
        check(fn, np.zeros((0, 3)))


def test_numpy_scans_on_device_arrays():
    a = rnd(2, 3)
    x = CudaArray.from_host(a)
    np.testing.assert_allclose(np.cumsum(x, axis=1).copy_to_host(), np.cumsum(a, axis=1))
    np.testing.assert_allclose(np.cumprod(x).copy_to_host(), np.cumprod(a))
    np.testing.assert_allclose(np.logaddexp.accumulate(x, axis=0).copy_to_host(), np.logaddexp.accumulate(a, axis=0))
    np.testing.assert_allclose(np.prod(x, axis=0, keepdims=True).copy_to_host(), np.prod(a, axis=0, keepdims=True))
    np.testing.assert_array_equal(np.flip(x, 1).copy_to_host(), np.flip(a, 1))


# scatters ---------------------------------------------------------------------------------------

DUP = ix([0, 2, 0], [2, 2, 1])     # index into a (3, 3) along dim 0: (0, 0) and (2, 1) hit twice


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_scatter_add_with_duplicate_indices_matches_cpu(dtype):
    check(lambda x, s, i: x.scatter_add(0, i, s), rnd(3, 3).astype(dtype), rnd(2, 4, seed=1).astype(dtype), DUP,
          atol=ATOL[dtype])
    check(lambda x, s, i: md.scatter_add(x, 1, i, s), rnd(3, 4).astype(dtype), rnd(3, 3, seed=1).astype(dtype),
          ix([1, 1, 3], [0, 0, 0], [2, 3, 2]), atol=ATOL[dtype])


def test_scatter_src_value_and_reduce_forms_match_cpu():
    perm = ix([2, 0, 1], [1, 2, 0])    # no position written twice: the written value is determined
    check(lambda x, s, i: x.scatter(0, i, s), rnd(3, 3), rnd(2, 4, seed=1), perm)
    check(lambda x, i: x.scatter(1, i, 2.5), rnd(2, 4), ix([3, 0], [1, 1]))
    check(lambda x, i: md.scatter(x, 0, i, value=-1.0), rnd(3, 3), DUP)
    check(lambda x, s, i: x.scatter(0, i, s, reduce="add"), rnd(3, 3), rnd(2, 3, seed=1), DUP, grad=False)
    check(lambda x, s, i: x.scatter(0, i, s, reduce="multiply"), rnd(3, 3), rnd(2, 3, seed=1), DUP, grad=False)
    check(lambda x, i: x.scatter(0, i, 3.0, reduce="multiply"), rnd(3, 3), DUP, grad=False)


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce_matches_cpu(reduce, include_self):
    src = rnd(2, 4, seed=1)
    src[0, 0] = 0.0                           # prod: a zero among the factors of (0, 0)
    src[1, 1] = src[0, 1] = 1.5               # amax / amin: a tie at (2, 1)
    check(lambda x, s, i: x.scatter_reduce(0, i, s, reduce, include_self=include_self), rnd(3, 3), src, DUP)
    check(lambda x, s, i: x.scatter_reduce(0, i, s, reduce, include_self=include_self), rnd(3, 3).astype(np.float32),
          src.astype(np.float32), DUP, atol=2e-5)


def test_scatter_reduce_integers_and_nan():
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        check(lambda x, s, i: x.scatter_reduce(0, i, s, reduce), ix([1, 2, 3], [4, 5, 6], [7, 8, 9]),
              ix([2, -3, 4], [5, 6, -7]), DUP, grad=False)
    src = rnd(2, 3)
    src[1, 1] = np.nan
    x = rnd(3, 3)
    x[0, 2] = np.nan
    for reduce in ("amax", "amin"):
        check(lambda x, s, i: x.scatter_reduce(0, i, s, reduce), x, src, DUP, grad=False)


def test_index_add_fill_copy_match_cpu():
    i = ix(0, 2, 0)                 # 0 twice: index_add sums both
    check(lambda x, s, i: x.index_add(1, i, s, alpha=2.0), rnd(2, 3), rnd(2, 3, seed=1), i)
    check(lambda x, s, i: md.index_add(x, 0, i, s), rnd(3, 2).astype(np.float32), rnd(3, 2, seed=1)
          .astype(np.float32), i, atol=2e-5)
    check(lambda x, i: x.index_fill(1, i, -2.0), rnd(2, 3), ix(0, -1, 0))
    check(lambda x, v, i: x.index_fill(0, i, v), rnd(3, 2), np.array(1.5), ix(2))
    check(lambda x, s, i: x.index_copy(1, i, s), rnd(2, 3), rnd(2, 2, seed=1), ix(2, 0))
    check(lambda x, s, i: x.index_reduce(0, i, s, "prod"), rnd(3, 2), rnd(3, 2, seed=1), ix(1, 1, 0))


def test_inplace_forms_on_cuda():
    x = md.zeros(3, 3, device="cuda", dtype=md.float64)
    x.scatter_add_(0, md.tensor(DUP, device="cuda"), md.ones(2, 3, device="cuda", dtype=md.float64))
    x.index_add_(1, md.tensor(ix(1, 1), device="cuda"), md.ones(3, 2, device="cuda", dtype=md.float64))
    want = np.zeros((3, 3))
    np.add.at(want, (DUP, np.arange(3)), 1.0)
    want[:, 1] += 2
    assert x.device == "cuda"
    np.testing.assert_array_equal(x.cpu().numpy(), want)


def _t(a):
    return md.tensor(a, device="cuda")


@pytest.mark.parametrize("call", [
    lambda x: x.scatter_add(0, _t(ix([0, 3, 0])), x),
    lambda x: x.scatter(1, _t(ix([-1, 0, 0])), 1.0),
    lambda x: x.scatter_reduce(0, _t(ix([0, 5, 1])), x, "amax"),
    lambda x: x.index_add(0, _t(ix(0, 7, 1)), x),
    lambda x: x.index_fill(1, _t(ix(-4)), 0.0),
], ids=["scatter_add", "scatter_negative", "scatter_reduce", "index_add", "index_fill"])
def test_out_of_range_indices_raise_before_anything_is_written(call):
    x = md.tensor(rnd(3, 3), device="cuda")
    before = x.cpu().numpy().copy()
    with pytest.raises(IndexError, match="out of bounds"):
        call(x)
    np.testing.assert_array_equal(x.cpu().numpy(), before)


def test_scatter_kernel_checks_its_index_range_and_shapes_before_launch():
    out = xp.zeros((3, 3))
    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 0 with size 3"):
        xp.scatter_along(out, 0, CudaArray.from_host(ix([0, 3])), 1.0, "add")
    with pytest.raises(ValueError, match="larger than out"):
        xp.scatter_along(out, 0, CudaArray.from_host(ix([0, 0, 0, 0])), 1.0, "add")
    xp.scatter_along(out, 1, CudaArray.from_host(ix([1, 1], [2, 0])), CudaArray.from_host(rnd(2, 2)), "multiply")
    np.testing.assert_array_equal(out.copy_to_host(), np.zeros((3, 3)))


def test_index_on_another_device_is_refused():
    x = md.tensor(rnd(3, 3), device="cuda")
    with pytest.raises(RuntimeError, match="same device"):
        x.scatter_add(0, md.tensor(DUP), x[:2])


def test_empty_indices_and_inputs():
    empty = np.zeros((0, 3), dtype=np.int64)
    check(lambda x, s, i: x.scatter_add(0, i, s), rnd(3, 3), rnd(2, 3, seed=1), empty)
    check(lambda x, s, i: x.scatter_reduce(0, i, s, "prod"), rnd(3, 3), rnd(2, 3, seed=1), empty)
    check(lambda x, s, i: x.index_add(0, i, s), rnd(3, 2), np.zeros((0, 2)), np.zeros(0, dtype=np.int64))
    check(lambda x, s, i: x.scatter(1, i, s), np.zeros((2, 0)), np.zeros((2, 0)), np.zeros((2, 0), dtype=np.int64))


def test_scatter_reduce_prod_with_zeros_matches_torch_on_cuda():
    torch = pytest.importorskip("torch")
    x, src = rnd(3, 3), rnd(2, 3, seed=1)
    src[0, 0] = src[1, 1] = 0.0
    x[2, 1] = 0.0
    g = rnd(3, 3, seed=2)
    xm = md.tensor(x, device="cuda", requires_grad=True)
    sm = md.tensor(src, device="cuda", requires_grad=True)
    ym = xm.scatter_reduce(0, _t(DUP), sm, "prod")
    ym.backward(md.tensor(g, device="cuda"))
    xt, st = torch.tensor(x, requires_grad=True), torch.tensor(src, requires_grad=True)
    yt = xt.scatter_reduce(0, torch.tensor(DUP), st, "prod")
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(ym.detach().cpu().numpy(), yt.detach().cpu().numpy(), atol=1e-12)
    np.testing.assert_allclose(xm.grad.cpu().numpy(), xt.grad.cpu().numpy(), atol=1e-12)
    np.testing.assert_allclose(sm.grad.cpu().numpy(), st.grad.cpu().numpy(), atol=1e-12)
