"""nn.utils.parametrizations (orthogonal with each orthogonal_map, spectral_norm, weight_norm), the
classic spectral_norm hook and the matrix functions behind orthogonal (minidl.linalg's), against
PyTorch, and all of them on the cuda device (numba's CUDA simulator in CI). The parametrize machinery
they build on is in test_nn_utils_parametrize.py.

The pattern: build the same layer in both, copy torch's state into minidl's, parametrize both
the same way (copying torch's state again where the parametrization draws random numbers),
then compare outputs, gradients, state_dict keys and values, and the same after optimizer steps.
"""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
from minidl.autograd import gradcheck
from minidl.nn.utils import parametrizations as PZ
from minidl.nn.utils import parametrize as P
from minidl import linalg as _linalg

torch = pytest.importorskip("torch")
tnn = torch.nn
TP = torch.nn.utils.parametrize
TPZ = torch.nn.utils.parametrizations


# the helpers the parametrize tests define (torch state copied in, compared step by step)
from test_nn_utils_parametrize import (assert_close, assert_state_equal, load_from_torch,  # noqa: E402,F401
                                       pair, train_and_compare)


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
    assert_close(_linalg.solve(a, b),
                 torch.linalg.solve(torch.from_numpy(a.detach().numpy()), torch.from_numpy(b.detach().numpy())),
                 1e-12, 1e-12)
    assert_close(_linalg.householder_product(h, tau),
                 torch.linalg.householder_product(torch.from_numpy(h.detach().numpy()),
                                                  torch.from_numpy(tau.detach().numpy())),
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
