"""What float16/bfloat16 ops keep for backward (ops/low_precision.py): 2-byte inputs, outputs and
declared derived arrays, float32 statistics; the bytes a graph keeps, and the gradients the
rounded saves give against float32-saved ones."""
import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl import zoo
from minidl.autograd import versions
from minidl.ops import attention
from minidl.ops import low_precision as lp
from minidl.train.memory import graph_bytes

F16 = np.dtype(np.float16)


def _saved(t):
    return [a for a in t._node.saved_tensors if a is not None]


@pytest.fixture
def float32_saves(monkeypatch):
    """A switch to run a forward with the derived arrays and outputs saved in float32."""
    def use(on):
        monkeypatch.setattr(lp, "NARROW_SAVES", not on)
    return use


def test_softmax_saves_its_rounded_output_and_sees_it_written_in_place():
    x = md.randn(4, 7).half().requires_grad_()
    y = F.softmax(x, dim=-1)
    (s,) = _saved(y)
    assert s is y._data                                  # the output itself: no float32 copy
    g = md.randn(4, 7).half()
    y.backward(g, retain_graph=True)
    yr, gr = y.float().detach().numpy(), g.float().detach().numpy()
    ref = (yr * (gr - (gr * yr).sum(-1, keepdims=True))).astype(np.float16)
    np.testing.assert_array_equal(x.grad.numpy(), ref)   # the float32 formula on the rounded output
    assert _saved(y)[0] is y._data                       # backward put the 2-byte array back
    with md.no_grad():
        y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward(g)


@pytest.mark.parametrize("impl", ["reference", "fused-softmax", "numba"])
def test_attention_keeps_probabilities_and_inputs_in_float16(impl):
    q, k, v = (md.randn(2, 3, 9, 8).half().requires_grad_() for _ in range(3))
    with attention.implementation(impl):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        saved = _saved(out)
        low = [a for a in saved if a.dtype == F16 and a.size]
        wide = [a for a in saved if a.dtype == np.float32 and a.size]
        if impl == "numba":   # q, k, k^T, v, the output; the row log-sum-exp stays float32
            assert len(low) == 5 and [a.shape for a in wide] == [(6, 9)]
            assert versions.storage_of(saved[0]) is versions.storage_of(q._data)   # a view of q, not a copy
            assert versions.storage_of(saved[6]) is versions.storage_of(out._data)  # the returned output
        else:                 # q, k, v themselves and P (pd is P without dropout)
            assert not wide and saved[:3] == [q._data, k._data, v._data] and saved[3] is saved[4]
        out.float().sum().backward()
    assert q.grad.dtype is md.float16 and np.isfinite(q.grad.numpy()).all()


def test_float32_calls_are_untouched():
    x = md.randn(3, 5, requires_grad=True)
    y = F.softmax(x, dim=-1)
    assert _saved(y)[0] is y._data and "low_precision" not in y._node.__dict__
    q = md.randn(1, 4, 6, requires_grad=True)
    out = F.scaled_dot_product_attention(q, q, q)
    assert all(a.dtype == np.float32 for a in _saved(out))


def test_a_view_of_an_inputs_copy_is_kept_as_the_view_of_the_input():
    x = md.randn(2, 4, 5, 5).half().requires_grad_()
    w = md.randn(4, 3, 3, 3).half().requires_grad_()
    y = F.conv_transpose2d(x, w)          # saves x reshaped
    xr = _saved(y)[0]
    assert xr.dtype == F16 and versions.storage_of(xr) is versions.storage_of(x._data)
    np.testing.assert_array_equal(xr.reshape(x.shape), x._data)


def _gpt_case():
    md.manual_seed(0)
    rng = np.random.default_rng(0)
    model = zoo.GPT(vocab_size=50, block_size=64, n_layer=2, n_head=4, d_model=32)
    x, y = md.tensor(rng.integers(0, 50, (8, 64))), md.tensor(rng.integers(0, 50, (8, 64)))
    return model, lambda: model(x, y)[1]


def _cnn_case():
    md.manual_seed(0)
    rng = np.random.default_rng(0)
    model = zoo.get_model("resnet8", in_channels=3, num_classes=10, norm="batch", width=8)
    x = md.tensor(rng.standard_normal((4, 3, 16, 16)).astype(np.float32))
    y = md.tensor(rng.integers(0, 10, 4))
    return model, lambda: F.cross_entropy(model(x), y)


@pytest.mark.parametrize("case", [_gpt_case, _cnn_case], ids=["gpt", "cnn"])
def test_float16_keeps_at_most_six_tenths_of_the_float32_bytes(case):
    """What stays float32 is what a GPU keeps in float32: the GPT's residual stream (the input of
    its norms) and the loss's log-probabilities; the 2-byte copies of the weights count. (The GPT's
    ratio rises as d_model grows against the context.)"""
    model, loss = case()
    saved = {}
    for name, dtype in (("fp32", None), ("fp16", md.float16)):
        with md.autocast("cpu", dtype=dtype or md.bfloat16, enabled=dtype is not None):
            saved[name] = graph_bytes(loss())
    ratio = saved["fp16"].saved / saved["fp32"].saved
    assert ratio <= 0.6, (ratio, saved["fp16"].by_dtype)


def _grads(model, loss, low, scale):
    for p in model.parameters():
        p.grad = None
    with md.autocast("cpu", dtype=low):
        value = loss()
    (value * scale).backward()
    return [p.grad.numpy().astype(np.float64) / scale for p in model.parameters()]


@pytest.mark.parametrize("low", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", [_gpt_case, _cnn_case], ids=["gpt", "cnn"])
def test_rounded_saves_move_gradients_by_a_few_ulps(case, low, float32_saves):
    """The documented tolerance: per parameter, |g - g(float32 saves)| <= 4 eps * max |g(float32 saves)|,
    eps the low dtype's machine epsilon (2**-10 for float16, 2**-7 for bfloat16). float16 runs with
    a loss scale, as GradScaler trains it: unscaled, its small gradients are subnormal."""
    model, loss = case()
    dtype = getattr(md, low)
    eps = 2.0 ** (-10 if low == "float16" else -7)
    scale = 1024.0 if low == "float16" else 1.0
    float32_saves(True)
    wide = _grads(model, loss, dtype, scale)
    float32_saves(False)
    narrow = _grads(model, loss, dtype, scale)
    moved = False
    for g, h in zip(narrow, wide):
        assert np.abs(g - h).max() <= 4 * eps * np.abs(h).max()
        moved = moved or not np.array_equal(g, h)
    if case is _gpt_case:
        assert moved        # attention's P and LinearGelu's U are rounded: the gradients do change
