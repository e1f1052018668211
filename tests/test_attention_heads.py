"""Attention's fused-softmax path as one parallel region over (batch, head) pairs
(kernels/cpu/attention_heads.py): each thread of Numba's pool runs its pairs' BLAS products and
softmax row passes, reading q, k, v and writing the outputs where they lie.

The region against the NumPy reference (ops/attention.py) in float32 and float64, forward and
backward, over the layouts it meets (a packed projection's heads, C-ordered, 3-D, single rows,
layouts BLAS cannot take) with and without causality and dropout; one share and two giving the
same bits; the op taking the region where it fits and not where it does not; the checks before
the kernels; the region as plain Python under NUMBA_DISABLE_JIT=1."""
import os
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl.kernels.cpu import _cblas
from minidl.kernels.cpu import attention_heads as K
from minidl.ops import attention as A
from minidl.ops.heads import split_heads

pytestmark = pytest.mark.skipif(not _cblas.AVAILABLE, reason="needs a BLAS the kernels can call (kernels/cpu/_cblas)")
TOL = {np.float32: dict(rtol=2e-5, atol=2e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}


def _reference(q, k, v, causal, scale, drop, g):
    """(O, dq, dk, dv) from the op's NumPy reference, in float64."""
    q, k, v, g = (a.astype(np.float64) for a in (q, k, v, g))
    allow = np.tril(np.ones((q.shape[-2], k.shape[-2]), bool)) if causal else None
    o, p, pd = A.attention_forward_reference(q, k, v, None, allow, scale, drop)
    dq, dk, dv, _ = A.attention_backward_reference(q, k, v, p, pd, drop, scale, g)
    return o, dq, dk, dv


def _close(got, expected, dtype):
    assert got.dtype == dtype and got.shape == expected.shape
    scale = max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(got, expected, rtol=TOL[dtype]["rtol"], atol=TOL[dtype]["atol"] * scale)


def _packed(rng, B, H, L, E, dtype):
    """q, k, v (B, H, L, E) as split_heads makes them: views of one (B, L, 3*H*E) projection."""
    x = rng.standard_normal((B, L, 3, H, E)).astype(dtype)
    return tuple(x[:, :, i].transpose(0, 2, 1, 3) for i in range(3))


def _layouts(rng, dtype):
    """name -> (q, k, v): the layouts the region meets."""
    def fresh(*shape):
        return rng.standard_normal(shape).astype(dtype)
    kt = fresh(2, 3, 4, 7)                       # k's rows 1 element apart: BLAS needs a copy
    return {
        "packed": _packed(rng, 3, 4, 6, 5, dtype),
        "c-ordered, L < S": (fresh(2, 3, 4, 5), fresh(2, 3, 7, 5), fresh(2, 3, 7, 2)),
        "c-ordered, L > S": (fresh(2, 3, 7, 5), fresh(2, 3, 4, 5), fresh(2, 3, 4, 6)),
        "3-d": (fresh(5, 6, 4), fresh(5, 6, 4), fresh(5, 6, 3)),
        "one query row": (fresh(2, 3, 7, 5)[:, :, 2:3], fresh(2, 3, 4, 5), fresh(2, 3, 4, 2)),
        "one feature": (fresh(2, 3, 4, 1), fresh(2, 3, 4, 1), fresh(2, 3, 3, 4).transpose(0, 1, 3, 2)[:, :, :, 1:2]),
        "k transposed": (fresh(2, 3, 4, 4), kt.transpose(0, 1, 3, 2), fresh(2, 3, 7, 3)),
    }


@pytest.fixture(params=[1, 2], ids=["one share", "two shares"])
def shares(request, monkeypatch):
    """The region with its pairs on one thread or split between two (small problems included)."""
    if request.param == 2 and numba.get_num_threads() < 2:
        pytest.skip("two shares need two threads")
    monkeypatch.setattr(K, "_shares", lambda q, S: min(request.param, q.shape[0] * q.shape[1]))
    return request.param


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dropout", [False, True])
@pytest.mark.parametrize("layout", list(_layouts(np.random.default_rng(0), np.float32)))
def test_the_region_matches_the_reference(layout, dtype, causal, dropout, shares):
    rng = np.random.default_rng(1)
    q, k, v = _layouts(rng, dtype)[layout]
    assert K.fits(q, k, v)
    S = k.shape[-2]
    drop = (rng.random(q.shape[:-1] + (S,)) > 0.3).astype(dtype) / dtype(0.7) if dropout else None
    g = rng.standard_normal(q.shape[:-1] + v.shape[-1:]).astype(dtype)
    scale = 0.6
    o, p, pd = K.attention_heads_forward(q, k, v, causal, scale, drop)
    dq, dk, dv = K.attention_heads_backward(q, k, v, p, pd, drop, g, scale)
    for got, expected in zip((o, dq, dk, dv), _reference(q, k, v, causal, scale, drop, g)):
        _close(got, expected, dtype)
    assert (pd is p) == (drop is None)


def test_one_share_and_two_give_the_same_bits(monkeypatch):
    """Each pair is computed the same way whichever thread runs it."""
    if numba.get_num_threads() < 2:
        pytest.skip("two shares need two threads")
    rng = np.random.default_rng(2)
    q, k, v = _packed(rng, 3, 5, 8, 4, np.float32)
    g = rng.standard_normal((3, 5, 8, 4)).astype(np.float32)
    results = []
    for n in (1, 2):
        monkeypatch.setattr(K, "_shares", lambda q, S: n)
        o, p, pd = K.attention_heads_forward(q, k, v, True, 0.5, None)
        results.append((o, *K.attention_heads_backward(q, k, v, p, pd, None, g, 0.5)))
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_outputs_land_in_the_callers_layout():
    """O is (B, L, H, Ev) in memory for 4-D operands; gradients go into the arrays passed as
    ``out`` (a packed projection's slots), or into fresh ones where BLAS could not write them."""
    rng = np.random.default_rng(3)
    q, k, v = _packed(rng, 2, 3, 4, 5, np.float64)
    o, p, pd = K.attention_heads_forward(q, k, v, True, 0.4, None)
    assert o.transpose(0, 2, 1, 3).flags.c_contiguous
    g = rng.standard_normal(o.shape)
    buf = np.full((2, 4, 3, 3, 5), np.nan)
    out = tuple(buf[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
    got = K.attention_heads_backward(q, k, v, p, pd, None, g, 0.4, out)
    assert all(a is b for a, b in zip(got, out)) and not np.isnan(buf).any()
    strided = tuple(np.zeros(a.shape + (2,))[..., 0] for a in (q, k, v))   # columns 2 apart
    fresh = K.attention_heads_backward(q, k, v, p, pd, None, g, 0.4, strided)
    assert all(a is not b for a, b in zip(fresh, strided)) and not any(a.any() for a in strided)
    for a, b in zip(fresh, got):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_op_takes_the_region_where_it_fits(monkeypatch, dtype):
    """Unmasked fused-softmax attention runs the region, forward and backward, with the values and
    gradients of the reference implementation; a mask, a broadcast batch or a negative scale keep
    the op's other paths."""
    calls = []
    for name in ("attention_heads_forward", "attention_heads_backward"):
        original = getattr(K, name)
        monkeypatch.setattr(K, name, lambda *a, _f=original, _n=name: calls.append(_n) or _f(*a))
    rng = np.random.default_rng(4)
    x0 = rng.standard_normal((2, 5, 3 * 2 * 4)).astype(dtype)
    g = rng.standard_normal((2, 2, 5, 4)).astype(dtype)
    results = {}
    for impl in ("fused-softmax", "reference"):
        x = md.tensor(x0, requires_grad=True)
        with A.implementation(impl):
            out = F.scaled_dot_product_attention(*split_heads(x, 3, 2), is_causal=True, scale=0.3)
        out.backward(md.tensor(g))
        results[impl] = out.detach().numpy(), x.grad.numpy()
    assert calls == ["attention_heads_forward", "attention_heads_backward"]
    for got, expected in zip(results["fused-softmax"], results["reference"]):
        _close(got, expected.astype(np.float64), dtype)
    calls.clear()
    q, k, v = (md.tensor(a) for a in _packed(rng, 2, 3, 4, 5, dtype))
    with A.implementation("fused-softmax"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=md.tensor(np.tril(np.ones((4, 4), bool))))
        F.scaled_dot_product_attention(q, k[:1], v, scale=0.5)
        F.scaled_dot_product_attention(q, k, v, scale=-1.0)
    assert calls == []


def test_fits_refuses_what_the_region_cannot_take(monkeypatch):
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((2, 3, 4, 5)).astype(np.float32) for _ in range(3))
    assert K.fits(q, k, v)
    assert not K.fits(q.astype(np.float16), k.astype(np.float16), v.astype(np.float16))
    assert not K.fits(q, k.astype(np.float64), v)
    assert not K.fits(q, k[:1], v)                                    # a broadcast batch
    assert not K.fits(q[..., :0], k[..., :0], v)                      # no features
    assert not K.fits(q[None, None], k[None, None], v[None, None])    # 6-D
    assert not K.fits(q[0, 0], k[0, 0], v[0, 0])                      # 2-D
    from minidl.runtime import block_workers
    monkeypatch.setattr(block_workers, "in_worker", lambda: True)
    assert not K.fits(q, k, v)


def test_the_entry_points_check_shapes_first():
    rng = np.random.default_rng(6)
    q, k, v = (rng.standard_normal((2, 3, 4, 5)) for _ in range(3))
    with pytest.raises(ValueError, match=r"q \(2, 3, 4, 5\) float64, k \(2, 3, 4, 6\)"):
        K.attention_heads_forward(q, rng.standard_normal((2, 3, 4, 6)), v, False, 1.0, None)
    # what the kernels would index out of bounds or over no rows: refused by the entry points too
    for kk, vv in [(k[:1], v[:1]), (k[:, :2], v[:, :2]), (k[..., :0, :], v[..., :0, :]), (k[0], v[0]),
                   (k.astype(np.float32), v)]:
        with pytest.raises(ValueError, match="one batch shape and dtype and no empty dimension"):
            K.attention_heads_forward(q, kk, vv, False, 1.0, None)
        with pytest.raises(ValueError, match="one batch shape and dtype and no empty dimension"):
            K.attention_heads_backward(q, kk, vv, np.zeros((2, 3, 4, 4)), np.zeros((2, 3, 4, 4)), None,
                                       np.zeros((2, 3, 4, 5)), 1.0)
    with pytest.raises(ValueError, match="dropout multiplier of shape"):
        K.attention_heads_forward(q, k, v, False, 1.0, np.ones((2, 3, 4, 3)))
    o, p, pd = K.attention_heads_forward(q, k, v, False, 1.0, None)
    with pytest.raises(ValueError, match="do not match"):
        K.attention_heads_backward(q, k, v, p, pd, None, o[..., :2], 1.0)
    with pytest.raises(ValueError, match="do not match"):
        K.attention_heads_backward(q, k, v, p[..., :3], pd[..., :3], None, o, 1.0)
    with pytest.raises(ValueError, match=r"dropout multiplier \(2, 3, 4, 3\) do not match"):
        K.attention_heads_backward(q, k, v, p, pd, np.ones((2, 3, 4, 3)), o, 1.0)


def test_the_region_runs_as_python_without_the_jit():
    """NUMBA_DISABLE_JIT=1: the same kernels and GEMM binding as Python, the reference's numbers."""
    script = textwrap.dedent("""
        import numpy as np
        from minidl.kernels.cpu import attention_heads as K
        from minidl.ops import attention as A
        rng = np.random.default_rng(0)
        x = rng.standard_normal((2, 5, 3, 2, 4))
        q, k, v = (x[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
        g = rng.standard_normal((2, 2, 5, 4))
        o, p, pd = K.attention_heads_forward(q, k, v, True, 0.5, None)
        got = (o,) + K.attention_heads_backward(q, k, v, p, pd, None, g, 0.5)
        allow = np.tril(np.ones((5, 5), bool))
        ro, rp, rpd = A.attention_forward_reference(q, k, v, None, allow, 0.5, None)
        want = (ro,) + A.attention_backward_reference(q, k, v, rp, rpd, None, 0.5, g)[:3]
        print(max(float(np.abs(a - b).max()) for a, b in zip(got, want)))
    """)
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout.strip().splitlines()[-1]) < 1e-12
