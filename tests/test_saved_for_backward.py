"""An op saves only what its needed gradients read, so the version check raises exactly
where PyTorch's does: modifying a tensor that no backward reads is allowed.

Each case builds a small graph, modifies one tensor in place and backpropagates; it is
written once against a library (minidl or torch) so the same sequence runs in both.
``RAISES`` records PyTorch's outcome; the oracle test re-derives it from torch."""
import numpy as np
import pytest

import minidl as md


def _leaf_clone(lib, *shape):
    return lib.ones(*shape, requires_grad=True).clone()


def tensor_times_number(lib):
    a = _leaf_clone(lib, 3)
    b = a * 3
    a.add_(1)
    return b, a


def x_times_constant_modify_x(lib):
    x = _leaf_clone(lib, 3)
    w = lib.ones(3)
    y = x * w          # dL/dx reads w only
    x.add_(1)
    return y, x


def x_times_constant_modify_constant(lib):
    x = _leaf_clone(lib, 3)
    w = lib.ones(3)
    y = x * w
    w.add_(1)
    return y, x


def constant_times_x_modify_constant(lib):
    x = _leaf_clone(lib, 3)
    w = lib.ones(3)
    y = w * x
    w.add_(1)
    return y, x


def product_modify_output(lib):
    x = _leaf_clone(lib, 3)
    y = x * 2
    z = y.sum()
    y.add_(1)
    return z, x


def tensor_over_number_modify_numerator(lib):
    a = _leaf_clone(lib, 3)
    b = a / 3
    a.add_(1)
    return b, a


def quotient_modify_output(lib):
    a = _leaf_clone(lib, 3)
    w = _leaf_clone(lib, 3)
    b = a / w
    z = b.sum()
    b.add_(1)
    return z, a


def x_over_constant_modify_constant(lib):
    a = _leaf_clone(lib, 3)
    w = lib.ones(3) * 2
    b = a / w          # dL/da = g / w reads w
    w.add_(1)
    return b, a


def constant_over_x_modify_constant(lib):
    a = lib.ones(3)
    w = _leaf_clone(lib, 3)
    b = a / w          # dL/dw = -g a / w**2 reads a
    a.add_(1)
    return b, w


def square_modify_input(lib):
    a = _leaf_clone(lib, 3)
    b = a ** 2
    a.add_(1)
    return b, a


def square_modify_output(lib):
    a = _leaf_clone(lib, 3)
    b = a ** 2
    z = b.sum()
    b.add_(1)
    return z, a


def tensor_power_modify_output(lib):
    a = _leaf_clone(lib, 3)
    e = lib.ones(3) * 2
    b = a ** e
    z = b.sum()
    b.add_(1)
    return z, a


def number_to_the_x_modify_output(lib):
    a = _leaf_clone(lib, 3)
    b = 2 ** a
    z = b.sum()
    b.add_(1)
    return z, a


def matmul_modify_x(lib):
    a = _leaf_clone(lib, 2, 2)
    w = lib.ones(2, 2)
    y = a @ w          # dL/da = g w^T reads w only
    a.add_(1)
    return y, a


def matmul_modify_constant(lib):
    a = _leaf_clone(lib, 2, 2)
    w = lib.ones(2, 2)
    y = a @ w
    w.add_(1)
    return y, a


def vector_matmul_modify_vector(lib):
    a = _leaf_clone(lib, 2)
    w = lib.ones(2, 3)
    y = a @ w
    a.add_(1)
    return y, a


def linear_modify_input_of_trained_layer(lib):
    x = lib.ones(2, 2)
    w = _leaf_clone(lib, 2, 2)
    y = lib.nn.functional.linear(x, w)     # dL/dw reads x
    x.add_(1)
    return y, w


def linear_modify_weight_of_frozen_layer(lib):
    x = _leaf_clone(lib, 2, 2)
    w = lib.ones(2, 2)
    b = lib.ones(2)
    y = lib.nn.functional.linear(x, w, b)  # dL/dx reads w only
    w.add_(1)
    return y, x


def linear_modify_input_of_frozen_layer(lib):
    x = _leaf_clone(lib, 2, 2)
    w = lib.ones(2, 2)
    y = lib.nn.functional.linear(x, w)
    x.add_(1)
    return y, x


def exp_modify_output(lib):
    a = _leaf_clone(lib, 3)
    b = a.exp()
    z = b.sum()
    b.add_(1)
    return z, a


def difference_modify_both(lib):
    a = _leaf_clone(lib, 3)
    w = lib.ones(3)
    b = a - w
    a.add_(1)
    w.add_(1)
    return b, a


RAISES = {
    tensor_times_number: False,
    x_times_constant_modify_x: False,
    x_times_constant_modify_constant: True,
    constant_times_x_modify_constant: True,
    product_modify_output: False,
    tensor_over_number_modify_numerator: False,
    quotient_modify_output: False,
    x_over_constant_modify_constant: True,
    constant_over_x_modify_constant: True,
    square_modify_input: True,
    square_modify_output: False,
    tensor_power_modify_output: True,
    number_to_the_x_modify_output: True,
    matmul_modify_x: False,
    matmul_modify_constant: True,
    vector_matmul_modify_vector: False,
    linear_modify_input_of_trained_layer: True,
    linear_modify_weight_of_frozen_layer: True,
    linear_modify_input_of_frozen_layer: False,
    exp_modify_output: True,
    difference_modify_both: False,
}
CASES = [pytest.param(case, id=case.__name__) for case in RAISES]


def _outcome(lib, case):
    """Whether backward refused because of the in-place write."""
    out, _ = case(lib)
    try:
        out.sum().backward()
    except RuntimeError as exc:
        assert "modified by an inplace operation" in str(exc)
        return True
    return False


@pytest.mark.parametrize("case", CASES)
def test_backward_raises_only_where_a_saved_value_was_overwritten(case):
    assert _outcome(md, case) is RAISES[case]


@pytest.mark.parametrize("case", CASES)
def test_the_same_sequence_raises_or_not_in_pytorch(case):
    torch = pytest.importorskip("torch")
    assert _outcome(torch, case) is RAISES[case]


def test_a_gradient_computed_after_an_allowed_write_is_the_one_of_the_forward():
    x = md.tensor([1.0, 2.0, 3.0], requires_grad=True)
    a = x * 1
    w = md.tensor([2.0, 3.0, 4.0])
    y = (a * w).sum()
    a.add_(100)                     # a is not read by dL/da = w
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [2, 3, 4])


def test_an_op_with_a_number_keeps_no_array_for_backward():
    x = md.ones(4, requires_grad=True)
    y = (x * 3.0) / 2.0
    div = y.grad_fn
    mul = div.inputs[0].grad_fn
    for node in (mul, div):
        assert [a for a in node.saved_tensors if hasattr(a, "shape")] == []
