"""A tensor and the views of its memory share one history, as in PyTorch: a recorded write
through a view changes the viewed tensor's history (CopySlices), and a view made before its
base was written in place takes the base's new history before it is used."""
import numpy as np
import pytest

import minidl as md
from minidl.autograd import gradcheck


def through_slice(lib, a):
    x = a.clone()
    v = x[1:]
    v.mul_(2)
    return x


def through_transposed_row(lib, a):
    x = a.clone()
    v = x.t()[1]
    v.mul_(lib.tensor([3.0, 4.0], dtype=a.dtype))
    return x * lib.arange(6.0, dtype=a.dtype).reshape(2, 3)


def through_a_view_of_a_view(lib, a):
    x = a.clone()
    x[0][1:].add_(x[1][:2] * 5)
    return x


def index_assignment_into_a_view(lib, a):
    x = a.clone()
    row = x[1]
    row[0] = a[0, 2] * 10
    return x.exp()


def stale_view_after_a_write_to_the_base(lib, a):
    x = a.clone()
    v = x[1:]
    x.mul_(2)
    return v * 3


def stale_reshaped_view(lib, a):
    x = a.clone()
    flat = x.reshape(-1)
    x.add_(a * a)
    return flat[2:5]


def write_into_a_constant_through_a_view(lib, a):
    x = lib.zeros(2, 3, dtype=a.dtype)
    x[:, 1:].add_(a[:, :2])
    return x * x


def two_writes_through_two_views(lib, a):
    x = a.clone()
    left, right = x[:, :1], x[:, 1:]
    left.mul_(3)
    right.sub_(left * 1)
    return x


CASES = [through_slice, through_transposed_row, through_a_view_of_a_view, index_assignment_into_a_view,
         stale_view_after_a_write_to_the_base, stale_reshaped_view, write_into_a_constant_through_a_view,
         two_writes_through_two_views]


def _leaf(lib, values):
    return lib.tensor(values, requires_grad=True)


A = np.arange(1.0, 7.0).reshape(2, 3) / 4


def test_the_gradient_of_a_write_through_a_slice_reaches_only_the_slice():
    a = md.ones(3, requires_grad=True)
    x = through_slice(md, a)
    assert type(x.grad_fn).__name__ == "CopySlices"
    x.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [1, 2, 2])
    np.testing.assert_allclose(x.detach().numpy(), [1, 2, 2])


def test_a_view_made_before_an_in_place_write_to_its_base_sees_the_write_in_its_gradient():
    a = md.ones(3, requires_grad=True)
    x = a.clone()
    v = x[1:]
    x.mul_(2)                       # v's values are now 2s; so is its derivative wrt a
    v.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [0, 2, 2])


def test_a_base_outside_the_graph_joins_it_when_a_view_is_written_with_a_tensor_that_requires_grad():
    w = md.tensor([2.0, 3.0], requires_grad=True)
    x = md.zeros(3)
    other_view = x[:2]
    x[1:].add_(w)
    assert x.requires_grad and other_view.requires_grad
    other_view.sum().backward()     # x[:2] = [0, 2]: only w[0] reaches it
    np.testing.assert_allclose(w.grad.numpy(), [1, 0])


@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_writes_through_views_pass_gradcheck(case):
    assert gradcheck(lambda a: case(md, a), (_leaf(md, A),))


@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_values_and_gradients_match_pytorch(case):
    torch = pytest.importorskip("torch")
    w = np.random.default_rng(0).standard_normal(np.shape(case(md, md.tensor(A))))
    got = []
    for lib in (md, torch):
        a = _leaf(lib, A)
        y = case(lib, a)
        (y * lib.tensor(w)).sum().backward()
        got.append((y.detach().numpy(), a.grad.numpy()))
    for ours, theirs in zip(*got):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


def test_a_view_of_a_leaf_that_requires_grad_is_still_not_written():
    p = md.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        p[1:].mul_(2)


def test_a_write_under_no_grad_through_a_view_leaves_the_history_alone():
    a = md.ones(3, requires_grad=True)
    x = a * 1
    with md.no_grad():
        x[1:].mul_(5)
    x.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [1, 1, 1])
    np.testing.assert_allclose(x.detach().numpy(), [1, 5, 5])


def test_a_saved_tensor_written_through_a_view_is_still_caught():
    a = md.ones(3, requires_grad=True)
    x = a * 1
    y = x.exp()                      # Exp saves its output...
    y[1:].mul_(2)                    # ...which a write through a view changes
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_a_stale_view_that_now_requires_grad_records_its_own_write():
    w = md.tensor([2.0, 3.0], requires_grad=True)
    x = md.zeros(3)
    v = x[:1]                        # made while x was outside the graph
    x[1:].add_(w)
    # v is a view of x, which now requires grad: the write is recorded, as it is through a
    # view made now (PyTorch 2 refuses this stale view as "a leaf", though not a fresh one)
    v.add_(w[1:] * 10)
    (x * md.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_allclose(x.detach().numpy(), [30, 2, 3])
    np.testing.assert_allclose(w.grad.numpy(), [2, 3 + 10])


def test_a_view_is_not_detached_in_place():
    x = md.ones(3, requires_grad=True) * 1
    with pytest.raises(RuntimeError, match="Can't detach views in-place"):
        x[1:].detach_()


def test_a_view_made_under_no_grad_does_not_take_its_base_s_history():
    p = md.ones(3, requires_grad=True)
    with md.no_grad():
        v = p[1:]
        p.mul_(2)                    # an optimizer-like update
    assert not v.requires_grad and v.grad_fn is None
    np.testing.assert_allclose((v * 1).detach().numpy(), [2, 2])
    assert v._version == p._version == 1   # the memory is still shared and counted


# contiguous(): a copy exactly when the layout is not C order ----------------------------------

@pytest.mark.parametrize("make", [lambda x: x.t(), lambda x: x[:, 1:], lambda x: x[::2]],
                         ids=["transpose", "column-slice", "strided-rows"])
def test_contiguous_of_a_strided_view_is_a_copy_that_does_not_write_through(make):
    x = md.zeros(4, 3)
    view = make(x)
    assert not view.is_contiguous()
    y = view.contiguous()
    assert y.is_contiguous() and y.shape == view.shape
    y.fill_(1.0)
    np.testing.assert_array_equal(x.numpy(), 0)


def test_contiguous_of_a_c_ordered_tensor_is_the_tensor_itself():
    x = md.zeros(4, 3)
    assert x.is_contiguous() and x.contiguous() is x
    assert x[1:].is_contiguous() and x[1:].contiguous()._data.base is not None   # a row slice stays a view


def test_contiguous_of_an_expanded_tensor_is_writable():
    y = md.zeros(1, 2).expand(3, 2).contiguous()
    y.add_(1)
    np.testing.assert_array_equal(y.numpy(), np.ones((3, 2)))


def test_contiguous_copy_is_differentiable():
    a = md.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    assert gradcheck(lambda t: t.t().contiguous() * md.tensor(np.arange(6.0).reshape(3, 2)), (a,))
