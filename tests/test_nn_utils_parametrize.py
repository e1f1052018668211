"""nn.utils.parametrize and parametrizations (orthogonal, spectral_norm, weight_norm), the classic
spectral_norm hook, conv/linear-BatchNorm fusion, skip_init, functional_call (nn.utils.stateless
and minidl.func) and the deprecated clip_grad_norm, against PyTorch.

The pattern: build the same layer in both, copy torch's state into minidl's, parametrize both
the same way (copying torch's state again where the parametrization draws random numbers),
then compare outputs, gradients, state_dict keys and values, and the same after optimizer steps.
"""
import copy
import pickle
import warnings

import numpy as np
import pytest

import minidl as md
import minidl.func
import minidl.nn as nn
from minidl.autograd import gradcheck
from minidl.nn.utils import parametrizations as PZ
from minidl.nn.utils import parametrize as P
from minidl import linalg as _linalg

torch = pytest.importorskip("torch")
tnn = torch.nn
TP = torch.nn.utils.parametrize
TPZ = torch.nn.utils.parametrizations


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


# orthogonal --------------------------------------------------------------------------------
@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "cayley", "householder"])
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
def test_orthogonal_matches_torch(orthogonal_map, shape):
    out_f, in_f = shape
    m, t = pair(lambda: nn.Linear(in_f, out_f), lambda: tnn.Linear(in_f, out_f))
    PZ.orthogonal(m, orthogonal_map=orthogonal_map)
    TPZ.orthogonal(t, orthogonal_map=orthogonal_map)
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original",
                                    "parametrizations.weight.0.base"] == list(t.state_dict())
    if shape[0] != shape[1]:
        load_from_torch(m, t)    # base was completed with random columns: take torch's
    else:
        assert_state_equal(m, t, 1e-12, 1e-12)
    # the weight starts as the QR-orthogonalized initial weight, and is orthogonal
    assert_close(m.weight, t.weight, 1e-12, 1e-12)
    x = np.random.default_rng(5).standard_normal((3, in_f))
    train_and_compare(m, t, x, steps=4, lr=0.05, rtol=1e-9, atol=1e-11)
    W = m.weight.detach().numpy()
    gram = W @ W.T if out_f < in_f else W.T @ W
    np.testing.assert_allclose(gram, np.eye(min(shape)), atol=1e-12)


@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "cayley", "householder"])
def test_orthogonal_without_trivialization(orthogonal_map):
    m, t = pair(lambda: nn.Linear(3, 5), lambda: tnn.Linear(3, 5))
    PZ.orthogonal(m, orthogonal_map=orthogonal_map, use_trivialization=False)
    TPZ.orthogonal(t, orthogonal_map=orthogonal_map, use_trivialization=False)
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original"] == list(t.state_dict())
    assert_state_equal(m, t, 1e-12, 1e-12)
    assert_close(m.weight, t.weight, 1e-10, 1e-12)
    train_and_compare(m, t, np.random.default_rng(6).standard_normal((2, 3)), rtol=1e-9, atol=1e-11)
    if orthogonal_map == "householder":
        # assignment: QR of the target, so the weight becomes the target when it is orthogonal
        q = np.linalg.qr(np.random.default_rng(7).standard_normal((5, 3)))[0]
        m.weight = md.tensor(q)
        t.weight = torch.from_numpy(q.copy())
        assert_close(m.weight, q, 1e-10, 1e-12)
        assert_state_equal(m, t, 1e-10, 1e-12)
    else:
        with pytest.raises(NotImplementedError, match="use_trivialization=False"):
            m.weight = md.eye(5, 3, dtype=md.float64)


def test_orthogonal_assignment_and_batched_conv_weight():
    m, t = pair(lambda: nn.Conv2d(2, 3, 3), lambda: tnn.Conv2d(2, 3, 3))   # weight (3, 2, 3, 3): a 3x3 batch
    PZ.orthogonal(m)
    TPZ.orthogonal(t)
    assert m.parametrizations.weight[0].orthogonal_map.name == "matrix_exp"
    assert_state_equal(m, t, 1e-12, 1e-12)
    x = np.random.default_rng(8).standard_normal((1, 2, 5, 5))
    train_and_compare(m, t, x, steps=2, lr=0.01, rtol=1e-9, atol=1e-10)
    # assigning an orthogonal matrix: base takes it, the original goes back to -I
    q = np.linalg.qr(np.random.default_rng(9).standard_normal((3, 2, 3, 3)))[0]
    m.weight = md.tensor(q)
    t.weight = torch.from_numpy(q.copy())
    assert_close(m.weight, q, 1e-12, 1e-12)
    assert_state_equal(m, t, 1e-12, 1e-12)
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices of shape"):
        m.weight = md.zeros(3, 3, dtype=md.float64)


def test_orthogonal_errors_and_default_maps():
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices"):
        PZ.orthogonal(nn.BatchNorm1d(3))
    with pytest.raises(ValueError, match="orthogonal_map has to be one of"):
        PZ.orthogonal(nn.Linear(3, 3), orthogonal_map="qr")
    with pytest.raises(ValueError, match="has no parameter or buffer"):
        PZ.orthogonal(nn.Linear(3, 3), name="missing")
    assert PZ.orthogonal(nn.Linear(3, 5)).parametrizations.weight[0].orthogonal_map.name == "householder"


def test_orthogonal_float32_and_remove():
    m, t = pair(lambda: nn.Linear(6, 6), lambda: tnn.Linear(6, 6), dtype="float32")
    PZ.orthogonal(m, orthogonal_map="cayley")
    TPZ.orthogonal(t, orthogonal_map="cayley")
    load_from_torch(m, t)
    assert m.weight.dtype == md.float32
    train_and_compare(m, t, np.random.default_rng(10).standard_normal((2, 6)).astype(np.float32),
                      optim="adam", lr=0.01, rtol=1e-4, atol=1e-5)
    P.remove_parametrizations(m, "weight")
    TP.remove_parametrizations(t, "weight")
    assert type(m) is nn.Linear
    assert_state_equal(m, t, 1e-5, 1e-6)


# spectral_norm (parametrization) -----------------------------------------------------------
@pytest.mark.parametrize("kind", ["linear", "conv", "conv_transpose"])
@pytest.mark.parametrize("n_power_iterations", [1, 3])
def test_spectral_norm_parametrization(kind, n_power_iterations):
    makers = {"linear": (lambda: nn.Linear(5, 4), lambda: tnn.Linear(5, 4), (3, 5)),
              "conv": (lambda: nn.Conv2d(2, 3, 3), lambda: tnn.Conv2d(2, 3, 3), (2, 2, 5, 5)),
              "conv_transpose": (lambda: nn.ConvTranspose2d(2, 3, 3), lambda: tnn.ConvTranspose2d(2, 3, 3),
                                 (2, 2, 4, 4))}
    make_md, make_torch, xshape = makers[kind]
    m, t = pair(make_md, make_torch)
    PZ.spectral_norm(m, n_power_iterations=n_power_iterations)
    TPZ.spectral_norm(t, n_power_iterations=n_power_iterations)
    sn = m.parametrizations.weight[0]
    assert sn.dim == (1 if kind == "conv_transpose" else 0)
    assert list(m.state_dict()) == list(t.state_dict())
    assert "parametrizations.weight.0._u" in m.state_dict()
    # u and v are random: start both from torch's
    load_from_torch(m, t)
    x = np.random.default_rng(11).standard_normal(xshape)
    train_and_compare(m, t, x, steps=3, lr=0.05, rtol=1e-9, atol=1e-11)
    # the buffers moved with the power iterations (training mode), and sigma(W_SN) ~ 1
    W = m.weight.detach().numpy()     # a read in training mode: one more power iteration,
    assert_close(W, t.weight, 1e-9, 1e-11)     # in both
    Wm = np.moveaxis(W, sn.dim, 0).reshape(W.shape[sn.dim], -1)
    assert abs(np.linalg.svd(Wm, compute_uv=False)[0] - 1) < 0.1
    # eval mode: reading the weight leaves u and v alone
    m.eval()
    t.eval()
    u = sn._u.numpy().copy()
    m.weight
    t.weight
    np.testing.assert_array_equal(sn._u.numpy(), u)
    assert_close(m.weight, t.weight, 1e-9, 1e-11)
    with pytest.raises(IndexError, match="Dimension out of range"):
        PZ.spectral_norm(nn.Linear(3, 3), dim=2)
    with pytest.raises(ValueError, match="n_power_iterations to be positive"):
        PZ.spectral_norm(nn.Linear(3, 3), n_power_iterations=0)


def test_spectral_norm_parametrization_1d_and_eps_and_dim():
    class Vec(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(md.tensor([3.0, 4.0]))

    m = PZ.spectral_norm(Vec())
    assert_close(m.weight, [0.6, 0.8])
    assert "parametrizations.weight.0._u" not in m.state_dict()
    m, t = pair(lambda: nn.Linear(5, 4), lambda: tnn.Linear(5, 4))
    PZ.spectral_norm(m, dim=1, eps=1e-3)
    TPZ.spectral_norm(t, dim=1, eps=1e-3)
    load_from_torch(m, t)
    train_and_compare(m, t, np.random.default_rng(12).standard_normal((2, 5)), rtol=1e-9, atol=1e-11)


def test_spectral_norm_two_forwards_then_backward():
    """The GAN pattern: two forwards (each refining u, v in place) and one backward."""
    m, t = pair(lambda: nn.Linear(4, 3), lambda: tnn.Linear(4, 3))
    PZ.spectral_norm(m)
    TPZ.spectral_norm(t)
    load_from_torch(m, t)
    x = np.random.default_rng(13).standard_normal((2, 4))
    loss = m(md.tensor(x)).sum() - m(md.tensor(2 * x)).sum()
    tloss = t(torch.from_numpy(x)).sum() - t(torch.from_numpy(2 * x)).sum()
    loss.backward()
    tloss.backward()
    assert_close(m.parametrizations.weight.original.grad, t.parametrizations.weight.original.grad, 1e-9, 1e-11)


# weight_norm (parametrization) -------------------------------------------------------------
@pytest.mark.parametrize("dim", [0, 1, None, -1])
def test_weight_norm_parametrization(dim):
    m, t = pair(lambda: nn.Conv2d(2, 3, 3), lambda: tnn.Conv2d(2, 3, 3))
    PZ.weight_norm(m, dim=dim)
    TPZ.weight_norm(t, dim=dim)
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original0",
                                    "parametrizations.weight.original1"] == list(t.state_dict())
    assert tuple(m.parametrizations.weight.original0.shape) == tuple(t.parametrizations.weight.original0.shape)
    assert_state_equal(m, t, 1e-12, 1e-12)
    x = np.random.default_rng(14).standard_normal((2, 2, 5, 5))
    train_and_compare(m, t, x, rtol=1e-9, atol=1e-11)


def test_weight_norm_parametrization_loads_old_state_dict():
    old = nn.Linear(4, 3)
    nn.utils.weight_norm(old)
    assert list(old.state_dict()) == ["bias", "weight_g", "weight_v"]
    with md.no_grad():
        old.weight_g.mul_(2.0)
    x = md.randn(2, 4)
    new = PZ.weight_norm(nn.Linear(4, 3))
    new.load_state_dict(old.state_dict())
    assert_close(new(x), old(x), 1e-6, 1e-6)
    assert_close(new.parametrizations.weight.original0, old.weight_g, 0, 0)


def test_weight_norm_parametrization_remove():
    m, t = pair(lambda: nn.Linear(4, 3), lambda: tnn.Linear(4, 3))
    PZ.weight_norm(m)
    TPZ.weight_norm(t)
    with md.no_grad():
        m.parametrizations.weight.original0.mul_(1.5)
    with torch.no_grad():
        t.parametrizations.weight.original0.mul_(1.5)
    P.remove_parametrizations(m, "weight")
    TP.remove_parametrizations(t, "weight")
    assert type(m) is nn.Linear and isinstance(m.weight, nn.Parameter)
    assert_state_equal(m, t, 1e-12, 1e-12)


# the classic spectral_norm hook ------------------------------------------------------------
@pytest.mark.parametrize("kind", ["linear", "conv_transpose"])
def test_spectral_norm_hook_matches_torch(kind):
    if kind == "linear":
        m, t = pair(lambda: nn.Linear(5, 4), lambda: tnn.Linear(5, 4))
        x = np.random.default_rng(15).standard_normal((3, 5))
    else:
        m, t = pair(lambda: nn.ConvTranspose2d(2, 3, 3), lambda: tnn.ConvTranspose2d(2, 3, 3))
        x = np.random.default_rng(15).standard_normal((1, 2, 4, 4))
    weight = m.weight
    assert nn.utils.spectral_norm(m, n_power_iterations=2) is m
    tnn.utils.spectral_norm(t, n_power_iterations=2)
    assert m.weight_orig is weight
    assert list(m.state_dict()) == list(t.state_dict()) == ["bias", "weight_orig", "weight_u", "weight_v"]
    assert [n for n, _ in m.named_parameters()] == ["bias", "weight_orig"]
    load_from_torch(m, t)
    assert_close(m.weight, t.weight, 0, 0)    # a plain attribute until the first forward
    train_and_compare(m, t, x, steps=3, lr=0.05, rtol=1e-9, atol=1e-11)
    m.eval()
    t.eval()
    assert_close(m(md.tensor(x)), t(torch.from_numpy(x)), 1e-9, 1e-11)
    with pytest.raises(RuntimeError, match="Cannot register two spectral_norm hooks"):
        nn.utils.spectral_norm(m)
    assert nn.utils.remove_spectral_norm(m) is m
    tnn.utils.remove_spectral_norm(t)
    assert isinstance(m.weight, nn.Parameter)
    assert list(m.state_dict()) == list(t.state_dict())
    assert_state_equal(m, t, 1e-9, 1e-11)
    m(md.tensor(x)).sum().backward()
    assert m.weight.grad is not None     # the hook is gone
    with pytest.raises(ValueError, match="spectral_norm of 'weight' not found"):
        nn.utils.remove_spectral_norm(m)


def test_spectral_norm_hook_loads_own_state_dict_and_errors():
    a = nn.utils.spectral_norm(nn.Linear(3, 4))
    a(md.randn(2, 3))
    b = nn.utils.spectral_norm(nn.Linear(3, 4))
    b.load_state_dict(a.state_dict())
    b.eval()
    a.eval()
    x = md.randn(2, 3)
    assert_close(b(x), a(x), 0, 0)
    with pytest.raises(ValueError, match="n_power_iterations to be positive"):
        nn.utils.spectral_norm(nn.Linear(3, 4), n_power_iterations=0)
    with pytest.raises(ValueError, match="expected Linear to have a parameter named 'nothing'"):
        nn.utils.spectral_norm(nn.Linear(3, 4), name="nothing")


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


# the matrix functions behind orthogonal (minidl.linalg's) -------------------------------------------------
def test_matrix_functions_gradcheck_and_values():
    rng = np.random.default_rng(23)
    a = md.tensor(rng.standard_normal((2, 4, 4)), requires_grad=True)
    b = md.tensor(rng.standard_normal((4, 2)), requires_grad=True)
    assert gradcheck(_linalg.matrix_exp, (a,))
    assert gradcheck(_linalg.solve, (a, b))
    h = md.tensor(rng.standard_normal((2, 5, 3)), requires_grad=True)
    tau = md.tensor(rng.standard_normal((2, 3)), requires_grad=True)
    assert gradcheck(_linalg.householder_product, (h, tau))
    for scale in (0.01, 1.0, 20.0):     # with and without scaling and squaring
        x = rng.standard_normal((3, 5, 5)) * scale
        assert_close(_linalg.matrix_exp(md.tensor(x)), torch.matrix_exp(torch.from_numpy(x)), 1e-12, 1e-12)
    assert_close(_linalg.solve(a, b), torch.linalg.solve(torch.from_numpy(a.numpy()), torch.from_numpy(b.numpy())),
                 1e-12, 1e-12)
    assert_close(_linalg.householder_product(h, tau),
                 torch.linalg.householder_product(torch.from_numpy(h.numpy()), torch.from_numpy(tau.numpy())),
                 1e-12, 1e-12)
    with pytest.raises(RuntimeError, match="singular"):
        _linalg.solve(md.zeros(2, 2), md.ones(2, 1))
    with pytest.raises(RuntimeError, match="square"):
        _linalg.matrix_exp(md.zeros(2, 3))


# on the cuda device (CI: numba's CUDA simulator) ------------------------------------------------
@pytest.mark.parametrize("how", ["matrix_exp", "cayley", "householder", "spectral_norm", "weight_norm",
                                 "spectral_norm_hook"])
def test_on_the_cuda_device(how):
    from minidl import backends
    try:
        backends.get("cuda")
    except RuntimeError as exc:   # pragma: no cover
        pytest.skip(f"cuda device unavailable: {exc}")
    apply = {"spectral_norm": PZ.spectral_norm, "weight_norm": PZ.weight_norm,
             "spectral_norm_hook": nn.utils.spectral_norm}.get(how, lambda m: PZ.orthogonal(m, orthogonal_map=how))
    md.manual_seed(0)
    cpu = apply(nn.Linear(3, 4).double())
    dev = apply(nn.Linear(3, 4).double().to("cuda"))
    dev.load_state_dict({k: v.to("cuda") for k, v in cpu.state_dict().items()})
    x = np.random.default_rng(24).standard_normal((2, 3))
    for step in range(2):
        y, yd = cpu(md.tensor(x)), dev(md.tensor(x).to("cuda"))
        assert yd.device.type == "cuda"
        assert_close(yd.cpu(), y, 1e-10, 1e-12)
        y.sum().backward()
        yd.sum().backward()
        grads = dict(cpu.named_parameters())
        for name, p in dev.named_parameters():
            assert p.grad.device.type == "cuda"
            assert_close(p.grad.cpu(), grads[name].grad, 1e-10, 1e-12, name)
        with md.no_grad():
            for p in list(cpu.parameters()) + list(dev.parameters()):
                p -= 0.1 * p.grad
                p.grad = None
