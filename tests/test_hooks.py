"""Hooks: Tensor.register_hook and the Module forward-pre, forward and full backward hooks,
each with a handle whose remove() unregisters it."""
import numpy as np
import pytest

import minidl as md


# tensor hooks ------------------------------------------------------------------------------
def test_a_leaf_hook_sees_the_summed_gradient_once_and_may_replace_it():
    x = md.tensor([1.0, 2.0], requires_grad=True)
    seen = []

    def double(g):
        seen.append(g.numpy().copy())
        return g * 2

    x.register_hook(double)
    (x * 2 + x * 3).sum().backward()
    assert len(seen) == 1
    np.testing.assert_allclose(seen[0], [5, 5])
    np.testing.assert_allclose(x.grad.numpy(), [10, 10])


def test_a_non_leaf_hook_changes_what_flows_further_back():
    x = md.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    y.register_hook(lambda g: g * 0)
    (y * y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0, 0])


def test_hooks_run_in_order_and_a_none_return_keeps_the_gradient():
    x = md.tensor([1.0], requires_grad=True)
    order = []
    x.register_hook(lambda g: order.append("a"))
    x.register_hook(lambda g: (order.append("b"), g + 1)[1])
    (x * 1).sum().backward()
    assert order == ["a", "b"] and x.grad.item() == 2.0


def test_removing_a_tensor_hook():
    x = md.tensor([1.0], requires_grad=True)
    handle = x.register_hook(lambda g: g * 100)
    handle.remove()
    handle.remove()                      # removing twice is harmless
    (x * 1).sum().backward()
    assert x.grad.item() == 1.0


def test_a_hook_returning_the_wrong_shape_is_a_clear_error():
    x = md.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2

    def bad(g):
        return md.ones(3)

    y.register_hook(bad)
    with pytest.raises(RuntimeError, match=r"hook 'bad' has changed the size of value.*\[3\].*\[2\]"):
        y.sum().backward()


def test_hooks_need_a_tensor_that_requires_grad():
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        md.ones(2).register_hook(lambda g: g)


def test_a_hook_on_the_root_sees_the_seed():
    x = md.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    seen = []
    y.register_hook(lambda g: seen.append(g.item()))
    y.backward()
    assert seen == [1.0]


def test_tensor_hooks_agree_with_pytorch():
    torch = pytest.importorskip("torch")
    a = np.array([0.5, -1.0, 2.0])
    grads = []
    for lib in (md, torch):
        x = lib.tensor(a, requires_grad=True)
        h = x.tanh()
        h.register_hook(lambda g: g * g)
        (h * x).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12)


# module hooks ------------------------------------------------------------------------------
def test_forward_pre_hook_can_replace_the_input():
    lin = md.nn.Linear(2, 2)
    handle = lin.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    out = lin(md.ones(1, 2))
    np.testing.assert_allclose(out.detach().numpy(), lin.bias.detach().numpy()[None], rtol=1e-6)
    handle.remove()
    assert not np.allclose(lin(md.ones(1, 2)).detach().numpy(), lin.bias.detach().numpy()[None])


def test_forward_hook_sees_module_args_and_output_and_can_replace_the_output():
    lin = md.nn.Linear(2, 3)
    calls = []

    def hook(m, args, out):
        calls.append((m, args[0].shape, out.shape))
        return out * 0

    lin.register_forward_hook(hook)
    out = lin(md.ones(4, 2))
    assert calls == [(lin, (4, 2), (4, 3))]
    np.testing.assert_allclose(out.detach().numpy(), 0)


def test_full_backward_hook_gets_grad_input_and_grad_output():
    lin = md.nn.Linear(2, 3)
    seen = {}

    def hook(m, grad_input, grad_output):
        seen["gi"] = [g.numpy().copy() for g in grad_input]
        seen["go"] = [g.numpy().copy() for g in grad_output]

    lin.register_full_backward_hook(hook)
    x = md.ones(1, 2, requires_grad=True)
    out = lin(x)
    out.backward(md.tensor([[1.0, 2.0, 3.0]]))
    np.testing.assert_allclose(seen["go"][0], [[1, 2, 3]])
    np.testing.assert_allclose(seen["gi"][0], x.grad.numpy())
    # float32 products of a random weight: the sum may cancel, so the tolerance is absolute too
    np.testing.assert_allclose(seen["gi"][0], [[1, 2, 3]] @ lin.weight.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_full_backward_hook_can_replace_grad_input():
    lin = md.nn.Linear(2, 2)
    lin.register_full_backward_hook(lambda m, gi, go: (gi[0] * 0,))
    x = md.ones(1, 2, requires_grad=True)
    lin(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 0)
    assert lin.weight.grad is not None and np.abs(lin.weight.grad.numpy()).sum() > 0


def test_full_backward_hook_runs_with_none_grad_input_when_the_input_needs_none():
    lin = md.nn.Linear(2, 2)
    seen = []
    lin.register_full_backward_hook(lambda m, gi, go: seen.append((gi, go[0].shape)))
    lin(md.ones(1, 2)).sum().backward()
    assert seen == [((None,), (1, 2))]


def test_removed_module_hooks_no_longer_run():
    lin = md.nn.Linear(2, 2)
    calls = []
    handles = [lin.register_forward_pre_hook(lambda m, a: calls.append("pre")),
               lin.register_forward_hook(lambda m, a, o: calls.append("post")),
               lin.register_full_backward_hook(lambda m, gi, go: calls.append("back"))]
    lin(md.ones(1, 2, requires_grad=True)).sum().backward()
    assert calls == ["pre", "post", "back"]
    for h in handles:
        h.remove()
    calls.clear()
    lin(md.ones(1, 2, requires_grad=True)).sum().backward()
    assert calls == []


def test_module_hooks_agree_with_pytorch():
    torch = pytest.importorskip("torch")
    w = np.array([[1.0, -2.0], [0.5, 3.0]])
    results = []
    for lib in (md, torch):
        lin = lib.nn.Linear(2, 2, bias=False).double()
        with lib.no_grad():
            lin.weight.copy_(lib.tensor(w))
        got = {}
        lin.register_full_backward_hook(lambda m, gi, go: got.update(gi=gi[0].numpy().copy(), go=go[0].numpy().copy()))
        lin.register_forward_hook(lambda m, a, o: o * 2)
        x = lib.tensor([[1.0, 1.0]], dtype=lib.float64, requires_grad=True)
        lin(x).pow(2).sum().backward()
        results.append((got["gi"], got["go"], x.grad.numpy()))
    for mine, theirs in zip(*results):
        np.testing.assert_allclose(mine, theirs, rtol=1e-12)
