"""minidl.linalg's norms (torch.linalg.vector_norm, matrix_norm, norm): values against explicit
numbers and PyTorch, gradients by gradcheck in float64, and PyTorch's errors."""
import math

import numpy as np
import pytest

import minidl as md
import minidl.linalg
from minidl.autograd import gradcheck

A = np.array([[3.0, -4.0, 0.5], [0.0, 1.0, -2.0]])


def test_module_is_importable_both_ways():
    assert md.linalg is minidl.linalg
    assert md.linalg.vector_norm is minidl.linalg.vector_norm


@pytest.mark.parametrize("ord, expected", [
    (2, math.sqrt(9 + 16 + 0.25 + 1 + 4)), (1, 10.5), (math.inf, 4.0), (-math.inf, 0.0), (0, 5.0),
    (3, (27 + 64 + 0.125 + 1 + 8) ** (1 / 3))])
def test_vector_norm_values(ord, expected):
    out = md.linalg.vector_norm(md.tensor(A), ord)
    assert out.shape == () and out.item() == pytest.approx(expected, rel=1e-6)


def test_vector_norm_dims_keepdim_and_dtype():
    x = md.tensor(A)
    np.testing.assert_allclose(md.linalg.vector_norm(x, dim=1).numpy(), np.sqrt((A ** 2).sum(1)), rtol=1e-6)
    assert md.linalg.vector_norm(x, dim=(0, 1), keepdim=True).shape == (1, 1)
    assert md.linalg.vector_norm(x, dtype=md.float64).dtype is md.float64


def test_vector_norm_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4, 5))
    for ord in (2, 1, 0.5, 3.5, math.inf, -math.inf, 0, -1.5):
        for dim in (None, 1, (0, 2)):
            want = torch.linalg.vector_norm(torch.tensor(a), ord, dim, keepdim=True).numpy()
            got = md.linalg.vector_norm(md.tensor(a), ord, dim, keepdim=True).numpy()
            np.testing.assert_allclose(got, want, rtol=1e-10, err_msg=f"ord={ord} dim={dim}")


@pytest.mark.parametrize("ord", [2, 1, 3.0, math.inf, -math.inf, -2.0])
def test_vector_norm_gradcheck(ord):
    x = md.tensor(np.random.default_rng(1).standard_normal((3, 4)) + 0.1, requires_grad=True)
    assert gradcheck(lambda t: md.linalg.vector_norm(t, ord, dim=1), (x,))


def test_vector_norm_zero_subgradient_at_zero():
    x = md.zeros(3, dtype=md.float64, requires_grad=True)
    md.linalg.vector_norm(x).backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]


def test_md_norm_and_tensor_norm_share_the_dispatch():
    x = md.tensor(A)
    assert md.norm(x).item() == pytest.approx(md.linalg.vector_norm(x).item())
    assert x.norm(p=math.inf, dim=0).tolist() == md.linalg.vector_norm(x, math.inf, dim=0).tolist() == [3.0, 4.0, 2.0]
    assert md.norm(x, "inf").item() == 4.0


def test_vector_norm_errors():
    with pytest.raises(RuntimeError, match="Expected a floating point or complex tensor as input. Got .*int64"):
        md.linalg.vector_norm(md.arange(3))
    with pytest.raises(TypeError, match="'ord' must be a number, got str"):
        md.linalg.vector_norm(md.ones(3), "fro")


@pytest.mark.parametrize("ord, expected", [
    ("fro", math.sqrt(9 + 16 + 0.25 + 1 + 4)), (1, 5.0), (-1, 2.5), (math.inf, 7.5), (-math.inf, 3.0)])
def test_matrix_norm_values(ord, expected):
    assert md.linalg.matrix_norm(md.tensor(A), ord).item() == pytest.approx(expected, rel=1e-6)


def test_matrix_norm_matches_torch_on_batches():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(2).standard_normal((2, 3, 4))
    for ord in ("fro", 1, -1, math.inf, -math.inf, "nuc", 2, -2):
        for dim, keepdim in (((-2, -1), False), ((2, 0), True), ((0, 1), False), ((2, 1), True)):
            want = torch.linalg.matrix_norm(torch.tensor(a), ord, dim, keepdim).numpy()
            got = md.linalg.matrix_norm(md.tensor(a), ord, dim, keepdim).numpy()
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-10, err_msg=f"ord={ord} dim={dim}")


def test_singular_value_norms_match_numpy():
    a = np.random.default_rng(4).standard_normal((2, 3, 4))
    for ord in ("nuc", 2, -2):
        want = np.linalg.norm(a, ord, axis=(2, 0))
        np.testing.assert_allclose(md.linalg.matrix_norm(md.tensor(a), ord, (2, 0)).numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(md.tensor(a).norm(p="nuc").numpy(), np.linalg.norm(a, "nuc", axis=(1, 2)),
                               rtol=1e-12)


@pytest.mark.parametrize("ord", ["fro", 1, -1, math.inf, -math.inf, "nuc", 2, -2])
def test_matrix_norm_gradcheck(ord):
    a = md.tensor(np.random.default_rng(3).standard_normal((2, 3, 4)), requires_grad=True)
    assert gradcheck(lambda t: md.linalg.matrix_norm(t, ord), (a,))


def test_matrix_norm_errors():
    with pytest.raises(RuntimeError, match="must have at least 2 dimensions"):
        md.linalg.matrix_norm(md.ones(3))
    with pytest.raises(RuntimeError, match="Order 3 not supported"):
        md.linalg.matrix_norm(md.ones(2, 3), ord=3)
    with pytest.raises(RuntimeError, match="Order nucl not supported"):
        md.linalg.matrix_norm(md.ones(2, 3), ord="nucl")


def test_norm_dispatch_matches_torch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(4).standard_normal((3, 4))
    cases = [dict(), dict(keepdim=True), dict(ord=1), dict(ord=math.inf), dict(dim=1), dict(dim=(0, 1), ord=-1),
             dict(ord=3, dim=0, keepdim=True), dict(dim=(1, 0))]
    for kw in cases:
        want = torch.linalg.norm(torch.tensor(a), **kw).numpy()
        got = md.linalg.norm(md.tensor(a), **kw).numpy()
        assert got.shape == want.shape, kw
        np.testing.assert_allclose(got, want, rtol=1e-10, err_msg=str(kw))
    v = np.random.default_rng(5).standard_normal((2, 3, 4))
    np.testing.assert_allclose(md.linalg.norm(md.tensor(v)).numpy(), torch.linalg.norm(torch.tensor(v)).numpy())


def test_norm_dispatch_rules():
    x = md.tensor(A)
    assert md.linalg.norm(x).item() == pytest.approx(math.sqrt(30.25))          # all elements, 2-norm
    assert md.linalg.norm(x, 1).item() == 5.0                                    # 2-D: the matrix 1-norm
    assert md.linalg.norm(x[0], 1).item() == 7.5                                 # 1-D: the vector 1-norm
    with pytest.raises(RuntimeError, match="the input must be 1D or 2D. Got 3D"):
        md.linalg.norm(md.ones(2, 3, 4), ord=2)
    with pytest.raises(RuntimeError, match="must be of length 1 or 2. Got \\[0, 1, 1\\]"):
        md.linalg.norm(x, dim=(0, 1, 1))
