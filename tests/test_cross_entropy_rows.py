"""cross_entropy's row kernels (kernels/cpu/cross_entropy.py) against their NumPy reference
(ops/loss.py): float32 and float64, one thread and several chunks, with weights, smoothing and
ignored rows; -inf logits and ignored rows exact; a target out of range refused before it is
read; and the op the same under either implementation, for 2-D and (N, C, d) logits, also
when the logits change after forward (log-softmax is what backward reads, as PyTorch)."""
import itertools

import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl.kernels.cpu import cross_entropy as K
from minidl.ops import loss as L
from minidl.ops._kernel_switch import implementation

CASES = list(itertools.product([(6, 5), (3000, 33)], [False, True], [0.0, 0.2]))   # rows; weighted; smoothing


def _inputs(rows, weighted, dtype, seed=0):
    rng = np.random.default_rng(seed)
    M, C = rows
    x = (3 * rng.standard_normal(rows)).astype(dtype)
    t = rng.integers(0, C, M)
    t[::4] = -100                                   # ignored rows
    x[1, 2] = x[5, 0] = -np.inf                     # masked-out logits
    t[1], t[5] = 0, 1                            # targets elsewhere in those rows
    w = rng.random(C) + 0.5 if weighted else None
    r = rng.standard_normal(M).astype(dtype)        # a random cotangent per row ("none")
    return x, t, w, r


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows,weighted,smoothing", CASES)
def test_the_kernels_match_the_reference(rows, weighted, smoothing, dtype):
    x, t, w, r = _inputs(rows, weighted, dtype)
    tol = dict(rtol=2e-5, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    got, want = K.cross_entropy_forward(x, t, w, -100, smoothing), L.cross_entropy_forward_reference(x, t, w, -100,
                                                                                                        smoothing)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, **tol)
    assert got[1].dtype == dtype
    dx = K.cross_entropy_backward(got[1], t, got[2], w, -100, smoothing, r)
    ref = L.cross_entropy_backward_reference(want[1], t, want[2], w, -100, smoothing, r)
    assert dx.dtype == dtype
    np.testing.assert_allclose(dx, ref, **tol)
    assert (dx[t == -100] == 0).all() and (got[0][t == -100] == 0).all()    # ignored: exactly 0
    if not smoothing:
        assert dx[1, 2] == 0 and dx[5, 0] == 0                             # exp(-inf) = 0, not exp32's 1e-38


def test_a_target_out_of_range_is_refused():
    x = np.zeros((3, 4), np.float32)
    with pytest.raises(IndexError, match="out of bounds for 4 classes"):
        K.cross_entropy_forward(x, np.array([0, 4, 1]), None, -100, 0.0)
    with pytest.raises(IndexError, match="out of bounds"):
        K.cross_entropy_forward(x, np.array([0, -1, 1]), None, -100, 0.0)


def test_arrays_of_the_wrong_length_are_refused_before_the_kernels():
    x, t = np.zeros((3, 4), np.float32), np.array([0, 1, 2])
    with pytest.raises(ValueError, match=r"expected t of shape \(3,\) for 3 rows, got one of shape \(2,\)"):
        K.cross_entropy_forward(x, t[:2], None, -100, 0.0)
    with pytest.raises(ValueError, match=r"expected a weight of shape \(4,\), got one of shape \(3,\)"):
        K.cross_entropy_forward(x, t, np.ones(3), -100, 0.1)
    _, logp, wt = K.cross_entropy_forward(x, t, None, -100, 0.0)
    with pytest.raises(ValueError, match=r"expected r of shape \(3,\)"):
        K.cross_entropy_backward(logp, t, wt, None, -100, 0.0, np.ones(5))
    with pytest.raises(ValueError, match=r"expected wt of shape \(3,\)"):
        K.cross_entropy_backward(logp, t, wt[:1], None, -100, 0.0, np.ones(3))


def _op(impl, x0, t, mutate=False, **kw):
    with implementation(impl):
        x = md.tensor(x0, requires_grad=True)
        h = x * 1.0                      # a non-leaf: it may be changed in place after the loss
        loss = F.cross_entropy(h, md.tensor(t), **kw)
        if mutate:
            with md.no_grad():
                h.mul_(3.0)
        loss.backward()
        return loss.detach().numpy(), x.grad.numpy()


@pytest.mark.parametrize("shape", [(300, 260), (4, 7, 5)])   # rows past the parallel threshold; (N, C, d)
@pytest.mark.parametrize("kw", [{}, {"label_smoothing": 0.1, "weight": md.tensor(np.linspace(0.5, 2.0, 7))},
                                {"reduction": "sum", "ignore_index": 3}])
def test_the_op_is_the_same_under_both_implementations(shape, kw):
    rng = np.random.default_rng(1)
    x0 = rng.standard_normal(shape)
    C = shape[1]
    t = rng.integers(0, C, (shape[0],) + shape[2:])
    if "weight" in kw and C != 7:
        kw = dict(kw, weight=md.tensor(np.linspace(0.5, 2.0, C)))
    ref, fast = _op("reference", x0, t, **kw), _op("numba", x0, t, **kw)
    for a, b in zip(ref, fast):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("impl", ["reference", "numba"])
def test_the_logits_may_change_after_forward(impl):
    rng = np.random.default_rng(2)
    x0, t = rng.standard_normal((5, 4)), rng.integers(0, 4, 5)
    for a, b in zip(_op(impl, x0, t), _op(impl, x0, t, mutate=True)):
        np.testing.assert_array_equal(a, b)
