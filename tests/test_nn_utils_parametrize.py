"""nn.utils.parametrize (register_parametrization and friends), conv/linear-BatchNorm fusion, skip_init,
functional_call (nn.utils.stateless and minidl.func) and the deprecated clip_grad_norm, against
PyTorch. The parametrizations built on parametrize (orthogonal, spectral_norm, weight_norm) are in
test_nn_utils_parametrizations.py.

The pattern: build the same layer in both, copy torch's state into minidl's, parametrize both
the same way, then compare outputs, gradients, state_dict keys and values, and the same after
optimizer steps.
"""
import copy
import pickle
import warnings

import numpy as np
import pytest

import minidl as md
import minidl.func
import minidl.nn as nn
from minidl.nn.utils import parametrize as P

torch = pytest.importorskip("torch")
tnn = torch.nn
TP = torch.nn.utils.parametrize


# helpers --------------------------------------------------------------------------------------
def load_from_torch(m, t):
    """Copy every entry of torch module ``t``'s state_dict into minidl module ``m`` (strict)."""
    m.load_state_dict({k: md.tensor(v.detach().numpy().copy()) for k, v in t.state_dict().items()})


def assert_state_equal(m, t, rtol=1e-6, atol=1e-7):
    ms, ts = m.state_dict(), t.state_dict()
    assert list(ms) == list(ts)
    for k in ts:
        np.testing.assert_allclose(ms[k].numpy(), ts[k].detach().numpy(), rtol=rtol, atol=atol, err_msg=k)


def assert_close(a, b, rtol=1e-5, atol=1e-6, msg=""):
    a = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
    b = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=msg)


def pair(make_md, make_torch, dtype="float64"):
    torch.manual_seed(0)
    md.manual_seed(0)
    t = make_torch()
    m = make_md()
    if dtype == "float64":
        t, m = t.double(), m.double()
    load_from_torch(m, t)
    return m, t


def train_and_compare(m, t, x, steps=3, lr=0.1, rtol=1e-5, atol=1e-7, optim="sgd"):
    """Forward, backward and an optimizer step in both, ``steps`` times, comparing the output,
    every parameter's gradient and the state after each step."""
    if optim == "sgd":
        om, ot = md.optim.SGD(m.parameters(), lr=lr, momentum=0.9), torch.optim.SGD(t.parameters(), lr=lr, momentum=0.9)
    else:
        om, ot = md.optim.Adam(m.parameters(), lr=lr), torch.optim.Adam(t.parameters(), lr=lr)
    for step in range(steps):
        y = m(md.tensor(x))
        yt = t(torch.from_numpy(x))
        assert_close(y, yt, rtol, atol, f"output at step {step}")
        (y * y).sum().backward()
        (yt * yt).sum().backward()
        tparams = dict(t.named_parameters())
        for name, p in m.named_parameters():
            assert_close(p.grad, tparams[name].grad, rtol, atol, f"grad of {name} at step {step}")
        om.step()
        ot.step()
        om.zero_grad()
        ot.zero_grad()
        assert_state_equal(m, t, rtol, atol)


class Symmetric(nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).mT


class TSymmetric(tnn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).mT


class Scale(nn.Module):
    """X * 2 with a right inverse X / 2."""

    def forward(self, X):
        return X * 2.0

    def right_inverse(self, X):
        return X / 2.0


class TScale(tnn.Module):
    def forward(self, X):
        return X * 2.0

    def right_inverse(self, X):
        return X / 2.0


class ExpSum(nn.Module):
    """Two originals: forward(a, b) = a + exp(b); right_inverse(W) = (W - 1, 0)."""

    def forward(self, a, b):
        return a + b.exp()

    def right_inverse(self, W):
        return W - 1.0, md.zeros_like(W)


class TExpSum(tnn.Module):
    def forward(self, a, b):
        return a + b.exp()

    def right_inverse(self, W):
        return W - 1.0, torch.zeros_like(W)


# parametrize -------------------------------------------------------------------------------
def test_register_parametrization_matches_torch_through_training():
    m, t = pair(lambda: nn.Linear(4, 4), lambda: tnn.Linear(4, 4))
    weight = m.weight
    opt = md.optim.SGD(m.parameters(), lr=0.1)    # built before: it must still train the weight
    P.register_parametrization(m, "weight", Symmetric())
    TP.register_parametrization(t, "weight", TSymmetric())
    assert type(m).__name__ == "ParametrizedLinear" and type(t).__name__ == "ParametrizedLinear"
    assert isinstance(m, nn.Linear)
    assert P.type_before_parametrizations(m) is nn.Linear
    assert P.is_parametrized(m) and P.is_parametrized(m, "weight") and not P.is_parametrized(m, "bias")
    assert m.parametrizations.weight.original is weight    # the same Parameter object
    assert isinstance(m.parametrizations.weight, P.ParametrizationList)
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original"] == list(t.state_dict())
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in t.named_parameters()]
    W = m.weight.detach().numpy()
    np.testing.assert_array_equal(W, W.T)
    x = np.random.default_rng(0).standard_normal((3, 4))
    train_and_compare(m, t, x)
    # the optimizer built before registering trains the original
    before = weight.detach().numpy().copy()
    m(md.tensor(x)).sum().backward()
    opt.step()
    assert not np.array_equal(before, weight.detach().numpy())


def test_right_inverse_and_assignment():
    m, t = pair(lambda: nn.Linear(3, 5), lambda: tnn.Linear(3, 5))
    w0 = m.weight.detach().numpy().copy()
    P.register_parametrization(m, "weight", Scale())
    TP.register_parametrization(t, "weight", TScale())
    # right_inverse at registration: the weight seen is unchanged, the original is W / 2
    assert_close(m.weight, w0, 0, 0)
    assert_close(m.parametrizations.weight.original, w0 / 2, 0, 0)
    assert_state_equal(m, t)
    # assigning to the parametrized name goes through right_inverse, into the same tensor object
    original = m.parametrizations.weight.original
    new = np.arange(15.0).reshape(5, 3)
    m.weight = md.tensor(new)
    t.weight = torch.from_numpy(new.copy())
    assert m.parametrizations.weight.original is original
    assert_close(m.weight, new, 0, 0)
    assert_state_equal(m, t)
    train_and_compare(m, t, np.random.default_rng(1).standard_normal((2, 3)))


def test_chained_parametrizations():
    m, t = pair(lambda: nn.Linear(4, 4), lambda: tnn.Linear(4, 4))
    for reg, mods in ((P.register_parametrization, (Symmetric(), Scale())),
                      (TP.register_parametrization, (TSymmetric(), TScale()))):
        target = m if reg is P.register_parametrization else t
        for mod in mods:
            reg(target, "weight", mod)
    assert len(m.parametrizations.weight) == 2
    assert list(m.state_dict()) == list(t.state_dict())
    assert_close(m.weight, t.weight, 0, 0)
    train_and_compare(m, t, np.random.default_rng(2).standard_normal((3, 4)))


def test_several_originals():
    m, t = pair(lambda: nn.Linear(3, 2), lambda: tnn.Linear(3, 2))
    w0 = m.weight.detach().numpy().copy()
    P.register_parametrization(m, "weight", ExpSum())
    TP.register_parametrization(t, "weight", TExpSum())
    plist = m.parametrizations.weight
    assert not plist.is_tensor and plist.ntensors == 2
    assert not hasattr(plist, "original")
    assert isinstance(plist.original0, nn.Parameter) and isinstance(plist.original1, nn.Parameter)
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original0",
                                    "parametrizations.weight.original1"] == list(t.state_dict())
    assert_close(m.weight, w0, 1e-12, 1e-12)
    train_and_compare(m, t, np.random.default_rng(3).standard_normal((4, 3)))
    # assignment sets both originals
    m.weight = md.ones(2, 3, dtype=md.float64)
    assert_close(plist.original0, np.zeros((2, 3)), 0, 0)
    assert_close(m.weight, np.ones((2, 3)), 0, 0)
    with pytest.raises(ValueError, match="sequence of tensors"):
        P.remove_parametrizations(m, "weight", leave_parametrized=False)
    P.remove_parametrizations(m, "weight")
    assert type(m) is nn.Linear and isinstance(m.weight, nn.Parameter)
    assert_close(m.weight, np.ones((2, 3)), 0, 0)


@pytest.mark.parametrize("leave", [True, False])
def test_remove_parametrizations(leave):
    m, t = pair(lambda: nn.Linear(4, 4), lambda: tnn.Linear(4, 4))
    weight = m.weight
    P.register_parametrization(m, "weight", Symmetric())
    TP.register_parametrization(t, "weight", TSymmetric())
    P.register_parametrization(m, "bias", Scale())
    TP.register_parametrization(t, "bias", TScale())
    assert list(m.state_dict()) == list(t.state_dict())
    P.remove_parametrizations(m, "weight", leave_parametrized=leave)
    TP.remove_parametrizations(t, "weight", leave_parametrized=leave)
    assert type(m).__name__ == "ParametrizedLinear"   # bias is still parametrized
    assert m.weight is weight and isinstance(m.weight, nn.Parameter)
    assert_state_equal(m, t, 0, 0)
    P.remove_parametrizations(m, "bias", leave_parametrized=leave)
    TP.remove_parametrizations(t, "bias", leave_parametrized=leave)
    assert type(m) is nn.Linear and not hasattr(m, "parametrizations")
    assert not hasattr(nn.Linear, "weight")    # the property was on the generated class only
    assert list(m.state_dict()) == ["weight", "bias"]
    assert_state_equal(m, t, 0, 0)
    x = np.random.default_rng(4).standard_normal((2, 4))
    assert_close(m(md.tensor(x)), t(torch.from_numpy(x)))
    with pytest.raises(ValueError, match="does not have a parametrization"):
        P.remove_parametrizations(m, "weight")


def test_parametrized_buffer():
    class WithBuffer(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("scale", md.tensor([1.0, 2.0, 3.0]))

        def forward(self, x):
            return x * self.scale

    class TWithBuffer(tnn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("scale", torch.tensor([1.0, 2.0, 3.0]))

        def forward(self, x):
            return x * self.scale

    m, t = WithBuffer(), TWithBuffer()
    P.register_parametrization(m, "scale", Scale())
    TP.register_parametrization(t, "scale", TScale())
    assert list(m.state_dict()) == ["parametrizations.scale.original"] == list(t.state_dict())
    assert [n for n, _ in m.named_buffers()] == [n for n, _ in t.named_buffers()]
    assert list(m.parameters()) == []
    assert_state_equal(m, t)
    assert_close(m(md.ones(3)), t(torch.ones(3)))


def test_unsafe_and_errors():
    class Shrink(nn.Module):
        def forward(self, X):
            return X[:-1]

    m = nn.Linear(3, 4)
    with pytest.raises(ValueError, match="may not change the shape"):
        P.register_parametrization(m, "weight", Shrink())
    assert type(m) is nn.Linear and isinstance(m.weight, nn.Parameter)    # unchanged after the error
    P.register_parametrization(m, "weight", Shrink(), unsafe=True)
    assert tuple(m.weight.shape) == (3, 3)

    class ToDouble(nn.Module):
        def forward(self, X):
            return X.double()

    m = nn.Linear(3, 4)
    with pytest.raises(ValueError, match="may not change the dtype"):
        P.register_parametrization(m, "weight", ToDouble())
    with pytest.raises(ValueError, match="does not have a parameter, a buffer"):
        P.register_parametrization(m, "nothing", Scale())
    # assigning with a parametrization lacking right_inverse
    m = nn.Linear(3, 3)
    P.register_parametrization(m, "weight", Symmetric())
    with pytest.raises(RuntimeError, match="does not implement right_inverse"):
        m.weight = md.zeros(3, 3)
    # a Parameter cannot be assigned over the parametrized name (as in PyTorch)
    with pytest.raises(KeyError, match="already exists"):
        m.weight = nn.Parameter(md.zeros(3, 3))


def test_cached():
    calls = []

    class Counting(nn.Module):
        def forward(self, X):
            calls.append(1)
            return X * 1.0

    m = nn.Linear(3, 3)
    P.register_parametrization(m, "weight", Counting())
    calls.clear()
    m.weight
    m.weight
    assert len(calls) == 2
    calls.clear()
    with P.cached():
        w1 = m.weight
        w2 = m.weight
        with P.cached():       # nested: the cache is kept until the outermost exits
            w3 = m.weight
        w4 = m.weight
    assert len(calls) == 1 and w1 is w2 is w3 is w4
    m.weight
    assert len(calls) == 2


def test_training_mode_follows_the_module_and_repr():
    m = nn.Linear(3, 3).eval()
    s = Scale()
    P.register_parametrization(m, "weight", s)
    assert s.training is False
    m.train()
    assert s.training is True
    assert repr(m).startswith("ParametrizedLinear(")
    assert "(parametrizations): ModuleDict(" in repr(m) and "(weight): ParametrizationList(" in repr(m)


def test_deepcopy_and_pickle():
    m = nn.Linear(3, 3)
    P.register_parametrization(m, "weight", Scale())
    c = copy.deepcopy(m)
    assert type(c).__name__ == "ParametrizedLinear"
    assert c.parametrizations.weight.original is not m.parametrizations.weight.original
    assert_close(c.weight, m.weight, 0, 0)
    with pytest.raises(RuntimeError, match="only supported through state_dict"):
        pickle.dumps(m)


def test_load_state_dict_round_trip():
    m, t = pair(lambda: nn.Linear(4, 4), lambda: tnn.Linear(4, 4))
    P.register_parametrization(m, "weight", Scale())
    TP.register_parametrization(t, "weight", TScale())
    with torch.no_grad():
        t.parametrizations.weight.original.mul_(3.0)
    load_from_torch(m, t)
    assert_close(m.weight, t.weight, 0, 0)
    other = nn.Linear(4, 4).double()
    P.register_parametrization(other, "weight", Scale())
    other.load_state_dict(m.state_dict())
    assert_close(other.weight, m.weight, 0, 0)


def test_transfer_parametrizations_and_params():
    a, b = nn.Linear(3, 3), nn.Linear(3, 3)
    P.register_parametrization(a, "weight", Scale())
    P.transfer_parametrizations_and_params(a, b)
    assert P.is_parametrized(b, "weight")
    assert b.parametrizations.weight.original is a.parametrizations.weight.original
    assert_close(b.weight, a.weight, 0, 0)


# fusion ------------------------------------------------------------------------------------
def _bn_pair(n):
    m, t = pair(lambda: nn.BatchNorm2d(n), lambda: tnn.BatchNorm2d(n))
    rng = np.random.default_rng(16)
    sd = {"weight": rng.uniform(0.5, 2, n), "bias": rng.standard_normal(n), "running_mean": rng.standard_normal(n),
          "running_var": rng.uniform(0.5, 2, n)}
    t.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()}, strict=False)
    load_from_torch(m, t)
    return m.eval(), t.eval()


@pytest.mark.parametrize("bias", [True, False])
def test_fuse_conv_bn_eval(bias):
    conv, tconv = pair(lambda: nn.Conv2d(2, 3, 3, bias=bias), lambda: tnn.Conv2d(2, 3, 3, bias=bias))
    conv.eval()
    tconv.eval()
    bn, tbn = _bn_pair(3)
    fused = nn.utils.fuse_conv_bn_eval(conv, bn)
    tfused = tnn.utils.fuse_conv_bn_eval(tconv, tbn)
    assert fused is not conv and type(fused) is nn.Conv2d
    assert isinstance(fused.weight, nn.Parameter) and isinstance(fused.bias, nn.Parameter)
    assert_state_equal(fused, tfused, 1e-12, 1e-12)
    x = np.random.default_rng(17).standard_normal((2, 2, 5, 5))
    assert_close(fused(md.tensor(x)), bn(conv(md.tensor(x))), 1e-10, 1e-10)
    with pytest.raises(AssertionError, match="Fusion only for eval"):
        nn.utils.fuse_conv_bn_eval(conv.train(), bn)


def test_fuse_conv_transpose_bn_and_weights():
    conv, tconv = pair(lambda: nn.ConvTranspose2d(2, 3, 3), lambda: tnn.ConvTranspose2d(2, 3, 3))
    bn, tbn = _bn_pair(3)
    fused = nn.utils.fuse_conv_bn_eval(conv.eval(), bn, transpose=True)
    tfused = tnn.utils.fuse_conv_bn_eval(tconv.eval(), tbn, transpose=True)
    assert_state_equal(fused, tfused, 1e-12, 1e-12)
    x = np.random.default_rng(18).standard_normal((1, 2, 4, 4))
    assert_close(fused(md.tensor(x)), bn(conv(md.tensor(x))), 1e-10, 1e-10)
    w, b = nn.utils.fuse_conv_bn_weights(conv.weight, None, bn.running_mean, bn.running_var, bn.eps, None, None,
                                         transpose=True)
    tw, tb = tnn.utils.fuse_conv_bn_weights(tconv.weight, None, tbn.running_mean, tbn.running_var, tbn.eps, None,
                                            None, transpose=True)
    assert_close(w, tw, 1e-12, 1e-12)
    assert_close(b, tb, 1e-12, 1e-12)
    assert w.requires_grad and not b.requires_grad and tw.requires_grad == w.requires_grad


def test_fuse_linear_bn_eval():
    lin, tlin = pair(lambda: nn.Linear(4, 3), lambda: tnn.Linear(4, 3))
    bn, tbn = pair(lambda: nn.BatchNorm1d(3), lambda: tnn.BatchNorm1d(3))
    tbn.running_mean.copy_(torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64))
    tbn.running_var.copy_(torch.tensor([1.5, 0.5, 2.0], dtype=torch.float64))
    load_from_torch(bn, tbn)
    lin.eval(), tlin.eval(), bn.eval(), tbn.eval()
    fused = nn.utils.fuse_linear_bn_eval(lin, bn)
    tfused = tnn.utils.fuse_linear_bn_eval(tlin, tbn)
    assert_state_equal(fused, tfused, 1e-12, 1e-12)
    x = np.random.default_rng(19).standard_normal((5, 4))
    assert_close(fused(md.tensor(x)), bn(lin(md.tensor(x))), 1e-10, 1e-10)
    w, b = nn.utils.fuse_linear_bn_weights(lin.weight, None, bn.running_mean, bn.running_var, bn.eps, bn.weight,
                                           bn.bias)
    tw, tb = tnn.utils.fuse_linear_bn_weights(tlin.weight, None, tbn.running_mean, tbn.running_var, tbn.eps,
                                              tbn.weight, tbn.bias)
    assert_close(w, tw, 1e-12, 1e-12)
    assert_close(b, tb, 1e-12, 1e-12)
    with pytest.raises(AssertionError, match="linear.out_features == bn.num_features"):
        nn.utils.fuse_linear_bn_eval(lin, nn.BatchNorm1d(2).eval())


# skip_init ---------------------------------------------------------------------------------
def test_skip_init():
    m = nn.utils.skip_init(nn.Linear, 3, 4, bias=False)
    assert type(m) is nn.Linear and tuple(m.weight.shape) == (4, 3) and m.bias is None
    assert m.weight.device.type == "cpu"
    m = nn.utils.skip_init(nn.Linear, 3, 4, dtype=md.float64, device="cpu")
    assert m.weight.dtype == md.float64

    class NoDevice(nn.Module):
        def __init__(self, n):
            super().__init__()

    with pytest.raises(RuntimeError, match="must support a 'device' arg"):
        nn.utils.skip_init(NoDevice, 3)
    with pytest.raises(RuntimeError, match="Expected a Module"):
        nn.utils.skip_init(int)


# functional_call -----------------------------------------------------------------------------
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(3, 4)
        self.bn = nn.BatchNorm1d(4)
        self.l2 = nn.Linear(4, 2)

    def forward(self, x, scale=1.0):
        return self.l2(self.bn(self.l1(x)).relu()) * scale


class TNet(tnn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = tnn.Linear(3, 4)
        self.bn = tnn.BatchNorm1d(4)
        self.l2 = tnn.Linear(4, 2)

    def forward(self, x, scale=1.0):
        return self.l2(self.bn(self.l1(x)).relu()) * scale


def test_functional_call_matches_torch():
    m, t = pair(Net, TNet)
    rng = np.random.default_rng(20)
    new = {k: rng.standard_normal(tuple(v.shape)) for k, v in t.named_parameters()}
    params = {k: md.tensor(v, requires_grad=True) for k, v in new.items()}
    tparams = {k: torch.tensor(v, requires_grad=True) for k, v in new.items()}
    before = {k: v.numpy().copy() for k, v in m.state_dict().items()}
    x = rng.standard_normal((5, 3))
    y = minidl.func.functional_call(m, params, (md.tensor(x),), {"scale": 2.0})
    yt = torch.func.functional_call(t, tparams, (torch.from_numpy(x),), {"scale": 2.0})
    assert_close(y, yt, 1e-10, 1e-12)
    y.sum().backward()
    yt.sum().backward()
    for k in params:
        assert_close(params[k].grad, tparams[k].grad, 1e-10, 1e-12, k)
    # the module's own tensors are back, unchanged, and received no gradient; the running
    # statistics (buffers not passed) were updated in place, as in torch
    assert all(p.grad is None for p in m.parameters())
    assert isinstance(m.l1.weight, nn.Parameter)
    for k, v in m.state_dict().items():
        if "running" not in k and "num_batches" not in k:
            np.testing.assert_array_equal(v.numpy(), before[k])
    assert_state_equal(m, t, 1e-10, 1e-12)
    # a single non-tuple argument, and a list of dicts
    m.eval()
    t.eval()
    buffers = {k: md.tensor(v.numpy()) for k, v in m.named_buffers()}
    y = minidl.func.functional_call(m, (params, buffers), md.tensor(x))
    yt = torch.func.functional_call(t, (tparams, dict(t.named_buffers())), torch.from_numpy(x))
    assert_close(y, yt, 1e-10, 1e-12)


def test_stateless_functional_call_warns_and_strict():
    m = Net()
    x = md.randn(2, 3)
    params = {k: v.detach() * 0 for k, v in m.named_parameters()}
    with pytest.warns(FutureWarning, match="torch.func.functional_call"):
        y = nn.utils.stateless.functional_call(m, params, (x,))
    np.testing.assert_array_equal(y.numpy(), np.zeros((2, 2)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        minidl.func.functional_call(m, params, (x,))     # the torch.func spelling does not warn
    with pytest.raises(RuntimeError, match="Missing key\\(s\\): 'bn.num_batches_tracked'"):
        minidl.func.functional_call(m, params, (x,), strict=True)
    with pytest.raises(RuntimeError, match="Unexpected key\\(s\\): 'extra'"):
        minidl.func.functional_call(m, dict(params, extra=md.zeros(1)), (x,), strict=True)
    with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
        minidl.func.functional_call(m, (params, {"l1.weight": md.zeros(4, 3)}), (x,))
    with pytest.raises(ValueError, match="to be a dict, or a list/tuple of dicts"):
        minidl.func.functional_call(m, 3, (x,))
    # an error inside the call still restores the module
    with pytest.raises(Exception):
        minidl.func.functional_call(m, params, (md.randn(2, 7),))
    assert isinstance(m.l1.weight, nn.Parameter) and float(m.l1.weight.abs().sum()) > 0
    # a name the module lacks is added for the call and removed after
    minidl.func.functional_call(m, {"l1.extra": md.zeros(1)}, (x,))
    assert not hasattr(m.l1, "extra")


def test_functional_call_tied_weights():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 3, bias=False)
            self.b = nn.Linear(3, 3, bias=False)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))

    m = Tied()
    x = md.randn(2, 3)
    w = md.eye(3) * 2
    y = minidl.func.functional_call(m, {"a.weight": w}, (x,))
    assert_close(y, x * 4, 1e-6, 1e-6)                  # b.weight tied to the given a.weight
    y = minidl.func.functional_call(m, {"a.weight": w}, (x,), tie_weights=False)
    assert_close(y, (x * 2) @ m.a.weight.detach().mT, 1e-6, 1e-6)
    with pytest.raises(ValueError, match="which are tied"):
        minidl.func.functional_call(m, {"a.weight": w, "b.weight": md.eye(3)}, (x,))
    assert m.b.weight is m.a.weight


def test_functional_call_on_parametrized_original():
    m, t = pair(lambda: nn.Linear(3, 3), lambda: tnn.Linear(3, 3))
    P.register_parametrization(m, "weight", Symmetric())
    TP.register_parametrization(t, "weight", TSymmetric())
    w = np.random.default_rng(21).standard_normal((3, 3))
    x = np.random.default_rng(22).standard_normal((2, 3))
    key = "parametrizations.weight.original"
    y = minidl.func.functional_call(m, {key: md.tensor(w)}, md.tensor(x))
    yt = torch.func.functional_call(t, {key: torch.from_numpy(w)}, torch.from_numpy(x))
    assert_close(y, yt, 1e-12, 1e-12)
    assert_state_equal(m, t, 0, 0)


# clip_grad_norm ----------------------------------------------------------------------------
def test_clip_grad_norm_deprecated_alias():
    p = nn.Parameter(md.tensor([3.0, 4.0]))
    p.grad = md.tensor([3.0, 4.0])
    with pytest.warns(FutureWarning, match="clip_grad_norm_"):
        total = nn.utils.clip_grad_norm(p, 1.0)
    assert abs(float(total) - 5.0) < 1e-6
    np.testing.assert_allclose(p.grad.numpy(), [0.6, 0.8], rtol=1e-5)
