"""nn.Linear's bias on the CPU (kernels/cpu/bias.py): y += b and db = sum_rows g on every thread.

The kernels against the reference in float32 and float64 at sizes that run one chunk, several
chunks and the NumPy fallback; which sizes and layouts take the kernel; the float64 partials
of the bias gradient; and Linear's forward and backward the same under either implementation."""
import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl.kernels.cpu import bias as K
from minidl.ops import linear as L
from minidl.ops._kernel_switch import implementation
from minidl.testing import OpSpec, check_implementations, spec_id

SHAPES = [(5, 7), (300, 257), (4097, 33)]   # below the parallel threshold, then two parallel sizes


@pytest.fixture
def parallel(monkeypatch):
    """The layer kernels allowed to run in parallel, whatever the process's BLAS tuning."""
    monkeypatch.setattr(K, "layer_parallel", lambda n: n >= 1 << 16)


SPECS = ([OpSpec(f"bias_add{s}", None, lambda y, b: y + b,
                 lambda rng, s=s: (rng.standard_normal(s), rng.standard_normal(s[1])),
                 implementations={"numba": K.bias_add}) for s in SHAPES]
         + [OpSpec(f"bias_grad{s}", None, lambda g: g.sum(axis=0), lambda rng, s=s: (rng.standard_normal(s),),
                   implementations={"numba": K.bias_grad}) for s in SHAPES])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_the_kernels_match_the_reference(spec, dtype, parallel):
    check_implementations(spec, dtype)


def _refuse(*args):
    raise AssertionError("the NumPy reference ran")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_large_contiguous_arrays_take_the_kernels_and_others_the_reference(dtype, parallel, monkeypatch):
    rng = np.random.default_rng(1)
    big, b = rng.standard_normal((1024, 96)).astype(dtype), rng.standard_normal(96).astype(dtype)
    expected_sum, expected_add = big.astype(np.float64).sum(axis=0), big + b
    monkeypatch.setattr(L, "bias_add_reference", _refuse)
    monkeypatch.setattr(L, "bias_grad_reference", _refuse)
    y = big.copy()
    assert K.bias_add(y, b) is y                               # in place
    np.testing.assert_allclose(y, expected_add, rtol=1e-6)
    db = K.bias_grad(big)
    assert db.dtype == dtype and db.shape == (96,)
    np.testing.assert_allclose(db, expected_sum, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-4)
    for other in (big[:10], np.asfortranarray(big), big.astype(np.float16)):   # small, not C-ordered, a dtype Numba lacks
        with pytest.raises(AssertionError, match="reference ran"):
            K.bias_grad(other)


def test_the_bias_gradient_sums_in_float64_across_row_blocks(parallel):
    # 2^17 rows of 1 + 2^-12: a block of 32 rows sums them exactly in float32, and a running
    # float32 sum of all rows (NumPy's down the rows) drops the small parts once it passes 2^11
    g = np.full((1 << 17, 4), 1 + 2.0 ** -12, np.float32)
    exact = (1 << 17) + (1 << 5)
    assert np.array_equal(K.bias_grad(g), np.full(4, exact, np.float32))
    assert float(L.bias_grad_reference(g)[0]) != exact


def test_a_bias_of_the_wrong_length_is_refused_before_the_kernel(parallel):
    with pytest.raises(ValueError, match=r"expected a bias of shape \(96,\).*got one of shape \(95,\)"):
        K.bias_add(np.zeros((1024, 96), np.float32), np.zeros(95, np.float32))


def test_no_rows():
    assert np.array_equal(K.bias_grad(np.zeros((0, 3), np.float32)), np.zeros(3, np.float32))
    y = np.zeros((0, 3), np.float32)
    assert K.bias_add(y, np.ones(3, np.float32)).shape == (0, 3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_linear_is_the_same_under_both_implementations(dtype, parallel):
    rng = np.random.default_rng(2)
    x0, w0, b0 = (rng.standard_normal(s).astype(dtype) for s in ((8, 128, 64), (96, 64), (96,)))
    g0 = rng.standard_normal((8, 128, 96)).astype(dtype)
    results = []
    for impl in ("reference", "numba"):
        with implementation(impl):
            x, w, b = (md.tensor(a, requires_grad=True) for a in (x0, w0, b0))
            y = F.linear(x, w, b)
            y.backward(md.tensor(g0))
            results.append([y.detach().numpy(), x.grad.numpy(), w.grad.numpy(), b.grad.numpy()])
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for got, want in zip(*results):   # the two may reach different BLAS libraries (kernels/cpu/_cblas.py)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())
