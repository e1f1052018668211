"""index_add, index_fill, scatter, scatter_add: out of place, in place, their gradients,
and the checks of their indices (all made before anything is written)."""
import numpy as np
import pytest

import minidl as md
from minidl.autograd import gradcheck
from minidl.ops.scatter import IndexOutOfRange


def f64(*shape, seed=0, requires_grad=True):
    a = np.random.default_rng(seed).standard_normal(shape)
    return md.tensor(a, requires_grad=requires_grad)


def idx(*values):
    return md.tensor(np.array(values, dtype=np.int64))


# values ----------------------------------------------------------------------------------

def test_index_add_adds_alpha_times_source_rows_and_repeated_indices_accumulate():
    x = md.zeros(3, 2)
    out = x.index_add(0, idx(2, 2, 0), md.tensor([[1.0, 2.0], [10.0, 20.0], [5.0, 5.0]]), alpha=2)
    np.testing.assert_allclose(out.numpy(), [[10, 10], [0, 0], [22, 44]])
    np.testing.assert_allclose(x.numpy(), 0)                      # out of place: x untouched


def test_index_fill_fills_whole_slices_and_counts_negative_indices_from_the_end():
    out = md.zeros(2, 4).index_fill(1, idx(-1, 0), 7.0)
    np.testing.assert_allclose(out.numpy(), [[7, 0, 0, 7], [7, 0, 0, 7]])


def test_scatter_writes_src_at_index_along_dim():
    out = md.zeros(3, 4).scatter(0, idx([0, 1, 2, 0]), md.tensor([[1.0, 2.0, 3.0, 4.0]]))
    np.testing.assert_allclose(out.numpy(), [[1, 0, 0, 4], [0, 2, 0, 0], [0, 0, 3, 0]])


def test_scatter_of_a_number_and_with_reduce():
    out = md.ones(2, 3).scatter(1, idx([2], [0]), value=5.0)
    np.testing.assert_allclose(out.numpy(), [[1, 1, 5], [5, 1, 1]])
    added = md.ones(2, 3).scatter(1, idx([2, 2], [0, 1]), md.tensor([[1.0, 2.0], [3.0, 4.0]]), reduce="add")
    np.testing.assert_allclose(added.numpy(), [[1, 1, 4], [4, 5, 1]])
    multiplied = md.ones(2, 3).scatter(1, idx([2, 2], [0, 1]), 3.0, reduce="multiply")
    np.testing.assert_allclose(multiplied.numpy(), [[1, 1, 9], [3, 3, 1]])


def test_scatter_add_accumulates_and_reads_only_the_leading_block_of_a_larger_src():
    src = md.tensor([[1.0, 2.0, 99.0], [3.0, 4.0, 99.0]])
    out = md.zeros(2, 3).scatter_add(1, idx([0, 0], [2, 1]), src)
    np.testing.assert_allclose(out.numpy(), [[3, 0, 0], [0, 4, 3]])


def test_module_level_functions_match_the_methods():
    x, i, s = md.zeros(2, 2), idx([1, 0]), md.tensor([[1.0, 2.0]])
    np.testing.assert_allclose(md.scatter(x, 1, i, s).numpy(), x.scatter(1, i, s).numpy())
    np.testing.assert_allclose(md.scatter_add(x, 1, i, s).numpy(), x.scatter_add(1, i, s).numpy())
    np.testing.assert_allclose(md.index_add(x, 0, idx(1), s).numpy(), x.index_add(0, idx(1), s).numpy())
    np.testing.assert_allclose(md.index_fill(x, 0, idx(1), 3.0).numpy(), x.index_fill(0, idx(1), 3.0).numpy())


def test_a_0d_tensor_is_a_one_element_vector():
    assert md.tensor(1.0).index_add(0, idx(0), md.tensor(2.0)).item() == 3.0
    assert md.tensor(1.0).scatter(0, md.tensor(0), md.tensor(5.0)).item() == 5.0
    assert md.tensor(1.0).index_fill(0, md.tensor(0), 4.0).shape == ()


def test_a_number_is_cast_to_the_dtype_of_the_tensor():
    out = md.zeros(3, dtype=md.int64).scatter(0, idx(0), 1.5)
    assert out.dtype == md.int64 and out.tolist() == [1, 0, 0]


def test_an_empty_index_writes_nothing():
    x = md.ones(2, 3)
    np.testing.assert_allclose(x.scatter(0, md.zeros(0, 3, dtype=md.int64), 5.0).numpy(), 1)
    np.testing.assert_allclose(x.index_add(0, md.zeros(0, dtype=md.int64), md.zeros(0, 3)).numpy(), 1)


# in place ----------------------------------------------------------------------------------

def test_the_in_place_forms_write_into_the_tensor_and_its_views_and_bump_the_version():
    x = md.zeros(2, 3)
    row = x[1]
    assert x.index_add_(0, idx(1), md.ones(1, 3)) is x
    x.scatter_(1, idx([0], [2]), 5.0)
    x.scatter_add_(1, idx([1], [1]), md.tensor([[2.0], [2.0]]))
    x.index_fill_(1, idx(0), -1.0)
    np.testing.assert_allclose(x.numpy(), [[-1, 2, 0], [-1, 3, 5]])
    np.testing.assert_allclose(row.numpy(), [-1, 3, 5])
    assert x._version == 4


def test_a_leaf_that_requires_grad_is_not_scattered_into():
    w = md.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        w.scatter_(0, idx(0), 1.0)


def test_in_place_scatter_is_differentiable_for_the_tensor_and_src():
    x = f64(3, 4)
    src = f64(1, 4, seed=1)

    def f(x, src):
        y = x * 1
        y.scatter_(0, idx([0, 1, 2, 0]), src)
        y.index_add_(1, idx(3, 3), src.reshape(4, 1)[:3].expand(3, 2) * 1)
        return y
    assert gradcheck(f, (x, src))


# gradients ---------------------------------------------------------------------------------

@pytest.mark.parametrize("case", [
    lambda x, s: x.index_add(0, idx(2, 0, 2), s[:3, :3], alpha=-1.5),
    lambda x, s: x.index_fill(1, idx(0, -1, 0), 2.0),
    lambda x, s: x.index_fill(1, idx(1, 1), s[0, 0]),
    lambda x, s: x.scatter(1, idx([2, 0], [1, 0], [0, 2]), s),
    lambda x, s: x.scatter_add(0, idx([0, 0, 2], [1, 0, 0]), s[:2]),
    lambda x, s: x.scatter_add(1, idx([2, 2], [0, 1], [0, 0]), s),
], ids=["index_add", "index_fill number", "index_fill tensor", "scatter (src larger than index)", "scatter_add dim 0",
        "scatter_add dim 1"])
def test_gradients_pass_gradcheck(case):
    assert gradcheck(case, (f64(3, 3), f64(4, 3, seed=1)))


def test_scatter_with_reduce_has_no_derivative_as_in_pytorch():
    y = f64(2, 3).scatter(1, idx([0], [1]), 2.0, reduce="add")
    with pytest.raises(RuntimeError, match="derivative of scatter with reduce"):
        y.sum().backward()


def test_backward_reads_its_own_copy_of_the_index():
    x, src = f64(3, 2), f64(2, 2, seed=1)
    index = idx(2, 0)
    y = x.index_add(0, index, src)
    index._data[...] = 1          # the caller reuses its index array
    y.backward(md.tensor(np.arange(6.0).reshape(3, 2)))
    np.testing.assert_allclose(src.grad.numpy(), [[4, 5], [0, 1]])


def test_scatter_add_backward_reads_its_own_copy_of_the_index():
    x, src = f64(2, 3), f64(1, 3, seed=1)
    index = idx([2, 0, 1])
    y = x.scatter_add(1, index, src)
    index._data[...] = 0
    y.backward(md.tensor(np.arange(6.0).reshape(2, 3)))
    np.testing.assert_allclose(src.grad.numpy(), [[2, 0, 1]])


# index checks --------------------------------------------------------------------------------

@pytest.mark.parametrize("call, message", [
    (lambda x: x.index_add(0, idx(-1, 0), md.ones(2, 4)), "index -1 is out of bounds for dimension 0 with size 3"),
    (lambda x: x.index_add(1, idx(4), md.ones(3, 1)), "index 4 is out of bounds for dimension 1 with size 4"),
    (lambda x: x.index_fill(1, idx(-5), 1.0), "index -5 is out of bounds for dimension 1 with size 4"),
    (lambda x: x.scatter(0, idx([3, 0, 0, 0]), 1.0), "index 3 is out of bounds for dimension 0 with size 3"),
    (lambda x: x.scatter_(1, idx([0, -1]), md.ones(1, 2)), "index -1 is out of bounds for dimension 1 with size 4"),
    (lambda x: x.scatter_add_(0, idx([0, 9]), md.ones(1, 2)), "index 9 is out of bounds for dimension 0 with size 3"),
    (lambda x: x.index_fill_(0, idx(0, 3), 1.0), "index 3 is out of bounds for dimension 0 with size 3"),
])
def test_an_index_out_of_range_is_an_index_error_naming_it_and_nothing_is_written(call, message):
    x = md.zeros(3, 4)
    with pytest.raises(IndexError, match=message) as info:
        call(x)
    assert isinstance(info.value, RuntimeError)       # what PyTorch raises for index_add and scatter
    assert isinstance(info.value, IndexOutOfRange)
    np.testing.assert_allclose(x.numpy(), 0)
    assert x._version == 0


@pytest.mark.parametrize("call, error, message", [
    (lambda x: x.index_add(0, md.tensor([0.0]), md.ones(1, 4)), RuntimeError, "Expected dtype int32/int64 for index"),
    (lambda x: x.index_add(0, idx([0]), md.ones(1, 4)), IndexError, "index is supposed to be a vector"),
    (lambda x: x.index_add(0, idx(0, 1), md.ones(1, 4)), RuntimeError, r"Number of indices \(2\) should be equal"),
    (lambda x: x.index_add(0, idx(0), md.ones(1, 3)), RuntimeError, "source tensor shape must match"),
    (lambda x: x.index_add(0, idx(0), md.ones(1, 4, dtype=md.float64)), RuntimeError, "dtypes differ"),
    (lambda x: x.index_add(2, idx(0), md.ones(1, 4)), IndexError, "dimension 2 is out of range"),
    (lambda x: x.index_fill(0, idx([0]), 1.0), RuntimeError, "Index has to be a vector/scalar"),
    (lambda x: x.index_fill(0, idx(0), md.ones(1)), RuntimeError, "only supports a 0-dimensional value tensor"),
    (lambda x: x.scatter(0, idx(0), 1.0), RuntimeError, "same number of dimensions"),
    (lambda x: x.scatter(1, md.zeros(4, 4, dtype=md.int64), md.ones(4, 4)), RuntimeError, "no larger than self"),
    (lambda x: x.scatter(0, md.zeros(2, 4, dtype=md.int64), md.ones(1, 4)), RuntimeError, "no larger size than src"),
    (lambda x: x.scatter(0, idx([0]), md.ones(1, 1), reduce="sum"), RuntimeError, "either add or multiply"),
    (lambda x: x.scatter(0, idx([0]), md.ones(1, 1, dtype=md.float64)), RuntimeError, "dtypes differ"),
    (lambda x: x.scatter(0, idx([0])), TypeError, "exactly one of src"),
])
def test_malformed_arguments_are_refused_before_anything_is_written(call, error, message):
    x = md.zeros(3, 4)
    with pytest.raises(error, match=message):
        call(x)
    np.testing.assert_allclose(x.numpy(), 0)


# PyTorch as the oracle -------------------------------------------------------------------------

ORACLE_CASES = {
    "index_add": lambda lib, x, s: x.index_add(1, lib.tensor([2, 0, 2]), s[:, :3], alpha=0.5),
    "index_fill": lambda lib, x, s: x.index_fill(0, lib.tensor([2, 1, 1]), s[0, 0]),
    "scatter": lambda lib, x, s: x.scatter(1, lib.tensor([[3, 0], [1, 1], [0, 2]]), s[:, :2]),
    "scatter value": lambda lib, x, s: x.scatter(0, lib.tensor([[2, 0, 1, 0]]), value=-2.0) * s[0, 0],
    "scatter_add": lambda lib, x, s: x.scatter_add(0, lib.tensor([[0, 0, 2, 1], [2, 2, 2, 0]]), s[:2]),
    "in-place chain": lambda lib, x, s: (x * 1).index_add_(0, lib.tensor([1]), s[:1]).scatter_add_(
        1, lib.tensor([[0], [0], [3]]), s[:, :1]).index_fill_(1, lib.tensor([2]), 3.0).scatter_(
        0, lib.tensor([[2, 2, 2, 2]]), s[2:3]),
}


@pytest.mark.parametrize("name", list(ORACLE_CASES))
def test_values_and_gradients_match_pytorch(name):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x0, s0, w = rng.standard_normal((3, 4)), rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    results = []
    for lib in (md, torch):
        x, s = lib.tensor(x0, requires_grad=True), lib.tensor(s0, requires_grad=True)
        y = ORACLE_CASES[name](lib, x, s)
        (y * lib.tensor(w)).sum().backward()
        results.append([y.detach().numpy(), x.grad.numpy(), None if s.grad is None else s.grad.numpy()])
    for a, b in zip(*results):
        if b is None:
            assert a is None or not np.any(a)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("call", [
    lambda lib, x: x.index_add(0, lib.tensor([-1]), lib.ones(1, 4)),
    lambda lib, x: x.index_add(0, lib.tensor([3]), lib.ones(1, 4)),
    lambda lib, x: x.index_fill(1, lib.tensor([4]), 1.0),
    lambda lib, x: x.scatter(0, lib.tensor([[-1, 0]]), 1.0),
    lambda lib, x: x.scatter_add(1, lib.tensor([[4]]), lib.ones(1, 1)),
])
def test_the_indices_pytorch_refuses_are_refused(call):
    torch = pytest.importorskip("torch")
    with pytest.raises((RuntimeError, IndexError)):
        call(torch, torch.zeros(3, 4))
    with pytest.raises(IndexError):
        call(md, md.zeros(3, 4))


def test_negative_indices_of_index_fill_match_pytorch():
    torch = pytest.importorskip("torch")
    ours = md.zeros(2, 4).index_fill(1, md.tensor([-1, -4]), 1.0).numpy()
    theirs = torch.zeros(2, 4).index_fill(1, torch.tensor([-1, -4]), 1.0).numpy()
    np.testing.assert_array_equal(ours, theirs)
