"""The rest of torch.nn's names: lazy 3-D and transposed convs with Uninitialized placeholders, the
3-D lp/unpool/fractional pools and *_with_indices, AdaptiveLogSoftmaxWithLoss,
F.multi_head_attention_forward, CrossMapLRN2d, conv_tbc, native_channel_shuffle, the deprecated
NLLLoss2d / Container, and the conv weight memory-format utilities. Values against NumPy loops,
gradients by gradcheck in float64, bad input, and PyTorch as the oracle when installed."""
import itertools
import math
import warnings

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.testing import OpSpec, check_forward, check_gradcheck, forward_cases, spec_id

rng = np.random.default_rng(7)


# NumPy references ----------------------------------------------------------------------------
def lp_pool3d_loop(x, p, k, s):
    N, C, T, H, W = x.shape
    out = [(n - k) // s + 1 for n in (T, H, W)]
    y = np.zeros((N, C, *out))
    for a, b, c in itertools.product(*map(range, out)):
        win = x[:, :, a * s:a * s + k, b * s:b * s + k, c * s:c * s + k]
        y[:, :, a, b, c] = (win ** p).sum(axis=(2, 3, 4)) ** (1 / p)
    return y


def unpool3d_loop(x, idx, out):
    N, C = x.shape[:2]
    y = np.zeros((N, C, int(np.prod(out))))
    for n, c in itertools.product(range(N), range(C)):
        y[n, c, idx[n, c].reshape(-1)] = x[n, c].reshape(-1)
    return y.reshape(N, C, *out)


def starts(u, n, o, k):
    if o == 1:
        return [n - k]
    a = (n - k) / (o - 1)
    return [int((i + u) * a) - int(u * a) for i in range(o - 1)] + [n - k]


def fractional3d_loop(x, samples, k, out):
    N, C, T, H, W = x.shape
    y, idx = np.zeros((N, C, *out)), np.zeros((N, C, *out), np.int64)
    for n, c in itertools.product(range(N), range(C)):
        st = [starts(samples[n, c, a], size, o, k) for a, size, o in zip(range(3), (T, H, W), out)]
        for i, j, l in itertools.product(*map(range, out)):
            t0, h0, w0 = st[0][i], st[1][j], st[2][l]
            win = x[n, c, t0:t0 + k, h0:h0 + k, w0:w0 + k]
            dt, dh, dw = np.unravel_index(np.argmax(win), win.shape)
            y[n, c, i, j, l] = win[dt, dh, dw]
            idx[n, c, i, j, l] = ((t0 + dt) * H + h0 + dh) * W + w0 + dw
    return y, idx


def cross_map_lrn_loop(x, size, alpha, beta, k):
    """PyTorch's (Lua Torch's) running recurrence, written as it is there."""
    C = x.shape[1]
    sq = x * x
    scale = np.zeros_like(x)
    pre = int((size - 1) / 2 + 1)
    scale[:, 0] = sq[:, :min(pre, C)].sum(axis=1)
    for c in range(1, C):
        scale[:, c] = scale[:, c - 1]
        if c < C - pre + 1:
            scale[:, c] += sq[:, c + pre - 1]
        if c > pre:
            scale[:, c] -= sq[:, c - pre]
    return x * (k + alpha / size * scale) ** -beta


def conv_tbc_loop(x, w, b, pad):
    xp = np.pad(x, ((pad, pad), (0, 0), (0, 0)))
    K = w.shape[0]
    T = xp.shape[0] - K + 1
    return np.stack([np.einsum("kbi,kio->bo", xp[t:t + K], w) for t in range(T)]) + b


def log_softmax(a):
    a = a - a.max(axis=1, keepdims=True)
    return a - np.log(np.exp(a).sum(axis=1, keepdims=True))


def mha_loop(q, k, v, H, w_in, b_in, w_out, b_out, kpm):
    """Sequence-first (L, B, E) query, bool key padding mask (B, S): out (L, B, E), mean weights (B, L, S)."""
    L, B, E = q.shape
    D = E // H
    Q, K, V = (t.transpose(1, 0, 2) @ w_in[i * E:(i + 1) * E].T + b_in[i * E:(i + 1) * E]
               for i, t in enumerate((q, k, v)))
    out, weights = np.zeros((B, L, E)), np.zeros((B, L, k.shape[0]))
    for b, h in itertools.product(range(B), range(H)):
        sl = slice(h * D, (h + 1) * D)
        s = Q[b, :, sl] @ K[b, :, sl].T / math.sqrt(D)
        s[:, kpm[b]] = -np.inf
        p = np.exp(s - s.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        out[b, :, sl] = p @ V[b, :, sl]
        weights[b] += p / H
    return (out @ w_out.T + b_out).transpose(1, 0, 2), weights


# OpSpecs ------------------------------------------------------------------------------------
def _normal(*shapes):
    return lambda r: tuple(r.standard_normal(s) for s in shapes)


_POOL_IDX = F.max_pool3d(md.tensor(rng.standard_normal((2, 2, 4, 4, 6))), 2, return_indices=True)[1].numpy()
_SAMPLES = rng.random((2, 2, 3))
_KPM = np.array([[False, False, True, False], [False, False, False, False]])

SPECS = [
    OpSpec("lp_pool3d_p2", lambda x: F.lp_pool3d(x, 2, 2), lambda x: lp_pool3d_loop(x, 2, 2, 2),
           _normal((2, 2, 4, 4, 6))),
    OpSpec("lp_pool3d_p3_stride1", lambda x: F.lp_pool3d(x.abs() + 0.5, 3.0, 2, 1),
           lambda x: lp_pool3d_loop(np.abs(x) + 0.5, 3.0, 2, 1), _normal((1, 2, 3, 3, 4))),
    OpSpec("max_unpool3d", lambda x: F.max_unpool3d(x, md.tensor(_POOL_IDX), 2),
           lambda x: unpool3d_loop(x, _POOL_IDX, (4, 4, 6)), _normal((2, 2, 2, 2, 3))),
    OpSpec("fractional_max_pool3d",
           lambda x: F.fractional_max_pool3d(x, 2, (3, 2, 4), _random_samples=md.tensor(_SAMPLES).to(x.dtype)),
           lambda x: fractional3d_loop(x, _SAMPLES, 2, (3, 2, 4))[0], _normal((2, 2, 5, 4, 7))),
    OpSpec("cross_map_lrn2d_size3", lambda x: nn.CrossMapLRN2d(3, 0.5, 0.75, 1.0)(x),
           lambda x: cross_map_lrn_loop(x, 3, 0.5, 0.75, 1.0), _normal((2, 7, 2, 3))),
    OpSpec("cross_map_lrn2d_size4", lambda x: nn.CrossMapLRN2d(4, 0.3, 0.6, 2.0)(x),
           lambda x: cross_map_lrn_loop(x, 4, 0.3, 0.6, 2.0), _normal((1, 6, 2, 2))),
    OpSpec("conv_tbc_pad1", lambda x, w, b: F.conv_tbc(x, w, b, 1), lambda x, w, b: conv_tbc_loop(x, w, b, 1),
           _normal((5, 2, 3), (2, 3, 4), (4,))),
    OpSpec("multi_head_attention_forward",
           lambda q, k, v, wi, bi, wo, bo: F.multi_head_attention_forward(
               q, k, v, 4, 2, wi, bi, None, None, False, 0.0, wo, bo, key_padding_mask=md.tensor(_KPM))[0],
           lambda q, k, v, wi, bi, wo, bo: mha_loop(q, k, v, 2, wi, bi, wo, bo, _KPM)[0],
           _normal((3, 2, 4), (4, 2, 4), (4, 2, 4), (12, 4), (12,), (4, 4), (4,))),
]


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck(spec):
    check_gradcheck(spec)


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward(spec, dtype, device):
    check_forward(spec, dtype, device)


# pooling ------------------------------------------------------------------------------------
def test_fractional_max_pool3d_indices_and_with_indices_forms():
    x = rng.standard_normal((2, 2, 5, 4, 7))
    out, idx = F.fractional_max_pool3d_with_indices(md.tensor(x), 2, (3, 2, 4), _random_samples=md.tensor(_SAMPLES))
    ry, ri = fractional3d_loop(x, _SAMPLES, 2, (3, 2, 4))
    np.testing.assert_array_equal(idx.numpy(), ri)
    np.testing.assert_allclose(out.numpy(), ry)
    y, i = F.max_pool3d_with_indices(md.tensor(x), 2)
    np.testing.assert_array_equal(i.numpy(), F.max_pool3d(md.tensor(x), 2, return_indices=True)[1].numpy())
    y, i = F.adaptive_max_pool3d_with_indices(md.tensor(x), 2)
    assert y.shape == i.shape == (2, 2, 2, 2, 2) and i.dtype == md.int64
    m = nn.FractionalMaxPool3d(2, output_ratio=0.5, return_indices=True)
    y, i = m(md.tensor(x[0]))    # unbatched (C, T, H, W): ratio of each axis
    assert y.shape == (2, 2, 2, 3)
    assert nn.MaxUnpool3d(2)(*F.max_pool3d(md.tensor(x), 2, return_indices=True),
                             output_size=(5, 4, 7)).shape == (2, 2, 5, 4, 7)
    assert nn.LPPool3d(2, 2)(md.tensor(x)).shape == (2, 2, 2, 2, 3)


@pytest.mark.parametrize("call,exc,match", [
    (lambda: F.max_unpool3d(md.zeros(2, 2, 2), md.zeros(2, 2, 2, dtype=md.int64), 2), RuntimeError,
     "max_unpooling3d should be a 4d or 5d Tensor"),
    (lambda: F.max_unpool3d(md.zeros(1, 1, 2, 2, 2), md.full((1, 1, 2, 2, 2), 64, dtype=md.int64), 2), RuntimeError,
     r"invalid max index: 64 \(output volumes are of size 4x4x4"),
    (lambda: F.max_unpool3d(md.zeros(1, 1, 2, 2, 2), md.zeros(1, 1, 2, 2, 2, dtype=md.int32), 2), RuntimeError,
     "should be type int64"),
    (lambda: F.max_unpool3d(md.zeros(1, 1, 2, 2, 2), md.zeros(1, 1, 2, 2, 1, dtype=md.int64), 2), RuntimeError,
     "Expected shape of indices"),
    (lambda: F.max_unpool3d(md.zeros(1, 1, 2, 2, 2), md.zeros(1, 1, 2, 2, 2, dtype=md.int64), 2,
                            output_size=(9, 9, 9)), ValueError, "invalid output_size"),
    (lambda: F.lp_pool3d(md.zeros(2, 2, 2), 2, 2), RuntimeError, "4-D or 5-D"),
    (lambda: F.fractional_max_pool3d(md.zeros(1, 1, 4, 4, 4), 2), ValueError, "output_size or an output_ratio"),
    (lambda: F.fractional_max_pool3d(md.zeros(1, 1, 4, 4, 4), 2, 3), RuntimeError,
     "pool time 2 too large relative to input time 4"),
    (lambda: F.fractional_max_pool3d(md.zeros(1, 1, 4, 4, 4), (2, 2), 2), RuntimeError, "tuple of three Ints"),
    (lambda: F.fractional_max_pool3d(md.zeros(1, 2, 5, 5, 5), 2, 2, _random_samples=md.zeros(1, 2, 2)),
     RuntimeError, r"size\(2\) equals to 3; got 2"),
    (lambda: nn.FractionalMaxPool3d(2), ValueError, "either an output size, or a pooling ratio"),
    (lambda: nn.FractionalMaxPool3d(2, output_ratio=1.5), ValueError, "between 0 and 1"),
])
def test_pooling_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# lazy modules and their placeholders --------------------------------------------------------
@pytest.mark.parametrize("cls,real,shape,wshape", [
    ("LazyConv3d", "Conv3d", (2, 3, 4, 4, 4), (4, 3, 3, 3, 3)),
    ("LazyConvTranspose1d", "ConvTranspose1d", (2, 3, 5), (3, 4, 3)),
    ("LazyConvTranspose2d", "ConvTranspose2d", (3, 5, 5), (3, 4, 3, 3)),
    ("LazyConvTranspose3d", "ConvTranspose3d", (1, 3, 3, 3, 3), (3, 4, 3, 3, 3))])
def test_lazy_convs_become_the_real_layer_keeping_the_parameter_objects(cls, real, shape, wshape):
    m = getattr(nn, cls)(4, 3)
    params = list(m.parameters())
    assert all(isinstance(p, nn.UninitializedParameter) and isinstance(p, nn.Parameter) for p in params)
    assert m.has_uninitialized_params() and repr(params[0]) == "<UninitializedParameter>"
    y = m(md.randn(*shape))
    assert type(m) is getattr(nn, real) and m.in_channels == 3 and m.weight.shape == wshape
    assert [p is q for p, q in zip(params, m.parameters())] == [True, True]
    assert not any(isinstance(p, nn.UninitializedParameter) for p in m.parameters())
    y.sum().backward()
    assert m.weight.grad.shape == wshape


def test_uninitialized_placeholders_materialize_in_place():
    p = nn.UninitializedParameter(dtype=md.float64)
    with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized parameter"):
        p.shape
    p.materialize((2, 3))
    assert type(p) is nn.Parameter and p.shape == (2, 3) and p.dtype == md.float64 and p.requires_grad
    b = nn.UninitializedBuffer(persistent=False)
    assert isinstance(b, nn.Buffer) and repr(b) == "<UninitializedBuffer>" and not b.requires_grad
    m = nn.Module()
    m.stat = b   # registered as itself, not unwrapped
    assert isinstance(m.stat, nn.UninitializedBuffer) and "stat" not in m.state_dict()
    b.materialize(4)
    assert m.stat.shape == (4,) and not isinstance(m.stat, nn.UninitializedBuffer)
    bn = nn.LazyBatchNorm2d()
    assert [type(t).__name__ for _, t in bn.named_buffers()] == ["UninitializedBuffer", "UninitializedBuffer",
                                                                 "Tensor"]
    bn(md.randn(2, 3, 2, 2))
    assert type(bn) is nn.BatchNorm2d and bn.running_mean.shape == (3,) and int(bn.num_batches_tracked) == 1
    assert [n for n, _ in nn.LazyBatchNorm1d(track_running_stats=False).named_buffers()] == []


# AdaptiveLogSoftmaxWithLoss -----------------------------------------------------------------
def _asm(head_bias=True):
    m = nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 6], div_value=2.0, head_bias=head_bias).double()
    return m, {n: p.detach().numpy() for n, p in m.named_parameters()}


def _asm_log_prob(w, x):
    head = log_softmax(x @ w["head.weight"].T + w.get("head.bias", 0))
    parts = [head[:, :3]]
    for i in range(2):
        t = x @ w[f"tail.{i}.0.weight"].T @ w[f"tail.{i}.1.weight"].T
        parts.append(log_softmax(t) + head[:, 3 + i:4 + i])
    return np.concatenate(parts, 1)


def test_adaptive_log_softmax_against_numpy():
    m, w = _asm()
    assert [t.weight.shape for t in m.tail[1]] == [(2, 8), (4, 2)]   # 8 // 2**2 hidden, 10 - 6 classes
    x, y = rng.standard_normal((7, 8)), np.array([0, 2, 3, 5, 6, 9, 1])
    full = _asm_log_prob(w, x)
    np.testing.assert_allclose(m.log_prob(md.tensor(x)).detach().numpy(), full, rtol=1e-10)
    out = m(md.tensor(x), md.tensor(y))
    assert out._fields == ("output", "loss")
    np.testing.assert_allclose(out.output.detach().numpy(), full[np.arange(7), y], rtol=1e-10)
    np.testing.assert_allclose(out.loss.item(), -full[np.arange(7), y].mean(), rtol=1e-10)
    np.testing.assert_array_equal(m.predict(md.tensor(x)).numpy(), full.argmax(1))
    single = m(md.tensor(x[2]), md.tensor(np.array(y[2])))
    assert single.output.shape == () and np.isclose(single.output.item(), full[2, y[2]])
    xt = md.tensor(x, requires_grad=True)
    assert md.autograd.gradcheck(lambda t: m(t, md.tensor(y)).loss, (xt,))


@pytest.mark.parametrize("call,exc,match", [
    (lambda: nn.AdaptiveLogSoftmaxWithLoss(8, 10, []), ValueError, "length larger than 0"),
    (lambda: nn.AdaptiveLogSoftmaxWithLoss(8, 10, [5, 3]), ValueError, "sorted in an increasing order"),
    (lambda: nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 10]), ValueError, "between 1 and n_classes-1"),
    (lambda: _asm()[0](md.zeros(3, 8, dtype=md.float64), md.tensor([0, 1, 10])), RuntimeError,
     r"Target values should be in \[0, 9\]"),
    (lambda: _asm()[0](md.zeros(3, 8, dtype=md.float64), md.tensor([0, 1])), RuntimeError, "same size in the batch"),
    (lambda: _asm()[0](md.zeros(3, 8, dtype=md.float64), md.tensor([[0]])), RuntimeError, "0D or 1D target"),
])
def test_adaptive_log_softmax_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# multi_head_attention_forward ---------------------------------------------------------------
def test_multi_head_attention_forward_weights_and_module_route():
    q, k = rng.standard_normal((3, 2, 4)), rng.standard_normal((4, 2, 4))
    wi, bi, wo, bo = (rng.standard_normal(s) for s in ((12, 4), (12,), (4, 4), (4,)))
    out, w = F.multi_head_attention_forward(md.tensor(q), md.tensor(k), md.tensor(k), 4, 2, md.tensor(wi),
                                            md.tensor(bi), None, None, False, 0.0, md.tensor(wo), md.tensor(bo),
                                            key_padding_mask=md.tensor(_KPM))
    ref_out, ref_w = mha_loop(q, k, k, 2, wi, bi, wo, bo, _KPM)
    np.testing.assert_allclose(out.numpy(), ref_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(w.numpy(), ref_w, rtol=1e-10, atol=1e-12)
    mha = nn.MultiheadAttention(4, 2, batch_first=True).double()
    mha.load_state_dict({"in_proj_weight": wi, "in_proj_bias": bi, "out_proj.weight": wo, "out_proj.bias": bo})
    o, w2 = mha(md.tensor(q.transpose(1, 0, 2)), md.tensor(k.transpose(1, 0, 2)), md.tensor(k.transpose(1, 0, 2)),
                key_padding_mask=md.tensor(_KPM))
    np.testing.assert_allclose(o.detach().numpy(), ref_out.transpose(1, 0, 2), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kw,exc,match", [
    (dict(query=md.zeros(3, 2, 5)), AssertionError, "was expecting embedding dimension of 4, but got 5"),
    (dict(key=md.zeros(5, 2, 4)), AssertionError, "does not match value shape"),
    (dict(query=md.zeros(3, 2, 4, 1)), AssertionError, "unbatched 2D or batched 3D"),
    (dict(key=md.zeros(4, 4)), AssertionError, "expected `key` and `value` to be 3-D"),
    (dict(attn_mask=md.zeros(3, 5)), RuntimeError, "The shape of the 2D attn_mask"),
    (dict(static_k=md.zeros(3, 4, 2)), AssertionError, r"static_k.size\(0\) of 4"),
    (dict(in_proj_weight=None), AssertionError, "in_proj_weight is None"),
])
def test_multi_head_attention_forward_bad_input(kw, exc, match):
    args = dict(query=md.zeros(3, 2, 4), key=md.zeros(4, 2, 4), value=md.zeros(4, 2, 4), in_proj_weight=md.zeros(12, 4))
    args.update(kw)
    with pytest.raises(exc, match=match):
        F.multi_head_attention_forward(args.pop("query"), args.pop("key"), args.pop("value"), 4, 2,
                                       args.pop("in_proj_weight"), None, None, None, False, 0.0, md.zeros(4, 4), None,
                                       **args)


# small layers --------------------------------------------------------------------------------
def test_cross_map_lrn2d_window_keeps_channel_zero_unlike_local_response_norm():
    x = rng.standard_normal((1, 6, 2, 2))
    y = nn.CrossMapLRN2d(3, 1.0, 0.75, 1.0)(md.tensor(x)).numpy()
    np.testing.assert_allclose(y, cross_map_lrn_loop(x, 3, 1.0, 0.75, 1.0), rtol=1e-12)
    assert not np.allclose(y, F.local_response_norm(md.tensor(x), 3, 1.0, 0.75, 1.0).numpy())
    assert repr(nn.CrossMapLRN2d(3)) == "CrossMapLRN2d(3, alpha=0.0001, beta=0.75, k=1)"
    with pytest.raises(ValueError, match="Expected input to be 4D, got 3D"):
        nn.CrossMapLRN2d(3)(md.zeros(2, 3, 4))


@pytest.mark.parametrize("call,exc,match", [
    (lambda: F.conv_tbc(md.zeros(5, 3), md.zeros(2, 3, 4), md.zeros(4)), RuntimeError, "Input must have 3 dims"),
    (lambda: F.conv_tbc(md.zeros(5, 2, 3), md.zeros(3, 4), md.zeros(4)), RuntimeError, "Weight tensor must have 3"),
    (lambda: F.conv_tbc(md.zeros(5, 2, 3), md.zeros(2, 2, 4), md.zeros(4)), RuntimeError, "input channels"),
    (lambda: F.conv_tbc(md.zeros(5, 2, 3), md.zeros(2, 3, 4), md.zeros(3)), RuntimeError, "Bias size must equal"),
    (lambda: F.conv_tbc(md.zeros(5, 2, 3), md.zeros(2, 3, 4), None), TypeError, "'bias' must be Tensor"),
    (lambda: F.native_channel_shuffle(md.zeros(2, 4, 3), 3), RuntimeError, "divisible by groups"),
])
def test_conv_tbc_and_native_channel_shuffle_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_conv_tbc_negative_pad_crops_and_native_channel_shuffle_interleaves():
    x, w, b = rng.standard_normal((6, 2, 3)), rng.standard_normal((2, 3, 4)), rng.standard_normal(4)
    np.testing.assert_allclose(F.conv_tbc(md.tensor(x), md.tensor(w), md.tensor(b), -1).numpy(),
                               conv_tbc_loop(x[1:-1], w, b, 0), rtol=1e-12)
    y = F.native_channel_shuffle(md.arange(6.0).reshape(1, 6, 1), 2)
    np.testing.assert_array_equal(y.numpy().ravel(), [0, 3, 1, 4, 2, 5])


def test_deprecated_nllloss2d_and_container_warn_and_work():
    with pytest.warns(FutureWarning, match="NLLLoss2d"):
        loss = nn.NLLLoss2d(reduction="sum")
    x = md.tensor(log_softmax(rng.standard_normal((2, 3))[:, :, None, None].repeat(2, 2)))
    assert isinstance(loss, nn.NLLLoss) and loss(x, md.zeros(2, 2, 1, dtype=md.int64)).shape == ()
    with pytest.warns(FutureWarning, match="Container"):
        c = nn.Container(act=nn.ReLU())
    assert list(dict(c.named_children())) == ["act"]


def test_convert_conv_weight_memory_format_keeps_parameters_and_checks_rank():
    m = nn.Sequential(nn.Conv2d(2, 3, 3), nn.Sequential(nn.ConvTranspose2d(3, 2, 2)), nn.Conv3d(1, 1, 1))
    w, data = m[1][0].weight, m[1][0].weight.detach().numpy().copy()
    before = w._data
    assert nn.utils.convert_conv2d_weight_memory_format(m, md.channels_last) is m
    assert m[1][0].weight is w and w._data is not before and np.array_equal(w.detach().numpy(), data)
    with pytest.raises(RuntimeError, match="required rank 5 tensor to use channels_last_3d"):
        nn.utils.convert_conv2d_weight_memory_format(m, md.channels_last_3d)
    three = m[2].weight._data
    nn.utils.convert_conv3d_weight_memory_format(m, md.channels_last_3d)
    assert m[2].weight._data is not three
    assert nn.utils.memory_format.convert_conv2d_weight_memory_format is nn.utils.convert_conv2d_weight_memory_format


# against PyTorch ----------------------------------------------------------------------------
def _torch():
    return pytest.importorskip("torch")


def test_3d_pools_match_torch_values_and_gradients():
    torch = _torch()
    x = rng.standard_normal((2, 2, 5, 6, 7))
    s = rng.random((2, 2, 3))
    for ours, theirs in [
        (lambda t: F.lp_pool3d(t, 2, 2, ceil_mode=True),
         lambda t: torch.nn.functional.lp_pool3d(t, 2, 2, ceil_mode=True)),
        (lambda t: F.fractional_max_pool3d(t, 2, (3, 3, 4), _random_samples=md.tensor(s)),
         lambda t: torch.nn.functional.fractional_max_pool3d(t, 2, (3, 3, 4), _random_samples=torch.tensor(s))),
        (lambda t: F.max_unpool3d(*F.max_pool3d(t, 2, return_indices=True), 2, output_size=(5, 6, 7)),
         lambda t: torch.nn.functional.max_unpool3d(*torch.nn.functional.max_pool3d(t, 2, return_indices=True), 2,
                                                    output_size=(5, 6, 7)))]:
        a, b = md.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        ya, yb = ours(a), theirs(b)
        np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), rtol=1e-12)
        g = rng.standard_normal(tuple(ya.shape))
        ya.backward(md.tensor(g)), yb.backward(torch.tensor(g))
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12, atol=1e-14)
    _, ia = F.fractional_max_pool3d(md.tensor(x), 2, (3, 3, 4), _random_samples=md.tensor(s), return_indices=True)
    _, ib = torch.nn.functional.fractional_max_pool3d(torch.tensor(x), 2, (3, 3, 4), _random_samples=torch.tensor(s),
                                                      return_indices=True)
    np.testing.assert_array_equal(ia.numpy(), ib.numpy())
    assert repr(nn.MaxUnpool3d(2)) == repr(torch.nn.MaxUnpool3d(2))
    assert repr(nn.LPPool3d(2, 3)) == repr(torch.nn.LPPool3d(2, 3))


def test_lazy_reprs_and_buffers_match_torch():
    torch = _torch()
    for name, args, kw in [("LazyConv3d", (4, 3), {}),
                           ("LazyConvTranspose1d", (4, 3), dict(stride=2, output_padding=1)),
                           ("LazyConvTranspose2d", (4, 3), dict(bias=False, dilation=2)),
                           ("LazyConvTranspose3d", (4, (1, 2, 3)), dict(padding=1))]:
        ours, theirs = getattr(nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)
        assert repr(ours) == repr(theirs)
    ours, theirs = nn.LazyBatchNorm1d(), torch.nn.LazyBatchNorm1d()
    assert [(n, type(b).__name__) for n, b in ours.named_buffers()] == \
        [(n, type(b).__name__) for n, b in theirs.named_buffers()]


def test_adaptive_log_softmax_matches_torch():
    torch = _torch()
    t = torch.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [4, 10, 15], div_value=2.0, head_bias=True).double()
    m = nn.AdaptiveLogSoftmaxWithLoss(16, 20, [4, 10, 15], div_value=2.0, head_bias=True).double()
    m.load_state_dict({k: v.detach().numpy() for k, v in t.state_dict().items()})
    x, y = rng.standard_normal((9, 16)), np.array([0, 3, 5, 19, 12, 11, 4, 16, 2])
    tx, mx = torch.tensor(x, requires_grad=True), md.tensor(x, requires_grad=True)
    a, b = t(tx, torch.tensor(y)), m(mx, md.tensor(y))
    np.testing.assert_allclose(b.output.detach().numpy(), a.output.detach().numpy(), rtol=1e-12)
    a.loss.backward(), b.loss.backward()
    np.testing.assert_allclose(mx.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-14)
    for (n, p), (_, q) in zip(m.named_parameters(), t.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, atol=1e-14, err_msg=n)
    np.testing.assert_array_equal(m.predict(mx).numpy(), t.predict(tx).numpy())
    np.testing.assert_allclose(m.log_prob(mx).detach().numpy(), t.log_prob(tx).detach().numpy(), rtol=1e-12)


@pytest.mark.parametrize("cfg", [{}, {"self": 1}, {"biaskv": 1, "zero": 1, "kpm": 1, "am": 1}, {"sep": 1, "kpm": 1},
                                 {"static": 1, "zero": 1}, {"nw": False, "kpm": 1, "am": 1}, {"avg": False},
                                 {"unbatched": 1, "am": 1}])
def test_multi_head_attention_forward_matches_torch(cfg):
    torch = _torch()
    L, S, B, E, H = 3, 4, 2, 6, 2
    r = np.random.default_rng(3)
    arrays = dict(wi=(3 * E, E), bi=(3 * E,), bk=(1, 1, E), bv=(1, 1, E), wo=(E, E), bo=(E,), wq=(E, E), wk=(E, 5),
                  wv=(E, 7), q=(L, B, E), k=(S, B, E), v=(S, B, E), k5=(S, B, 5), v7=(S, B, 7), sk=(B * H, 5, E // H),
                  sv=(B * H, 5, E // H), am=(L, S))
    arrays = {n: r.standard_normal(s) for n, s in arrays.items()}
    arrays["kpm"] = np.array([[False, False, True, False], [False, False, False, False]])

    def run(lib, F_):
        t = {n: lib.tensor(a, requires_grad=n not in ("kpm", "am")) for n, a in arrays.items()}
        q, k, v = t["q"], t["k"], t["v"]
        if cfg.get("self"):
            k = v = q
        kw = dict(need_weights=cfg.get("nw", True), average_attn_weights=cfg.get("avg", True))
        bk = bv = None
        if cfg.get("biaskv"):
            bk, bv = t["bk"], t["bv"]
        if cfg.get("sep"):
            kw.update(use_separate_proj_weight=True, q_proj_weight=t["wq"], k_proj_weight=t["wk"],
                      v_proj_weight=t["wv"])
            k, v = t["k5"], t["v7"]
        if cfg.get("kpm"):
            kw["key_padding_mask"] = t["kpm"]
        if cfg.get("am"):
            kw["attn_mask"] = t["am"]
        if cfg.get("static"):
            kw["static_k"], kw["static_v"] = t["sk"], t["sv"]
        if cfg.get("unbatched"):
            q, k, v = q[:, 0], k[:, 0], v[:, 0]
        out, w = F_.multi_head_attention_forward(q, k, v, E, H, t["wi"], t["bi"], bk, bv, bool(cfg.get("zero")), 0.0,
                                                 t["wo"], t["bo"], **kw)
        total = (out * lib.tensor(np.cos(np.arange(out.numel())).reshape(tuple(out.shape)))).sum()
        if w is not None:
            total = total + (w * w).sum()
        total.backward()
        return out, w, {n: x.grad for n, x in t.items() if x.grad is not None}

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        to, tw, tg = run(torch, torch.nn.functional)
    mo, mw, mg = run(md, F)
    np.testing.assert_allclose(mo.detach().numpy(), to.detach().numpy(), rtol=1e-10, atol=1e-12)
    assert (mw is None) == (tw is None)
    if tw is not None:
        np.testing.assert_allclose(mw.detach().numpy(), tw.detach().numpy(), rtol=1e-10, atol=1e-12)
    assert sorted(mg) == sorted(tg)
    for n in tg:
        np.testing.assert_allclose(mg[n].numpy(), tg[n].numpy(), rtol=1e-9, atol=1e-12, err_msg=n)


def test_cross_map_lrn2d_and_conv_tbc_match_torch_values():
    torch = _torch()
    x = rng.standard_normal((2, 7, 3, 3))
    for size in (1, 2, 5, 9):
        np.testing.assert_allclose(nn.CrossMapLRN2d(size, 0.1)(md.tensor(x)).numpy(),
                                   torch.nn.CrossMapLRN2d(size, 0.1)(torch.tensor(x)).numpy(), rtol=1e-12)
    x, w, b = rng.standard_normal((5, 2, 3)), rng.standard_normal((3, 3, 4)), rng.standard_normal(4)
    ts = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    ms = [md.tensor(a, requires_grad=True) for a in (x, w, b)]
    yt, ym = torch.nn.functional.conv_tbc(*ts, 2), F.conv_tbc(*ms, 2)
    np.testing.assert_allclose(ym.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
    (yt * yt).sum().backward(), (ym * ym).sum().backward()
    for a, c in zip(ms, ts):
        np.testing.assert_allclose(a.grad.numpy(), c.grad.numpy(), rtol=1e-10)
