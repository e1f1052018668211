"""x[index] = v: in place for every kind of index, differentiable for x (the overwritten part
gets zero gradient) and for v (its gradient gathered and summed over broadcasting)."""
import numpy as np
import pytest

import minidl as md
from minidl.autograd import gradcheck

INDICES = [
    (1,), (slice(1, 3),), (None, 0), (Ellipsis, 1), ((slice(None), [0, 2]),), (np.array([1, 0]),),
    ((0, slice(None)),), (np.array([[True, False, True], [False, True, False]]),),
    ((slice(None), np.array([True, False, True])),),
]


@pytest.mark.parametrize("index", INDICES, ids=str)
def test_assignment_writes_what_numpy_writes(index):
    index = index[0] if len(index) == 1 else index
    a = np.arange(6.0).reshape(2, 3)
    x = md.tensor(a)
    view = x[:]
    expected = a.copy()
    expected[index] = -1.0
    x[index] = -1.0
    np.testing.assert_allclose(x.numpy(), expected)
    np.testing.assert_allclose(view.numpy(), expected)     # in place: views see it
    assert x._version == 1


def test_integer_tensors_and_masks_as_indices():
    x = md.zeros(4)
    x[md.tensor([1, 3])] = md.tensor([5.0, 6.0])
    x[x > 5.5] = 0.0
    np.testing.assert_allclose(x.numpy(), [0, 5, 0, 0])


def test_boolean_mask_reads_and_their_gradient():
    x = md.tensor([1.0, -2.0, 3.0], requires_grad=True)
    picked = x[x > 0]
    np.testing.assert_allclose(picked.detach().numpy(), [1, 3])
    (picked * md.tensor([10.0, 20.0])).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [10, 0, 20])


def test_gradients_of_x_and_v():
    x = md.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    v = md.tensor([10.0], requires_grad=True)
    y = x * 1
    y[1:3] = v                            # v broadcast over two positions
    (y * md.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1, 0, 0, 4])
    np.testing.assert_allclose(v.grad.numpy(), [5])


def test_a_constant_tensor_gets_history_from_the_value():
    v = md.tensor([2.0, 3.0], requires_grad=True)
    buf = md.zeros(2, 2)
    buf[0] = v
    buf[1] = v * v
    buf.sum().backward()
    np.testing.assert_allclose(v.grad.numpy(), [1 + 4, 1 + 6])


def test_a_value_that_does_not_broadcast_is_a_clear_error():
    x = md.zeros(3)
    with pytest.raises(RuntimeError, match=r"value tensor of shape \[3\] cannot be broadcast to indexing result of shape \[2\]"):
        x[0:2] = md.ones(3)
    assert x._version == 0


def test_assignment_on_a_leaf_that_requires_grad_needs_no_grad():
    w = md.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        w[0] = 1.0
    with md.no_grad():
        w[0] = 1.0
    np.testing.assert_allclose(w.detach().numpy(), [1, 0, 0])


@pytest.mark.parametrize("index", [slice(0, 2), [2, 0], (slice(None), 1)], ids=str)
def test_setitem_passes_gradcheck(index):
    rng = np.random.default_rng(0)
    x = md.tensor(rng.standard_normal((3, 3)), requires_grad=True)
    v = md.tensor(rng.standard_normal(3), requires_grad=True)

    def f(x, v):
        y = x * 1
        y[index] = v if index != (slice(None), 1) else v * 2
        return y.tanh()

    assert gradcheck(f, (x, v))


def test_setitem_agrees_with_pytorch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(1).standard_normal((3, 4))
    b = np.random.default_rng(2).standard_normal(4)
    grads = []
    for lib in (md, torch):
        x = lib.tensor(a, requires_grad=True)
        v = lib.tensor(b, requires_grad=True)
        y = x * 2
        y[1] = v
        y[lib.tensor([0, 2]), 1:3] = v[:2] * 3
        y[y > 1.0] = 0.0
        y.tanh().sum().backward()
        grads.append((x.grad.numpy(), v.grad.numpy()))
    for mine, theirs in zip(*grads):
        np.testing.assert_allclose(mine, theirs, rtol=1e-12)
