"""scaled_dot_product_attention (reference and fused Numba kernel), positional encodings,
and MultiheadAttention (against PyTorch when it is installed)."""
import threading

import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl.autograd import gradcheck
from minidl.ops import attention as A
from minidl.testing import OpSpec, check_forward, check_gradcheck, check_implementations, forward_cases, spec_id

IMPLS = ("reference", "numba", "fused-softmax")


def naive_attention(q, k, v, mask=None, causal=False, scale=None):
    """softmax(q k^T * scale + mask) v written directly (bool mask: True = may attend)."""
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = np.einsum("...le,...se->...ls", q, k) * scale
    L, S = s.shape[-2:]
    if causal:
        s = np.where(np.tril(np.ones((L, S), bool)), s, -np.inf)
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    with np.errstate(invalid="ignore"):  # a fully masked row is NaN here (tested separately)
        s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(axis=-1, keepdims=True)
    return np.einsum("...ls,...se->...le", p, v)


def _qkv(rng, batch=(2, 3), L=4, S=5, E=3, Ev=2):
    return (rng.standard_normal(batch + (L, E)), rng.standard_normal(batch + (S, E)),
            rng.standard_normal(batch + (S, Ev)))


def _bool_mask(rng, shape):
    m = rng.random(shape) > 0.35
    m[..., 0] = True  # every query sees at least one key (fully masked rows have their own test)
    return m


def _specs(impl):
    def op(**kw):
        def run(q, k, v, *mask):
            with A.implementation(impl):
                return F.scaled_dot_product_attention(q, k, v, *mask, **kw)
        return run

    return [
        OpSpec(f"sdpa-{impl}-plain", op(), lambda q, k, v: naive_attention(q, k, v), lambda r: _qkv(r)),
        OpSpec(f"sdpa-{impl}-causal", op(is_causal=True), lambda q, k, v: naive_attention(q, k, v, causal=True),
               lambda r: _qkv(r, L=5, S=5)),
        OpSpec(f"sdpa-{impl}-causal-L<S", op(is_causal=True),
               lambda q, k, v: naive_attention(q, k, v, causal=True), lambda r: _qkv(r, L=3, S=5)),
        OpSpec(f"sdpa-{impl}-boolmask", op(), lambda q, k, v, m: naive_attention(q, k, v, m),
               lambda r: _qkv(r) + (_bool_mask(r, (2, 1, 4, 5)),)),
        # the float mask is an input too: gradcheck checks its gradient (dS summed over heads)
        OpSpec(f"sdpa-{impl}-floatmask", op(), lambda q, k, v, m: naive_attention(q, k, v, m),
               lambda r: _qkv(r) + (r.standard_normal((1, 3, 4, 5)),)),
        OpSpec(f"sdpa-{impl}-broadcast-batch", op(scale=0.7),
               lambda q, k, v: naive_attention(q, k, v, scale=0.7),
               lambda r: (r.standard_normal((2, 3, 4, 3)), r.standard_normal((1, 3, 5, 3)),
                          r.standard_normal((2, 1, 5, 2)))),
        OpSpec(f"sdpa-{impl}-3d", op(is_causal=True), lambda q, k, v: naive_attention(q, k, v, causal=True),
               lambda r: _qkv(r, batch=(3,), L=4, S=4, E=4, Ev=4)),
    ]


SPECS = _specs("reference") + _specs("numba") + _specs("fused-softmax")


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward(spec, dtype, device):
    check_forward(spec, dtype, device)


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck(spec):
    assert check_gradcheck(spec)


def _kernel_impl(causal):
    from minidl.kernels.cpu.attention import attention_forward

    def run(q, k, v, mask):
        bh = q.shape[0]
        bias = np.where(mask, 0.0, -np.inf).astype(q.dtype)
        drop = np.empty((0,) + mask.shape[1:], q.dtype)
        o, _ = attention_forward(np.ascontiguousarray(q), np.ascontiguousarray(k.transpose(0, 2, 1)),
                                 np.ascontiguousarray(v),
                                 bias.reshape(bh, *mask.shape[1:]), drop, causal,
                                 q.dtype.type(1 / np.sqrt(q.shape[-1])))
        return o
    return run


@pytest.mark.parametrize("causal", [False, True])
def test_kernel_matches_reference(causal):
    spec = OpSpec("kernel", op=None, reference=lambda q, k, v, m: naive_attention(q, k, v, m, causal=causal),
                  inputs=lambda r: _qkv(r, batch=(6,), L=7, S=7, E=5, Ev=3) + (_bool_mask(r, (6, 7, 7)),),
                  implementations={"numba": _kernel_impl(causal)})
    for dtype in ("float32", "float64"):
        check_implementations(spec, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_kernel_and_reference_agree_on_gradients_with_masks(dtype):
    rng = np.random.default_rng(1)
    q, k, v = [a.astype(dtype) for a in _qkv(rng, batch=(2, 2), L=6, S=6, E=4, Ev=3)]
    bias = rng.standard_normal((2, 1, 6, 6)).astype(dtype)
    allow = _bool_mask(rng, (6, 6))
    g = rng.standard_normal((2, 2, 6, 3)).astype(dtype)
    grads = {}
    for impl in IMPLS:
        with A.implementation(impl):
            ts = [md.tensor(a, requires_grad=True) for a in (q, k, v, bias)]
            out = F.scaled_dot_product_attention(*ts[:3], attn_mask=ts[3], is_causal=True)
            out2 = F.scaled_dot_product_attention(*ts[:3], attn_mask=allow)
            (out * md.tensor(g)).sum().backward()
            (out2 * md.tensor(g)).sum().backward()
            grads[impl] = [out.detach().numpy(), out2.detach().numpy()] + [t.grad.numpy() for t in ts]
    tol = 1e-5 if dtype == "float32" else 1e-12
    for impl in IMPLS[1:]:
        for a, b in zip(grads["reference"], grads[impl]):
            np.testing.assert_allclose(a, b, atol=tol, rtol=tol)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("perm", [(1, 0, 2, 3), (2, 1, 0, 3)])
def test_any_memory_layout_gives_the_c_ordered_result(impl, causal, perm):
    """q, k, v permuted views (so the scores' product comes out in another layout) give the same
    output and gradients as C-ordered copies of the same values."""
    rng = np.random.default_rng(2)
    base = [rng.standard_normal((3, 4, 5, 6)).astype(np.float32) for _ in range(3)]
    g = None
    results = []
    for arrays in ([a.transpose(perm) for a in base], [np.ascontiguousarray(a.transpose(perm)) for a in base]):
        with A.implementation(impl):
            ts = [md.tensor(a, requires_grad=True) for a in arrays]
            out = F.scaled_dot_product_attention(*ts, is_causal=causal)
            g = rng.standard_normal(out.shape).astype(np.float32) if g is None else g
            out.backward(md.tensor(g))
            results.append([out.detach().numpy()] + [t.grad.numpy() for t in ts])
    assert not base[0].transpose(perm).flags.c_contiguous
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=1e-5)


def test_softmax_kernels_work_in_place_on_any_layout():
    from minidl.kernels.cpu.softmax import softmax_backward_, softmax_rows_
    rng = np.random.default_rng(3)
    s = rng.standard_normal((5, 4, 3)).astype(np.float32).transpose(1, 0, 2)
    expected = np.exp(s - s.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    assert softmax_rows_(s) is s
    np.testing.assert_allclose(s, expected, rtol=1e-5, atol=1e-6)
    dp = rng.standard_normal((5, 4, 3)).astype(np.float32).transpose(1, 0, 2)
    want = s * (dp - (dp * s).sum(-1, keepdims=True))
    assert softmax_backward_(dp, s) is dp
    np.testing.assert_allclose(dp, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_max_in_lanes_is_the_max_of_every_prefix(dtype):
    """The softmax and cross-entropy kernels' row max (eight running maxima): every length, the
    maximum anywhere in the row, -inf rows; NaN after the first entry is passed over as the
    chain ``m = max(m, x)`` passes it (the exp that follows meets it)."""
    from minidl.kernels.cpu._numerics import row_max
    rng = np.random.default_rng(12)
    a = rng.standard_normal((40, 21)).astype(dtype)
    for r in range(40):
        a[r, r % 21] = 9.0 + r
        for n in range(1, 22):
            assert row_max(a, r, n) == a[r, :n].max()
    assert row_max(np.full((1, 13), -np.inf, dtype), 0, 13) == -np.inf
    b = np.array([[1.0, np.nan, 3.0, 2.0] * 3], dtype)
    assert row_max(b, 0, 12) == 3.0


@pytest.mark.parametrize("impl", IMPLS)
def test_fully_masked_rows_give_zero_output_and_zero_grad(impl):
    rng = np.random.default_rng(2)
    q, k, v = [md.tensor(a, requires_grad=True) for a in _qkv(rng, batch=(2,), L=3, S=4)]
    allow = np.ones((2, 3, 4), bool)
    allow[1, 2] = False                     # query 2 of batch 1 may attend to nothing
    with A.implementation(impl):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=allow)
        (out * out).sum().backward()
    o = out.detach().numpy()
    assert np.isfinite(o).all() and np.all(o[1, 2] == 0)
    np.testing.assert_allclose(o[0], naive_attention(*(t.detach().numpy() for t in (q, k, v)), allow)[0], atol=1e-6)
    for t in (q, k, v):
        assert np.isfinite(t.grad.numpy()).all()
    assert np.all(q.grad.numpy()[1, 2] == 0)


@pytest.mark.parametrize("impl", IMPLS)
def test_dropout_reproducible_and_gradchecked(impl):
    rng = np.random.default_rng(3)
    q, k, v = [md.tensor(a, requires_grad=True) for a in _qkv(rng, batch=(2,), L=4, S=4)]

    def f(q, k, v):
        md.manual_seed(7)  # the same dropout mask on every evaluation of the finite differences
        with A.implementation(impl):
            return F.scaled_dot_product_attention(q, k, v, dropout_p=0.4, is_causal=True)
    assert gradcheck(f, (q, k, v))
    a, b = f(q, k, v).detach().numpy(), f(q, k, v).detach().numpy()
    np.testing.assert_array_equal(a, b)
    with A.implementation(impl):
        c = F.scaled_dot_product_attention(q, k, v, is_causal=True).detach().numpy()
    assert not np.allclose(a, c)


def test_dropout_same_mask_in_both_implementations():
    rng = np.random.default_rng(4)
    q, k, v = [md.tensor(a.astype(np.float32)) for a in _qkv(rng, batch=(3, 2), L=8, S=8, E=4, Ev=4)]
    outs = []
    for impl in IMPLS:
        md.manual_seed(11)
        with A.implementation(impl):
            outs.append(F.scaled_dot_product_attention(q, k, v, dropout_p=0.5).numpy())
    np.testing.assert_allclose(outs[0], outs[1], atol=1e-5)


def test_bad_inputs_are_named():
    q = md.randn(2, 4, 3)
    with pytest.raises(ValueError, match="E=3"):
        F.scaled_dot_product_attention(q, md.randn(2, 5, 2), md.randn(2, 5, 2))
    with pytest.raises(ValueError, match="S=5"):
        F.scaled_dot_product_attention(q, md.randn(2, 5, 3), md.randn(2, 6, 2))
    with pytest.raises(ValueError, match="attn_mask"):
        F.scaled_dot_product_attention(q, md.randn(2, 5, 3), md.randn(2, 5, 2), attn_mask=np.ones((3, 5), bool))
    with pytest.raises(TypeError, match="dtypes differ"):
        F.scaled_dot_product_attention(q, md.randn(2, 5, 3).double(), md.randn(2, 5, 2))
    with pytest.raises(ValueError, match="dropout_p"):
        F.scaled_dot_product_attention(q, q, q, dropout_p=1.0)


def test_implementation_switch():
    prev = A.set_implementation("reference")
    try:
        assert A.get_implementation() == "reference"
        with A.implementation("numba"):
            assert A.get_implementation() == "numba"
        assert A.get_implementation() == "reference"
        with pytest.raises(ValueError, match="expected one of"):
            A.set_implementation("fast")
    finally:
        A.set_implementation(prev)


# ------------------------------------------------------------------------ positional encodings
def test_rotary_gradcheck_and_relative_property():
    rope = md.nn.RotaryEmbedding(4, max_len=16)
    x = md.tensor(np.random.default_rng(5).standard_normal((2, 3, 6, 4)), requires_grad=True)
    assert gradcheck(lambda t: rope(t), (x,))
    # norms are preserved and q_t . k_s depends only on t - s
    y = rope(x).detach().numpy()
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x.detach().numpy(), axis=-1), rtol=1e-12)
    qv, kv = np.random.default_rng(6).standard_normal((2, 4))
    q = rope(md.tensor(np.tile(qv, (10, 1)))).numpy()
    k = rope(md.tensor(np.tile(kv, (10, 1)))).numpy()
    np.testing.assert_allclose(q[5] @ k[3], q[7] @ k[5], rtol=1e-10)
    assert not np.isclose(q[5] @ k[3], q[5] @ k[4])


def test_sinusoidal_table_and_learned_embedding():
    from minidl.nn.modules.positional import sinusoidal_table
    pe = sinusoidal_table(10, 6)
    t, i = 7, 2
    assert np.isclose(pe[t, 2 * i], np.sin(t / 10000 ** (2 * i / 6)))
    assert np.isclose(pe[t, 2 * i + 1], np.cos(t / 10000 ** (2 * i / 6)))
    enc = md.nn.SinusoidalPositionalEncoding(6, max_len=10)
    x = md.zeros(2, 4, 6)
    np.testing.assert_allclose(enc(x).numpy()[1], pe[:4], atol=1e-6)
    np.testing.assert_allclose(enc(x, offset=3).numpy()[0], pe[3:7], atol=1e-6)
    assert "pe" not in enc.state_dict()
    lpe = md.nn.LearnedPositionalEmbedding(8, 6)
    x = md.randn(2, 5, 6, requires_grad=True)
    lpe(x).sum().backward()
    np.testing.assert_allclose(lpe.weight.grad.numpy()[:5], 2.0)
    np.testing.assert_allclose(lpe.weight.grad.numpy()[5:], 0.0)
    with pytest.raises(ValueError, match="max_len"):
        lpe(md.randn(1, 9, 6))


# ------------------------------------------------------------------------ MultiheadAttention
def _mha_pair(E=8, H=2, bias=True, dropout=0.0):
    torch = pytest.importorskip("torch")
    ref = torch.nn.MultiheadAttention(E, H, dropout=dropout, bias=bias, batch_first=True).double()
    mha = md.nn.MultiheadAttention(E, H, dropout=dropout, bias=bias, batch_first=True).double()
    mha.load_state_dict({k: v.detach().numpy() for k, v in ref.state_dict().items()})
    return torch, ref, mha


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("masks", ["none", "padding", "attn_bool", "attn_float", "causal", "both"])
def test_mha_matches_pytorch(need_weights, masks):
    torch, ref, mha = _mha_pair()
    rng = np.random.default_rng(8)
    B, L, E = 3, 5, 8
    x = rng.standard_normal((B, L, E))
    kpm = np.zeros((B, L), bool)
    kpm[1, 3:] = True
    kpm[2, 4:] = True
    causal = np.triu(np.ones((L, L), bool), 1)  # True = masked out (MHA's convention)
    kw_np, kw_t = {}, {}
    if masks in ("padding", "both"):
        kw_np["key_padding_mask"], kw_t["key_padding_mask"] = kpm, torch.tensor(kpm)
    if masks in ("attn_bool", "both"):
        kw_np["attn_mask"], kw_t["attn_mask"] = causal, torch.tensor(causal)
    if masks == "attn_float":
        fm = rng.standard_normal((L, L))
        kw_np["attn_mask"], kw_t["attn_mask"] = md.tensor(fm), torch.tensor(fm)
    if masks == "causal":
        kw_np["is_causal"] = True
        kw_t["attn_mask"], kw_t["is_causal"] = torch.tensor(causal), True
    xt = torch.tensor(x, requires_grad=True)
    xm = md.tensor(x, requires_grad=True)
    out_t, w_t = ref(xt, xt, xt, need_weights=need_weights, **kw_t)
    out_m, w_m = mha(xm, xm, xm, need_weights=need_weights, **kw_np)
    np.testing.assert_allclose(out_m.detach().numpy(), out_t.detach().numpy(), atol=1e-10)
    if need_weights:
        np.testing.assert_allclose(w_m.detach().numpy(), w_t.detach().numpy(), atol=1e-10)
    else:
        assert w_m is None and w_t is None
    g = rng.standard_normal(out_m.shape)
    out_t.backward(torch.tensor(g))
    out_m.backward(g)
    np.testing.assert_allclose(xm.grad.numpy(), xt.grad.numpy(), atol=1e-10)
    for name, p in ref.named_parameters():
        mine = dict(mha.named_parameters())[name]
        np.testing.assert_allclose(mine.grad.numpy(), p.grad.numpy(), atol=1e-10, err_msg=name)


def test_mha_cross_attention_and_seq_first_match_pytorch():
    torch, ref, mha = _mha_pair(E=6, H=3, bias=False)
    ref.batch_first = False
    mha.batch_first = False
    rng = np.random.default_rng(9)
    q, k, v = rng.standard_normal((4, 2, 6)), rng.standard_normal((7, 2, 6)), rng.standard_normal((7, 2, 6))
    out_t, w_t = ref(*(torch.tensor(a) for a in (q, k, v)))
    out_m, w_m = mha(*(md.tensor(a) for a in (q, k, v)))
    np.testing.assert_allclose(out_m.detach().numpy(), out_t.detach().numpy(), atol=1e-10)
    np.testing.assert_allclose(w_m.detach().numpy(), w_t.detach().numpy(), atol=1e-10)


def test_mha_parameters_and_init():
    mha = md.nn.MultiheadAttention(16, 4)
    names = dict(mha.named_parameters())
    assert names["in_proj_weight"].shape == (48, 16) and names["in_proj_bias"].shape == (48,)
    assert names["out_proj.weight"].shape == (16, 16) and names["out_proj.bias"].shape == (16,)
    assert np.all(mha.in_proj_bias.detach().numpy() == 0) and np.all(mha.out_proj.bias.detach().numpy() == 0)
    bound = np.sqrt(6 / (16 + 48))  # xavier_uniform_ on the (3E, E) matrix
    w = mha.in_proj_weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    with pytest.raises(ValueError, match="divisible"):
        md.nn.MultiheadAttention(10, 3)


def test_mha_gradcheck_with_padding():
    mha = md.nn.MultiheadAttention(4, 2, batch_first=True).double()
    x = md.tensor(np.random.default_rng(10).standard_normal((2, 3, 4)), requires_grad=True)
    kpm = np.array([[False, False, True], [False, False, False]])
    for nw in (True, False):
        assert gradcheck(lambda t: mha(t, t, t, key_padding_mask=kpm, need_weights=nw)[0], (x,))


def test_split_heads_relabels_and_gradchecks():
    from minidl.ops.heads import split_heads
    x = md.tensor(np.random.default_rng(11).standard_normal((2, 3, 12)), requires_grad=True)
    parts = split_heads(x, 3, 2)
    ref = x.detach().numpy().reshape(2, 3, 3, 2, 2).transpose(2, 0, 3, 1, 4)
    for p, r in zip(parts, ref):
        assert p.shape == (2, 2, 3, 2) and np.shares_memory(p.detach().numpy(), x.detach().numpy())   # a view: no copy
        np.testing.assert_array_equal(p.detach().numpy(), r)
    assert gradcheck(lambda t: split_heads(t, 3, 2), (x,))
    assert gradcheck(lambda t: split_heads(t, 3, 2)[1], (x,))  # unused parts get zero gradient
    with pytest.raises(ValueError, match="split_heads"):
        split_heads(md.randn(2, 3, 10), 3, 2)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("case", ["plain", "causal", "causal-L<S", "bool", "float", "scale"])
def test_sdpa_matches_pytorch(impl, case):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(12)
    L, S = (3, 5) if case == "causal-L<S" else (5, 5)
    q, k, v = rng.standard_normal((2, 2, L, 4)), rng.standard_normal((2, 2, S, 4)), rng.standard_normal((2, 2, S, 3))
    kw = {}
    if case.startswith("causal"):
        kw["is_causal"] = True
    if case == "bool":
        kw["attn_mask"] = _bool_mask(rng, (2, 1, L, S))
    if case == "float":
        kw["attn_mask"] = rng.standard_normal((L, S))
    if case == "scale":
        kw["scale"] = 0.3
    g = rng.standard_normal((2, 2, L, 3))
    ts = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    tkw = {key: (torch.tensor(val) if isinstance(val, np.ndarray) else val) for key, val in kw.items()}
    torch.nn.functional.scaled_dot_product_attention(*ts, **tkw).backward(torch.tensor(g))
    ms = [md.tensor(a, requires_grad=True) for a in (q, k, v)]
    with A.implementation(impl):
        out = F.scaled_dot_product_attention(*ms, **kw)
    out.backward(g)
    ref = torch.nn.functional.scaled_dot_product_attention(*(t.detach() for t in ts), **tkw)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), atol=1e-12)
    for m, t in zip(ms, ts):
        np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), atol=1e-12)


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 2e-6)])
@pytest.mark.parametrize("causal", [False, True])
def test_softmax_kernels_apply_the_scale(dtype, tol, causal):
    """softmax_rows_(s, causal, c) = softmax(c s) (causal: j <= i, rest 0) and
    softmax_backward_(dp, p, c) = its gradient with respect to s, c p (dp - rowsum(dp p))."""
    from minidl.kernels.cpu.softmax import softmax_backward_, softmax_rows_
    rng = np.random.default_rng(5)
    s = rng.standard_normal((3, 6, 6)).astype(dtype) * 4
    dp = rng.standard_normal((3, 6, 6)).astype(dtype)
    c = 0.35
    z = c * s.astype(np.float64)
    if causal:
        z = np.where(np.tril(np.ones((6, 6), bool)), z, -np.inf)
    want = np.exp(z - z.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    p = softmax_rows_(s.copy(), causal, c)
    np.testing.assert_allclose(p, want, rtol=tol, atol=tol)
    ds = softmax_backward_(dp.copy(), p, c)
    np.testing.assert_allclose(ds, c * want * (dp - (dp * want).sum(-1, keepdims=True)), rtol=10 * tol, atol=10 * tol)
    with pytest.raises(ValueError, match="scale must be > 0"):
        softmax_rows_(s.copy(), causal, 0.0)


def test_fused_softmax_output_has_heads_last_memory_layout():
    """(B, H, L, E) output stored as (B, L, H, E): merging the heads afterwards is a free reshape."""
    rng = np.random.default_rng(6)
    q, k, v = (md.tensor(a.astype(np.float32)) for a in _qkv(rng, batch=(2, 3), L=4, S=4, E=5, Ev=5))
    with A.implementation("fused-softmax"):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True).numpy()
    assert out.shape == (2, 3, 4, 5) and out.transpose(0, 2, 1, 3).flags.c_contiguous
    want = naive_attention(*(t.numpy().astype(np.float64) for t in (q, k, v)), causal=True)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


def test_split_heads_and_attention_pass_packed_gradients_without_copies(monkeypatch):
    """q, k, v from split_heads are views of the projection; the fused-softmax backward writes
    dq, dk, dv into one packed buffer laid out alike, which SplitHeads.backward returns as it is.
    Gradients equal the reference path's, which copies."""
    from minidl.ops import heads
    from minidl.ops.heads import split_heads
    rng = np.random.default_rng(7)
    x0 = rng.standard_normal((2, 5, 3 * 2 * 4))
    g = rng.standard_normal((2, 2, 5, 4))
    roots = []
    original = heads.packed_root
    monkeypatch.setattr(heads, "packed_root", lambda parts: roots.append(original(parts)) or roots[-1])
    grads = {}
    for impl in ("fused-softmax", "reference"):
        x = md.tensor(x0, requires_grad=True)
        q, k, v = split_heads(x, 3, 2)
        with A.implementation(impl):
            F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(md.tensor(g))
        grads[impl] = x.grad.numpy()
    # fused-softmax: packed_like and SplitHeads.backward both find the packed root; reference: not
    assert [r is not None for r in roots] == [True, True, False]
    np.testing.assert_allclose(grads["fused-softmax"], grads["reference"], rtol=1e-12, atol=1e-12)
    # arrays that merely look alike are not taken for parts of one buffer
    a = np.zeros((2, 5, 3, 2, 4))
    parts = [a[:, :, p].transpose(0, 2, 1, 3) for p in range(3)]
    assert original(parts) is a
    assert original([parts[0], parts[2], parts[1]]) is None
    assert original([parts[0], parts[1], parts[2].copy()]) is None


@pytest.fixture
def shares(monkeypatch):
    """Every unmasked fused-softmax call here takes shares of the batch on the block workers (two
    threads, small problems included), the path where no BLAS is callable from Numba (the
    kernels' region, tests/test_attention_heads.py, off); returns the names of the threads that
    ran a share."""
    import numba

    from minidl.kernels.cpu import _threads
    from minidl.runtime import block_workers, layer_threads
    if not block_workers.available():
        pytest.skip("needs an OpenBLAS whose thread count can be set")
    monkeypatch.setattr(_threads, "SERIAL_BELOW", 1)
    monkeypatch.setattr(layer_threads, "PARALLEL", True)
    monkeypatch.setattr(A, "SHARES_FROM", 1)
    monkeypatch.setattr(A, "heads_region_fits", lambda q, k, v: False)
    monkeypatch.setattr(numba, "get_num_threads", lambda: 2)
    seen = set()
    original = A.attention_backward_reference

    def spy_backward(*a, **k):
        seen.add(threading.current_thread().name)
        return original(*a, **k)
    monkeypatch.setattr(A, "attention_backward_reference", spy_backward)
    return seen


@pytest.mark.parametrize("dropout_p", [0.0, 0.3])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("packed", [False, True])
def test_shares_of_the_batch_on_workers_equal_the_one_thread_path(monkeypatch, shares, causal, dropout_p, packed):
    """Output and gradients as on the calling thread, bit for bit (each share runs the same
    per-head products and row passes); both threads ran a share of backward."""
    from minidl.ops.heads import split_heads
    rng = np.random.default_rng(8)
    x0 = rng.standard_normal((5, 6, 3 * 2 * 4)).astype(np.float32)
    g = rng.standard_normal((5, 2, 6, 4)).astype(np.float32)
    results = []
    for shares_from in (1, 1 << 62):               # shared, then all on the calling thread
        monkeypatch.setattr(A, "SHARES_FROM", shares_from)
        x = md.tensor(x0, requires_grad=True)
        if packed:
            q, k, v = split_heads(x, 3, 2)
        else:
            q, k, v = (t.contiguous() for t in split_heads(x, 3, 2))
        md.manual_seed(3)
        with A.implementation("fused-softmax"):
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=causal)
        out.backward(md.tensor(g))
        results.append((out.detach().numpy(), x.grad.numpy()))
        if shares_from == 1:
            assert len(shares) == 2
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_masked_or_broadcast_attention_stays_on_the_calling_thread(shares):
    rng = np.random.default_rng(9)
    q, k, v = (md.tensor(a.astype(np.float32)) for a in _qkv(rng, batch=(3, 2), L=4, S=4, E=3, Ev=3))
    mask = md.tensor(rng.random((4, 4)) > 0.3)
    k1 = md.tensor(rng.standard_normal((1, 2, 4, 3)).astype(np.float32))
    with A.implementation("fused-softmax"):
        for args, kw in [((q, k, v), dict(attn_mask=mask)), ((q, k1, v), {}), ((q, k, v), dict(scale=-1.0))]:
            x = [t.detach().requires_grad_() for t in args]
            F.scaled_dot_product_attention(*x, **kw).sum().backward()
    assert shares == {threading.current_thread().name}
