"""pairwise_distance and the embedding / ranking losses (margin_ranking, hinge_embedding,
cosine_embedding, triplet_margin): PyTorch as the oracle for values and gradients (random
cotangents) for every reduction and option, gradcheck in float64, values by hand, the modules
and bad input."""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.autograd import gradcheck

RNG = np.random.default_rng(0)
LABELS = np.array([1.0, -1.0, 1.0, -1.0, 1.0])

# name -> (float64 inputs that get gradients, constant targets, keyword options)
CASES = {
    "margin_ranking": (F.margin_ranking_loss, [RNG.standard_normal(5), RNG.standard_normal(5)], [LABELS],
                       {"margin": 0.3}),
    "margin_ranking_broadcast": (F.margin_ranking_loss, [RNG.standard_normal(5), RNG.standard_normal(1)], [LABELS],
                                 {}),
    "hinge_embedding": (F.hinge_embedding_loss, [RNG.standard_normal((2, 5))], [np.tile(LABELS, (2, 1))],
                        {"margin": 0.5}),
    "cosine_embedding": (F.cosine_embedding_loss, [RNG.standard_normal((5, 3)), RNG.standard_normal((5, 3))],
                         [LABELS], {"margin": 0.1}),
    "cosine_embedding_one_pair": (F.cosine_embedding_loss, [RNG.standard_normal(3), RNG.standard_normal(3)],
                                  [np.array(-1.0)], {"margin": -0.5}),
}
for p in (2.0, 1.0, 3.0):
    for swap in (False, True):
        CASES[f"triplet_p{p}_swap{swap}"] = (F.triplet_margin_loss, [RNG.standard_normal((4, 6)) for _ in range(3)],
                                             [], {"margin": 1.5, "p": p, "swap": swap})
CASES["triplet_1d"] = (F.triplet_margin_loss, [RNG.standard_normal(6) for _ in range(3)], [], {})


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("name", list(CASES))
def test_losses_match_torch_values_and_gradients(name, reduction):
    torch = pytest.importorskip("torch")
    fn, arrays, targets, kw = CASES[name]
    xs = [md.tensor(a, requires_grad=True) for a in arrays]
    txs = [torch.tensor(a, requires_grad=True) for a in arrays]
    y = fn(*xs, *[md.tensor(t) for t in targets], reduction=reduction, **kw)
    ty = getattr(torch.nn.functional, fn.__name__)(*txs, *[torch.tensor(t) for t in targets], reduction=reduction,
                                                    **kw)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-10)
    v = np.random.default_rng(1).standard_normal(tuple(ty.shape))
    y.backward(md.tensor(v))
    ty.backward(torch.tensor(v))
    for x, tx in zip(xs, txs):
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("name", list(CASES))
def test_losses_gradcheck(name):
    fn, arrays, targets, kw = CASES[name]
    xs = [md.tensor(a, requires_grad=True) for a in arrays]
    ts = [md.tensor(t) for t in targets]
    assert gradcheck(lambda *xs: fn(*xs, *ts, reduction="none", **kw), xs)


PAIRWISE = [((3, 4), (4,), {}), ((3, 4), (3, 4), {"p": 1.0}), ((2, 3, 4), (3, 4), {"p": 3.0, "keepdim": True}),
            ((3, 4), (1, 4), {"p": 0.5, "eps": 1e-3}), ((5,), (5,), {}), ((3, 4), (3, 4), {"p": float("inf")})]


@pytest.mark.parametrize("s1,s2,kw", PAIRWISE, ids=[f"{a}{b}{kw}" for a, b, kw in PAIRWISE])
def test_pairwise_distance_matches_torch_and_gradchecks(s1, s2, kw):
    torch = pytest.importorskip("torch")
    a, b = RNG.standard_normal(s1), RNG.standard_normal(s2)
    x1, x2 = md.tensor(a, requires_grad=True), md.tensor(b, requires_grad=True)
    t1, t2 = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    y, ty = F.pairwise_distance(x1, x2, **kw), torch.nn.functional.pairwise_distance(t1, t2, **kw)
    assert y.shape == tuple(ty.shape)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12)
    v = np.random.default_rng(2).standard_normal(tuple(ty.shape))
    y.backward(md.tensor(v))
    ty.backward(torch.tensor(v))
    np.testing.assert_allclose(x1.grad.numpy(), t1.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(x2.grad.numpy(), t2.grad.numpy(), rtol=1e-10)
    assert gradcheck(lambda p, q: F.pairwise_distance(p, q, **kw), (md.tensor(a, requires_grad=True),
                                                                    md.tensor(b, requires_grad=True)))


def test_values_by_hand():
    f64 = md.float64
    d = F.pairwise_distance(md.tensor([[0.0, 0.0]], dtype=f64), md.tensor([[3.0, 4.0]], dtype=f64), eps=0.0)
    np.testing.assert_allclose(d.numpy(), [5.0])
    # max(0, -y (x1 - x2) + margin) with x1 - x2 = 1: max(0, -1 + 0.5) = 0 for y = 1, 1 + 0.5 for y = -1
    l = F.margin_ranking_loss(md.tensor([2.0, 2.0], dtype=f64), md.tensor([1.0, 1.0], dtype=f64),
                              md.tensor([1.0, -1.0], dtype=f64), margin=0.5, reduction="none")
    np.testing.assert_allclose(l.numpy(), [0.0, 1.5])
    l = F.hinge_embedding_loss(md.tensor([0.3, 0.3, 2.0], dtype=f64), md.tensor([1, -1, -1]), reduction="sum")
    np.testing.assert_allclose(l.numpy(), 0.3 + 0.7 + 0.0)
    # orthogonal vectors: cos = 0, so 1 for a similar pair and max(0, 0 - (-0.2)) for a dissimilar one
    x1, x2 = md.tensor([[1.0, 0.0], [1.0, 0.0]], dtype=f64), md.tensor([[0.0, 2.0], [0.0, 2.0]], dtype=f64)
    l = F.cosine_embedding_loss(x1, x2, md.tensor([1, -1]), margin=-0.2, reduction="none")
    np.testing.assert_allclose(l.numpy(), [1.0, 0.2])
    l = F.triplet_margin_loss(md.tensor([[0.0, 0.0]], dtype=f64), md.tensor([[1.0, 0.0]], dtype=f64),
                              md.tensor([[0.0, 1.5]], dtype=f64), margin=1.0, eps=0.0)
    np.testing.assert_allclose(l.numpy(), 1.0 + 1.0 - 1.5)


def test_integer_labels_and_float32_keep_the_inputs_dtype():
    x = md.randn(4, 3)
    assert F.hinge_embedding_loss(x, md.tensor([[1, -1, 1]] * 4)).dtype == md.float32
    assert F.cosine_embedding_loss(x, md.randn(4, 3), md.tensor([1, -1, 1, 1])).dtype == md.float32


MODULES = [("MarginRankingLoss", (), 3), ("MarginRankingLoss", (0.2,), 3), ("HingeEmbeddingLoss", (0.5,), 2),
           ("CosineEmbeddingLoss", (0.1,), 3), ("TripletMarginLoss", (), 3),
           ("TripletMarginLoss", (0.5, 1.0, 1e-6, True), 3), ("PairwiseDistance", (), 2),
           ("PairwiseDistance", (1.0, 1e-3, True), 2)]


@pytest.mark.parametrize("name,args,n", MODULES, ids=[f"{n}{a}" for n, a, _ in MODULES])
def test_modules_match_torch(name, args, n):
    torch = pytest.importorskip("torch")
    ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(ours) == repr(theirs)
    arrays = [RNG.standard_normal((5, 3)) for _ in range(n)]
    if name in ("MarginRankingLoss", "HingeEmbeddingLoss"):
        arrays = [a[:, 0] for a in arrays[:n - 1]] + [LABELS]
    elif name == "CosineEmbeddingLoss":
        arrays = arrays[:2] + [LABELS]
    y = ours(*[md.tensor(a) for a in arrays])
    np.testing.assert_allclose(y.numpy(), theirs(*[torch.tensor(a) for a in arrays]).numpy(), rtol=1e-10)
    if name != "PairwiseDistance":
        assert ours.reduction == theirs.reduction == "mean"


@pytest.mark.parametrize("call,exc,match", [
    (lambda: F.margin_ranking_loss(md.randn(3), md.randn(3), md.randn(3, 1)), RuntimeError,
     r"All input tensors should have same dimension but got sizes: input1: \[3\], input2: \[3\], target: \[3, 1\]"),
    (lambda: F.cosine_embedding_loss(md.randn(3, 4), md.randn(3, 4), md.randn(3, 1)), RuntimeError,
     "0D or 1D target tensor expected, multi-target not supported"),
    (lambda: F.cosine_embedding_loss(md.randn(3, 4), md.randn(3, 4), md.tensor(1.0)), RuntimeError,
     r"0D target tensor expects 1D input tensors, but found inputs with sizes \[3, 4\] and \[3, 4\]"),
    (lambda: F.triplet_margin_loss(md.randn(2, 3), md.randn(3), md.randn(2, 3)), RuntimeError,
     "same number of dimensions, but got: anchor 2D, positive 1D, and negative 2D"),
    (lambda: F.pairwise_distance(md.randn(3, 4), md.randn(3, 5)), RuntimeError,
     r"x1 of shape \[3, 4\] and x2 of shape \[3, 5\] do not broadcast"),
    (lambda: F.pairwise_distance(md.randn(3), md.tensor([1, 2, 3])), RuntimeError,
     "expected a floating point x2, got dtype"),
    (lambda: F.margin_ranking_loss(md.randn(3), [1.0, 2.0, 3.0], md.randn(3)), TypeError,
     "expected input2 to be a Tensor, got list"),
    (lambda: F.hinge_embedding_loss(md.randn(3), md.randn(3), reduction="avg"), ValueError,
     "avg is not a valid value for reduction"),
    (lambda: nn.TripletMarginLoss(margin=0.0), ValueError, "expected margin to be greater than 0, got 0.0"),
])
def test_bad_input_raises_naming_expected_and_got(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
