"""nn.utils.weight_norm / remove_weight_norm: w = g * v / ||v||, against PyTorch's classic API."""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
from minidl.autograd import gradcheck
from minidl.nn.utils import remove_weight_norm, weight_norm

# PyTorch marks its classic weight_norm deprecated in favour of the parametrization; it is the oracle here
pytestmark = pytest.mark.filterwarnings("ignore:.*weight_norm.*:FutureWarning")


def _pair(kind):
    torch = pytest.importorskip("torch")
    md.manual_seed(0)
    m = nn.Linear(5, 4) if kind == "linear" else nn.Conv2d(3, 4, 3, padding=1)
    t = torch.nn.Linear(5, 4) if kind == "linear" else torch.nn.Conv2d(3, 4, 3, padding=1)
    with torch.no_grad():
        t.weight.copy_(torch.from_numpy(m.weight.detach().numpy().copy()))
        t.bias.copy_(torch.from_numpy(m.bias.detach().numpy().copy()))
    x = np.random.default_rng(1).standard_normal((2, 5) if kind == "linear" else (2, 3, 6, 6)).astype(np.float32)
    return torch, m, t, x


@pytest.mark.parametrize("kind", ["linear", "conv"])
@pytest.mark.parametrize("dim", [0, 1, None, -1, -2])
def test_matches_torch_forward_grads_and_state_dict(kind, dim):
    torch, m, t, x = _pair(kind)
    weight_norm(m, dim=dim)
    torch.nn.utils.weight_norm(t, dim=dim)
    assert list(m.state_dict()) == list(t.state_dict())
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert tuple(m.weight_g.shape) == tuple(t.weight_g.shape)
    np.testing.assert_allclose(m.weight_g.detach().numpy(), t.weight_g.detach().numpy(), rtol=1e-6)
    # a step changes g and v, so the weight seen by the next forward must be recomputed
    for step in range(2):
        y = m(md.tensor(x))
        yt = t(torch.from_numpy(x))
        # float32 sums of up to 27 products in different orders: tolerance on the output's scale
        np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-4)
        (y * y).sum().backward()
        (yt * yt).sum().backward()
        for name in ("weight_g", "weight_v", "bias"):
            want = getattr(t, name).grad.numpy()
            np.testing.assert_allclose(getattr(m, name).grad.numpy(), want, rtol=1e-4,
                                       atol=1e-5 * np.abs(want).max(), err_msg=name)
        with md.no_grad():
            for p in m.parameters():
                p -= 0.1 * p.grad
        with torch.no_grad():
            for p in t.parameters():
                p -= 0.1 * p.grad
        m.zero_grad()
        t.zero_grad()


@pytest.mark.parametrize("kind", ["linear", "conv"])
def test_remove_round_trip(kind):
    torch, m, t, x = _pair(kind)
    before = m(md.tensor(x)).detach().numpy()
    weight_norm(m)
    torch.nn.utils.weight_norm(t)
    with md.no_grad():
        m.weight_g.mul_(1.5)
    with torch.no_grad():
        t.weight_g.mul_(1.5)
    b = m.bias.detach().numpy().reshape((-1,) + (1,) * (x.ndim - 2))
    np.testing.assert_allclose(m(md.tensor(x)).detach().numpy(), 1.5 * (before - b) + b, rtol=1e-5, atol=1e-5)
    assert remove_weight_norm(m) is m
    torch.nn.utils.remove_weight_norm(t)
    assert isinstance(m.weight, nn.Parameter)
    assert list(m.state_dict()) == list(t.state_dict())
    assert not hasattr(m, "weight_g") and not hasattr(m, "weight_v")
    np.testing.assert_allclose(m.weight.detach().numpy(), t.weight.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m(md.tensor(x)).detach().numpy(), t(torch.from_numpy(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)
    m(md.tensor(x)).sum().backward()     # the hook is gone: the gradient reaches the folded weight
    assert m.weight.grad is not None


def test_starts_as_the_same_function_and_loads_state_dict():
    md.manual_seed(0)
    m = nn.Linear(3, 2)
    x = md.randn(4, 3)
    before = m(x).detach().numpy()
    weight_norm(m)
    np.testing.assert_allclose(m(x).detach().numpy(), before, rtol=1e-6, atol=1e-6)
    other = weight_norm(nn.Linear(3, 2))
    other.load_state_dict(m.state_dict())
    np.testing.assert_allclose(other(x).detach().numpy(), before, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dim", [0, 1, None])
def test_gradcheck_through_the_hook(dim):
    """The weight the pre-hook computes is differentiable in g and v (float64 central differences)."""
    rng = np.random.default_rng(1)
    m = weight_norm(nn.Linear(4, 3).double(), dim=dim)
    x = md.tensor(rng.standard_normal((2, 4)))
    params = [m.weight_g, m.weight_v]

    def f(g, v):   # the module reads g and v from its attributes: point them at gradcheck's inputs
        m._parameters["weight_g"], m._parameters["weight_v"] = g, v
        object.__setattr__(m, "weight_g", g)
        object.__setattr__(m, "weight_v", v)
        return m(x)

    assert gradcheck(f, (md.tensor(params[0].detach().numpy(), requires_grad=True),
                         md.tensor(params[1].detach().numpy(), requires_grad=True)))


def test_errors():
    m = weight_norm(nn.Linear(3, 2))
    with pytest.raises(RuntimeError, match="Cannot register two weight_norm hooks"):
        weight_norm(m)
    with pytest.raises(ValueError, match="weight_norm of 'bias' not found"):
        remove_weight_norm(m, "bias")
    with pytest.raises(ValueError, match="parameter named 'kernel'"):
        weight_norm(nn.Linear(3, 2), name="kernel")
    with pytest.raises(IndexError, match="dim 2 is out of range"):
        weight_norm(nn.Linear(3, 2), dim=2)
    with pytest.raises(TypeError, match="dim must be an int or None"):
        weight_norm(nn.Linear(3, 2), dim=0.5)
