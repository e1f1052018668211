"""In-place semantics as PyTorch's: writes whose operand partly overlaps the written memory are
refused, writes into expanded tensors are refused, retain_grad() follows an in-place op, and the
outputs of a module with full backward hooks may not be written in place."""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
from minidl.autograd import gradcheck

PARTIAL = "some elements of the input tensor and the written-to tensor refer to a single memory location"
INTERNAL = "more than one element of the written-to tensor refers to a single memory location"
HOOKED = "is a view and is being modified inplace"


# partial overlap -----------------------------------------------------------------------------
def _shifted_add(lib):
    x = lib.arange(5.0)
    x[1:].add_(x[:-1])
    return x


def _shifted_setitem(lib):
    x = lib.arange(5.0)
    x[1:] = x[:-1]
    return x


def _shifted_copy(lib):
    x = lib.arange(5.0)
    x[1:].copy_(x[:-1])
    return x


def _mul_transpose(lib):
    x = lib.arange(4.0).reshape(2, 2)
    x.mul_(x.t())
    return x


def _add_row(lib):
    x = lib.arange(4.0).reshape(2, 2)
    x.add_(x[0])
    return x


def _shifted_iadd_no_grad(lib):
    x = lib.arange(5.0)
    with lib.no_grad():
        x[1:] += x[:-1]
    return x


def _shifted_clamp(lib):
    x = lib.arange(5.0)
    x[1:].clamp_(x[:-1])
    return x


def _detached_view(lib):
    x = lib.arange(4.0)
    x[1:].add_(x.detach()[:-1])
    return x


def _shifted_addcmul(lib):
    x = lib.arange(5.0)
    x[1:].addcmul_(x[:-1], lib.ones(4))
    return x


OVERLAPPING = [_shifted_add, _shifted_setitem, _shifted_copy, _mul_transpose, _add_row, _shifted_iadd_no_grad,
               _shifted_clamp, _detached_view, _shifted_addcmul]


@pytest.mark.parametrize("case", OVERLAPPING, ids=lambda f: f.__name__)
def test_partial_overlap_is_refused(case):
    with pytest.raises(RuntimeError, match=PARTIAL):
        case(md)


def test_partial_overlap_of_a_recorded_write_is_refused_and_leaves_the_values():
    a = md.arange(5.0, dtype=md.float64).requires_grad_()
    x = a * 1
    with pytest.raises(RuntimeError, match=PARTIAL):
        x[1:].add_(x[:-1])
    np.testing.assert_array_equal(x.detach().numpy(), np.arange(5.0))


def _self_add(lib):
    x = lib.arange(4.0)
    x.add_(x)
    return x


def _same_memory_view(lib):
    x = lib.arange(4.0)
    x[:].add_(x.view(4))
    return x


def _disjoint_halves(lib):
    x = lib.arange(6.0)
    x[:3].add_(x[3:])
    return x


def _disjoint_setitem(lib):
    x = lib.arange(4.0)
    x[:2] = x[2:]
    return x


def _element_setitem(lib):
    x = lib.arange(4.0)
    x[0] = x[1]
    return x


def _same_setitem(lib):
    x = lib.arange(4.0)
    x[1:] = x[1:]
    return x


def _interleaved(lib):
    x = lib.arange(6.0)
    x[::2].add_(x[1::2])
    return x


def _cloned(lib):
    x = lib.arange(5.0)
    x[1:].mul_(x[:-1].clone())
    return x


ALLOWED = {   # NumPy references
    _self_add: np.arange(4.0) * 2,
    _same_memory_view: np.arange(4.0) * 2,
    _disjoint_halves: np.array([3.0, 5, 7, 3, 4, 5]),
    _disjoint_setitem: np.array([2.0, 3, 2, 3]),
    _element_setitem: np.array([1.0, 1, 2, 3]),
    _same_setitem: np.arange(4.0),
    _interleaved: np.array([1.0, 1, 5, 3, 9, 5]),
    _cloned: np.array([0.0, 0, 2, 6, 12]),
}


@pytest.mark.parametrize("case", list(ALLOWED), ids=lambda f: f.__name__)
def test_full_or_no_overlap_is_allowed(case):
    np.testing.assert_array_equal(case(md).numpy(), ALLOWED[case])


def test_full_overlap_gradient():
    def f(a):
        y = a * 1.5
        y.add_(y)              # the same memory: each element read before it is written, 2y
        return y * a
    x = md.tensor(np.linspace(-1, 1, 5), dtype=md.float64, requires_grad=True)
    assert gradcheck(f, (x,))
    f(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * 3.0 * np.linspace(-1, 1, 5))


# expanded tensors ----------------------------------------------------------------------------
@pytest.mark.parametrize("write", [lambda x: x.add_(1), lambda x: x.mul_(2), lambda x: x.copy_(md.ones(3)),
                                   lambda x: x.relu_(), lambda x: x.__setitem__(slice(1, None), 1.0)])
def test_writing_into_an_expanded_tensor_is_refused(write):
    x = md.zeros(1).expand(3)
    with pytest.raises(RuntimeError, match=INTERNAL):
        write(x)
    np.testing.assert_array_equal(x.numpy(), np.zeros(3))


# retain_grad through an in-place op ------------------------------------------------------------
def test_retained_grad_follows_the_inplace_op():
    x = md.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    y.mul_(3)
    (y * md.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert y.retains_grad
    np.testing.assert_array_equal(y.grad.numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 12.0, 18.0])


def test_retained_grad_of_a_base_written_through_a_view():
    x = md.randn(4, requires_grad=True)
    y = x * 2
    y.retain_grad()
    y[1:].mul_(3)
    (y * y).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), 2 * y.detach().numpy(), rtol=1e-6)


def test_retained_grad_of_a_view_whose_base_was_written():
    x = md.randn(4, requires_grad=True)
    y = x * 2
    v = y[1:]
    v.retain_grad()
    y.mul_(3)
    (v * v).sum().backward()
    np.testing.assert_allclose(v.grad.numpy(), 2 * v.detach().numpy(), rtol=1e-6)


# outputs of a module with full backward hooks ----------------------------------------------------
def _hooked_linear(pre=False):
    md.manual_seed(0)
    m = nn.Linear(3, 3)
    if pre:
        m.register_full_backward_pre_hook(lambda *a: None)
    else:
        m.register_full_backward_hook(lambda *a: None)
    return m


@pytest.mark.parametrize("write", [lambda y: y.add_(1), lambda y: nn.ReLU(inplace=True)(y), lambda y: y.t_(),
                                   lambda y: y.__setitem__(0, 1.0), lambda y: y[0].add_(1)],
                         ids=["add_", "relu_inplace", "t_", "setitem", "view_add_"])
def test_inplace_on_a_hooked_output_is_refused(write):
    y = _hooked_linear()(md.randn(2, 3))
    with pytest.raises(RuntimeError, match=HOOKED):
        write(y)


def test_inplace_on_a_hooked_input_and_pre_hook_output_is_refused():
    m = nn.ReLU(inplace=True)
    m.register_full_backward_hook(lambda *a: None)
    with pytest.raises(RuntimeError, match=HOOKED):
        m(md.randn(2, 3, requires_grad=True) * 1)
    with pytest.raises(RuntimeError, match=HOOKED):
        _hooked_linear(pre=True)(md.randn(2, 3)).add_(1)


def test_hooked_output_may_be_written_outside_the_graph_or_after_another_op():
    m = _hooked_linear()
    with md.no_grad():
        y = m(md.ones(2, 3))
        y.add_(1)
    z = m(md.ones(2, 3)) * 1
    z.add_(1)
    z.sum().backward()
    np.testing.assert_allclose(y.numpy(), z.detach().numpy(), rtol=1e-6)


# against PyTorch ---------------------------------------------------------------------------------
@pytest.mark.parametrize("case", OVERLAPPING + list(ALLOWED), ids=lambda f: f.__name__)
def test_overlap_matches_torch(case):
    torch = pytest.importorskip("torch")
    try:
        want = case(torch).numpy()
    except RuntimeError as e:
        assert PARTIAL in str(e)
        with pytest.raises(RuntimeError, match=PARTIAL):
            case(md)
    else:
        np.testing.assert_array_equal(case(md).numpy(), want)


def test_expanded_write_matches_torch():
    torch = pytest.importorskip("torch")
    for lib in (torch, md):
        with pytest.raises(RuntimeError, match=INTERNAL):
            lib.zeros(1).expand(3).add_(1)


def test_retained_grad_matches_torch():
    torch = pytest.importorskip("torch")
    v = np.array([1.0, -2.0, 3.0])
    grads = []
    for lib in (torch, md):
        x = lib.tensor(v, requires_grad=True)
        y = x * 2
        y.retain_grad()
        y.mul_(3)
        y[1:].add_(1)
        (y ** 2).sum().backward()
        grads.append((y.grad.numpy(), x.grad.numpy()))
    np.testing.assert_allclose(grads[1][0], grads[0][0])
    np.testing.assert_allclose(grads[1][1], grads[0][1])


def test_hooked_output_matches_torch():
    torch = pytest.importorskip("torch")
    for lib, lnn in ((torch, torch.nn), (md, nn)):
        m = lnn.Linear(3, 3)
        m.register_full_backward_hook(lambda *a: None)
        with pytest.raises(RuntimeError, match=HOOKED):
            lnn.ReLU(inplace=True)(m(lib.randn(2, 3)))
