"""``inplace=True`` on the activations and dropout, F.* and nn.*: as in PyTorch the input is
overwritten with the result and returned, gradients are those of the out-of-place op, and
the in-place rules hold (no leaf that requires grad; no tensor a recorded op still needs)."""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.autograd import gradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional

X = np.array([[-2.0, -0.5, 0.0, 0.3, 1.5, 7.0], [3.0, -7.0, 0.9, -1.1, 6.5, -0.01]])

FUNCTIONS = {   # name: (args after the input)
    "relu": (), "leaky_relu": (0.2,), "elu": (0.7,), "selu": (), "silu": (), "mish": (),
    "hardtanh": (-0.8, 1.2), "relu6": (),
}
UNDERSCORE = {"relu_": (), "elu_": (0.7,), "selu_": (), "leaky_relu_": (0.2,), "hardtanh_": (-0.8, 1.2)}


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_functional_inplace_overwrites_and_returns_the_input(name):
    args = FUNCTIONS[name]
    x, tx = md.tensor(X.copy()), torch.tensor(X.copy())
    view = x[1]
    out = getattr(F, name)(x, *args, inplace=True)
    expected = getattr(TF, name)(tx, *args, inplace=True)
    assert out is x and x._version == 1
    np.testing.assert_allclose(x.numpy(), expected.numpy(), rtol=1e-12)
    np.testing.assert_allclose(view.numpy(), expected.numpy()[1], rtol=1e-12)
    y = md.tensor(X.copy())
    assert getattr(F, name)(y, *args) is not y and np.array_equal(y.numpy(), X)   # the default leaves it


@pytest.mark.parametrize("name", list(UNDERSCORE))
def test_the_underscore_forms(name):
    args = UNDERSCORE[name]
    x, tx = md.tensor(X.copy()), torch.tensor(X.copy())
    assert getattr(F, name)(x, *args) is x
    np.testing.assert_allclose(x.numpy(), getattr(TF, name)(tx, *args).numpy(), rtol=1e-12)


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_inplace_in_the_graph_has_the_out_of_place_gradient(name):
    args = FUNCTIONS[name]
    w = md.tensor(np.random.default_rng(0).uniform(0.5, 1.5, X.shape), requires_grad=True)

    def f(w, inplace):
        return getattr(F, name)(w * md.tensor(X), *args, inplace=inplace)
    assert gradcheck(lambda w: f(w, True), (w,))
    g = md.tensor(np.random.default_rng(1).standard_normal(X.shape))
    f(w, True).backward(g)
    inplace_grad = w.grad.numpy().copy()
    w.grad = None
    f(w, False).backward(g)
    np.testing.assert_allclose(inplace_grad, w.grad.numpy(), rtol=1e-12)


def test_inplace_on_a_leaf_that_requires_grad_is_refused_as_pytorch():
    x = md.tensor(X, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        F.relu(x, inplace=True)
    with md.no_grad():
        assert F.relu(x, inplace=True) is x


def test_overwriting_an_output_a_recorded_op_needs_is_caught_at_backward():
    x = md.tensor(X, requires_grad=True)
    s = x.sigmoid()                 # its backward reads s
    F.relu(s, inplace=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        s.sum().backward()


@pytest.mark.parametrize("make, tmake", [
    (lambda: nn.ReLU(inplace=True), lambda: torch.nn.ReLU(inplace=True)),
    (lambda: nn.LeakyReLU(0.1, inplace=True), lambda: torch.nn.LeakyReLU(0.1, inplace=True)),
    (lambda: nn.ELU(inplace=True), lambda: torch.nn.ELU(inplace=True)),
    (lambda: nn.SELU(inplace=True), lambda: torch.nn.SELU(inplace=True)),
    (lambda: nn.SiLU(inplace=True), lambda: torch.nn.SiLU(inplace=True)),
    (lambda: nn.Mish(inplace=True), lambda: torch.nn.Mish(inplace=True)),
    (lambda: nn.Hardtanh(inplace=True), lambda: torch.nn.Hardtanh(inplace=True)),
    (lambda: nn.ReLU6(inplace=True), lambda: torch.nn.ReLU6(inplace=True)),
])
def test_layers_with_inplace_true_write_into_their_input(make, tmake):
    x, tx = md.tensor(X.copy()), torch.tensor(X.copy())
    assert make()(x) is x
    np.testing.assert_allclose(x.numpy(), tmake()(tx).numpy(), rtol=1e-12)


def test_a_resnet_stem_with_an_inplace_relu_trains_as_the_out_of_place_one():
    """conv -> batch norm -> ReLU(inplace=True), as torchvision builds it: neither op before the
    ReLU needs its own output for backward, so overwriting it is allowed and changes nothing."""
    x = md.tensor(np.random.default_rng(2).standard_normal((2, 3, 6, 6)).astype(np.float32))
    grads = []
    for inplace in (True, False):
        md.manual_seed(0)
        net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(inplace=inplace), nn.Linear(4, 2))
        net(x).square().sum().backward()
        grads.append([p.grad.numpy().copy() for p in net.parameters()])
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fn", [F.dropout, F.dropout1d, F.dropout2d, F.dropout3d])
def test_inplace_dropout(fn):
    shape = (2, 3, 4, 5, 6)[: {F.dropout: 2, F.dropout1d: 3, F.dropout2d: 4, F.dropout3d: 5}[fn]]
    data = np.random.default_rng(3).uniform(1, 2, shape)
    x = md.tensor(data.copy())
    md.manual_seed(5)
    out = fn(x, 0.5, True, True)
    md.manual_seed(5)
    expected = fn(md.tensor(data), 0.5, True, False)
    assert out is x and x._version == 1
    np.testing.assert_array_equal(x.numpy(), expected.numpy())
    assert 0 < (x.numpy() == 0).mean() < 1 and np.allclose(x.numpy()[x.numpy() != 0], 2 * data[x.numpy() != 0])
    y = md.tensor(data.copy())
    assert fn(y, 0.5, False, True) is y and np.array_equal(y.numpy(), data)   # eval: untouched


def test_dropout_layers_pass_inplace_on():
    x = md.tensor(np.ones((4, 8)))
    drop = nn.Dropout(0.5, inplace=True)
    assert drop(x) is x and x._version == 1
    drop.eval()
    y = md.tensor(np.ones((4, 8)))
    assert drop(y) is y and y._version == 0
