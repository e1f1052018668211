"""The residual add fused with LayerNorm / RMSNorm: (s, y) = (x + r, norm(x + r)).

Forward and backward of both implementations (NumPy reference, Numba kernels) against plain
NumPy formulas and float64 gradcheck with random cotangents on both outputs; the kernels
against the reference in float32 and float64 (streamed and plain stores, with and without the
stream's gradient); errors; and the zoo's Transformers, whose outputs and gradients must be
those of the unfused composition. PyTorch, when installed, as an oracle."""
import os
import subprocess
import sys

import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl.kernels.cpu import residual_norm as K
from minidl.ops import normalization as N
from minidl.ops.normalization import residual_norm as R
from minidl.testing import OpSpec, check_forward, check_gradcheck, forward_cases, spec_id
from minidl.zoo.encoder import TransformerEncoderClassifier
from minidl.zoo.gpt import GPT
from minidl.zoo.transformer import SelfAttention

IMPLS = ("reference", "numba")


# independent NumPy formulas ------------------------------------------------------------------
def np_layer_norm(s, w=None, b=None, eps=1e-5):
    mu = s.mean(-1, keepdims=True)
    y = (s - mu) / np.sqrt(((s - mu) ** 2).mean(-1, keepdims=True) + eps)
    return y * (1 if w is None else w) + (0 if b is None else b)


def np_rms_norm(s, w=None, eps=1e-6):
    return s / np.sqrt((s * s).mean(-1, keepdims=True) + eps) * (1 if w is None else w)


def _with(impl, fn):
    def run(*args):
        with N.implementation(impl):
            return fn(*args)
    return run


def _specs(impl):
    specs = []
    for shape in [(3, 5), (2, 3, 4), (4, 1)]:
        d, tag = shape[-1], "x".join(map(str, shape))

        def inputs(rng, shape=shape, d=d):
            return (rng.standard_normal(shape), rng.standard_normal(shape), 1 + 0.3 * rng.standard_normal(d),
                    rng.standard_normal(d))
        specs += [
            OpSpec(f"add_layer_norm-{impl}-{tag}",
                   _with(impl, lambda x, r, w, b, d=d: F.add_layer_norm(x, r, (d,), w, b)),
                   lambda x, r, w, b: (x + r, np_layer_norm(x + r, w, b)), inputs),
            OpSpec(f"add_layer_norm-{impl}-plain-{tag}", _with(impl, lambda x, r, w, b, d=d: F.add_layer_norm(x, r, d)),
                   lambda x, r, w, b: (x + r, np_layer_norm(x + r)), inputs, grad_inputs=(0, 1)),
            OpSpec(f"add_layer_norm-{impl}-norm-only-{tag}",
                   _with(impl, lambda x, r, w, b, d=d: F.add_layer_norm(x, r, (d,), w, b, return_sum=False)),
                   lambda x, r, w, b: np_layer_norm(x + r, w, b), inputs),
            OpSpec(f"add_rms_norm-{impl}-{tag}",
                   _with(impl, lambda x, r, w, b, d=d: F.add_rms_norm(x, r, (d,), w, 1e-6)),
                   lambda x, r, w, b: (x + r, np_rms_norm(x + r, w)), inputs, grad_inputs=(0, 1, 2)),
            OpSpec(f"add_rms_norm-{impl}-norm-only-{tag}",
                   _with(impl, lambda x, r, w, b, d=d: F.add_rms_norm(x, r, (d,), w, 1e-6, return_sum=False)),
                   lambda x, r, w, b: np_rms_norm(x + r, w), inputs, grad_inputs=(0, 1, 2)),
        ]
    return specs


SPECS = _specs("reference") + _specs("numba")


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward_matches_numpy(spec, dtype, device):
    check_forward(spec, dtype, device)


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck(spec):
    assert check_gradcheck(spec)


# the kernels against the reference -----------------------------------------------------------
def _arrays(n, d, dtype, seed=0, mean=0.0):
    g = np.random.default_rng(seed)
    x, r, dy, ds = (mean / 2 + g.standard_normal((n, d)) for _ in range(4))
    w, b = 1 + 0.3 * g.standard_normal(d), g.standard_normal(d)
    return [a.astype(dtype) for a in (x, r, w, b, dy, ds)]


TOL = {np.float32: dict(rtol=2e-4, atol=2e-4), np.float64: dict(rtol=1e-10, atol=1e-10)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("with_ds", [False, True])
def test_layer_norm_kernels_match_reference(dtype, stream, with_ds):
    # 67 rows: several chunks and rows per chunk; 96 features: streamed rows of 384 bytes or more
    x, r, w, b, dy, ds = _arrays(67, 96, dtype, mean=20.0)
    ds = ds if with_ds else None
    s, y, mean, rstd = K.add_layer_norm_forward(x, r, w, b, 1e-5, stream=stream)
    rs, ry, rmean, rrstd = R.add_layer_norm_forward_reference(x, r, w, b, 1e-5)
    np.testing.assert_array_equal(s, rs)                  # the sum is the plain float add
    np.testing.assert_allclose(y, ry, **TOL[dtype])
    np.testing.assert_allclose(mean, rmean, rtol=1e-6 if dtype == np.float32 else 1e-12)
    np.testing.assert_allclose(rstd, rrstd, rtol=1e-5 if dtype == np.float32 else 1e-12)
    dr = np.full_like(s, np.nan)          # r's own copy, written in the same pass
    dx, dw, db = K.add_layer_norm_backward(dy, ds, s, mean, rstd, w, stream=stream, dr_out=dr)
    rdx, rdw, rdb = R.add_layer_norm_backward_reference(dy, ds, rs, rmean, rrstd, w)
    for got, want in ((dx, rdx), (dw, rdw), (db, rdb)):
        np.testing.assert_allclose(got, want, **TOL[dtype])
    np.testing.assert_array_equal(dr, dx)
    dx_only, none_w, none_b = K.add_layer_norm_backward(dy, ds, s, mean, rstd, w, True, False, False)
    np.testing.assert_array_equal(dx_only, dx) if not stream else np.testing.assert_allclose(dx_only, dx, **TOL[dtype])
    assert none_w is None and none_b is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("with_ds", [False, True])
def test_rms_norm_kernels_match_reference(dtype, stream, with_ds):
    x, r, w, _, dy, ds = _arrays(67, 96, dtype, seed=1)
    ds = ds if with_ds else None
    s, y, rstd = K.add_rms_norm_forward(x, r, w, 1e-6, stream=stream)
    rs, ry, rrstd = R.add_rms_norm_forward_reference(x, r, w, 1e-6)
    np.testing.assert_array_equal(s, rs)
    np.testing.assert_allclose(y, ry, **TOL[dtype])
    np.testing.assert_allclose(rstd, rrstd, rtol=1e-5 if dtype == np.float32 else 1e-12)
    dr = np.full_like(s, np.nan)
    dx, dw = K.add_rms_norm_backward(dy, ds, s, rstd, w, stream=stream, dr_out=dr)
    rdx, rdw = R.add_rms_norm_backward_reference(dy, ds, rs, rrstd, w)
    np.testing.assert_allclose(dx, rdx, **TOL[dtype])
    np.testing.assert_array_equal(dr, dx)
    np.testing.assert_allclose(dw, rdw, **TOL[dtype])
    none_dx, dw_only = K.add_rms_norm_backward(dy, ds, s, rstd, w, False, True)
    assert none_dx is None
    np.testing.assert_allclose(dw_only, dw, **TOL[dtype])


def test_large_mean_float32_statistics_are_exact():
    # 1e3 + small noise: E[s^2] - E[s]^2 would cancel to nothing in float32
    x, r, w, b, _, _ = _arrays(40, 300, np.float32, seed=2)
    x = (1000 + 0.01 * x).astype(np.float32)
    r = (0.01 * r).astype(np.float32)
    s, y, mean, rstd = K.add_layer_norm_forward(x, r, w, b, 1e-5)
    s64 = s.astype(np.float64)
    var = s64.var(-1)
    np.testing.assert_allclose(rstd, 1 / np.sqrt(var + 1e-5), rtol=2e-4)
    np.testing.assert_allclose(y, np_layer_norm(s64, w.astype(np.float64), b.astype(np.float64)), atol=3e-3)


@pytest.mark.parametrize("impl", IMPLS)
def test_float16_inputs_give_float16_outputs(impl):
    g = np.random.default_rng(3)
    x, r = (g.standard_normal((8, 64)).astype(np.float16) for _ in range(2))
    w = md.tensor(np.ones(64, np.float32), requires_grad=True)
    with N.implementation(impl):
        xt, rt = md.tensor(x, requires_grad=True), md.tensor(r, requires_grad=True)
        s, y = F.add_layer_norm(xt, rt, 64, w)
        (s.float().sum() + (y.float() * y.float()).sum()).backward()
    assert s.dtype == y.dtype == xt.grad.dtype == np.float16 and w.grad.dtype == np.float32
    np.testing.assert_array_equal(s.detach().numpy(), x + r)
    np.testing.assert_allclose(y.detach().numpy(), np_layer_norm((x + r).astype(np.float64)), atol=1e-2)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("shape", [(0, 5), (3, 0)])
def test_empty_inputs(impl, shape):
    x = md.zeros(*shape, requires_grad=True)
    r = md.zeros(*shape, requires_grad=True)
    with N.implementation(impl):
        s, y = F.add_layer_norm(x, r, shape[-1])
        (s.sum() + y.sum()).backward()
        s2, y2 = F.add_rms_norm(x, r, shape[-1])
    assert s.shape == y.shape == s2.shape == y2.shape == shape and x.grad.shape == shape


def _loss(s, y):
    return (s * s).sum() + (y * y).sum()


def _no_engine_copies(monkeypatch):
    from minidl.autograd import engine
    copies = []
    real = engine._copy
    monkeypatch.setattr(engine, "_copy", lambda g: copies.append(g.shape) or real(g))
    return copies


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("which", ["layer", "rms"])
def test_two_leaves_get_separate_gradient_arrays_from_the_one_pass(impl, which, monkeypatch):
    # the kernel writes r's copy itself: the engine copies nothing
    g = np.random.default_rng(3)
    xa, ra = g.standard_normal((5, 8)), g.standard_normal((5, 8))
    fn = (lambda x, r: F.add_layer_norm(x, r, 8)) if which == "layer" else (lambda x, r: F.add_rms_norm(x, r, 8))
    x, r = md.tensor(xa, requires_grad=True), md.tensor(ra, requires_grad=True)
    copies = _no_engine_copies(monkeypatch)
    with N.implementation(impl):
        _loss(*fn(x, r)).backward()
    assert copies == []
    assert not np.shares_memory(x.grad.numpy(), r.grad.numpy())
    np.testing.assert_array_equal(x.grad.numpy(), r.grad.numpy())
    # the same gradient as through non-leaf inputs, which share the one array
    a, b = md.tensor(xa, requires_grad=True), md.tensor(ra, requires_grad=True)
    with N.implementation(impl):
        _loss(*fn(a * 1.0, b * 1.0)).backward()
    np.testing.assert_allclose(a.grad.numpy(), x.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), x.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("impl", IMPLS)
def test_leaves_with_gradients_or_one_leaf_twice_accumulate(impl):
    g = np.random.default_rng(4)
    xa, ra = g.standard_normal((5, 8)), g.standard_normal((5, 8))
    ref_x, ref_r = md.tensor(xa, requires_grad=True), md.tensor(ra, requires_grad=True)
    with N.implementation(impl):
        _loss(*F.add_layer_norm(ref_x, ref_r, 8)).backward()
    want = ref_x.grad.numpy()
    # x already holds a gradient: it is added to; r still gets its own array
    x, r = md.tensor(xa, requires_grad=True), md.tensor(ra, requires_grad=True)
    x.grad = md.ones(5, 8, dtype=md.float64)
    with N.implementation(impl):
        _loss(*F.add_layer_norm(x, r, 8)).backward()
    np.testing.assert_allclose(x.grad.numpy(), want + 1, rtol=1e-12)
    np.testing.assert_allclose(r.grad.numpy(), want, rtol=1e-12)
    assert not np.shares_memory(x.grad.numpy(), r.grad.numpy())
    # one leaf as both inputs: d(x + x) / dx = 2
    t = md.tensor(xa, requires_grad=True)
    u = md.tensor(xa, requires_grad=True)
    with N.implementation(impl):
        _loss(*F.add_layer_norm(t, t, 8)).backward()
        _loss(*F.add_layer_norm(u * 1.0, u * 1.0, 8)).backward()
    np.testing.assert_allclose(t.grad.numpy(), u.grad.numpy(), rtol=1e-12)


def test_a_second_output_of_the_wrong_shape_is_refused():
    x, r, w, b, dy, ds = _arrays(4, 8, np.float32)
    s, y, mean, rstd = K.add_layer_norm_forward(x, r, w, b, 1e-5)
    with pytest.raises(ValueError, match=r"expected an output array of shape \(4, 8\), got one of shape \(4, 7\)"):
        K.add_layer_norm_backward(dy, ds, s, mean, rstd, w, dr_out=np.empty((4, 7), np.float32))
    with pytest.raises(ValueError, match=r"shape \(4, 8\), got one of shape \(32,\)"):
        K.add_rms_norm_backward(dy, ds, s, rstd, w, dx_out=np.empty(32, np.float32))


def test_bad_inputs_are_refused_with_clear_errors():
    x = md.randn(2, 4)
    with pytest.raises(RuntimeError, match=r"residual of the input's shape \[2, 4\].*\[2, 1\]"):
        F.add_layer_norm(x, md.randn(2, 1), 4)
    with pytest.raises(TypeError, match="expected a Tensor residual"):
        F.add_rms_norm(x, np.zeros((2, 4), np.float32), 4)
    with pytest.raises(TypeError, match="dtypes differ: input is float32 but residual is float64"):
        F.add_layer_norm(x, md.randn(2, 4, dtype=md.float64), 4)
    with pytest.raises(RuntimeError, match="normalized_shape"):
        F.add_layer_norm(x, md.randn(2, 4), 3)
    with pytest.raises(RuntimeError, match="expected weight of shape"):
        F.add_layer_norm(x, md.randn(2, 4), 4, md.ones(3))
    with pytest.raises(ValueError, match="same"):
        K.add_layer_norm_forward(np.zeros((2, 4), np.float32), np.zeros((2, 3), np.float32), None, None, 1e-5)


def test_an_in_place_write_to_the_saved_sum_is_caught():
    x = md.randn(3, 4, requires_grad=True)
    s, y = F.add_layer_norm(x, md.randn(3, 4), 4)
    loss = (y * y).sum()
    with md.no_grad():
        s += 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


# the zoo's Transformers: the same values as the unfused composition --------------------------
def _mlp(m, x):
    return m.fc2(m.act(m.fc1(x)))


def _unfused_blocks(model, x, kpm=None):
    """The blocks and final norm as plain adds, norms, Linears and GELUs, module by module (the
    formulas of zoo/transformer.py's docstring)."""
    for blk in model.blocks:
        if blk.norm_position == "pre":
            x = x + blk.drop(blk.attn(blk.norm1(x, kpm), kpm))
            x = x + blk.drop(_mlp(blk.mlp, blk.norm2(x, kpm)))
        else:
            a = blk.alpha
            x = blk.norm1((x if a == 1.0 else x * a) + blk.drop(blk.attn(x, kpm)), kpm)
            x = blk.norm2((x if a == 1.0 else x * a) + blk.drop(_mlp(blk.mlp, x)), kpm)
    final = getattr(model, "ln_f", None) or getattr(model, "norm", None)
    return x if final is None else final(x, kpm)


def _unfused_gpt(model, idx, targets):
    x = model.drop(model.pos_emb(model.tok_emb(md.tensor(idx))))
    logits = model.head(_unfused_blocks(model, x))
    B, T = idx.shape
    return logits, F.cross_entropy(logits.reshape(B * T, -1), md.tensor(targets).reshape(B * T))


def _grads(model):
    return {name: p.grad.numpy().copy() for name, p in model.named_parameters()}


@pytest.mark.parametrize("norm_position,norm", [("pre", "layer"), ("pre", "rms"), ("post", "layer"),
                                                 ("deepnorm", "rms"), ("pre", "scale")])
def test_gpt_forward_and_backward_equal_the_unfused_composition(norm_position, norm):
    md.manual_seed(0)
    model = GPT(vocab_size=11, block_size=8, n_layer=3, n_head=2, d_model=16, norm_position=norm_position, norm=norm)
    g = np.random.default_rng(0)
    idx, tgt = g.integers(0, 11, (3, 8)), g.integers(0, 11, (3, 8))
    results = []
    for forward in (lambda: model(idx, tgt), lambda: _unfused_gpt(model, idx, tgt)):
        model.zero_grad()
        logits, loss = forward()
        loss.backward()
        results.append((logits.detach().numpy().copy(), _grads(model)))
    (fused, g_fused), (plain, g_plain) = results
    np.testing.assert_allclose(fused, plain, rtol=1e-5, atol=1e-5)
    assert g_fused.keys() == g_plain.keys()
    for name in g_fused:
        np.testing.assert_allclose(g_fused[name], g_plain[name], rtol=1e-4, atol=1e-6, err_msg=name)


def test_encoder_with_padding_and_batch_norm_equals_the_unfused_composition():
    for norm in ("layer", "batch"):
        md.manual_seed(1)
        model = TransformerEncoderClassifier(vocab_size=9, num_classes=3, max_len=6, d_model=8, n_head=2,
                                             n_layer=2, dropout=0.0, norm=norm)
        idx = np.array([[1, 2, 3, 0, 0, 0], [4, 5, 6, 7, 8, 1]])
        kpm = idx == 0
        with md.no_grad():
            fused, _ = model.encode(md.tensor(idx))
            x = model.pos_emb(model.tok_emb(md.tensor(idx)))
            plain = _unfused_blocks(model, x, kpm)
        np.testing.assert_allclose(fused.numpy(), plain.numpy(), rtol=1e-5, atol=1e-5)


def test_a_hooked_norm_sees_the_sum_and_the_output_is_unchanged():
    md.manual_seed(2)
    model = GPT(vocab_size=7, block_size=4, n_layer=2, n_head=1, d_model=8)
    idx = np.arange(8).reshape(2, 4) % 7
    with md.no_grad():
        fused = model(idx)[0].numpy()
        seen = []
        model.blocks[1].norm1.register_forward_hook(lambda m, args, out: seen.append(args[0].numpy().copy()))
        block_hook = []
        model.blocks[0].register_forward_hook(lambda m, args, out: block_hook.append(out.numpy().copy()))
        hooked = model(idx)[0].numpy()
    np.testing.assert_allclose(hooked, fused, rtol=1e-5, atol=1e-6)
    assert len(seen) == len(block_hook) == 1
    np.testing.assert_allclose(seen[0], block_hook[0], rtol=1e-6)   # block 0's output is norm1's input


# qk-norm ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("qk_norm", ["layer", "rms"])
def test_qk_norm_adds_per_head_norms_and_makes_attention_scale_invariant(qk_norm):
    md.manual_seed(3)
    plain = GPT(vocab_size=7, block_size=6, n_layer=1, n_head=2, d_model=8)
    model = GPT(vocab_size=7, block_size=6, n_layer=1, n_head=2, d_model=8, qk_norm=qk_norm)
    assert not any("q_norm" in k for k in plain.state_dict())
    names = set(model.state_dict())
    assert {"blocks.0.attn.q_norm.weight", "blocks.0.attn.k_norm.weight"} <= names
    assert ("blocks.0.attn.q_norm.bias" in names) == (qk_norm == "layer")
    assert model.blocks[0].attn.q_norm.weight.shape == (4,)     # head_dim, shared by the heads
    idx = np.arange(12).reshape(2, 6) % 7
    _, loss = model(idx, idx)
    loss.backward()
    assert np.abs(model.blocks[0].attn.q_norm.weight.grad.numpy()).max() > 0

    x = md.randn(2, 6, 8)

    def scaled_queries_and_keys(attn, c):
        """The attention's output after multiplying its query and key projections by c."""
        with md.no_grad():
            w, b = attn.qkv.weight, attn.qkv.bias
            w0, b0 = w.detach().numpy().copy(), b.detach().numpy().copy()
            w._data[:16] *= c
            b._data[:16] *= c
            out = attn(x).numpy()
            w._data[...], b._data[...] = w0, b0
        return out
    # normalized queries and keys do not see the scale (but for eps, which matters for a head whose
    # 4 features happen to be close); plain attention's logits grow with it
    normed = SelfAttention(8, 2, causal=True, qk_norm=qk_norm)
    changed = np.abs(scaled_queries_and_keys(normed, 30.0) - scaled_queries_and_keys(normed, 1.0)).max()
    unnormed = SelfAttention(8, 2, causal=True)
    changed_plain = np.abs(scaled_queries_and_keys(unnormed, 30.0) - scaled_queries_and_keys(unnormed, 1.0)).max()
    assert changed < 1e-2 < 0.1 < changed_plain


def test_qk_norm_is_checked():
    with pytest.raises(ValueError, match="unknown qk_norm 'batch'"):
        GPT(vocab_size=7, block_size=6, n_layer=1, n_head=2, d_model=8, qk_norm="batch")


# NUMBA_DISABLE_JIT and PyTorch --------------------------------------------------------------------
def test_kernels_run_without_jit():
    code = ("import numpy as np, minidl as md, minidl.nn.functional as F\n"
            "from minidl.autograd import gradcheck\n"
            "g = np.random.default_rng(0)\n"
            "x, r = (md.tensor(g.standard_normal((3, 4)), requires_grad=True) for _ in range(2))\n"
            "w = md.tensor(g.standard_normal(4), requires_grad=True)\n"
            "assert gradcheck(lambda x, r, w: F.add_layer_norm(x, r, (4,), w, w), [x, r, w])\n"
            "assert gradcheck(lambda x, r, w: F.add_rms_norm(x, r, (4,), w), [x, r, w])\n")
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]


@pytest.mark.parametrize("which", ["layer", "rms"])
def test_against_pytorch(which):
    torch = pytest.importorskip("torch")
    g = np.random.default_rng(8)
    x, r, gs, gy = (g.standard_normal((4, 3, 10)).astype(np.float32) for _ in range(4))
    w, b = (1 + 0.3 * g.standard_normal(10)).astype(np.float32), g.standard_normal(10).astype(np.float32)
    tx, tr, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, r, w, b))
    ts = tx + tr
    ty = (torch.nn.functional.layer_norm(ts, (10,), tw, tb) if which == "layer"
          else torch.nn.functional.rms_norm(ts, (10,), tw, 1e-6))
    torch.autograd.backward([ts, ty], [torch.tensor(gs), torch.tensor(gy)])
    mx, mr, mw, mb = (md.tensor(a, requires_grad=True) for a in (x, r, w, b))
    ms, my = F.add_layer_norm(mx, mr, 10, mw, mb) if which == "layer" else F.add_rms_norm(mx, mr, 10, mw, 1e-6)
    md.autograd.backward([ms, my], [md.tensor(gs), md.tensor(gy)])
    np.testing.assert_array_equal(ms.detach().numpy(), ts.detach().numpy())
    np.testing.assert_allclose(my.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    for a, t in ((mx, tx), (mr, tr), (mw, tw)):
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-4)
    if which == "layer":
        np.testing.assert_allclose(mb.grad.numpy(), tb.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("which", ["layer", "rms"])
def test_results_do_not_depend_on_where_the_arrays_lie(which):
    # small arrays side by side in one buffer, as malloc places them: the same bits as apart
    x, r, w, b, dy, ds = _arrays(4, 8, np.float32, seed=5)
    buf = np.empty(6 * 32, np.float32)
    views = [buf[k * 32:(k + 1) * 32].reshape(4, 8) for k in range(6)]
    for v, a in zip(views[:4], (x, r, dy, ds)):
        v[...] = a
    if which == "layer":
        apart = K.add_layer_norm_forward(x, r, w, b, 1e-5)
        close = K.add_layer_norm_forward(*views[:2], w, b, 1e-5, out=views[4], sum_out=views[5])
        g_apart = K.add_layer_norm_backward(dy, ds, apart[0], apart[2], apart[3], w)
        g_close = K.add_layer_norm_backward(views[2], views[3], views[5], close[2], close[3], w, dx_out=views[0])
    else:
        apart = K.add_rms_norm_forward(x, r, w, 1e-5)
        close = K.add_rms_norm_forward(*views[:2], w, 1e-5, out=views[4], sum_out=views[5])
        g_apart = K.add_rms_norm_backward(dy, ds, apart[0], apart[2], w)
        g_close = K.add_rms_norm_backward(views[2], views[3], views[5], close[2], w, dx_out=views[0])
    for a, c in zip(apart + g_apart, close + g_close):
        np.testing.assert_array_equal(a, c)
