"""In-place ops and version counters: writes go into the tensor's memory (views see them),
every write bumps the version, and backward refuses to use values overwritten since the
forward saved them."""
import numpy as np
import pytest

import minidl as md
from minidl.autograd import gradcheck

MODIFIED = r"modified by an inplace operation: \[minidl\.FloatTensor \[3\]\] is at version 1; expected version 0"


def test_backward_refuses_a_saved_tensor_modified_since():
    x = md.ones(3, requires_grad=True)
    w = md.tensor([1.0, 2.0, 3.0])
    y = (x * w).sum()           # Mul saved w for x's gradient
    w.fill_(10)
    with pytest.raises(RuntimeError, match=MODIFIED):
        y.backward()


def test_a_tensor_the_backward_does_not_read_may_change():
    x = md.ones(3, requires_grad=True)
    w = md.tensor([1.0, 2.0, 3.0])
    y = (x + w).sum()           # Add saves nothing
    w.fill_(10)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [1, 1, 1])


def test_a_modified_saved_output_is_caught_and_named():
    x = md.ones(3, requires_grad=True)
    y = x.exp()
    z = y.sum()
    y.add_(1)
    with pytest.raises(RuntimeError, match=r"which is output 0 of Exp, is at version 1; expected version 0"):
        z.backward()


def test_every_write_bumps_the_version_and_views_share_it():
    x = md.zeros(2, 3)
    v = x[0]
    t = x.transpose(0, 1)
    assert x._version == 0
    x.add_(1)
    v.mul_(2)
    assert x._version == v._version == t._version == 2
    np.testing.assert_allclose(x.numpy(), [[2, 2, 2], [1, 1, 1]])   # the view's write is in x
    d = x.detach()
    d.zero_()
    assert x._version == 3                # detach() shares the counter...
    assert x.data._version == 0           # ...while .data does not, as in PyTorch


def test_a_write_through_a_view_is_caught_by_the_node_that_saved_the_base():
    x = md.ones(3, requires_grad=True)
    w = md.tensor([1.0, 2.0, 3.0])
    y = (x * w).sum()
    w[1:].mul_(2)
    with pytest.raises(RuntimeError, match="is at version 1; expected version 0"):
        y.backward()


def test_a_leaf_that_requires_grad_may_only_be_written_under_no_grad():
    p = md.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place operation."):
        p.add_(1)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        p -= 1
    with pytest.raises(RuntimeError, match="a view of a leaf Variable"):
        p[0:1].mul_(2)


def test_a_recorded_write_through_a_view_gives_the_viewed_tensor_that_history():
    w = md.tensor([2.0], requires_grad=True)
    x = md.zeros(3)
    x[0:1].add_(w)             # x now depends on w (PyTorch's CopySlices)
    assert x.requires_grad and type(x.grad_fn).__name__ == "CopySlices"
    (x * md.tensor([5.0, 1.0, 1.0])).sum().backward()
    np.testing.assert_allclose(x.detach().numpy(), [2, 0, 0])
    np.testing.assert_allclose(w.grad.numpy(), [5])


def test_an_expanded_tensor_is_not_written_in_place():
    w = md.tensor([2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="read-only"):
        (w * 1).expand(3).mul_(2)


def test_sgd_step_by_augmented_assignment_updates_the_parameter_object():
    p = md.nn.Parameter(md.tensor([1.0, 2.0]))
    alias = p
    (p * p).sum().backward()
    with md.no_grad():
        p -= 0.1 * p.grad
    assert p is alias and p.is_leaf and p.requires_grad
    np.testing.assert_allclose(p.detach().numpy(), [0.8, 1.6], rtol=1e-6)


def test_augmented_operators_write_in_place():
    x = md.tensor([1.0, 2.0])
    view = x[:]
    x += 1
    x *= 3
    x -= md.tensor([1.0, 1.0])
    x /= 2
    x **= 2
    np.testing.assert_allclose(view.numpy(), [(2.5) ** 2, 4.0 ** 2])


def test_in_place_ops_on_a_non_leaf_are_recorded():
    x = md.tensor([0.5, -1.0, 2.0], requires_grad=True)
    w = md.tensor([3.0, 4.0, 5.0], requires_grad=True)
    a = x * 1
    a.mul_(w).add_(1).tanh_()
    assert a.grad_fn is not None and not a.is_leaf
    a.sum().backward()
    expected = (1 - np.tanh(np.array([0.5, -1.0, 2.0]) * [3, 4, 5] + 1) ** 2)
    np.testing.assert_allclose(x.grad.numpy(), expected * [3, 4, 5], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(w.grad.numpy(), expected * [0.5, -1.0, 2.0], rtol=1e-5, atol=1e-7)


def test_earlier_consumers_keep_the_old_history():
    x = md.tensor([1.0, 2.0], requires_grad=True)
    a = x * 2
    b = (a + 1).sum()          # uses a before the write (Add saves nothing)
    a.add_(x)                  # a = 2x + x
    (b * 3 + a.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), [6 + 3, 6 + 3])


def test_overwriting_ops_cut_the_gradient_and_copy_passes_it_on():
    x = md.tensor([1.0, 2.0], requires_grad=True)
    s = md.tensor([5.0], requires_grad=True)
    a = x * 1
    a.fill_(3)
    assert a.requires_grad
    b = x * 1
    b.copy_(s)                 # broadcast from shape [1]
    (a.sum() + (b * b).sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), [0, 0])
    np.testing.assert_allclose(s.grad.numpy(), [20])


def test_a_constant_tensor_takes_history_from_its_operand():
    w = md.tensor([1.0, 2.0], requires_grad=True)
    a = md.zeros(2)
    a.add_(w)
    assert not a.is_leaf and a.requires_grad
    (a * a).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [2, 4])


def test_shape_and_dtype_changes_are_refused():
    with pytest.raises(RuntimeError, match=r"output with shape \[3\] doesn't match the broadcast shape \[2, 3\]"):
        md.ones(3).add_(md.ones(2, 3))
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type int64"):
        md.tensor([1, 2]).add_(1.5)
    with pytest.raises(RuntimeError, match="can't be cast"):
        md.tensor([1, 2]).exp_()
    with pytest.raises(RuntimeError, match="does not broadcast"):
        md.ones(3).copy_(md.ones(2))
    x = md.ones(3)
    x.add_(md.tensor([1.0, 1.0, 1.0], dtype=md.float64))     # a wider float is cast back
    assert x.dtype == md.float32


def test_elementwise_in_place_methods_match_their_out_of_place_forms():
    a = np.array([0.3, 1.5, -0.7])
    for name, ref in [("exp_", np.exp), ("tanh_", np.tanh), ("neg_", np.negative),
                      ("sigmoid_", lambda v: 1 / (1 + np.exp(-v))), ("relu_", lambda v: np.maximum(v, 0))]:
        x = md.tensor(a)
        assert getattr(x, name)() is x
        np.testing.assert_allclose(x.numpy(), ref(a), rtol=1e-6)
    x = md.tensor(np.abs(a))
    x.sqrt_().log_()
    np.testing.assert_allclose(x.numpy(), np.log(np.sqrt(np.abs(a))), rtol=1e-6)
    x = md.tensor(a)
    x.clamp_(-0.5, 1.0).clamp_min_(0.0).clamp_max_(0.5)
    np.testing.assert_allclose(x.numpy(), [0.3, 0.5, 0.0])
    x = md.tensor(a)
    x.masked_fill_(md.tensor([True, False, True]), 9.0).pow_(2).div_(3).sub_(1, alpha=2)
    np.testing.assert_allclose(x.numpy(), np.array([81, 2.25, 81]) / 3 - 2, rtol=1e-6)


def test_random_fills_are_in_place_and_seeded():
    md.manual_seed(0)
    x = md.zeros(1000)
    view = x[:10]
    x.uniform_(2.0, 3.0)
    assert 2.0 <= x.min().item() and x.max().item() <= 3.0
    np.testing.assert_allclose(view.numpy(), x.numpy()[:10])
    x.normal_(0.0, 1.0)
    assert abs(float(x.mean())) < 0.2
    x.bernoulli_(0.25)
    assert set(np.unique(x.numpy())) <= {0.0, 1.0} and 0.15 < float(x.mean()) < 0.35


def test_in_place_chain_passes_gradcheck():
    def f(x, w):
        a = x * 1
        a.mul_(w).add_(w).sigmoid_()
        a.pow_(2)
        return a

    rng = np.random.default_rng(0)
    x = md.tensor(rng.standard_normal(4), requires_grad=True)
    w = md.tensor(rng.standard_normal(4), requires_grad=True)
    assert gradcheck(f, (x, w))


def test_in_place_agrees_with_pytorch():
    torch = pytest.importorskip("torch")
    a, b = np.array([0.5, -1.0, 2.0]), np.array([1.5, 0.25, -0.5])
    grads = []
    for lib in (md, torch):
        x = lib.tensor(a, requires_grad=True)
        w = lib.tensor(b, requires_grad=True)
        h = x * 2
        h.mul_(w)
        h += x
        h.clamp_(-1.0, 1.5)
        h.exp_()
        h.sum().backward()
        grads.append((x.grad.numpy(), w.grad.numpy()))
    for mine, theirs in zip(*grads):
        np.testing.assert_allclose(mine, theirs, rtol=1e-12)


def test_version_error_agrees_with_pytorch():
    torch = pytest.importorskip("torch")
    messages = []
    for lib in (md, torch):
        x = lib.ones(3, requires_grad=True)
        w = lib.tensor([1.0, 2.0, 3.0])
        y = (x * w).sum()
        w.add_(1)
        with pytest.raises(RuntimeError) as err:
            y.backward()
        messages.append(str(err.value))
    prefix = "one of the variables needed for gradient computation has been modified by an inplace operation: " \
             "[torch.FloatTensor [3]] is at version 1; expected version 0 instead"
    assert all(m.replace("minidl.", "torch.").startswith(prefix) for m in messages)
    assert "[minidl.FloatTensor [3]]" in messages[0]     # minidl names its own type
