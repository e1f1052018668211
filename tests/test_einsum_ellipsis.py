"""md.einsum with an ellipsis ("...ij,...jk->...ik"): the dimensions an operand has beyond its
letters line up from the right and broadcast, the implicit output puts them first, and an explicit
output without "..." sums them, as PyTorch's einsum; gradients flow back through the broadcast
(size-1) dimensions summed."""
import numpy as np
import pytest

import minidl as md
from minidl.autograd import gradcheck, gradgradcheck

CASES = [
    ("...ij,...jk->...ik", [(3, 1, 2, 4), (5, 4, 6)]),    # batched matmul, batch dims broadcast
    ("...ij,...jk", [(3, 1, 2, 4), (5, 4, 6)]),           # the same, implicit output
    ("b...j->b", [(3, 1, 2, 4)]),                         # the ellipsis summed away
    ("i...->...", [(2, 3, 4)]),
    ("...d,...d->...", [(2, 1, 5), (3, 5)]),              # a batched dot product
    ("...ij->...ji", [(2, 3, 4)]),
    ("...i", [(2, 3)]),                                   # implicit: ellipsis first, then i
    ("ij...->", [(2, 3)]),                                # an empty ellipsis
    ("ij,ij->ij", [(1, 3), (2, 3)]),                      # a size-1 letter broadcasts too
]


def _arrays(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in shapes]


def _reference(eq, arrays):
    """NumPy's einsum with the broadcast operands expanded first (NumPy broadcasts an ellipsis, and
    a size-1 letter only in some of its paths), and the implicit output written out."""
    if "->" not in eq:
        letters = eq.replace("...", "").replace(",", "")
        eq = eq + "->" + ("..." if "..." in eq else "") + "".join(
            sorted(c for c in set(letters) if letters.count(c) == 1))
    lhs, out = eq.split("->")
    if "..." in lhs and "..." not in out:        # PyTorch sums the ellipsis dimensions away
        kept = np.einsum(lhs + "->..." + out, *arrays)
        return kept.sum(axis=tuple(range(kept.ndim - len(out))))
    return np.einsum(eq, *arrays)


@pytest.mark.parametrize("eq, shapes", CASES[:-1])
def test_values_match_numpy(eq, shapes):
    arrays = _arrays(shapes)
    got = md.einsum(eq, *[md.tensor(a) for a in arrays]).numpy()
    np.testing.assert_allclose(got, _reference(eq, arrays), rtol=1e-12, atol=1e-12)


def test_shapes_of_the_ellipsis_outputs():
    a, b = md.zeros(3, 1, 2, 4), md.zeros(5, 4, 6)
    assert md.einsum("...ij,...jk->...ik", a, b).shape == (3, 5, 2, 6)
    assert md.einsum("...ij,...jk", a, b).shape == (3, 5, 2, 6)
    assert md.einsum("b...j->b", a).shape == (3,)
    assert md.einsum("...i", md.zeros(2, 3)).shape == (2, 3)
    assert md.einsum("ij...->", md.zeros(2, 3)).shape == ()
    assert md.einsum("...,...->...", md.zeros(3), md.zeros(2, 1)).shape == (2, 3)


@pytest.mark.parametrize("eq, shapes", CASES)
def test_gradients_pass_finite_differences(eq, shapes):
    inputs = tuple(md.tensor(a, requires_grad=True) for a in _arrays(shapes, seed=1))
    assert gradcheck(lambda *x: md.einsum(eq, *x), inputs)


def test_broadcast_dimension_gradient_is_summed_and_twice_differentiable():
    x = md.tensor(_arrays([(1, 3)])[0], requires_grad=True)
    y = md.tensor(_arrays([(2, 3)], seed=2)[0], requires_grad=True)
    md.einsum("...j,...j->...", x, y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), y.detach().numpy().sum(0, keepdims=True))
    assert gradgradcheck(lambda a, b: md.einsum("...j,...j->...", a, b) ** 2, (x, y))


@pytest.mark.parametrize("eq, shapes, message", [
    ("...ijk->", [(2, 3)], r"the number of subscripts in the equation \(3\) is more than the number of dimensions"),
    ("i...j...->", [(2, 3)], "found '.' for operand 0 for which an ellipsis was already found"),
    ("i..j->", [(2, 3)], "found '.' for operand 0 that is not part of any ellipsis"),
    ("ij->", [(2, 3, 4)], r"the number of subscripts in the equation \(2\) does not match the number of dimensions"),
])
def test_bad_ellipses_are_refused_as_pytorch_refuses_them(eq, shapes, message):
    with pytest.raises(RuntimeError, match="einsum\\(\\): " + message):
        md.einsum(eq, *[md.zeros(*s) for s in shapes])


@pytest.mark.parametrize("eq, shapes", CASES)
def test_values_and_gradients_match_torch(eq, shapes):
    torch = pytest.importorskip("torch")
    arrays = _arrays(shapes, seed=3)
    tt = [torch.tensor(a, requires_grad=True) for a in arrays]
    mt = [md.tensor(a, requires_grad=True) for a in arrays]
    yt, ym = torch.einsum(eq, *tt), md.einsum(eq, *mt)
    g = np.random.default_rng(4).standard_normal(tuple(yt.shape))
    yt.backward(torch.tensor(g))
    ym.backward(md.tensor(g))
    np.testing.assert_allclose(ym.detach().numpy(), yt.detach().numpy(), rtol=1e-12, atol=1e-12)
    for a, b in zip(mt, tt):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12, atol=1e-12)
