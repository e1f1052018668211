"""nn.init.orthogonal_, eye_ and dirac_: orthogonal_ is PyTorch's construction (QR of a normal
draw from minidl's generator, signs fixed by R's diagonal) checked on the same draw, its
(semi-)orthogonality and gain; eye_ and dirac_ against PyTorch; bad input."""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn


@pytest.mark.parametrize("shape", [(4, 4), (3, 7), (7, 3), (6, 2, 2), (2, 3, 3, 3)])
def test_orthogonal_is_torchs_construction_on_the_same_draw(shape):
    torch = pytest.importorskip("torch")
    md.manual_seed(5)
    w = nn.init.orthogonal_(md.zeros(*shape), gain=1.5)
    rows, cols = shape[0], int(np.prod(shape[1:]))
    draw = np.random.default_rng(5).normal(0.0, 1.0, (rows, cols))   # what orthogonal_ drew after manual_seed(5)
    flat = torch.tensor(draw.T if rows < cols else draw)
    q, r = torch.linalg.qr(flat)
    q = q * torch.diag(r, 0).sign()
    expected = 1.5 * (q.T if rows < cols else q)
    np.testing.assert_allclose(w.numpy(), expected.numpy().reshape(shape).astype(np.float32), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [(5, 5), (3, 8), (8, 3), (4, 2, 3)])
def test_orthogonal_rows_or_columns_are_orthonormal_times_gain(shape):
    w = nn.init.orthogonal_(md.zeros(*shape, dtype=md.float64), gain=2.0).numpy().reshape(shape[0], -1)
    small = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
    np.testing.assert_allclose(small, 4.0 * np.eye(small.shape[0]), atol=1e-12)


def test_orthogonal_is_reproducible_and_returns_the_tensor():
    md.manual_seed(1)
    a = md.zeros(3, 3)
    assert nn.init.orthogonal_(a) is a
    md.manual_seed(1)
    assert np.array_equal(nn.init.orthogonal_(md.zeros(3, 3)).numpy(), a.numpy())
    assert nn.init.orthogonal_(md.zeros(0, 3)).shape == (0, 3)   # nothing to fill


def test_orthogonal_of_a_parameter_in_grad_mode():
    p = nn.Parameter(np.zeros((4, 4), np.float32))
    nn.init.orthogonal_(p)
    np.testing.assert_allclose(p.detach().numpy() @ p.detach().numpy().T, np.eye(4), atol=1e-6)


@pytest.mark.parametrize("shape", [(3, 3), (2, 5), (5, 2)])
def test_eye_matches_torch(shape):
    torch = pytest.importorskip("torch")
    w = md.full(shape, 7.0)
    assert nn.init.eye_(w) is w
    assert np.array_equal(w.numpy(), torch.nn.init.eye_(torch.full(shape, 7.0)).numpy())


@pytest.mark.parametrize("shape,groups", [((4, 3, 3), 1), ((2, 4, 5), 1), ((4, 2, 3, 3), 2), ((6, 3, 2, 4, 3), 3)])
def test_dirac_matches_torch(shape, groups):
    torch = pytest.importorskip("torch")
    w = md.full(shape, 7.0)
    nn.init.dirac_(w, groups)
    assert np.array_equal(w.numpy(), torch.nn.init.dirac_(torch.full(shape, 7.0), groups).numpy())


def test_dirac_keeps_the_input_of_a_convolution():
    conv = nn.Conv2d(3, 3, 3, padding=1, bias=False)
    nn.init.dirac_(conv.weight)
    x = md.randn(2, 3, 5, 5)
    np.testing.assert_allclose(conv(x).detach().numpy(), x.detach().numpy(), atol=1e-6)


@pytest.mark.parametrize("call,exc,match", [
    (lambda: nn.init.orthogonal_(md.zeros(3)), ValueError, r"Only tensors with 2 or more dimensions .*got shape \[3\]"),
    (lambda: nn.init.orthogonal_(md.tensor([[1, 2]])), NotImplementedError, "orthogonal_.*int64"),
    (lambda: nn.init.eye_(md.zeros(2, 2, 2)), ValueError, r"Only tensors with 2 dimensions .*got shape \[2, 2, 2\]"),
    (lambda: nn.init.dirac_(md.zeros(3, 3)), ValueError, "Only tensors with 3, 4, or 5 dimensions"),
    (lambda: nn.init.dirac_(md.zeros(3, 3, 3), groups=2), ValueError, "dim 0 must be divisible by groups"),
])
def test_bad_input_raises_naming_expected_and_got(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
