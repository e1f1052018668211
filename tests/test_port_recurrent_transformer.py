"""Recurrent and transformer modules against PyTorch: RNN/LSTM/GRU, packing, MultiheadAttention,
scaled_dot_product_attention and the Transformer stacks, loaded from a torch state_dict and
compared in float64 (outputs and gradients); plus torch-free checks of the same behaviour."""
import warnings

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.nn.utils import rnn as mrnn

TOL = dict(rtol=1e-8, atol=1e-10)


def _np(t):
    return t.detach().cpu().numpy() if hasattr(t, "detach") else np.asarray(t)


def _load(module, torch_module):
    """module <- torch_module's state_dict, both in float64."""
    torch_module.double()
    module.double()
    module.load_state_dict({k: md.tensor(v.detach().numpy()) for k, v in torch_module.state_dict().items()})


def _pair(torch, a):
    a = np.asarray(a, dtype=np.float64)
    return torch.tensor(a, requires_grad=True), md.tensor(a, requires_grad=True)


def _assert_close(ours, theirs):
    np.testing.assert_allclose(_np(ours), _np(theirs), equal_nan=True, **TOL)


def _assert_param_grads(module, torch_module):
    theirs = dict(torch_module.named_parameters())
    assert list(theirs) == [n for n, _ in module.named_parameters()]
    for name, p in module.named_parameters():
        _assert_close(p.grad, theirs[name].grad)


# ------------------------------------------------------------------------------ recurrent
@pytest.mark.parametrize("kind,kw", [
    ("LSTM", dict(num_layers=2, bidirectional=True, proj_size=2)),
    ("LSTM", dict(num_layers=2, bias=False, batch_first=True)),
    ("GRU", dict(num_layers=3, bidirectional=True, batch_first=True)),
    ("RNN", dict(num_layers=2, nonlinearity="relu", bidirectional=True)),
])
def test_recurrent_stack_matches_torch_packed_and_padded(kind, kw):
    torch = pytest.importorskip("torch")
    from torch.nn.utils import rnn as trnn
    torch.manual_seed(0)
    ref, ours = getattr(torch.nn, kind)(3, 5, **kw), getattr(nn, kind)(3, 5, **kw)
    _load(ours, ref)
    rng = np.random.default_rng(0)
    bf = kw.get("batch_first", False)
    x = rng.standard_normal((4, 6, 3) if bf else (6, 4, 3))
    D, L, H = 2 if kw.get("bidirectional") else 1, kw["num_layers"], 5
    P = kw.get("proj_size", 0) or H
    h0 = rng.standard_normal((D * L, 4, P))
    lengths = [2, 6, 1, 4]
    tx, mx = _pair(torch, x)
    th, mh = _pair(torch, h0)
    if kind == "LSTM":
        c0 = rng.standard_normal((D * L, 4, H))
        tc, mc = _pair(torch, c0)
        th, mh = (th, tc), (mh, mc)
    t_out, t_state = ref(trnn.pack_padded_sequence(tx, lengths, batch_first=bf, enforce_sorted=False), th)
    m_out, m_state = ours(mrnn.pack_padded_sequence(mx, lengths, batch_first=bf, enforce_sorted=False), mh)
    t_pad, t_len = trnn.pad_packed_sequence(t_out, batch_first=bf, padding_value=-2.0, total_length=7)
    m_pad, m_len = mrnn.pad_packed_sequence(m_out, batch_first=bf, padding_value=-2.0, total_length=7)
    _assert_close(m_pad, t_pad)
    np.testing.assert_array_equal(m_len.numpy(), t_len.numpy())
    t_states = t_state if isinstance(t_state, tuple) else (t_state,)
    m_states = m_state if isinstance(m_state, tuple) else (m_state,)
    for a, b in zip(m_states, t_states):
        _assert_close(a, b)
    w = rng.standard_normal(tuple(t_pad.shape))
    ((t_pad * torch.tensor(w)).sum() + sum((s * (i + 2)).sum() for i, s in enumerate(t_states))).backward()
    ((m_pad * md.tensor(w)).sum() + sum((s * (i + 2)).sum() for i, s in enumerate(m_states))).backward()
    _assert_close(mx.grad, tx.grad)
    for a, b in zip(mh if isinstance(mh, tuple) else (mh,), th if isinstance(th, tuple) else (th,)):
        _assert_close(a.grad, b.grad)
    _assert_param_grads(ours, ref)


def test_rnn_cell_repr_names_a_relu_nonlinearity():
    assert repr(nn.RNNCell(3, 4, nonlinearity="relu")) == "RNNCell(3, 4, nonlinearity=relu)"
    assert repr(nn.RNNCell(3, 4, bias=False)) == "RNNCell(3, 4, bias=False)"


def test_rnn_flat_weights_follow_flat_weights_names():
    lstm = nn.LSTM(3, 4, num_layers=2, bidirectional=True, proj_size=2)
    assert len(lstm._flat_weights) == len(lstm._flat_weights_names) == 20
    for name, p in zip(lstm._flat_weights_names, lstm._flat_weights):
        assert p is getattr(lstm, name)
    assert lstm._flat_weights_names[:5] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                                             "weight_hr_l0"]


# ------------------------------------------------------------------------------ MultiheadAttention
MHA_CONFIGS = [dict(kdim=5, vdim=3), dict(add_bias_kv=True), dict(add_zero_attn=True),
               dict(kdim=5, vdim=3, add_bias_kv=True, add_zero_attn=True, bias=False)]


def _mha_pair(torch, **kw):
    torch.manual_seed(0)
    ref = torch.nn.MultiheadAttention(8, 2, **kw)
    ours = nn.MultiheadAttention(8, 2, batch_first=False, **kw)
    assert list(ref.state_dict()) == list(ours.state_dict())
    _load(ours, ref)
    return ref, ours


def _mha_compare(torch, ref, ours, q, k, v, **kwargs):
    tq, mq = _pair(torch, q)
    tk, mk = _pair(torch, k)
    tv, mv = _pair(torch, v)
    t_kw = {n: torch.tensor(a) if isinstance(a, np.ndarray) else a for n, a in kwargs.items()}
    m_kw = {n: md.tensor(a) if isinstance(a, np.ndarray) else a for n, a in kwargs.items()}
    t_out, t_w = ref(tq, tk, tv, **t_kw)
    m_out, m_w = ours(mq, mk, mv, **m_kw)
    _assert_close(m_out, t_out)
    assert (m_w is None) == (t_w is None)
    if t_w is not None:
        _assert_close(m_w, t_w)
    g = np.random.default_rng(1).standard_normal(tuple(t_out.shape))
    (t_out * torch.tensor(g)).sum().backward()
    (m_out * md.tensor(g)).sum().backward()
    for a, b in ((mq, tq), (mk, tk), (mv, tv)):
        _assert_close(a.grad, b.grad)
    _assert_param_grads(ours, ref)


@pytest.mark.parametrize("kw", MHA_CONFIGS)
@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_kdim_vdim_bias_kv_zero_attn_match_torch(kw, need_weights):
    torch = pytest.importorskip("torch")
    ref, ours = _mha_pair(torch, **kw)
    rng = np.random.default_rng(2)
    L, S, B = 3, 4, 2
    q = rng.standard_normal((L, B, 8))
    k = rng.standard_normal((S, B, kw.get("kdim", 8)))
    v = rng.standard_normal((S, B, kw.get("vdim", 8)))
    kpm = np.array([[False, False, True, True], [False, True, False, False]])
    _mha_compare(torch, ref, ours, q, k, v, need_weights=need_weights, average_attn_weights=False)
    _mha_compare(torch, ref, ours, q, k, v, need_weights=need_weights, key_padding_mask=kpm,
                 attn_mask=rng.standard_normal((L, S)))
    _mha_compare(torch, ref, ours, q, k, v, need_weights=need_weights,
                 attn_mask=rng.standard_normal((B * 2, L, S)))
    _mha_compare(torch, ref, ours, q[:, 0], k[:, 0], v[:, 0], need_weights=need_weights,
                 key_padding_mask=kpm[0])


@pytest.mark.parametrize("need_weights,padding", [(True, False), (False, False), (False, True)])
def test_mha_is_causal_is_a_hint_about_attn_mask(need_weights, padding):
    torch = pytest.importorskip("torch")
    ref, ours = _mha_pair(torch, add_bias_kv=True)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 2, 8))
    causal = np.triu(np.ones((4, 4), bool), 1)
    kpm = np.array([[False] * 4, [False, False, False, True]]) if padding else None
    _mha_compare(torch, ref, ours, x, x, x, need_weights=need_weights, attn_mask=causal, is_causal=True,
                 key_padding_mask=kpm)


def test_mha_constructor_and_forward_take_torch_positional_order():
    mha = nn.MultiheadAttention(8, 2, 0.0, True, True, True, 5, 3, True)
    assert mha.kdim == 5 and mha.vdim == 3 and mha.add_zero_attn and mha.batch_first
    assert mha.in_proj_weight is None and tuple(mha.k_proj_weight.shape) == (8, 5)
    assert tuple(mha.v_proj_weight.shape) == (8, 3) and tuple(mha.bias_k.shape) == (1, 1, 8)
    assert [n for n, _ in mha.named_parameters()] == ["q_proj_weight", "k_proj_weight", "v_proj_weight",
                                                       "in_proj_bias", "bias_k", "bias_v", "out_proj.weight",
                                                       "out_proj.bias"]
    q, k, v = md.randn(2, 3, 8), md.randn(2, 4, 5), md.randn(2, 4, 3)
    out, w = mha(q, k, v, None, True, None, False)     # average_attn_weights=False, positionally
    assert tuple(out.shape) == (2, 3, 8)
    assert tuple(w.shape) == (2, 2, 3, 6)              # per head; S + bias_k + zero key


def test_mha_zero_attention_key_and_value():
    """add_zero_attn appends a key of zeros: score 0 for every query, and its value adds nothing."""
    mha = nn.MultiheadAttention(4, 1, add_zero_attn=True, batch_first=True).double()
    q, kv = md.randn(1, 2, 4, dtype=md.float64), md.randn(1, 3, 4, dtype=md.float64)
    out, w = mha(q, kv, kv)
    assert tuple(w.shape) == (1, 2, 4)
    E = 4
    W, b = mha.in_proj_weight.detach().numpy(), mha.in_proj_bias.detach().numpy()
    qp = q.numpy()[0] @ W[:E].T + b[:E]
    kp = np.concatenate([kv.numpy()[0] @ W[E:2 * E].T + b[E:2 * E], np.zeros((1, E))])
    vp = np.concatenate([kv.numpy()[0] @ W[2 * E:].T + b[2 * E:], np.zeros((1, E))])
    s = qp @ kp.T / np.sqrt(E)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(w.detach().numpy()[0], p, rtol=1e-10)
    expect = (p @ vp) @ mha.out_proj.weight.detach().numpy().T + mha.out_proj.bias.detach().numpy()
    np.testing.assert_allclose(out.detach().numpy()[0], expect, rtol=1e-10)


def test_mha_parameters_follow_default_dtype():
    before = md.get_default_dtype()
    md.set_default_dtype(md.float64)
    try:
        mha = nn.MultiheadAttention(4, 2, kdim=3, add_bias_kv=True, batch_first=True)
        attn = nn.TransformerEncoderLayer(4, 2, 8).self_attn
    finally:
        md.set_default_dtype(before)
    assert {p.dtype for p in mha.parameters()} == {md.float64}
    assert {p.dtype for p in attn.parameters()} == {md.float64}
    x = md.randn(2, 3, 4, dtype=md.float64)
    assert mha(x, md.randn(2, 5, 3, dtype=md.float64), x[:, :1].expand(2, 5, 4))[0].dtype == md.float64


# ------------------------------------------------------------------------------ scaled_dot_product_attention
@pytest.mark.parametrize("mask,causal", [(None, False), ("float", False), (None, True), ("bool", False)])
def test_sdpa_grouped_query_attention_matches_torch(mask, causal):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    q = rng.standard_normal((2, 6, 3, 5))
    k, v = rng.standard_normal((2, 2, 4, 5)), rng.standard_normal((2, 2, 4, 7))
    m = {None: None, "float": rng.standard_normal((2, 6, 3, 4)), "bool": rng.random((1, 4)) > 0.3}[mask]
    tq, mq = _pair(torch, q)
    tk, mk = _pair(torch, k)
    tv, mv = _pair(torch, v)
    tm = mm = None
    if m is not None:
        tm, mm = (torch.tensor(m), md.tensor(m)) if m.dtype == bool else (torch.tensor(m), md.tensor(m))
    t = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm, is_causal=causal, scale=0.7,
                                                         enable_gqa=True)
    o = F.scaled_dot_product_attention(mq, mk, mv, attn_mask=mm, is_causal=causal, scale=0.7, enable_gqa=True)
    _assert_close(o, t)
    g = rng.standard_normal(tuple(t.shape))
    (t * torch.tensor(g)).sum().backward()
    (o * md.tensor(g)).sum().backward()
    for a, b in ((mq, tq), (mk, tk), (mv, tv)):
        _assert_close(a.grad, b.grad)


def test_sdpa_enable_gqa_repeats_each_kv_head_for_its_group():
    rng = np.random.default_rng(5)
    q = md.tensor(rng.standard_normal((1, 4, 3, 2)))
    k, v = md.tensor(rng.standard_normal((1, 2, 5, 2))), md.tensor(rng.standard_normal((1, 2, 5, 2)))
    out = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    expect = F.scaled_dot_product_attention(q, k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1))
    np.testing.assert_allclose(out.numpy(), expect.numpy(), rtol=1e-12)
    same = F.scaled_dot_product_attention(q, q, q, enable_gqa=True)
    np.testing.assert_allclose(same.numpy(), F.scaled_dot_product_attention(q, q, q).numpy(), rtol=1e-12)
    with pytest.raises(RuntimeError, match="divide"):
        F.scaled_dot_product_attention(q, k[:, :1].expand(1, 3, 5, 2), v[:, :1].expand(1, 3, 5, 2), enable_gqa=True)


# ------------------------------------------------------------------------------ transformer stacks
def _encoder_pair(torch, nhead=2, batch_first=True, **kw):
    torch.manual_seed(0)
    ref_layer = torch.nn.TransformerEncoderLayer(8, nhead, 16, 0.0, batch_first=batch_first)
    our_layer = nn.TransformerEncoderLayer(8, nhead, 16, 0.0, batch_first=batch_first)
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        ref = torch.nn.TransformerEncoder(ref_layer, 2, norm=torch.nn.LayerNorm(8), **kw)
    with warnings.catch_warnings(record=True) as ours_w:
        warnings.simplefilter("always")
        ours = nn.TransformerEncoder(our_layer, 2, norm=nn.LayerNorm(8), **kw)
    assert [str(w.message) for w in ours_w] == [str(w.message) for w in theirs]
    assert ours.use_nested_tensor == ref.use_nested_tensor
    with torch.no_grad():
        for p in ref.parameters():     # a final norm whose bias is not 0: padded rows show the order
            p.add_(0.1 * torch.randn_like(p))
    _load(ours, ref)
    return ref.eval(), ours.eval()


@pytest.mark.parametrize("nhead,batch_first,kw", [(2, True, {}), (1, True, {}), (2, False, {}),
                                                   (2, True, dict(enable_nested_tensor=False))])
@pytest.mark.parametrize("float_mask", [False, True])
def test_encoder_inference_padding_matches_torch(nhead, batch_first, kw, float_mask):
    torch = pytest.importorskip("torch")
    ref, ours = _encoder_pair(torch, nhead, batch_first, **kw)
    x = np.random.default_rng(6).standard_normal((3, 5, 8))
    if not batch_first:
        x = x.transpose(1, 0, 2)
    kpm = np.array([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]])
    if float_mask:
        kpm = np.where(kpm, -np.inf, 0.0)
    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            theirs = ref(torch.tensor(x), src_key_padding_mask=torch.tensor(kpm))
        with md.set_grad_enabled(grad):
            mine = ours(md.tensor(x), src_key_padding_mask=md.tensor(kpm))
        _assert_close(mine, theirs)


def test_encoder_inference_zeroes_padded_positions_before_norm():
    layer = nn.TransformerEncoderLayer(8, 2, 16, 0.0, batch_first=True)
    enc = nn.TransformerEncoder(layer, 2).eval()
    assert enc.use_nested_tensor and enc.enable_nested_tensor and enc.mask_check
    x = md.randn(2, 5, 8)
    kpm = md.tensor(np.array([[False] * 5, [False] * 3 + [True] * 2]))
    with md.no_grad():
        out = enc(x, src_key_padding_mask=kpm).numpy()
    assert np.all(out[1, 3:] == 0) and np.all(out[1, :3] != 0) and np.all(out[0] != 0)
    trained = enc(x, src_key_padding_mask=kpm)          # a graph is recorded: every position computed
    assert np.all(trained.detach().numpy()[1, 3:] != 0)
    np.testing.assert_allclose(trained.detach().numpy()[:, :3], out[:, :3], rtol=1e-5, atol=1e-6)
    not_prefix = md.tensor(np.array([[False] * 5, [False, True, False, True, True]]))
    with md.no_grad():
        assert np.all(enc(x, src_key_padding_mask=not_prefix).numpy()[1] != 0)


def test_encoder_warns_when_nested_path_is_impossible():
    with pytest.warns(UserWarning, match="batch_first was not True"):
        enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2), 1)
    assert not enc.use_nested_tensor
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2), 1, enable_nested_tensor=False)
        nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, batch_first=True), 1)


def test_encoder_layer_activation_relu_or_gelu():
    assert nn.TransformerEncoderLayer(8, 2, activation="relu").activation_relu_or_gelu == 1
    assert nn.TransformerEncoderLayer(8, 2, activation=F.gelu).activation_relu_or_gelu == 2
    assert nn.TransformerEncoderLayer(8, 2, activation=nn.GELU()).activation_relu_or_gelu == 2
    assert nn.TransformerEncoderLayer(8, 2, activation=F.silu).activation_relu_or_gelu == 0


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer_matches_torch_with_masks(norm_first, batch_first):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    kw = dict(dropout=0.0, norm_first=norm_first, batch_first=batch_first)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = torch.nn.Transformer(8, 2, 2, 2, 16, activation=torch.nn.functional.silu, **kw)
        ours = nn.Transformer(8, 2, 2, 2, 16, activation=F.silu, **kw)
    _load(ours, ref)
    rng = np.random.default_rng(7)
    src, tgt = rng.standard_normal((2, 5, 8)), rng.standard_normal((2, 4, 8))
    if not batch_first:
        src, tgt = src.transpose(1, 0, 2), tgt.transpose(1, 0, 2)
    kpm = np.array([[False] * 5, [False] * 3 + [True] * 2])
    tgt_mask = np.asarray(nn.Transformer.generate_square_subsequent_mask(4, dtype=md.float64).numpy())
    ts, ms = _pair(torch, src)
    tt, mt = _pair(torch, tgt)
    t = ref(ts, tt, tgt_mask=torch.tensor(tgt_mask), src_key_padding_mask=torch.tensor(kpm),
            memory_key_padding_mask=torch.tensor(kpm), tgt_is_causal=True)
    o = ours(ms, mt, tgt_mask=md.tensor(tgt_mask), src_key_padding_mask=md.tensor(kpm),
             memory_key_padding_mask=md.tensor(kpm), tgt_is_causal=True)
    _assert_close(o, t)
    g = rng.standard_normal(tuple(t.shape))
    (t * torch.tensor(g)).sum().backward()
    (o * md.tensor(g)).sum().backward()
    _assert_close(ms.grad, ts.grad)
    _assert_close(mt.grad, tt.grad)
    _assert_param_grads(ours, ref)
