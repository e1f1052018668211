"""Selections that return (values, indices): max/min(dim), sort, topk, kthvalue, median(dim),
mode(dim); the gradient reaches exactly the selected elements."""
import numpy as np
import pytest

import minidl as md
from minidl.autograd import gradcheck


def distinct(*shape, seed=0):
    """Values without ties, so every selection has one right answer."""
    n = int(np.prod(shape))
    return np.random.default_rng(seed).permutation(n).reshape(shape).astype(np.float64) / n - 0.5


def test_max_with_dim_unpacks_into_values_and_indices_even_for_two_rows():
    x = md.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])   # dim 0 has size 2: unpacking must not split rows
    values, indices = x.max(dim=1)
    np.testing.assert_allclose(values.numpy(), [5, 7])
    np.testing.assert_array_equal(indices.numpy(), [1, 0])
    assert indices.dtype == md.int64
    out = x.min(0)
    assert out.values is out[0] and out.indices is out[1]
    np.testing.assert_array_equal(out.indices.numpy(), [0, 1, 0])


def test_max_without_dim_is_a_tensor():
    x = md.tensor([[1.0, 5.0], [7.0, 0.0]])
    assert isinstance(x.max(), md.Tensor) and x.max().item() == 7.0 and x.min().item() == 0.0


def test_keepdim_keeps_the_reduced_axis():
    x = md.tensor(distinct(2, 3, 4))
    for op in (lambda t: t.max(1, keepdim=True), lambda t: t.kthvalue(2, 1, keepdim=True),
               lambda t: t.median(1, keepdim=True), lambda t: t.mode(1, keepdim=True)):
        v, i = op(x)
        assert v.shape == (2, 1, 4) and i.shape == (2, 1, 4)


def test_gradient_goes_only_to_the_selected_element():
    x = md.tensor([[1.0, 3.0, 3.0]], requires_grad=True)
    x.max(dim=1).values.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0, 1, 0]])   # ties: the returned index only


def test_sort_is_stable_in_both_directions():
    x = md.tensor([1.0, 2.0, 2.0, 1.0])
    v, i = x.sort()
    np.testing.assert_array_equal(i.numpy(), [0, 3, 1, 2])
    v, i = x.sort(descending=True)
    np.testing.assert_array_equal(i.numpy(), [1, 2, 0, 3])
    np.testing.assert_allclose(v.numpy(), [2, 2, 1, 1])


def test_topk_and_kthvalue_check_k():
    x = md.ones(3)
    with pytest.raises(RuntimeError, match="k out of range"):
        x.topk(4)
    with pytest.raises(RuntimeError, match="k out of range"):
        x.kthvalue(0)


def test_mode_takes_the_smallest_most_frequent_value_and_its_last_index():
    v, i = md.tensor([[3.0, 1.0, 3.0, 1.0, 2.0], [5.0, 5.0, 4.0, 4.0, 4.0]]).mode(1)
    np.testing.assert_allclose(v.numpy(), [1, 4])
    np.testing.assert_array_equal(i.numpy(), [3, 4])


def test_median_is_the_lower_median():
    v, i = md.tensor([[4.0, 1.0, 3.0, 2.0]]).median(1)
    assert v.item() == 2.0 and i.item() == 3
    x = md.tensor([3.0, 1.0, 3.0, 2.0], requires_grad=True)
    m = x.median()
    m.backward()
    assert m.item() == 2.0
    np.testing.assert_allclose(x.grad.numpy(), [0, 0, 0, 1])


def test_dims_are_checked():
    with pytest.raises(IndexError, match="out of range"):
        md.ones(2, 3).sort(dim=2)
    with pytest.raises(IndexError, match="non-zero size"):
        md.ones(0, 3).max(dim=0)
    with pytest.raises(TypeError, match="amax"):
        md.ones(2, 3).max(dim=(0, 1))
    assert md.ones(0, 3).max(dim=1).values.shape == (0,)


def test_zero_dim_tensors():
    v, i = md.tensor(3.0).max(0)
    assert v.shape == () and i.item() == 0
    assert md.tensor(3.0).sort().values.item() == 3.0


@pytest.mark.parametrize("op", [
    lambda t: t.max(1).values, lambda t: t.min(-1).values, lambda t: t.sort(1).values,
    lambda t: t.sort(0, descending=True).values, lambda t: t.topk(2, dim=1).values,
    lambda t: t.topk(2, dim=0, largest=False).values, lambda t: t.kthvalue(2, 1).values,
    lambda t: t.median(1).values, lambda t: t.median(), lambda t: t.amax(1),
])
def test_selections_pass_gradcheck(op):
    x = md.tensor(distinct(3, 4), requires_grad=True)
    assert gradcheck(op, (x,))


@pytest.mark.parametrize("name, call", [
    ("max", lambda t, lib: t.max(1)), ("min", lambda t, lib: t.min(0, keepdim=True)),
    ("sort", lambda t, lib: t.sort(1, descending=True)), ("topk", lambda t, lib: t.topk(3, dim=1)),
    ("topk smallest", lambda t, lib: t.topk(2, dim=0, largest=False)), ("kthvalue", lambda t, lib: t.kthvalue(2, 0)),
    ("median", lambda t, lib: t.median(1)), ("mode", lambda t, lib: t.mode(1)),
])
def test_selections_agree_with_pytorch(name, call):
    torch = pytest.importorskip("torch")
    a = distinct(3, 5, seed=4)
    if name == "mode":
        a = np.array([[1.0, 2.0, 2.0, 3.0, 3.0], [4.0, 4.0, 4.0, 1.0, 1.0], [0.5, 0.5, 0.7, 0.7, 0.7]])
    x, tx = md.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    out, tout = call(x, md), call(tx, torch)
    assert type(out).__name__ == type(tout).__name__.split(".")[-1]
    np.testing.assert_allclose(out.values.detach().numpy(), tout.values.detach().numpy())
    np.testing.assert_array_equal(out.indices.numpy(), tout.indices.numpy())
    g = np.random.default_rng(5).standard_normal(tuple(tout.values.shape))
    out.values.backward(md.tensor(g))
    tout.values.backward(torch.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
