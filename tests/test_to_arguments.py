"""The arguments training scripts pass to ``to`` / ``cuda`` / ``cpu`` besides the device and
dtype: ``non_blocking``, ``copy`` and ``memory_format``, on tensors and modules, with
PyTorch's results (the same tensor when nothing changes, a differentiable copy otherwise)."""
import numpy as np
import pytest

import minidl as md
from minidl import nn


def test_non_blocking_is_accepted_by_keyword_and_position():
    x = md.randn(2, 3)
    assert x.to("cpu", non_blocking=True) is x
    assert x.to(non_blocking=True) is x
    assert x.to("cpu", md.float32, True) is x             # (device, dtype, non_blocking)
    y = x.to(md.float64, non_blocking=True)
    assert y.dtype == md.float64
    np.testing.assert_array_equal(y.numpy(), x.numpy())
    assert x.cpu() is x and x.cpu(memory_format=md.preserve_format) is x


def test_copy_true_gives_a_new_differentiable_tensor():
    x = md.randn(2, 3, requires_grad=True)
    for y in (x.to(copy=True), x.to("cpu", copy=True), x.to(md.float32, False, True), x.to(x, True, True),
              x.to("cpu", md.float32, False, True)):
        assert y is not x and y.grad_fn is not None
        assert not np.shares_memory(y.detach().numpy(), x.detach().numpy())
        np.testing.assert_array_equal(y.detach().numpy(), x.detach().numpy())
    (x.to(copy=True) * 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), 2)


def test_bad_to_arguments_are_refused():
    x = md.randn(2)
    with pytest.raises(TypeError, match="unexpected arguments"):
        x.to(foo=1)
    with pytest.raises(TypeError, match="at most two flags"):
        x.to("cpu", md.float32, True, True, True)
    with pytest.raises(TypeError, match="memory_format must be a minidl.memory_format"):
        x.to(memory_format="channels_last")


def test_memory_format_changes_no_value_and_keeps_pytorchs_aliasing():
    x = md.randn(2, 3, 4, 5)
    assert x.to(memory_format=md.preserve_format) is x
    assert x.to(memory_format=md.contiguous_format) is x
    y = x.to(memory_format=md.channels_last)              # PyTorch copies into the new layout
    assert y is not x and not np.shares_memory(y.numpy(), x.numpy())
    np.testing.assert_array_equal(y.numpy(), x.numpy())
    z = md.randn(1, 2, 3, 4, 5).to(memory_format=md.channels_last_3d)
    assert z.shape == (1, 2, 3, 4, 5)
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        md.randn(2, 3).to(memory_format=md.channels_last)
    assert repr(md.channels_last) == "minidl.channels_last" and isinstance(md.channels_last, md.memory_format)


def test_module_to_accepts_non_blocking_and_memory_format_and_refuses_copy():
    lin = nn.Linear(3, 2)
    w = lin.weight
    assert lin.to("cpu", non_blocking=True) is lin and lin.weight is w
    assert lin.to(md.float64, True) is lin and w.dtype == md.float64
    assert lin.to(memory_format=md.channels_last) is lin and lin.weight is w
    with pytest.raises(RuntimeError, match="does not accept copy argument"):
        lin.to("cpu", copy=True)


def test_cuda_takes_pytorchs_arguments():
    x = md.tensor([1.0, 2.0])
    for y in (x.cuda(non_blocking=True), x.cuda(0), x.cuda(md.device("cuda", 0), True), x.cuda("cuda:0")):
        assert y.device == "cuda"
        np.testing.assert_array_equal(y.cpu().numpy(), [1.0, 2.0])
    g = x.to(0, non_blocking=True)                        # an int is a GPU index, as in PyTorch
    assert g.device == "cuda" and g.cuda(non_blocking=True) is g
    lin = nn.Linear(2, 1)
    assert lin.cuda(0) is lin and lin.weight.device == "cuda"
    lin.cpu()
    assert lin.weight.device == "cpu"
