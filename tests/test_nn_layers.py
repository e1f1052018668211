"""Layers other than conv/pooling: linear, embedding, activations (gelu both modes), dropout,
containers, initialisation statistics and clip_grad_norm_."""
import math
from collections import OrderedDict

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.kernels.cpu import gelu as k_gelu
from minidl.nn import init
from minidl.nn.utils import clip_grad_norm_, clip_grad_value_
from minidl.ops import activation as act_ops
from minidl.ops._kernel_switch import implementation
from minidl.testing import OpSpec, check_forward, check_gradcheck, check_implementations, forward_cases, spec_id

_erf = np.vectorize(math.erf)

SPECS = [
    OpSpec(name="linear", op=lambda x, w, b: F.linear(x, w, b), reference=lambda x, w, b: x @ w.T + b,
           inputs=lambda rng: (rng.standard_normal((4, 3)), rng.standard_normal((5, 3)), rng.standard_normal(5))),
    OpSpec(name="linear_3d_nobias", op=lambda x, w: F.linear(x, w), reference=lambda x, w: x @ w.T,
           inputs=lambda rng: (rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4)))),
    OpSpec(name="linear_1d", op=lambda x, w, b: F.linear(x, w, b), reference=lambda x, w, b: w @ x + b,
           inputs=lambda rng: (rng.standard_normal(3), rng.standard_normal((2, 3)), rng.standard_normal(2))),
    OpSpec(name="embedding_repeated", op=lambda w, i: F.embedding(i, w), reference=lambda w, i: w[i],
           inputs=lambda rng: (rng.standard_normal((6, 3)), np.array([[1, 4, 1], [0, 1, 5]])), grad_inputs=[0]),
    OpSpec(name="gelu", op=lambda x: F.gelu(x), reference=lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))),
           inputs=lambda rng: (rng.standard_normal((3, 7)) * 3,),
           implementations={"numba": k_gelu.gelu_forward}),
    OpSpec(name="gelu_tanh", op=lambda x: F.gelu(x, approximate="tanh"),
           reference=lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
           inputs=lambda rng: (rng.standard_normal((3, 7)) * 3,),
           implementations={"numba": k_gelu.gelu_tanh_forward}),
]


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward(spec, dtype, device):
    check_forward(spec, dtype, device)


@pytest.mark.parametrize("impl", ["numba", "reference"])
@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck(spec, impl):
    with implementation(impl):
        assert check_gradcheck(spec)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gelu_kernel_matches_reference(dtype):
    check_implementations(SPECS[4], dtype)
    x = np.random.default_rng(0).standard_normal(50) * 3
    g = np.random.default_rng(1).standard_normal(50)
    np.testing.assert_allclose(k_gelu.gelu_backward(x, g), act_ops.gelu_backward_reference(x, g), rtol=1e-14)


def test_gelu_values_and_torch():
    # GELU(1) = Phi(1) = 0.8413447460685429; tanh approximation 0.8411919906082768
    assert F.gelu(md.tensor([1.0], dtype=md.float64)).item() == pytest.approx(0.8413447460685429, abs=1e-15)
    assert F.gelu(md.tensor([1.0], dtype=md.float64), approximate="tanh").item() == pytest.approx(0.8411919906082768,
                                                                                                    abs=1e-15)
    with pytest.raises(ValueError, match="approximate"):
        F.gelu(md.randn(2), approximate="fast")
    torch = pytest.importorskip("torch")
    x = np.linspace(-6, 6, 101)
    for mode in ("none", "tanh"):
        np.testing.assert_allclose(nn.GELU(mode)(md.tensor(x)).numpy(),
                                   torch.nn.functional.gelu(torch.tensor(x), approximate=mode).numpy(), atol=1e-14)


def test_linear_module_init_and_errors():
    md.manual_seed(0)
    m = nn.Linear(50, 40)
    bound = 1 / math.sqrt(50)
    w, b = m.weight.detach().numpy(), m.bias.detach().numpy()
    assert w.shape == (40, 50) and w.dtype == np.float32
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.05 * bound       # U(-b, b) has std b / sqrt 3
    assert np.abs(b).max() <= bound
    assert m(md.randn(2, 7, 50)).shape == (2, 7, 40)
    assert nn.Linear(3, 2, bias=False).bias is None
    assert repr(m) == "Linear(in_features=50, out_features=40, bias=True)"
    with pytest.raises(ValueError, match="expected last dim 50"):
        m(md.randn(2, 49))
    x = md.randn(3, 4)
    assert nn.Identity(5, foo=1)(x) is x


def test_embedding_repeated_indices_and_padding_idx():
    w = md.tensor(np.arange(12.0).reshape(4, 3), requires_grad=True)
    idx = md.tensor(np.array([[1, 1, 3], [1, 0, 3]]))
    out = F.embedding(idx, w, padding_idx=3)
    assert out.shape == (2, 3, 3)
    np.testing.assert_array_equal(out.detach().numpy()[0, 2], [9, 10, 11])
    g = np.ones((2, 3, 3))
    out.backward(g)
    np.testing.assert_array_equal(w.grad.numpy()[:, 0], [1, 3, 0, 0])   # row 1 used 3 times; padding row none
    with pytest.raises(IndexError, match="num_embeddings is 4"):
        F.embedding([0, 4], w)
    with pytest.raises(TypeError, match="integer indices"):
        F.embedding(md.tensor([0.0, 1.0]), w)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_embedding_backward_kernel_matches_add_at(dtype):
    from minidl.kernels.cpu.embedding import embedding_backward
    rng = np.random.default_rng(3)
    idx = rng.integers(0, 7, size=(4, 9))
    g = rng.standard_normal((4, 9, 5)).astype(dtype)
    ref = np.zeros((7, 5), dtype)
    np.add.at(ref, idx.reshape(-1), g.reshape(-1, 5))
    np.testing.assert_allclose(embedding_backward(idx, g, 7), ref, rtol=1e-6)


def test_embedding_module():
    md.manual_seed(0)
    e = nn.Embedding(2000, 16, padding_idx=0)
    w = e.weight.detach().numpy()
    assert np.all(w[0] == 0)
    assert abs(w[1:].mean()) < 0.02 and abs(w[1:].std() - 1) < 0.02      # N(0, 1)
    assert e(md.tensor([[0, 5]])).shape == (1, 2, 16)
    assert nn.Embedding(5, 2, padding_idx=-1).padding_idx == 4
    pre = nn.Embedding.from_pretrained(md.tensor(np.eye(3)))
    assert not pre.weight.requires_grad
    np.testing.assert_array_equal(pre(md.tensor([2])).numpy(), [[0, 0, 1]])


def test_dropout_statistics_scaling_and_gradient():
    md.manual_seed(0)
    x = md.ones(200, 500, requires_grad=True)
    y = F.dropout(x, p=0.3, training=True)
    v = y.detach().numpy()
    kept = v != 0
    assert abs(1 - kept.mean() - 0.3) < 0.01                       # ~p of the elements are zeroed
    np.testing.assert_allclose(v[kept], 1 / 0.7, rtol=1e-6)        # the rest scaled by 1/(1-p)
    assert abs(v.mean() - 1) < 0.02                                 # expectation preserved
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), v)                   # dy/dx is the same scaled mask
    assert F.dropout(x, 0.3, training=False) is x
    assert F.dropout(x, 0.0) is x
    assert np.all(F.dropout(x, 1.0).detach().numpy() == 0)
    md.manual_seed(5)
    a = F.dropout(md.ones(10, 10), 0.5).numpy()
    md.manual_seed(5)
    np.testing.assert_array_equal(a, F.dropout(md.ones(10, 10), 0.5).numpy())   # seeded
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout(x, 1.5)


def test_dropout_module_train_eval():
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    x = md.randn(64, 4)
    m.eval()
    np.testing.assert_array_equal(m(x).detach().numpy(), m[0](x).detach().numpy())
    m.train()
    assert (m(x).detach().numpy() == 0).mean() > 0.3


def test_activation_modules():
    x = md.tensor([[-1.0, 0.0, 2.0]])
    np.testing.assert_allclose(nn.ReLU()(x).numpy(), [[0, 0, 2]])
    np.testing.assert_allclose(nn.Tanh()(x).numpy(), np.tanh([[-1, 0, 2]]), rtol=1e-6)
    np.testing.assert_allclose(nn.Sigmoid()(x).numpy(), 1 / (1 + np.exp([[1, 0, -2]])), rtol=1e-6)
    s = nn.Softmax(dim=1)(x).numpy()
    np.testing.assert_allclose(s, np.exp([[-1, 0, 2]]) / np.exp([[-1, 0, 2]]).sum(), rtol=1e-6)
    np.testing.assert_allclose(nn.LogSoftmax(dim=-1)(x).numpy(), np.log(s), rtol=1e-5)
    assert nn.Flatten()(md.randn(2, 3, 4, 5)).shape == (2, 60)
    assert nn.Flatten(0, 1)(md.randn(2, 3, 4)).shape == (6, 4)


# containers ------------------------------------------------------------------------------

def test_sequential_indexing_len_iteration_and_names():
    a, b, c = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
    s = nn.Sequential(a, b, c)
    assert len(s) == 3 and s[0] is a and s[-1] is c and list(s) == [a, b, c]
    assert isinstance(s[1:], nn.Sequential) and list(s[1:]) == [b, c]
    assert list(s.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    x = md.randn(4, 2)
    np.testing.assert_allclose(s(x).detach().numpy(), c(b(a(x))).detach().numpy())
    s.append(nn.Tanh())
    assert len(s) == 4 and isinstance(s[3], nn.Tanh)
    del s[1]
    assert [type(m).__name__ for m in s] == ["Linear", "Linear", "Tanh"]
    assert list(s.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.bias"]   # renumbered
    s[2] = nn.Sigmoid()
    assert isinstance(s[2], nn.Sigmoid)
    s.insert(0, nn.Identity())
    assert isinstance(s[0], nn.Identity) and len(s) == 4
    named = nn.Sequential(OrderedDict(fc=nn.Linear(2, 2), act=nn.ReLU()))
    assert list(named.state_dict()) == ["fc.weight", "fc.bias"] and named.fc is named[0]
    with pytest.raises(IndexError, match="out of range"):
        s[10]
    with pytest.raises(TypeError, match="only hold Modules"):
        nn.Sequential(lambda x: x)


def test_modulelist_and_moduledict_register_parameters():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
            self.heads = nn.ModuleDict({"a": nn.Linear(2, 1), "b": nn.Linear(2, 4)})

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return self.heads["a"](x)

    net = Net()
    assert len(list(net.parameters())) == 10
    assert "layers.2.bias" in net.state_dict() and "heads.b.weight" in net.state_dict()
    assert net(md.randn(3, 2)).shape == (3, 1)
    ml = net.layers
    ml.append(nn.ReLU())
    ml += [nn.Tanh()]
    assert len(ml) == 5 and isinstance(ml[-1], nn.Tanh) and isinstance(ml[1:3], nn.ModuleList)
    d = net.heads
    assert list(d.keys()) == ["a", "b"] and "a" in d and len(d) == 2
    d["c"] = nn.ReLU()
    assert list(d) == ["a", "b", "c"]
    d.pop("b")
    assert list(d) == ["a", "c"] and not hasattr(d, "b")


# init ----------------------------------------------------------------------------------------

def test_init_statistics():
    md.manual_seed(0)
    w = md.zeros(400, 300)
    fan_in, fan_out = 300, 400
    init.kaiming_uniform_(w, a=0, nonlinearity="relu")
    bound = math.sqrt(2) * math.sqrt(3 / fan_in)
    assert np.abs(w.numpy()).max() <= bound and abs(w.numpy().std() - bound / math.sqrt(3)) < 0.01 * bound
    init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")
    assert abs(w.numpy().std() - math.sqrt(2 / fan_out)) < 0.01 * math.sqrt(2 / fan_out)
    init.xavier_uniform_(w, gain=2.0)
    b = 2.0 * math.sqrt(6 / (fan_in + fan_out))
    assert np.abs(w.numpy()).max() <= b and abs(w.numpy().std() - b / math.sqrt(3)) < 0.01 * b
    init.xavier_normal_(w)
    assert abs(w.numpy().std() - math.sqrt(2 / (fan_in + fan_out))) < 0.01 * math.sqrt(2 / (fan_in + fan_out))
    init.trunc_normal_(w, mean=1.0, std=2.0, a=0.0, b=3.0)
    v = w.numpy()
    assert v.min() >= 0.0 and v.max() <= 3.0
    # mean of N(1, 2) truncated to [0, 3]: symmetric-ish window around 1 -> mu + s*(phi(a')-phi(b'))/Z
    from math import erf, exp, pi, sqrt
    al, be = (0 - 1) / 2, (3 - 1) / 2
    phi = lambda z: exp(-z * z / 2) / sqrt(2 * pi)  # noqa: E731
    Z = 0.5 * (erf(be / sqrt(2)) - erf(al / sqrt(2)))
    assert abs(v.mean() - (1 + 2 * (phi(al) - phi(be)) / Z)) < 0.01
    conv_w = md.zeros(8, 4, 3, 3)
    init.kaiming_uniform_(conv_w, a=math.sqrt(5))        # fan_in = 4*3*3: bound 1/sqrt(36)
    assert np.abs(conv_w.numpy()).max() <= 1 / 6
    init.constant_(w, 0.5)
    assert np.all(w.numpy() == 0.5)
    init.zeros_(w)
    assert not w.numpy().any()
    init.ones_(w)
    assert np.all(w.numpy() == 1)
    init.uniform_(w, -0.1, 0.2)
    assert w.numpy().min() >= -0.1 and w.numpy().max() <= 0.2
    init.normal_(w, 3.0, 0.5)
    assert abs(w.numpy().mean() - 3.0) < 0.01


def test_init_seeding_gain_and_errors():
    md.manual_seed(7)
    a = init.normal_(md.zeros(5)).numpy().copy()
    md.manual_seed(7)
    np.testing.assert_array_equal(a, init.normal_(md.zeros(5)).numpy())
    assert init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert init.calculate_gain("leaky_relu", math.sqrt(5)) == pytest.approx(math.sqrt(1 / 3))
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(md.zeros(5))
    with pytest.raises(ValueError, match="unsupported nonlinearity"):
        init.calculate_gain("swish")
    p = nn.Parameter(md.zeros(3, 3))
    init.uniform_(p)                       # works on a leaf that requires grad (outside the graph)
    assert p.requires_grad and p.detach().numpy().any()


# clip_grad_norm_ -------------------------------------------------------------------------------

def test_clip_grad_norm():
    p1, p2 = nn.Parameter(md.zeros(3)), nn.Parameter(md.zeros(2, 2))
    p1.grad = md.tensor([3.0, 0.0, 0.0])
    p2.grad = md.tensor([[0.0, 4.0], [0.0, 0.0]])
    total = clip_grad_norm_([p1, p2], max_norm=1.0)
    assert total.item() == pytest.approx(5.0)
    np.testing.assert_allclose(p1.grad.numpy(), [3 / (5 + 1e-6), 0, 0], rtol=1e-6)
    np.testing.assert_allclose(np.sqrt((p1.grad.numpy() ** 2).sum() + (p2.grad.numpy() ** 2).sum()), 1.0, rtol=1e-5)
    before = p1.grad.numpy().copy()
    assert clip_grad_norm_([p1, p2], max_norm=10.0).item() == pytest.approx(1.0, rel=1e-5)
    np.testing.assert_array_equal(p1.grad.numpy(), before)              # under the limit: untouched
    p1.grad = md.tensor([-7.0, 1.0, 0.0])
    assert clip_grad_norm_(p1, 2.0, norm_type="inf").item() == pytest.approx(7.0)
    np.testing.assert_allclose(p1.grad.numpy(), np.array([-7.0, 1.0, 0.0]) * 2 / (7 + 1e-6), rtol=1e-6)
    p1.grad = md.tensor([1.0, 2.0, -3.0])
    assert clip_grad_norm_(p1, 100.0, norm_type=1).item() == pytest.approx(6.0)
    p1.grad = md.tensor([np.nan, 1.0, 0.0])
    with pytest.raises(RuntimeError, match="non-finite"):
        clip_grad_norm_(p1, 1.0, error_if_nonfinite=True)
    p1.grad = md.tensor([5.0, -1.0, 0.5])
    clip_grad_value_(p1, 1.0)
    np.testing.assert_array_equal(p1.grad.numpy(), [1.0, -1.0, 0.5])


def test_clip_grad_norm_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal(s).astype(np.float32) for s in [(3, 4), (5,), (2, 2, 2)]]
    for norm_type in (2.0, 1.0, 3.0, float("inf")):
        ps = [nn.Parameter(md.zeros(*g.shape)) for g in grads]
        ts = [torch.zeros(g.shape, requires_grad=True) for g in grads]
        for p, t, g in zip(ps, ts, grads):
            p.grad = md.tensor(g)
            t.grad = torch.tensor(g)
        a = clip_grad_norm_(ps, 0.5, norm_type)
        b = torch.nn.utils.clip_grad_norm_(ts, 0.5, norm_type)
        assert a.item() == pytest.approx(b.item(), rel=1e-5)
        for p, t in zip(ps, ts):
            np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_linear_embedding_match_torch():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    tl, te = torch.nn.Linear(4, 3), torch.nn.Embedding(6, 4, padding_idx=2)
    ml, me = nn.Linear(4, 3), nn.Embedding(6, 4, padding_idx=2)
    ml.load_state_dict({k: v.detach().numpy() for k, v in tl.state_dict().items()})
    me.load_state_dict({k: v.detach().numpy() for k, v in te.state_dict().items()})
    idx = np.array([[0, 2, 5, 0], [1, 1, 2, 3]])
    y = ml(me(md.tensor(idx))).sum()
    ty = tl(te(torch.tensor(idx))).sum()
    y.backward()
    ty.backward()
    assert y.item() == pytest.approx(ty.item(), rel=1e-5)
    np.testing.assert_allclose(me.weight.grad.numpy(), te.weight.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ml.weight.grad.numpy(), tl.weight.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_float32_erf_approximation_is_accurate():
    from minidl.kernels.cpu.gelu import erf_f32
    x = np.linspace(-7, 7, 20001).astype(np.float32)
    approx = np.array([erf_f32(v) for v in x[::20]])
    np.testing.assert_allclose(approx, _erf(x[::20].astype(np.float64)), atol=1e-6, rtol=0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gelu_tanh_kernel_matches_reference(dtype):
    check_implementations(SPECS[5], dtype)
    x = (np.random.default_rng(0).standard_normal(50) * 3).astype(dtype)
    g = np.random.default_rng(1).standard_normal(50).astype(dtype)
    tol = 1e-5 if dtype == "float32" else 1e-13
    np.testing.assert_allclose(k_gelu.gelu_tanh_backward(x, g), act_ops.gelu_tanh_backward_reference(
        x.astype(np.float64), g.astype(np.float64)), atol=tol, rtol=tol)


def test_gelu_parallel_variant(monkeypatch):
    from minidl.runtime import layer_threads
    monkeypatch.setattr(layer_threads, "PARALLEL", True)
    from minidl.kernels.cpu import _threads
    monkeypatch.setattr(_threads, "SERIAL_BELOW", 0)
    for dtype in (np.float32, np.float64):
        x = np.random.default_rng(2).standard_normal(100).astype(dtype)
        np.testing.assert_allclose(k_gelu.gelu_forward(x), act_ops.gelu_reference(x.astype(np.float64)), atol=2e-6)
        np.testing.assert_allclose(k_gelu.gelu_backward(x, x), act_ops.gelu_backward_reference(x.astype(np.float64),
                                                                                               x.astype(np.float64)),
                                   atol=2e-6)


@pytest.mark.parametrize("make, error, message", [
    (lambda m: m.LayerNorm(-1), RuntimeError, r"LayerNorm: normalized_shape must hold non-negative sizes, got \[-1\]"),
    (lambda m: m.LayerNorm((2, -1)), RuntimeError, r"LayerNorm: normalized_shape .* got \[2, -1\]"),
    (lambda m: m.RMSNorm(-1), RuntimeError, "RMSNorm: normalized_shape"),
    (lambda m: m.LayerNorm(2.5), TypeError, "LayerNorm\\(\\): argument 'normalized_shape'"),
    (lambda m: m.BatchNorm1d(-1), RuntimeError, "BatchNorm1d: num_features must be non-negative, got num_features=-1"),
    (lambda m: m.GroupNorm(2, -2), RuntimeError, "GroupNorm: num_channels must be non-negative"),
    (lambda m: m.Conv1d(-1, 2, 3), RuntimeError, "Conv1d: in_channels must be non-negative, got in_channels=-1"),
    (lambda m: m.Bilinear(-1, 2, 3), RuntimeError, "Bilinear: in1_features must be non-negative"),
    (lambda m: m.RNNCell(-1, 3), RuntimeError, "RNNCell: input_size must be non-negative"),
    (lambda m: m.LSTMCell(3, -1), RuntimeError, "LSTMCell: hidden_size must be non-negative"),
    (lambda m: m.RNN(-1, 3), ValueError, "input_size must be greater than zero, got input_size=-1"),
    (lambda m: m.LSTM(0, 3), ValueError, "input_size must be greater than zero"),
    (lambda m: m.GRU(2.5, 3), TypeError, "input_size should be of type int, got: float"),
    (lambda m: m.MultiheadAttention(-4, 2), ValueError, "embed_dim and num_heads must be greater than 0"),
])
def test_layer_size_errors_name_the_argument(make, error, message):
    """PyTorch's error type (checked against it) with the argument named, not NumPy's
    "negative dimensions are not allowed"."""
    torch = pytest.importorskip("torch")
    with pytest.raises(error):
        make(torch.nn)
    with pytest.raises(error, match=message):
        make(nn)


@pytest.mark.parametrize("name", ["uniform_", "normal_", "trunc_normal_", "xavier_uniform_", "xavier_normal_",
                                  "kaiming_uniform_", "kaiming_normal_"])
def test_random_init_of_an_integer_tensor_raises(name):
    t = md.zeros(3, 3, dtype=md.int64)
    with pytest.raises(NotImplementedError, match=f"nn.init.{name}: not implemented for dtype minidl.int64; "
                                                  "expected a floating point tensor"):
        getattr(init, name)(t)
    assert t.tolist() == [[0] * 3] * 3
    init.constant_(t, 2)   # no draws: fine, as PyTorch
    assert t.tolist() == [[2] * 3] * 3


def test_dropout_of_an_integer_tensor_in_training_raises():
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="Float can't be cast"):
        torch.nn.functional.dropout(torch.ones(4, dtype=torch.long), 0.5, True)
    x = md.ones(10, dtype=md.int64)
    for call in (lambda: F.dropout(x, 0.5, True), lambda: F.dropout2d(md.ones(1, 2, 3, 3, dtype=md.int64), 0.5)):
        with pytest.raises(RuntimeError, match="dropout(2d)?: expected a floating point input .* got dtype "
                                               "minidl.int64"):
            call()
    assert F.dropout(x, 0.5, False) is x            # eval: the identity
    assert F.dropout(x, 1.0, True).tolist() == [0] * 10   # zeroes, no scaling, as PyTorch
