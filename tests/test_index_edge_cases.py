"""Indices, dims and sizes at the edges, one test each (test_fuzz_indices.py searches around
them): huge values are refused with a clean error before anything is allocated or looped over,
out-of-range dims raise IndexError, and geometry PyTorch accepts gives PyTorch's answer."""
import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl.kernels.switch import implementation

IMPLS = ["numba", "reference"]


# sizes ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [lambda: md.zeros(10 ** 12), lambda: md.randn(2 ** 40, 2 ** 40),
                                  lambda: md.full((10 ** 6, 10 ** 7), 1.0), lambda: md.eye(10 ** 7),
                                  lambda: md.randperm(10 ** 12), lambda: md.linspace(0, 1, 10 ** 12),
                                  lambda: md.randint(0, 5, (10 ** 12,))],
                         ids=["zeros", "randn", "full", "eye", "randperm", "linspace", "randint"])
def test_a_size_beyond_the_machine_is_refused_before_allocating(make):
    with pytest.raises(RuntimeError, match="can't allocate memory: you tried to allocate"):
        make()


def test_an_empty_shape_with_huge_extents_is_refused_cleanly():
    """NumPy cannot represent extents whose byte length overflows int64, even without an
    element (PyTorch returns an empty tensor there); the error says so."""
    with pytest.raises(RuntimeError, match="too large"):
        md.zeros(0, 2 ** 40, 2 ** 40)
    assert md.zeros(0, 2 ** 40).shape == (0, 2 ** 40)


def test_arange_with_int_bounds_beyond_int64_is_refused():
    """NumPy would build an object array of Python ints (gigabytes for a range of 10**8)."""
    with pytest.raises(RuntimeError, match="int64 without overflow"):
        md.arange(0, -10 ** 20, -2 ** 60)
    with pytest.raises(RuntimeError, match="can't allocate"):
        md.arange(0, 2 ** 62)
    np.testing.assert_array_equal(md.arange(0, 2 ** 62, 2 ** 61).numpy(), [0, 2 ** 61])


# indices and dims -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("index", [2 ** 63, -2 ** 63 - 1, (0, 2 ** 70), 10 ** 20])
def test_an_int_index_beyond_int64_is_an_index_error(index):
    with pytest.raises(IndexError, match="out of bounds"):
        md.zeros(3, 3)[index]


@pytest.mark.parametrize("shape", [(-2,), (-1, -1), (2, -3)])
def test_reshape_infers_one_dim_only(shape):
    with pytest.raises(ValueError, match="only one dimension can be inferred"):
        md.zeros(0).reshape(*shape)


def test_flatten_and_argmax_of_a_0d_tensor_take_dims_0_and_minus_1_only():
    x = md.tensor(3.0)
    assert x.flatten(0, -1).shape == (1,)
    assert x.argmax(0).item() == 0 and x.argmax(-1).item() == 0
    with pytest.raises(IndexError):
        x.flatten(0, 1)
    for dim in (1, 2 ** 63):
        with pytest.raises(IndexError):
            x.argmax(dim)


def test_permute_rejects_a_dim_out_of_range():
    with pytest.raises(IndexError, match="permute"):
        md.zeros(3).permute(1)
    with pytest.raises(IndexError, match="permute"):
        md.zeros(3, 2).permute(0, 10 ** 20)


# pooling and convolution geometry ---------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["max_pool2d", "avg_pool2d", "conv2d"])
def test_geometry_beyond_int64_is_a_value_error_not_a_kernel_error(op):
    x = md.randn(1, 1, 3, 3)
    with pytest.raises(ValueError, match="overflows a 64-bit integer"):
        if op == "conv2d":
            F.conv2d(x, md.randn(1, 1, 1, 1), stride=10 ** 20)
        else:
            getattr(F, op)(x, 2, stride=10 ** 20)


@pytest.mark.parametrize("op", ["max_pool2d", "conv2d"])
def test_padding_beyond_the_machine_is_refused_before_allocating(op):
    """A huge padding would pad the input (and im2col copy it) whatever the stride."""
    x = md.randn(1, 1, 3, 3)
    with pytest.raises(RuntimeError, match="can't allocate memory"):
        if op == "conv2d":
            F.conv2d(x, md.randn(1, 1, 1, 1), padding=10 ** 5, stride=10 ** 6)
        else:
            F.max_pool2d(x, 2 ** 41 + 1, stride=2 ** 62, padding=2 ** 40, ceil_mode=True)


@pytest.mark.parametrize("impl", IMPLS)
def test_ceil_mode_kernel_overhanging_the_input_by_far_is_pooled_over_the_input(impl):
    """With ceil_mode and a stride past the input, one window may reach far beyond it:
    pooling visits the part inside the input only, not every offset of the kernel."""
    x = md.tensor(np.arange(9.0).reshape(1, 1, 3, 3), requires_grad=True)
    with implementation(layer=impl):
        out, idx = F.max_pool2d(x, 2 ** 40, stride=2 ** 62, ceil_mode=True, return_indices=True)
        avg = F.avg_pool2d(x, 10, stride=100, ceil_mode=True)   # PyTorch: the mean of the 9 elements
        (out.sum() + avg.sum()).backward()
    assert out.item() == 8 and idx.item() == 8 and avg.item() == 4
    np.testing.assert_allclose(x.grad.numpy().ravel(), [1 / 9] * 8 + [1 + 1 / 9])


@pytest.mark.parametrize("impl", IMPLS)
def test_a_dilated_window_over_padding_only_gives_minus_inf_and_no_gradient(impl):
    """Padding 1 and dilation 3 on a 2x2 input: the one window reads rows -1 and 2, both
    outside. PyTorch gives -inf (and an index past the plane, which its backward writes to);
    minidl gives -inf, index -1, and a zero gradient, writing nothing out of bounds."""
    x = md.tensor(np.arange(4.0).reshape(1, 1, 2, 2), requires_grad=True)
    with implementation(layer=impl):
        out, idx = F.max_pool2d(x, 2, stride=1, padding=1, dilation=3, return_indices=True)
        out.sum().backward()
    assert out.item() == -np.inf and idx.item() == -1
    np.testing.assert_array_equal(x.grad.numpy(), 0)


@pytest.mark.parametrize("impl", IMPLS)
def test_a_window_of_minus_inf_points_at_its_first_element_inside(impl):
    x = md.tensor(np.full((1, 1, 3, 3), -np.inf), requires_grad=True)
    with implementation(layer=impl):
        out, idx = F.max_pool2d(x, 2, stride=2, padding=1, return_indices=True)
        out.sum().backward()
    np.testing.assert_array_equal(idx.numpy().ravel(), [0, 1, 3, 4])
    assert x.grad.numpy().sum() == 4


# selections -----------------------------------------------------------------------------------------------

def test_gather_and_index_select_refuse_negative_indices_as_pytorch():
    """PyTorch's gather and index_select do not count from the end (NumPy's take would)."""
    x = md.arange(6.0).reshape(2, 3)
    with pytest.raises(RuntimeError, match="index -1 is out of bounds"):
        md.gather(x, 1, md.tensor([[-1], [0]]))
    with pytest.raises(RuntimeError, match="index -1 is out of bounds"):
        md.index_select(x, 1, md.tensor([-1]))
    np.testing.assert_array_equal(md.gather(x, 1, md.tensor([[2], [0]])).numpy(), [[2], [3]])


def test_split_refuses_negative_sizes():
    with pytest.raises(RuntimeError, match="non-negative entries"):
        md.zeros(3).split([-1, 4])
    with pytest.raises(RuntimeError, match="split_size"):
        md.zeros(0).split(-1)
    assert [t.shape for t in md.zeros(3).split([0, 3])] == [(0,), (3,)]


def test_chunk_of_an_empty_dim_gives_the_chunks_asked_for():
    assert [t.shape for t in md.zeros(2, 0).chunk(3, 1)] == [(2, 0)] * 3   # PyTorch: `chunks` empty pieces
    assert [t.shape for t in md.zeros(5).chunk(3)] == [(2,), (2,), (1,)]
    with pytest.raises(RuntimeError, match="can't allocate"):
        md.zeros(0).chunk(2 ** 60)


@pytest.mark.parametrize("index", [(Ellipsis, Ellipsis), (np.array([False]), Ellipsis, Ellipsis),
                                   (Ellipsis, np.array([0]), Ellipsis), (True, Ellipsis, 0, Ellipsis)])
def test_two_ellipses_are_an_index_error_with_or_without_index_arrays(index):
    x = md.zeros(1, 2)
    with pytest.raises(IndexError, match="single ellipsis"):
        x[index]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[index] = 1.0


def test_an_int_apart_from_an_index_array_is_applied_first_as_in_pytorch():
    x = md.arange(60.0).reshape(3, 4, 5)
    assert tuple(x[0, None, [1, 2]].shape) == (1, 2, 5)          # NumPy: (2, 1, 5)
    assert tuple(x[0, :, [1, 2]].shape) == (4, 2)                # NumPy: (2, 4)
    np.testing.assert_array_equal(x[0, :, [1, 2]].numpy(), x.numpy()[0][:, [1, 2]])
    assert tuple(md.zeros(1, 0)[0, None, md.tensor([], dtype=md.long)].shape) == (1, 0)
