"""The autograd surface of a Tensor and of minidl.autograd, as in PyTorch: ``.data`` and
``.grad``, is_leaf / requires_grad_ / retain_grad, ``autograd.grad`` and ``autograd.backward``."""
import numpy as np
import pytest

import minidl as md


# .data -------------------------------------------------------------------------------------
def test_data_is_a_detached_tensor_sharing_memory():
    w = md.tensor([1.0, 2.0], requires_grad=True)
    d = w.data
    assert isinstance(d, md.Tensor) and not d.requires_grad and d.is_leaf
    d.fill_(5)
    assert w.detach().numpy()[0] == d.detach().numpy()[0]      # the same memory
    assert (w * 2).requires_grad            # w itself is untouched as a leaf


def test_data_supports_pytorch_idioms_on_buffers_and_parameters():
    bn = md.nn.BatchNorm1d(3)
    bn.running_mean.data[...] = md.tensor([1.0, 2.0, 3.0])
    np.testing.assert_allclose(bn.running_mean.numpy(), [1, 2, 3])
    p = md.nn.Parameter(md.zeros(2))
    p.data.fill_(3.0)
    np.testing.assert_allclose(p.detach().numpy(), [3, 3])
    assert float(p.data.sum()) == 6.0


def test_setting_data_replaces_the_storage():
    w = md.nn.Parameter(md.zeros(2))
    w.data = md.ones(3)
    assert w.shape == (3,) and isinstance(w, md.nn.Parameter) and w.requires_grad
    np.testing.assert_allclose(w.detach().numpy(), [1, 1, 1])
    with pytest.raises(TypeError, match="Tensor"):
        w.data = np.ones(3)


# .grad -------------------------------------------------------------------------------------
def test_grad_can_be_assigned_and_is_then_accumulated_into():
    x = md.tensor([1.0, 2.0], requires_grad=True)
    x.grad = md.tensor([10.0, 10.0])
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [13, 13])
    x.grad = None
    assert x.grad is None


def test_grad_assignment_is_checked_like_pytorch():
    x = md.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="size"):
        x.grad = md.zeros(2)
    with pytest.raises(RuntimeError, match="dtype"):
        x.grad = md.zeros(3, dtype=md.float64)
    with pytest.raises(TypeError, match="Tensor or None"):
        x.grad = 3


def test_grad_can_be_zeroed_in_place():
    x = md.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    g = x.grad
    x.grad.zero_()
    assert x.grad is g
    np.testing.assert_allclose(g.numpy(), [0, 0])


# leaves ------------------------------------------------------------------------------------
def test_is_leaf_follows_pytorch():
    a = md.ones(2)
    w = md.ones(2, requires_grad=True)
    assert a.is_leaf and w.is_leaf
    assert not (w * 2).is_leaf
    assert (a * 2).is_leaf               # no graph: a result of constants is a leaf
    assert (w * 2).detach().is_leaf


def test_requires_grad_underscore_returns_self_and_refuses_non_leaves():
    a = md.ones(2)
    assert a.requires_grad_() is a and a.requires_grad
    with pytest.raises(RuntimeError, match="leaf"):
        (a * 2).requires_grad_(False)
    with pytest.raises(RuntimeError, match="floating point"):
        md.tensor([1, 2]).requires_grad_()


def test_retain_grad_keeps_a_non_leaf_gradient():
    x = md.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    y.retain_grad()
    assert y.retains_grad
    (y * y).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), [6, 12])
    z = x * 2
    (z * 1).sum().backward()
    assert z.grad is None                # not retained
    with pytest.raises(RuntimeError, match="requires_grad=False"):
        md.ones(2).retain_grad()


# autograd.grad -----------------------------------------------------------------------------
def test_grad_returns_gradients_without_touching_dot_grad():
    x = md.tensor([1.0, 2.0], requires_grad=True)
    w = md.tensor([3.0, 4.0], requires_grad=True)
    gx, gw = md.autograd.grad((x * w).sum(), [x, w])
    np.testing.assert_allclose(gx.numpy(), [3, 4])
    np.testing.assert_allclose(gw.numpy(), [1, 2])
    assert x.grad is None and w.grad is None


def test_grad_with_respect_to_an_intermediate_tensor():
    x = md.tensor([1.0, 2.0], requires_grad=True)
    h = x * x
    (gh,) = md.autograd.grad((h * 5).sum(), h)
    np.testing.assert_allclose(gh.numpy(), [5, 5])
    assert x.grad is None


def test_grad_with_grad_outputs_and_retain_graph():
    x = md.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    (g1,) = md.autograd.grad(y, x, grad_outputs=md.tensor([1.0, 10.0]), retain_graph=True)
    (g2,) = md.autograd.grad(y, x, grad_outputs=[md.tensor([1.0, 1.0])])
    np.testing.assert_allclose(g1.numpy(), [2, 40])
    np.testing.assert_allclose(g2.numpy(), [2, 4])
    with pytest.raises(RuntimeError, match="second time"):
        md.autograd.grad(y, x, grad_outputs=md.tensor([1.0, 1.0]))


def test_grad_of_an_unused_input_is_an_error_unless_allowed():
    x = md.tensor([1.0], requires_grad=True)
    unused = md.tensor([1.0], requires_grad=True)
    msg = ("One of the differentiated Tensors appears to not have been used in the graph. "
           "Set allow_unused=True if this is the desired behavior.")
    with pytest.raises(RuntimeError, match=msg):
        md.autograd.grad((x * 2).sum(), [x, unused])
    gx, gu = md.autograd.grad((x * 2).sum(), [x, unused], allow_unused=True)
    assert gu is None and gx.item() == 2
    _, gz = md.autograd.grad((x * 2).sum(), [x, unused], materialize_grads=True)
    np.testing.assert_allclose(gz.numpy(), [0])


def test_grad_create_graph_and_inputs_without_grad():
    x = md.tensor([1.0], requires_grad=True)
    (g,) = md.autograd.grad((x * x).sum(), x, create_graph=True)
    assert g.requires_grad and g.item() == 2.0
    (x * x).sum().backward(create_graph=True)
    assert x.grad.requires_grad and x.grad.item() == 2.0
    with pytest.raises(NotImplementedError, match="create_graph=True: .* has no differentiable backward"):
        md.autograd.grad(md.nn.functional.embedding_bag(md.tensor([0]), (x * 2).reshape(1, 1), md.tensor([0])).sum(),
                         x, create_graph=True)
    with pytest.raises(RuntimeError, match="does not require grad"):
        md.autograd.grad((x * 2).sum(), md.ones(1))


def test_grad_gives_the_same_answer_as_backward():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4))
    x = md.tensor(a, requires_grad=True)
    (g,) = md.autograd.grad((x.tanh() * x).sum(), x)
    (x.tanh() * x).sum().backward()
    np.testing.assert_allclose(g.numpy(), x.grad.numpy())
    assert g.numpy() is not x.grad.numpy()


def test_backward_inputs_accumulates_only_into_those():
    x = md.tensor([1.0], requires_grad=True)
    w = md.tensor([2.0], requires_grad=True)
    (x * w).sum().backward(inputs=[w])
    assert x.grad is None and w.grad.item() == 1.0


def test_autograd_backward_shares_the_tensor_backward_path():
    x = md.tensor([1.0, 2.0], requires_grad=True)
    md.autograd.backward([(x * 2).sum(), x * x], [None, md.tensor([1.0, 1.0])])
    np.testing.assert_allclose(x.grad.numpy(), [4, 6])
    with pytest.raises(RuntimeError, match="scalar outputs"):
        md.autograd.backward(x * x)
    with pytest.raises(RuntimeError, match="does not require grad"):
        md.autograd.backward(md.ones(1))


def test_backward_takes_an_array_or_a_number_as_gradient():
    x = md.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).backward(np.array([1.0, 2.0]))
    np.testing.assert_allclose(x.grad.numpy(), [3, 6])
    y = md.tensor(2.0, requires_grad=True)
    (y * y).backward(2.0)
    assert y.grad.item() == 8.0


def test_grad_agrees_with_pytorch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(2).standard_normal((2, 3))
    x = md.tensor(a, requires_grad=True)
    tx = torch.tensor(a, requires_grad=True)
    h, th = x.sigmoid(), tx.sigmoid()
    g = md.autograd.grad((h * h).sum(), [x, h])
    tg = torch.autograd.grad((th * th).sum(), [tx, th])
    for mine, theirs in zip(g, tg):
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-12)
