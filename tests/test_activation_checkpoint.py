"""utils.checkpoint: recomputing a function in backward gives the gradients of running it normally."""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.autograd import gradcheck
from minidl.utils.checkpoint import checkpoint, checkpoint_sequential


def _mlp(p=0.0):
    md.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Dropout(p), nn.Linear(16, 16), nn.ReLU(),
                         nn.Linear(16, 3))


def _grads(model, run, x):
    """(output, dL/dx, dL/dparameters) of L = sum(y^2) for y = run(x), all as arrays."""
    model.zero_grad()
    x = x.detach().requires_grad_(True)
    y = run(x)
    (y * y).sum().backward()
    return [y.detach().numpy(), x.grad.numpy()] + [p.grad.numpy() for p in model.parameters()]


def _assert_same(a, b):
    assert len(a) == len(b)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)


@pytest.mark.parametrize("p", [0.0, 0.4])
def test_same_gradients_bit_for_bit(p):
    model = _mlp(p)
    x = md.randn(8, 6)
    state = md.get_rng_state()
    plain = _grads(model, model, x)
    md.set_rng_state(state)
    ckpt = _grads(model, lambda t: checkpoint(model, t, use_reentrant=False), x)
    _assert_same(plain, ckpt)
    # recomputing restored the generator for itself only: the stream goes on as in the plain run
    after_ckpt = md.rand(3).numpy()
    md.set_rng_state(state)
    _grads(model, model, x)
    np.testing.assert_array_equal(md.rand(3).numpy(), after_ckpt)


def test_without_preserve_rng_state_dropout_draws_again():
    model = _mlp(0.5)
    x = md.randn(8, 6)
    state = md.get_rng_state()
    plain = _grads(model, model, x)
    md.set_rng_state(state)
    ckpt = _grads(model, lambda t: checkpoint(model, t, use_reentrant=False, preserve_rng_state=False), x)
    np.testing.assert_array_equal(plain[0], ckpt[0])        # the forward drew the same mask
    assert not np.array_equal(plain[1], ckpt[1])            # the recomputation drew a new one


def test_parameters_train_when_the_input_needs_no_gradient():
    model = _mlp()
    x = md.randn(4, 6)
    y = checkpoint(model, x, use_reentrant=False)
    assert y.requires_grad
    (y * y).sum().backward()
    model2 = _mlp()
    (model2(x) ** 2).sum().backward()
    for p, q in zip(model.parameters(), model2.parameters()):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())


def test_autograd_grad_reaches_closure_parameters():
    model = _mlp()
    x = md.randn(4, 6, requires_grad=True)
    params = list(model.parameters())
    want = md.autograd.grad((model(x) ** 2).sum(), [x] + params)
    got = md.autograd.grad((checkpoint(lambda t: model(t), x, use_reentrant=True) ** 2).sum(), [x] + params)
    _assert_same([w.numpy() for w in want], [g.numpy() for g in got])
    assert all(p.grad is None for p in params)               # autograd.grad touches no .grad


def test_tuple_outputs_non_tensor_arguments_and_kwargs():
    w = md.randn(5, 5, requires_grad=True)

    def f(a, scale, b, mode="add", bias=None):
        h = (a @ w).tanh() * scale
        return h + b if mode == "add" else h * b, "tag", (a * b).sum(), md.tensor([1, 2])

    md.manual_seed(1)
    a = md.randn(3, 5, requires_grad=True)
    b = md.randn(3, 5, requires_grad=True)
    plain = f(a, 0.5, b, mode="mul")
    (plain[0].sum() + plain[2] * 3).backward()
    want = [plain[0].detach().numpy(), a.grad.numpy(), b.grad.numpy(), w.grad.numpy()]
    w.grad = None
    a2 = a.detach().requires_grad_(True)
    b2 = b.detach().requires_grad_(True)
    outs = checkpoint(f, a2, 0.5, b2, use_reentrant=False, mode="mul")
    assert isinstance(outs, tuple) and outs[1] == "tag" and not outs[3].requires_grad
    (outs[0].sum() + outs[2] * 3).backward()
    _assert_same(want, [outs[0].detach().numpy(), a2.grad.numpy(), b2.grad.numpy(), w.grad.numpy()])
    w.grad = None
    a3 = a2.detach().requires_grad_(True)
    outs = checkpoint(f, a3, 0.5, b2, use_reentrant=False, mode="mul")
    outs[2].backward()                  # the first output is unused: it contributes nothing
    np.testing.assert_array_equal(a3.grad.numpy(), b2.detach().numpy())
    assert w.grad is None or not w.grad.numpy().any()


def test_a_non_leaf_read_from_outside_sends_its_gradient_up_its_history():
    w0 = md.randn(4, requires_grad=True)
    w = w0 * 2                                  # built before the call, used inside and after it
    x = md.randn(3, 4, requires_grad=True)
    y = checkpoint(lambda a: (a * w).sin(), x, use_reentrant=False)
    (y.sum() + (w * w).sum()).backward()
    xv, wv = x.detach().numpy(), w.detach().numpy()
    np.testing.assert_allclose(w0.grad.numpy(), 2 * ((np.cos(xv * wv) * xv).sum(0) + 2 * wv), rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), np.cos(xv * wv) * wv, rtol=1e-6)


def test_inside_a_model_training_loop():
    class Net(nn.Module):
        def __init__(self, use_ckpt):
            super().__init__()
            md.manual_seed(0)
            self.a = nn.Linear(6, 12)
            self.b = nn.Sequential(nn.Linear(12, 12), nn.GELU(), nn.Dropout(0.2), nn.Linear(12, 12))
            self.head = nn.Linear(12, 3)
            self.use_ckpt = use_ckpt

        def forward(self, x):
            h = self.a(x).relu()
            h = checkpoint(self.b, h, use_reentrant=False) if self.use_ckpt else self.b(h)
            return self.head(h)

    losses = []
    for use in (False, True):
        net = Net(use)
        opt = md.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        md.manual_seed(5)
        run = []
        for _ in range(5):
            x = md.randn(16, 6)
            target = md.tensor(np.arange(16) % 3)
            loss = F.cross_entropy(net(x), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            run.append(loss.item())
        losses.append((run, [p.detach().numpy().copy() for p in net.parameters()]))
    assert losses[0][0] == losses[1][0]
    _assert_same(losses[0][1], losses[1][1])


def test_checkpoint_sequential_matches():
    model = _mlp(0.3)
    x = md.randn(8, 6)
    state = md.get_rng_state()
    plain = _grads(model, model, x)
    for segments in (1, 2, 3):
        md.set_rng_state(state)
        ckpt = _grads(model, lambda t: checkpoint_sequential(model, segments, t, use_reentrant=False), x)
        _assert_same(plain, ckpt)


def test_gradcheck_float64():
    w = md.tensor(np.random.default_rng(0).standard_normal((4, 4)), requires_grad=True)

    def f(x, w):
        return checkpoint(lambda a: (a @ w).tanh() * a, x, use_reentrant=False)

    x = md.tensor(np.random.default_rng(1).standard_normal((3, 4)), requires_grad=True)
    assert gradcheck(f, (x, w))


def test_no_grad_mode_just_calls():
    model = _mlp()
    with md.no_grad():
        y = checkpoint(model, md.randn(2, 6), use_reentrant=False)
    assert not y.requires_grad


def test_inplace_write_to_a_saved_input_is_caught():
    w = md.randn(3, requires_grad=True)
    x = md.randn(3, requires_grad=True) * 1
    y = checkpoint(lambda a: a * w, x, use_reentrant=False)
    with md.no_grad():
        x.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_arguments_checked():
    f = nn.Linear(2, 2)
    x = md.randn(1, 2)
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed explicitly"):
        checkpoint(f, x)
    with pytest.raises(ValueError, match="Unexpected keyword arguments: scale"):
        checkpoint(f, x, use_reentrant=True, scale=2)
    with pytest.raises(TypeError, match="expected a callable function, got int"):
        checkpoint(3, x, use_reentrant=False)
    with pytest.raises(ValueError, match="segments must be a positive int, got 0"):
        checkpoint_sequential([f], 0, x, use_reentrant=False)


def test_against_torch():
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint as tcheckpoint
    model = _mlp()
    tmodel = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16),
                                 torch.nn.ReLU(), torch.nn.Linear(16, 3)).double()
    src = [m for m in model if isinstance(m, nn.Linear)]
    dst = [m for m in tmodel if isinstance(m, torch.nn.Linear)]
    model.double()
    with torch.no_grad():
        for s, d in zip(src, dst):
            d.weight.copy_(torch.from_numpy(s.weight.detach().numpy()))
            d.bias.copy_(torch.from_numpy(s.bias.detach().numpy()))
    xn = np.random.default_rng(0).standard_normal((5, 6))
    x = md.tensor(xn, requires_grad=True)
    tx = torch.tensor(xn, requires_grad=True)
    y = checkpoint(model, x, use_reentrant=False)
    ty = tcheckpoint(tmodel, tx, use_reentrant=False)
    (y ** 2).sum().backward()
    (ty ** 2).sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    for s, d in zip(src, dst):
        np.testing.assert_allclose(s.weight.grad.numpy(), d.weight.grad.numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(s.bias.grad.numpy(), d.bias.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_recomputes_under_the_forwards_autocast():
    model = _mlp()
    x = md.randn(4, 6)
    plain = []
    for ck in (False, True):
        model.zero_grad()
        with md.autocast("cpu", dtype=md.bfloat16):
            y = checkpoint(model, x, use_reentrant=False) if ck else model(x)
        assert y.dtype == md.bfloat16
        y.float().sum().backward()          # outside the region, as a training step does
        plain.append([y.float().detach().numpy()] + [p.grad.numpy() for p in model.parameters()])
    _assert_same(*plain)
