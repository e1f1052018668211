"""float16 / bfloat16 GEMMs on the cuda device (the CUDA simulator in CI, tiny shapes that span
several tiles: the simulator's tile is 4, the shapes here are 7 x 9 x 6 and up): the tiled
matmul kernel reads the 2-byte operands as they are (no float32 copy reaches it), sums their
exact products in float32 and rounds once, so

- its result equals, bit for bit, the float32 sums of the products taken in the kernel's order
  (k = 0, 1, ...) and rounded once, and the same kernel run on float32 copies, rounded;
- matmul / linear / addmm forward and backward equal the CPU's float32-BLAS results within one
  low-precision ulp: both round the float32 sum of the same exact products once, and only the
  order of the float32 additions differs (BLAS blocks K differently), which can move a sum across
  a rounding boundary of the low dtype.
"""
import ml_dtypes
import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl import backends

try:
    backends.get("cuda")
except RuntimeError as exc:   # pragma: no cover
    pytest.skip(f"cuda device unavailable: {exc}", allow_module_level=True)

from minidl.backends.cuda import reduction   # noqa: E402  (needs the cuda backend)
from minidl.backends.cuda.array import CudaArray   # noqa: E402
from minidl.kernels.cuda import matmul as kmatmul   # noqa: E402
from minidl.kernels.cuda._common import SIMULATOR   # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)
LOW = [np.dtype(np.float16), BF16]
MD = {np.dtype(np.float16): md.float16, BF16: md.bfloat16}


def _np(t):
    return t.cpu().detach().numpy() if isinstance(t, md.Tensor) else t.copy_to_host()


def _ulps(a, b):
    """Distance in units of the last place between two arrays of one 2-byte float dtype."""
    def ordered(x):
        bits = np.asarray(x).view(np.uint16).astype(np.int64)
        return np.where(bits & 0x8000, -(bits & 0x7fff), bits)
    assert a.dtype == b.dtype and a.dtype.itemsize == 2
    return np.abs(ordered(a) - ordered(b))


def _rand(shape, dtype, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _in_order(a, b):
    """a @ b (2-D float32) summed as the kernel sums: one float32 add per k, in order."""
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(a.shape[1]):
        acc = acc + a[:, k, None] * b[None, k, :]
    return acc


@pytest.fixture
def launches(monkeypatch):
    """The (a, b, out) buffer dtypes and bfloat16 flags of every matmul kernel launch."""
    seen = []
    real = kmatmul.launch

    def spy(out, a, *args, **kw):
        b = args[4]
        seen.append((np.dtype(a.dtype), np.dtype(b.dtype), np.dtype(out.dtype), kw.get("bf16", args[-1])))
        return real(out, a, *args, **kw)
    monkeypatch.setattr(kmatmul, "launch", spy)
    return seen


@pytest.mark.parametrize("dtype", LOW, ids=["float16", "bfloat16"])
def test_kernel_rounds_the_in_order_float32_sums_once(dtype, launches):
    a, b = _rand((7, 9), dtype, 0), _rand((9, 6), dtype, 1)
    da, db = CudaArray.from_host(a), CudaArray.from_host(b)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    want = _in_order(a32, b32)   # each product exact in float32: FMA or not, the same sums
    got = _np(reduction.matmul(da, db))
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.view(np.uint16), want.astype(dtype).view(np.uint16))
    np.testing.assert_array_equal(_np(reduction.matmul(da, db, dtype=np.float32)), want)
    # transposed (strided) operands are read in place, with the same sums
    dat, dbt = CudaArray.from_host(np.ascontiguousarray(a.T)).T, CudaArray.from_host(np.ascontiguousarray(b.T)).T
    np.testing.assert_array_equal(_np(reduction.matmul(dat, dbt)).view(np.uint16), got.view(np.uint16))
    storage = np.dtype(np.uint16) if dtype == BF16 else dtype
    assert all(s[0] == s[1] == storage for s in launches) and len(launches) == 3


def test_kernel_bfloat16_rounding_is_to_nearest_even_on_ties():
    # 1 + 2**-8 is halfway between two bfloat16 values: a tie, rounded to the even one (1.0);
    # 1 + 3 * 2**-8 is halfway too and rounds up to the even 1 + 2**-6
    a = np.array([[1.0, 2.0 ** -8], [1.0, 3 * 2.0 ** -8], [1.0, -(2.0 ** -8)]], BF16)
    b = np.ones((2, 1), BF16)
    got = _np(reduction.matmul(CudaArray.from_host(a), CudaArray.from_host(b))).astype(np.float64)
    want = (a.astype(np.float32) @ b.astype(np.float32)).astype(BF16).astype(np.float64)
    np.testing.assert_array_equal(got, want)
    assert got[0, 0] == 1.0 and got[1, 0] == 1 + 2.0 ** -6


@pytest.mark.parametrize("dtype", LOW, ids=["float16", "bfloat16"])
def test_batched_and_mixed_operands(dtype):
    a, b = _rand((3, 5, 9), dtype, 2), _rand((9, 6), dtype, 3)
    got = _np(reduction.matmul(CudaArray.from_host(a), CudaArray.from_host(b)))
    for z in range(3):   # broadcast batch: every entry in the kernel's order
        want = _in_order(a[z].astype(np.float32), b.astype(np.float32)).astype(dtype)
        np.testing.assert_array_equal(got[z].view(np.uint16), want.view(np.uint16))
    f = _rand((9, 6), np.float32, 4)   # low x float32: float32 out, the low side read as 2 bytes
    mixed = _np(reduction.matmul(CudaArray.from_host(a[0]), CudaArray.from_host(f)))
    assert mixed.dtype == np.float32
    np.testing.assert_allclose(mixed, a[0].astype(np.float32) @ f, rtol=1e-5, atol=1e-6)


def test_float32_matmul_is_unchanged(launches):
    a, b = _rand((7, 9), np.float32, 5), _rand((9, 6), np.float32, 6)
    got = _np(reduction.matmul(CudaArray.from_host(a), CudaArray.from_host(b)))
    assert got.dtype == np.float32 and launches == [(np.dtype(np.float32),) * 3 + ((False, False, False),)]
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-6)
    if SIMULATOR:   # a GPU may fuse the (inexact) float32 products into FMAs
        np.testing.assert_array_equal(got, _in_order(a, b))


def _pair(shape, dtype, seed):
    x = _rand(shape, dtype, seed)
    return md.tensor(x, requires_grad=True), md.tensor(x, device="cuda", requires_grad=True)


def _two_byte_launches(launches):
    return all(s[0].itemsize == 2 and s[1].itemsize == 2 for s in launches)


@pytest.mark.parametrize("dtype", LOW, ids=["float16", "bfloat16"])
def test_linear_forward_backward_reads_two_bytes_and_equals_the_cpu(dtype, launches):
    (x, dx), (w, dw), (b, db) = (_pair(s, dtype, 10 + i) for i, s in enumerate(((2, 7, 9), (6, 9), (6,))))
    g = _rand((2, 7, 6), dtype, 13)
    y = F.linear(x, w, b)
    dy = F.linear(dx, dw, db)
    assert dy.dtype is MD[dtype] and dy.device == "cuda"
    y.backward(md.tensor(g))
    dy.backward(md.tensor(g, device="cuda"))
    assert len(launches) == 3 and _two_byte_launches(launches)   # no float32 copy reaches the kernel
    assert all(s[2] == np.float32 for s in launches)   # float32 sums: the bias is added before the rounding
    for cpu, dev in ((y, dy), (x.grad, dx.grad), (w.grad, dw.grad), (b.grad, db.grad)):
        c, d = _np(cpu), _np(dev)
        assert d.dtype == dtype and _ulps(c, d).max() <= 1   # only the float32 summation order differs
    # against the same op on float32 copies on the device: the same kernel sums, bit for bit
    x32, w32, b32, g32 = (md.tensor(_np(t).astype(np.float32), device="cuda") for t in (dx, dw, db, md.tensor(g)))
    want_y = F.linear(x32, w32, b32).to(MD[dtype])
    want_dx = (g32.reshape(14, 6) @ w32).reshape(2, 7, 9).to(MD[dtype])
    want_dw = (g32.reshape(14, 6).t() @ x32.reshape(14, 9)).to(MD[dtype])
    for got, want in ((dy, want_y), (dx.grad, want_dx), (dw.grad, want_dw)):
        np.testing.assert_array_equal(_np(got).view(np.uint16), _np(want).view(np.uint16))


@pytest.mark.parametrize("dtype", LOW, ids=["float16", "bfloat16"])
def test_matmul_forward_backward_reads_two_bytes_and_equals_the_cpu(dtype, launches):
    (a, da), (b, db) = _pair((3, 5, 9), dtype, 20), _pair((9, 6), dtype, 21)
    g = _rand((3, 5, 6), dtype, 22)
    out, dout = a @ b, da @ db
    out.backward(md.tensor(g))
    dout.backward(md.tensor(g, device="cuda"))
    assert len(launches) == 3 and _two_byte_launches(launches)
    for cpu, dev in ((out, dout), (a.grad, da.grad), (b.grad, db.grad)):
        c, d = _np(cpu), _np(dev)
        assert d.dtype == dtype and _ulps(c, d).max() <= 1
    # dL/db sums the broadcast batch in float32 before the one rounding
    g32 = _np(md.tensor(g)).astype(np.float32)
    a32 = _np(a).astype(np.float32)
    want = sum(_in_order(a32[z].T, g32[z]) for z in range(3)).astype(dtype)
    assert _ulps(_np(db.grad), want).max() <= 1   # the batch sum's order is the backend's


@pytest.mark.parametrize("dtype", LOW, ids=["float16", "bfloat16"])
def test_addmm_and_baddbmm_read_two_bytes_and_equal_the_cpu(dtype, launches):
    (i, di), (a, da), (b, db) = (_pair(s, dtype, 30 + n) for n, s in enumerate(((7, 6), (7, 9), (9, 6))))
    out, dout = md.addmm(i, a, b, beta=0.5, alpha=2.0), md.addmm(di, da, db, beta=0.5, alpha=2.0)
    g = _rand((7, 6), dtype, 34)
    out.backward(md.tensor(g))
    dout.backward(md.tensor(g, device="cuda"))
    # forward reads a and b as 2 bytes; backward's g is scaled first (float32), a and b stay 2-byte
    assert len(launches) == 3 and launches[0][:2] == ((np.dtype(np.uint16),) * 2 if dtype == BF16 else (dtype,) * 2)
    assert all(min(s[0].itemsize, s[1].itemsize) == 2 for s in launches)
    for cpu, dev in ((out, dout), (i.grad, di.grad), (a.grad, da.grad), (b.grad, db.grad)):
        assert _ulps(_np(cpu), _np(dev)).max() <= 1
    (p, dp), (q, dq), (r, dr) = (_pair(s, dtype, 40 + n) for n, s in enumerate(((2, 5, 6), (2, 5, 9), (2, 9, 6))))
    got, want = md.baddbmm(dp, dq, dr), md.baddbmm(p, q, r)
    assert got.dtype is MD[dtype] and _ulps(_np(want), _np(got)).max() <= 1


def test_cpu_low_precision_gemm_still_runs_on_float32_copies(monkeypatch):
    """On the CPU the opt-in does nothing: the op's code sees float32 arrays (float32 BLAS)."""
    from minidl.ops import linear as linear_op
    seen = []
    real = linear_op._rows

    def spy(a):
        seen.append(a.dtype)
        return real(a)
    monkeypatch.setattr(linear_op, "_rows", spy)   # forward's (and backward's) view of x and g
    x, w = _pair((3, 4), np.float16, 50)[0], _pair((2, 4), np.float16, 51)[0]
    y = F.linear(x, w)
    y.backward(md.tensor(_rand((3, 2), np.float16, 52)))
    assert len(seen) == 3 and set(seen) == {np.dtype(np.float32)}
    assert y.dtype is md.float16 and x.grad.dtype is md.float16


def test_an_opt_in_naming_no_argument_is_refused():
    from minidl.autograd.op_function import Function
    from minidl.ops.low_precision import float32_compute

    class Bad(Function):
        cuda_low_operands = ("a", "nope")

        @staticmethod
        def forward(ctx, a, b):
            return a

        @staticmethod
        def backward(ctx, g):
            return g, None
    with pytest.raises(TypeError, match=r"names \['nope'\].*expected names from \['a', 'b'\]"):
        float32_compute(Bad)
