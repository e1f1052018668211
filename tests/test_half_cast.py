"""minidl's float32 <-> float16/bfloat16 array casts (kernels/cpu/half_cast.py, used by every op that
computes a 2-byte input in float32) give NumPy's / ml_dtypes' results bit for bit, on the fast path
and the fallbacks, and never warn on overflow; its parallel sum and copy of float32/float64 arrays
(residual adds, autograd's gradient sums and copies) equal NumPy's bit for bit."""
import warnings

import ml_dtypes
import numba
import numpy as np
import pytest

from minidl.kernels.cpu import half_cast
from minidl.kernels.cpu._threads import SERIAL_BELOW
from minidl.ops.low_precision import cast_array

LOW = [np.float16, ml_dtypes.bfloat16]


def _float32_patterns(n, seed):
    """Random float32 bit patterns (every exponent, NaNs and infinities included) and the edges."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    edges = np.array([0.0, -0.0, 1.0, 65504.0, 65519.99, 65520.0, -65520.0, 6.1e-5, 5.96e-8, 2.98e-8, 1e-45,
                      3.4e38, np.inf, -np.inf, np.nan], np.float32)
    out = bits.view(np.float32)
    out[:edges.size] = edges
    return out


def _reference(a, dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return a.astype(dtype)


@pytest.mark.parametrize("low", LOW)
def test_narrowing_equals_numpy_bit_for_bit(low):
    x = _float32_patterns(4 * SERIAL_BELOW + 3, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")        # overflow to inf is silent, as on a GPU
        got = cast_array(x, low)
    ref = _reference(x, low)
    assert got.dtype == np.dtype(low) and got.shape == x.shape
    nan = np.isnan(x)
    np.testing.assert_array_equal(got.view(np.uint16)[~nan], ref.view(np.uint16)[~nan])
    assert np.isnan(got[nan].astype(np.float32)).all()


@pytest.mark.parametrize("low", LOW)
def test_widening_every_pattern_equals_numpy(low):
    patterns = np.tile(np.arange(2 ** 16, dtype=np.uint32).astype(np.uint16), 2).view(low)
    got = cast_array(patterns, np.float32)
    ref = patterns.astype(np.float32)
    finite_or_inf = ~np.isnan(ref)
    np.testing.assert_array_equal(got.view(np.uint32)[finite_or_inf], ref.view(np.uint32)[finite_or_inf])
    assert np.isnan(got[~finite_or_inf]).all()
    nan_bits = ref.view(np.uint32)[~finite_or_inf]
    quiet = (nan_bits & 0x400000) != 0     # quiet NaNs keep their bits; signalling ones may come back quiet
    np.testing.assert_array_equal(got.view(np.uint32)[~finite_or_inf][quiet], nan_bits[quiet])


@pytest.mark.parametrize("low", LOW)
def test_shapes_and_the_fallbacks(low):
    x = np.random.default_rng(1).standard_normal((SERIAL_BELOW // 64, 128)).astype(np.float32)
    fast = cast_array(x, low)
    assert fast.shape == x.shape and fast.flags.c_contiguous
    np.testing.assert_array_equal(fast.view(np.uint16), x.astype(low).view(np.uint16))
    for a in (x[:, ::2], x[:3], x.T):          # strided, small, Fortran-ordered: NumPy's astype
        np.testing.assert_array_equal(cast_array(a, low).view(np.uint16), a.astype(low).view(np.uint16))
    np.testing.assert_array_equal(cast_array(fast, np.float64), fast.astype(np.float64))
    assert cast_array(x[:0], low).shape == (0, 128)


_JIT_ONLY = pytest.mark.skipif(numba.config.DISABLE_JIT, reason="the kernels are bypassed without the JIT")


@_JIT_ONLY
def test_the_fast_path_is_the_kernel(monkeypatch):
    calls = []
    real = half_cast._narrow_flat
    monkeypatch.setattr(half_cast, "_narrow_flat", lambda s, o: (calls.append(s.dtype), real(s, o)))
    x = np.ones(SERIAL_BELOW, np.float32)
    assert cast_array(x, np.float16).dtype == np.float16 and calls == [np.float32]
    assert cast_array(x[:10], np.float16).dtype == np.float16 and len(calls) == 1


@pytest.mark.parametrize("low", LOW)
def test_the_sum_of_two_low_arrays_equals_numpy(low):
    rng = np.random.default_rng(2)
    a = (rng.standard_normal(2 * SERIAL_BELOW + 5) * rng.choice([1e-6, 1.0, 3e4], 2 * SERIAL_BELOW + 5))
    b = -a + rng.standard_normal(a.size) * 1e-3          # cancellation, ties and overflow all occur
    a, b = _reference(a.astype(np.float32), low), _reference(b.astype(np.float32), low)
    a[:3] = _reference(np.array([np.inf, 6e4, np.nan], np.float32), low)
    b[:3] = _reference(np.array([-np.inf, 6e4, 1.0], np.float32), low)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = a + b
    got = half_cast.add(a, b)
    assert got.dtype == np.dtype(low)
    nan = np.isnan(ref.astype(np.float32))
    np.testing.assert_array_equal(got.view(np.uint16)[~nan], ref.view(np.uint16)[~nan])
    assert np.isnan(got[nan].astype(np.float32)).all()
    with warnings.catch_warnings():                        # small arrays: NumPy's own add (inf - inf warns)
        warnings.simplefilter("ignore")
        small, ref_small = half_cast.add(a[:7], b[:7]), a[:7] + b[:7]
    np.testing.assert_array_equal(small.view(np.uint16)[3:], ref_small.view(np.uint16)[3:])


@_JIT_ONLY
def test_low_precision_residual_adds_and_gradient_sums_take_the_kernel(monkeypatch):
    import minidl as md
    calls = []
    real = half_cast._add_flat
    monkeypatch.setattr(half_cast, "_add_flat", lambda *a: (calls.append(a[0].dtype), real(*a)))
    x = md.tensor(np.random.default_rng(3).standard_normal(SERIAL_BELOW).astype(np.float16), requires_grad=True)
    y = x * 2
    z = (y + y.exp())                        # one add forward; y's gradient is a sum of two
    z.backward(md.ones_like(z))
    assert len(calls) >= 2
    ref = (2 + 2 * np.exp(2 * x.detach().numpy().astype(np.float32)))
    np.testing.assert_allclose(x.grad.numpy().astype(np.float32), ref, rtol=4e-3)


@pytest.mark.parametrize("low", LOW)
def test_relu_on_two_byte_floats_works_on_the_bits_with_pytorchs_results(low):
    import minidl as md
    import minidl.nn.functional as F
    special = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-7, -1e-7, 3.0, -2.0], np.float32)
    vals = np.concatenate([special, np.random.default_rng(4).standard_normal(SERIAL_BELOW)]).astype(np.float32)
    x = md.tensor(vals.astype(low), requires_grad=True)
    g = np.random.default_rng(5).standard_normal(vals.size).astype(low)
    y = F.relu(x)
    y.backward(md.tensor(g))
    x32 = vals.astype(low).astype(np.float32)
    want = np.where(x32 < 0, 0, x32)                                   # clamp: NaN and -0.0 kept
    assert y.dtype.name == np.dtype(low).name
    np.testing.assert_array_equal(y.detach().numpy().astype(np.float32).view(np.uint32),
                                  want.astype(np.float32).view(np.uint32))
    grad_mask = ~(want <= 0)                                           # threshold backward: NaN passes
    np.testing.assert_array_equal(x.grad.numpy().astype(np.float32), np.where(grad_mask, g.astype(np.float32), 0))
    torch = pytest.importorskip("torch")
    tdt = torch.float16 if low is np.float16 else torch.bfloat16
    tx = torch.tensor(x32, dtype=tdt, requires_grad=True)
    torch.relu(tx).backward(torch.tensor(g.astype(np.float32), dtype=tdt))
    ty, my = torch.relu(tx).detach().float().detach().numpy(), y.detach().numpy().astype(np.float32)
    nan = np.isnan(ty)
    np.testing.assert_array_equal(np.isnan(my), nan)                 # NaN payloads may differ
    np.testing.assert_array_equal(ty[~nan].view(np.uint32), my[~nan].view(np.uint32))   # -0.0 included
    np.testing.assert_array_equal(tx.grad.float().numpy(), x.grad.numpy().astype(np.float32))


def _spy(monkeypatch, name):
    calls = []
    real = getattr(half_cast, name)
    monkeypatch.setattr(half_cast, name, lambda *a: (calls.append(a[0].dtype), real(*a)))
    return calls


@_JIT_ONLY
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_sum_and_copy_of_wide_arrays_run_parallel_and_equal_numpy(monkeypatch, dtype):
    monkeypatch.setattr(numba, "get_num_threads", lambda: 2)
    adds, copies = _spy(monkeypatch, "_add_flat"), _spy(monkeypatch, "_widen_flat")
    rng = np.random.default_rng(4)
    a = rng.standard_normal(3 * SERIAL_BELOW + 7).astype(dtype).reshape(-1, 1)
    b = rng.standard_normal(a.shape).astype(dtype)
    a[:4, 0] = [np.inf, -0.0, np.nan, 1e308 if dtype == np.float64 else 3e38]
    b[:4, 0] = [-np.inf, -0.0, 1.0, 1e308 if dtype == np.float64 else 3e38]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = a + b
    got, c = half_cast.add(a, b), half_cast.copy(a)
    assert adds == [dtype] and copies == [dtype]
    assert got.dtype == dtype and got.shape == a.shape and c.shape == a.shape
    np.testing.assert_array_equal(got.view(np.uint8), ref.view(np.uint8))    # NaN, -0.0 and inf included
    np.testing.assert_array_equal(c.view(np.uint8), a.view(np.uint8))
    assert not np.shares_memory(c, a)
    for x, y in [(a[::2], b[::2]), (a[:9], b[:9]), (a, b.astype(np.float16)), (a, b[:1])]:
        with warnings.catch_warnings():     # strided, small, mixed dtypes, broadcasting: NumPy's add
            warnings.simplefilter("ignore")
            np.testing.assert_array_equal(half_cast.add(x, y), x + y)
    np.testing.assert_array_equal(half_cast.copy(a[::2]), a[::2])
    assert len(adds) == 1 and len(copies) == 1
    monkeypatch.setattr(numba, "get_num_threads", lambda: 1)   # one thread: NumPy's own loops
    half_cast.add(a, b), half_cast.copy(a)
    assert len(adds) == 1 and len(copies) == 1


@_JIT_ONLY
def test_two_leaves_of_one_gradient_get_parallel_copies(monkeypatch):
    import minidl as md
    monkeypatch.setattr(numba, "get_num_threads", lambda: 2)
    copies = _spy(monkeypatch, "_widen_flat")
    rng = np.random.default_rng(5)
    x = md.tensor(rng.standard_normal((SERIAL_BELOW // 8, 8)).astype(np.float32), requires_grad=True)
    r = md.tensor(rng.standard_normal((SERIAL_BELOW // 8, 8)).astype(np.float32), requires_grad=True)
    g = rng.standard_normal(x.shape).astype(np.float32)
    (x + r).backward(md.tensor(g))        # Add's backward hands the caller's array to both leaves
    assert copies == [np.float32, np.float32]
    np.testing.assert_array_equal(x.grad.numpy(), g)
    np.testing.assert_array_equal(r.grad.numpy(), g)
    assert not np.shares_memory(x.grad.numpy(), r.grad.numpy())


@_JIT_ONLY
def test_float32_residual_adds_and_gradient_sums_take_the_parallel_kernel(monkeypatch):
    import minidl as md
    monkeypatch.setattr(numba, "get_num_threads", lambda: 2)
    adds = _spy(monkeypatch, "_add_flat")
    x = md.tensor(np.random.default_rng(6).standard_normal(SERIAL_BELOW).astype(np.float32), requires_grad=True)
    y = x * 2
    z = y + y.exp()                          # one add forward; y's gradient is a sum of two
    z.backward(md.ones_like(z))
    assert adds == [np.float32, np.float32]
    np.testing.assert_allclose(x.grad.numpy(), 2 + 2 * np.exp(2 * x.detach().numpy()), rtol=1e-6)
