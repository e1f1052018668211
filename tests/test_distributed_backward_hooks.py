"""The two backward-pass hooks DistributedDataParallel is built on: post-accumulate-grad hooks
(PyTorch's Tensor.register_post_accumulate_grad_hook), which run as soon as a leaf's gradient
is complete, and final callbacks queued during backward."""
import numpy as np
import pytest

import minidl as md
from minidl.autograd.backward_callbacks import queue_callback


def test_post_accumulate_hook_runs_when_the_leafs_gradient_is_complete_not_at_the_end():
    events = []
    x = md.tensor([1.0, 2.0])
    w1 = md.tensor([0.5, -1.0], requires_grad=True)
    w2 = md.tensor([3.0, 4.0], requires_grad=True)
    h = w1 * x
    h.register_hook(lambda g: events.append("h"))           # runs between the two layers' backward
    w1.register_post_accumulate_grad_hook(lambda t: events.append(("w1", t.grad.tolist())))
    w2.register_post_accumulate_grad_hook(lambda t: events.append(("w2", t.grad.tolist())))
    (w2 * h).sum().backward()
    assert events == [("w2", [0.5, -2.0]), "h", ("w1", [3.0, 8.0])]


def test_a_leaf_used_twice_gets_one_call_with_the_summed_gradient():
    calls = []
    w = md.tensor([2.0], requires_grad=True)
    w.register_post_accumulate_grad_hook(lambda t: calls.append(t.grad.item()))
    (w * 3.0 + (w * w).exp().log()).sum().backward()         # two paths: 3 and 2w = 4
    assert calls == [7.0]
    (w * 3.0).sum().backward()                                  # accumulates: .grad = 7 + 3
    assert calls == [7.0, 10.0]


def test_tensor_hooks_run_first_and_their_result_is_what_is_accumulated():
    seen = []
    w = md.tensor([1.0, 1.0], requires_grad=True)
    w.register_hook(lambda g: g * 10)
    w.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
    (w * md.tensor([1.0, 2.0])).sum().backward()
    assert seen == [[10.0, 20.0]] and w.grad.tolist() == [10.0, 20.0]


def test_handles_remove_hooks_and_autograd_grad_runs_none():
    calls = []
    w = md.tensor([1.0], requires_grad=True)
    handle = w.register_post_accumulate_grad_hook(lambda t: calls.append(1))
    md.autograd.grad((w * 2).sum(), [w])
    assert calls == []                                        # no .grad accumulated, no hook
    handle.remove()
    (w * 2).sum().backward()
    assert calls == [] and w.grad.item() == 2.0


def test_leaves_only():
    w = md.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="non-leaf"):
        (w * 2).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        md.tensor([1.0]).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(TypeError, match="callable"):
        w.register_post_accumulate_grad_hook(3)


def test_gradients_are_unchanged_by_a_hook_on_a_graph_with_shared_subexpressions():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4))

    def grads(hooked):
        w = md.tensor(a, requires_grad=True)
        v = md.tensor(a.T.copy(), requires_grad=True)
        if hooked:
            w.register_post_accumulate_grad_hook(lambda t: None)
        h = (w @ v).tanh()
        (h @ h + (w * 2) @ v).sum().backward()
        return w.grad.numpy(), v.grad.numpy()
    for hooked, plain in zip(grads(True), grads(False)):
        np.testing.assert_array_equal(hooked, plain)


def test_final_callbacks_run_after_the_backward_in_queue_order():
    events = []
    w = md.tensor([1.0], requires_grad=True)

    def hook(t):
        events.append("hook")
        queue_callback(lambda: events.append(("first", w.grad.item())))
        queue_callback(lambda: (events.append("second"), queue_callback(lambda: events.append("queued by a callback"))))
    w.register_post_accumulate_grad_hook(hook)
    (w * 5).sum().backward()
    assert events == ["hook", ("first", 5.0), "second", "queued by a callback"]


def test_queue_callback_outside_backward_raises():
    with pytest.raises(RuntimeError, match="Final callbacks can only be installed during backward pass."):
        queue_callback(lambda: None)


def test_a_failed_backward_does_not_run_its_callbacks_nor_leak_them():
    ran = []
    w = md.tensor([1.0], requires_grad=True)

    def hook(t):
        queue_callback(lambda: ran.append(1))
        raise ValueError("hook failed")
    w.register_post_accumulate_grad_hook(hook)
    with pytest.raises(ValueError, match="hook failed"):
        (w * 2).sum().backward()
    assert ran == []
    with pytest.raises(RuntimeError, match="Final callbacks"):
        queue_callback(lambda: None)


def test_a_leaf_that_is_the_root_of_backward_runs_its_post_hook():
    seen = []
    w = md.tensor([1.0, 2.0], requires_grad=True)
    w.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
    w.backward(md.tensor([3.0, 4.0]))
    assert seen == [[3.0, 4.0]]
