"""stride, narrow, unfold, diagonal, ravel and the smaller tensor functions (count_nonzero,
nan_to_num, isin, broadcast_to, dot, log2, reciprocal, one-argument where): values, views sharing
memory, gradients by gradcheck in float64, PyTorch's errors, and PyTorch's results where installed."""
import numpy as np
import pytest

import minidl as md
from minidl.autograd import gradcheck

X = np.arange(12.0).reshape(3, 4)


def _x64(shape=(3, 4), seed=0):
    return md.tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=True)


def test_stride_in_elements():
    x = md.tensor(X)
    assert x.stride() == (4, 1) and x.stride(0) == 4 and x.stride(-1) == 1
    assert x.t().stride() == (1, 4)
    assert md.ones(3, 1).expand(3, 5).stride() == (1, 0)
    assert md.tensor(2.0).stride() == ()
    with pytest.raises(IndexError):
        x.stride(2)


def test_narrow_is_a_differentiable_view():
    x = md.tensor(X)
    n = x.narrow(1, 1, 2)
    assert n.tolist() == [[1.0, 2.0], [5.0, 6.0], [9.0, 10.0]]
    assert np.shares_memory(n.numpy(), x.numpy())
    assert md.narrow(x, 0, -1, 1).tolist() == [[8.0, 9.0, 10.0, 11.0]]
    assert x.narrow(1, 4, 0).shape == (3, 0)
    assert gradcheck(lambda t: t.narrow(1, 1, 2) * 3, (_x64(),))


def test_narrow_errors_as_pytorch():
    x = md.tensor(X)
    with pytest.raises(RuntimeError, match=r"start \(3\) \+ length \(2\) exceeds dimension size \(4\)"):
        x.narrow(1, 3, 2)
    with pytest.raises(IndexError, match=r"start out of range \(expected to be in range of \[-4, 4\], but got 5\)"):
        x.narrow(1, 5, 0)
    with pytest.raises(RuntimeError, match="length must be non-negative"):
        x.narrow(1, 0, -1)
    with pytest.raises(IndexError):
        x.narrow(2, 0, 1)


def test_unfold_windows_view_and_values():
    x = md.arange(7.0)
    u = x.unfold(0, 3, 2)
    assert u.tolist() == [[0.0, 1.0, 2.0], [2.0, 3.0, 4.0], [4.0, 5.0, 6.0]]
    assert np.shares_memory(u.numpy(), x.numpy())
    m = md.tensor(X).unfold(1, 2, 1)
    assert m.shape == (3, 3, 2) and m[1, 2].tolist() == [6.0, 7.0]
    assert md.tensor(X).unfold(0, 2, 1).shape == (2, 4, 2)
    assert md.tensor(3.0).unfold(0, 1, 1).tolist() == [3.0]
    assert md.tensor(X).unfold(1, 0, 1).shape == (3, 5, 0)


def test_unfold_gradient_adds_overlapping_windows():
    x = md.ones(5, dtype=md.float64, requires_grad=True)
    x.unfold(0, 3, 1).sum().backward()
    assert x.grad.tolist() == [1.0, 2.0, 3.0, 2.0, 1.0]   # how many windows hold each element
    assert gradcheck(lambda t: t.unfold(1, 2, 1) ** 2, (_x64((2, 5, 3)),))
    assert gradcheck(lambda t: t.unfold(-2, 2, 3) * 2, (_x64((2, 6, 3)),))


def test_unfold_errors_as_pytorch():
    x = md.tensor(X)
    with pytest.raises(RuntimeError, match="maximum size for tensor at dimension 1 is 4 but size is 5"):
        x.unfold(1, 5, 1)
    with pytest.raises(RuntimeError, match="step is 0 but must be > 0"):
        x.unfold(1, 2, 0)
    with pytest.raises(IndexError):
        x.unfold(2, 1, 1)


def test_unfold_matches_torch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(1).standard_normal((2, 7, 3))
    for args in ((1, 3, 2), (1, 7, 1), (0, 1, 1), (-1, 2, 1)):
        t = torch.tensor(a, requires_grad=True)
        m = md.tensor(a, requires_grad=True)
        w = np.random.default_rng(2).standard_normal(tuple(t.unfold(*args).shape))
        (t.unfold(*args) * torch.tensor(w)).sum().backward()
        (m.unfold(*args) * md.tensor(w)).sum().backward()
        np.testing.assert_array_equal(m.unfold(*args).detach().numpy(), t.unfold(*args).detach().numpy())
        np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), rtol=1e-12)


def test_diagonal_values_view_and_gradient():
    x = md.tensor(X)
    assert x.diagonal().tolist() == [0.0, 5.0, 10.0]
    assert x.diagonal(1).tolist() == [1.0, 6.0, 11.0] and x.diagonal(-1).tolist() == [4.0, 9.0]
    assert x.diagonal(5).shape == (0,)
    assert np.shares_memory(x.diagonal().numpy(), x.numpy())
    assert md.ones(2, 3, 4).diagonal(1, -1, 0).shape == (3, 1)
    assert gradcheck(lambda t: md.diagonal(t, -1, 0, 2) * 2, (_x64((3, 2, 4)),))
    with pytest.raises(RuntimeError, match="diagonal dimensions cannot be identical 0, 0"):
        x.diagonal(0, 0, 0)


def test_diagonal_matches_torch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(3).standard_normal((3, 4, 5))
    for args in ((0, 0, 1), (2, 2, 0), (-1, 1, 2), (1, -1, -2)):
        np.testing.assert_array_equal(md.tensor(a).diagonal(*args).numpy(), torch.tensor(a).diagonal(*args).numpy())


def test_ravel_count_nonzero_broadcast_to():
    x = md.tensor([[0.0, 1.5], [2.0, 0.0]])
    assert x.ravel().tolist() == [0.0, 1.5, 2.0, 0.0] and md.ravel(x.t()).tolist() == [0.0, 2.0, 1.5, 0.0]
    assert md.count_nonzero(x).item() == 2 and md.count_nonzero(x).dtype is md.int64
    assert x.count_nonzero(dim=0).tolist() == [1, 1] and md.count_nonzero(x, (0, 1)).item() == 2
    b = md.broadcast_to(md.tensor([1.0, 2.0]), (3, 2))
    assert b.tolist() == [[1.0, 2.0]] * 3
    assert gradcheck(lambda t: md.broadcast_to(t, (3, -1, 4)), (_x64((2, 1)),))


def test_nan_to_num_values_and_gradient():
    x = md.tensor([float("nan"), float("inf"), -float("inf"), 1.5], dtype=md.float64, requires_grad=True)
    y = md.nan_to_num(x, nan=0.5, posinf=9.0, neginf=-9.0)
    assert y.tolist() == [0.5, 9.0, -9.0, 1.5]
    assert md.nan_to_num(x).tolist()[1:3] == [np.finfo(np.float64).max, np.finfo(np.float64).min]
    (y * md.tensor([1.0, 2.0, 3.0, 4.0], dtype=md.float64)).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0, 4.0]   # 1 where finite, 0 where replaced
    assert md.tensor([1, 2]).nan_to_num().tolist() == [1, 2]
    assert gradcheck(lambda t: t.nan_to_num(), (_x64(),))


def test_log2_reciprocal():
    assert md.log2(md.tensor([8.0, 0.5])).tolist() == [3.0, -1.0]
    assert md.log2(md.tensor([8])).dtype is md.float32
    assert md.tensor([2, 4]).reciprocal().tolist() == [0.5, 0.25]
    pos = md.tensor(np.random.default_rng(4).uniform(0.5, 2.0, (3, 4)), requires_grad=True)
    assert gradcheck(md.log2, (pos,)) and gradcheck(md.reciprocal, (pos,))


def test_isin():
    assert md.isin(md.tensor([1, 2, 3]), md.tensor([2, 5])).tolist() == [False, True, False]
    assert md.tensor([1.0, 2.0]).isin(2.0).tolist() == [False, True]
    assert md.isin(2, md.tensor([2])).item() is True
    assert md.isin(md.tensor([1, 2]), md.tensor([2]), invert=True).tolist() == [True, False]
    with pytest.raises(TypeError, match="two numbers"):
        md.isin(1, 2)


def test_dot():
    a, b = _x64((4,), 5), _x64((4,), 6)
    assert md.dot(a, b).item() == pytest.approx(float((a.detach().numpy() * b.detach().numpy()).sum()))
    assert md.tensor([1.0, 2.0]).dot(md.tensor([3.0, 4.0])).item() == 11.0
    assert gradcheck(md.dot, (a, b))
    with pytest.raises(RuntimeError, match="1D tensors expected, but got 2D and 1D tensors"):
        md.dot(md.ones(2, 1), md.ones(2))
    with pytest.raises(RuntimeError, match="inconsistent tensor size"):
        md.dot(md.ones(2), md.ones(3))
    with pytest.raises(RuntimeError, match="same dtype"):
        md.dot(md.ones(2), md.ones(2, dtype=md.float64))


def test_where_with_one_argument_is_nonzero_as_tuple():
    rows, cols = md.where(md.tensor([[0, 1], [2, 0]]))
    assert rows.tolist() == [0, 1] and cols.tolist() == [1, 0] and rows.dtype is md.int64
    x = md.tensor([1.0, -2.0])
    assert md.where(x > 0, x, md.zeros(2)).tolist() == [1.0, 0.0]
    with pytest.raises(TypeError, match="both input and other, or neither"):
        md.where(x > 0, x)


def test_small_functions_match_torch():
    torch = pytest.importorskip("torch")
    a = np.array([[0.0, 1.5, -2.0], [np.nan, np.inf, 3.0]])
    np.testing.assert_array_equal(md.nan_to_num(md.tensor(a)).numpy(), torch.nan_to_num(torch.tensor(a)).numpy())
    np.testing.assert_array_equal(md.count_nonzero(md.tensor(a), dim=1).numpy(),
                                  torch.count_nonzero(torch.tensor(a), dim=1).numpy())
    b = np.abs(a[0]) + 1
    np.testing.assert_allclose(md.log2(md.tensor(b)).numpy(), torch.log2(torch.tensor(b)).numpy(), rtol=1e-15)
    np.testing.assert_allclose(md.reciprocal(md.tensor(b)).numpy(), torch.reciprocal(torch.tensor(b)).numpy())
    assert md.tensor(a).stride() == torch.tensor(a).stride()
    assert md.tensor(a).t().stride() == torch.tensor(a).t().stride()


@pytest.mark.parametrize("view", [lambda t: t.unfold(0, 2, 1), lambda t: t.reshape(2, 3).diagonal()],
                         ids=["unfold", "diagonal"])
def test_strided_views_of_a_device_tensor_stay_on_the_device(view):
    from minidl import backends
    try:
        backends.get("cuda")
    except RuntimeError as exc:   # pragma: no cover
        pytest.skip(f"cuda device unavailable: {exc}")
    y = view(md.arange(6.0).cuda())
    assert y.device == "cuda"
    np.testing.assert_array_equal(y.cpu().numpy(), view(md.arange(6.0)).cpu().numpy())


def test_an_integer_in_every_axis_gives_a_zero_dim_view():
    x = md.tensor(np.arange(4.0))
    e = x[1]
    assert e.shape == () and np.shares_memory(e.numpy(), x.numpy())
    e.fill_(9.0)
    x[-1].add_(1.0)
    assert x.tolist() == [0.0, 9.0, 2.0, 4.0]
    m = md.tensor(X.copy())
    m[2, 3].mul_(-1.0)
    assert m[2, 3].item() == -11.0
    z = md.tensor(np.zeros(3))
    for element in z:                           # iteration yields views, as PyTorch's unbind does
        element.add_(1.0)
    assert z.tolist() == [1.0, 1.0, 1.0]


def test_writing_a_zero_dim_view_flows_into_the_base_gradient():
    a = md.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = a * 2
    b[1].mul_(5)
    b.sum().backward()
    assert a.grad.tolist() == [2.0, 10.0, 2.0]
