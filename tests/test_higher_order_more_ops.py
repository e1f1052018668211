"""Gradients of gradients through the reductions (var/std, max/min/amax/amin and the dim forms),
einsum, the trigonometric and hyperbolic functions, atan2/hypot, the index and rearrange ops
(roll, flip, tril/triu, index_select, gather, scatter, take_along_dim, sort/topk/kthvalue,
masked_select, repeat/tile/repeat_interleave, index_put with accumulate, slice/select_scatter),
normalize, cosine_similarity, cross entropy with probability targets, unfold/fold and
max_unpool: gradgradcheck in float64 with random output cotangents."""
import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl import autograd
from minidl.autograd import gradgradcheck

RNG = np.random.default_rng(0)


def rand(*shape):
    return RNG.standard_normal(shape)


def distinct(*shape):
    """Values far apart (no ties: max/sort/topk are smooth there)."""
    return RNG.permutation(np.arange(int(np.prod(shape)), dtype=np.float64)).reshape(shape) * 0.7 + 0.1


def T(a, grad=True):
    return md.tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


IDX = md.tensor([[0, 2], [1, 0]])
MASK = md.tensor(np.array([[True, False, True], [False, True, True]]))

# name -> (function of tensors, input arrays)
CASES = {
    "var": (lambda x: x.var(), [rand(2, 3)]),
    "var_dim_biased": (lambda x: x.var(1, unbiased=False, keepdim=True), [rand(2, 3)]),
    "std": (lambda x: x.std(), [rand(2, 3)]),
    "std_dim_correction": (lambda x: md.std(x, dim=(0,), correction=0), [rand(3, 2)]),
    "var_mean": (lambda x: md.var_mean(x, 1), [rand(2, 3)]),
    "std_mean": (lambda x: md.std_mean(x, 0), [rand(3, 2)]),
    "max": (lambda x: x.max() * x, [distinct(2, 3)]),
    "min": (lambda x: x.min() * x, [distinct(2, 3)]),
    "max_dim": (lambda x: x.max(1).values ** 2, [distinct(2, 3)]),
    "min_dim": (lambda x: x.min(0, keepdim=True)[0] ** 2, [distinct(2, 3)]),
    "amax": (lambda x: x.amax((0, 1)) * x, [distinct(2, 2, 2)]),
    "amin": (lambda x: x.amin(1) ** 2, [distinct(2, 3)]),
    "einsum_matmul": (lambda a, b: md.einsum("ij,jk->ik", a, b), [rand(2, 3), rand(3, 2)]),
    "einsum_outer_sum": (lambda a, b: md.einsum("ij,k->jk", a, b) ** 2, [rand(2, 3), rand(2)]),
    "atan2": (lambda a, b: md.atan2(a, b), [rand(2, 3), rand(3) + 2]),
    "hypot": (lambda a, b: md.hypot(a, b), [rand(2, 3), rand(2, 1) + 2]),
    "tan": (lambda x: x.tan(), [rand(5) * 0.5]),
    "asin": (lambda x: x.asin(), [rand(5) * 0.2]),
    "acos": (lambda x: x.acos(), [rand(5) * 0.2]),
    "atan": (lambda x: x.atan(), [rand(5)]),
    "asinh": (lambda x: x.asinh(), [rand(5)]),
    "acosh": (lambda x: x.acosh(), [np.abs(rand(5)) + 1.5]),
    "atanh": (lambda x: x.atanh(), [rand(5) * 0.2]),
    "sinh": (lambda x: x.sinh(), [rand(5)]),
    "cosh": (lambda x: x.cosh(), [rand(5)]),
    "roll": (lambda x: x.roll((1, -1), (0, 1)) * x, [rand(2, 3)]),
    "roll_flat": (lambda x: x.roll(2) * x, [rand(2, 3)]),
    "flip": (lambda x: x.flip(1) * x, [rand(2, 3)]),
    "tril": (lambda x: x.tril(-1) * x, [rand(3, 3)]),
    "triu": (lambda x: x.triu(1) * x, [rand(2, 3)]),
    "index_select": (lambda x: x.index_select(1, md.tensor([2, 0, 2])) ** 2, [rand(2, 3)]),
    "gather": (lambda x: x.gather(1, IDX) ** 2, [rand(2, 3)]),
    "take_along_dim": (lambda x: md.take_along_dim(x, IDX, 1) ** 2, [rand(2, 3)]),
    "scatter": (lambda x, s: x.scatter(1, IDX, s) ** 2, [rand(2, 3), rand(2, 3)]),
    "scatter_add": (lambda x, s: x.scatter_add(1, IDX, s) ** 2, [rand(2, 3), rand(2, 2)]),
    "sort": (lambda x: x.sort(1, descending=True).values ** 2, [distinct(2, 3)]),
    "topk": (lambda x: x.topk(2, 0).values ** 2, [distinct(3, 2)]),
    "kthvalue": (lambda x: x.kthvalue(2, 1).values ** 2, [distinct(2, 3)]),
    "normalize": (lambda x: F.normalize(x, dim=1), [rand(2, 3)]),
    "normalize_p3": (lambda x: F.normalize(x, p=3, dim=0), [rand(2, 3) + 3]),
    "normalize_inf": (lambda x: F.normalize(x, p=float("inf"), dim=1), [distinct(2, 3)]),
    "cosine_similarity": (lambda a, b: F.cosine_similarity(a, b), [rand(2, 3), rand(2, 3)]),
    "cosine_similarity_broadcast": (lambda a, b: F.cosine_similarity(a, b, dim=0), [rand(3, 1), rand(3, 2)]),
    "masked_select": (lambda x: x.masked_select(MASK) ** 2, [rand(2, 3)]),
    "masked_select_broadcast": (lambda x: x.masked_select(MASK) ** 2, [rand(3)]),
    "repeat": (lambda x: x.repeat(2, 1, 2) ** 2, [rand(2, 3)]),
    "tile": (lambda x: x.tile(2) ** 2, [rand(2, 3)]),
    "repeat_interleave": (lambda x: x.repeat_interleave(md.tensor([1, 3]), dim=0) ** 2, [rand(2, 3)]),
    "cross_entropy_probs": (lambda x: F.cross_entropy(x, md.tensor(np.full((2, 3), 1 / 3))), [rand(2, 3)]),
    "cross_entropy_probs_target": (lambda x, t: F.cross_entropy(x, t, reduction="none", label_smoothing=0.1),
                                   [rand(2, 3, 2), rand(2, 3, 2)]),
    "cross_entropy_probs_weight": (lambda x, t: F.cross_entropy(x, t, weight=md.tensor([1.0, 2.0, 0.5],
                                                                                        dtype=md.float64),
                                                                reduction="sum"), [rand(2, 3), rand(2, 3)]),
    "unfold": (lambda x: F.unfold(x, (2, 2), padding=1, stride=(1, 2)) ** 2, [rand(1, 2, 3, 3)]),
    "fold": (lambda c: F.fold(c, (3, 3), (2, 2)) ** 2, [rand(1, 4, 4)]),
    "index_put_accumulate": (lambda x, v: x.index_put((md.tensor([0, 1, 0]), md.tensor([2, 0, 2])), v * v,
                                                      accumulate=True) ** 2, [rand(2, 3), rand(3)]),
    "getitem_advanced_third": (lambda x: x[md.tensor([0, 1, 1])] ** 3, [rand(2, 3)]),
    "slice_scatter": (lambda x, s: md.slice_scatter(x, s, 1, 0, 3, 2) ** 2, [rand(2, 3), rand(2, 2)]),
    "select_scatter": (lambda x, s: md.select_scatter(x, s, 0, 1) ** 2, [rand(2, 3), rand(3)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradgradcheck(name):
    fn, arrays = CASES[name]
    assert gradgradcheck(fn, [T(a) for a in arrays], atol=1e-6, rtol=1e-4)


def test_max_unpool2d_gradgradcheck():
    y, idx = F.max_pool2d(T(distinct(1, 2, 4, 4), grad=False), 2, return_indices=True)
    assert gradgradcheck(lambda v: F.max_unpool2d(v, idx, 2) ** 2, [T(rand(*y.shape))], atol=1e-6, rtol=1e-4)


def test_third_order_through_indexing_matches_the_closed_form():
    """d^3/dx^3 of sum(x[i]**4) for repeated i: every repeat contributes 24 x."""
    x = T(rand(3))
    y = (x[md.tensor([0, 2, 2])] ** 4).sum()
    g, = autograd.grad(y, x, create_graph=True)
    h, = autograd.grad(g.sum(), x, create_graph=True)
    t, = autograd.grad(h.sum(), x)
    np.testing.assert_allclose(t.numpy(), 24 * x.detach().numpy() * np.array([1, 0, 2]), rtol=1e-12)


def test_hessian_of_var_matches_the_closed_form():
    """var = sum (x - m)^2 / (N - 1): its Hessian is 2 (I - 1/N) / (N - 1)."""
    n = 4
    x = T(rand(n))
    g, = autograd.grad(x.var(), x, create_graph=True)
    rows = [autograd.grad(g[i], x, retain_graph=True)[0].numpy() for i in range(n)]
    np.testing.assert_allclose(np.stack(rows), 2 * (np.eye(n) - 1 / n) / (n - 1), atol=1e-12)


def test_scatter_with_reduce_has_no_second_derivative_either():
    x = T(rand(2, 3))
    y = x.scatter(1, IDX, x[:, :2] * 1.0, reduce="multiply")
    with pytest.raises(RuntimeError, match="reduce"):
        autograd.grad(y.sum(), x, create_graph=True)


@pytest.mark.parametrize("name", ["std", "max_dim", "einsum_matmul", "atan2", "gather", "normalize",
                                  "cosine_similarity", "cross_entropy_probs_target", "unfold", "tan"])
def test_hessian_vector_products_match_torch(name):
    torch = pytest.importorskip("torch")
    fn, arrays = CASES[name]
    xs = [T(a) for a in arrays]
    out = fn(*xs)
    v = RNG.standard_normal(tuple(out.shape))
    gs = autograd.grad(out, xs, md.tensor(v), create_graph=True)
    w = [RNG.standard_normal(a.shape) for a in arrays]
    hv = autograd.grad(sum((g * md.tensor(wi)).sum() for g, wi in zip(gs, w)), xs, allow_unused=True)
    tfn = _torch_fn(torch, name)
    txs = [torch.tensor(np.asarray(a, np.float64), requires_grad=True) for a in arrays]
    tout = tfn(*txs)
    tgs = torch.autograd.grad(tout, txs, torch.tensor(v), create_graph=True)
    thv = torch.autograd.grad(sum((g * torch.tensor(wi)).sum() for g, wi in zip(tgs, w)), txs, allow_unused=True)
    for a, b in zip(hv, thv):
        if b is None:
            assert a is None or np.allclose(a.numpy(), 0)
        else:
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-9, atol=1e-10)


def _torch_fn(torch, name):
    tF = torch.nn.functional
    idx = torch.tensor([[0, 2], [1, 0]])
    return {
        "std": lambda x: x.std(),
        "max_dim": lambda x: x.max(1).values ** 2,
        "einsum_matmul": lambda a, b: torch.einsum("ij,jk->ik", a, b),
        "atan2": torch.atan2,
        "gather": lambda x: x.gather(1, idx) ** 2,
        "normalize": lambda x: tF.normalize(x, dim=1),
        "cosine_similarity": tF.cosine_similarity,
        "cross_entropy_probs_target": lambda x, t: tF.cross_entropy(x, t, reduction="none", label_smoothing=0.1),
        "unfold": lambda x: tF.unfold(x, (2, 2), padding=1, stride=(1, 2)) ** 2,
        "tan": torch.tan,
    }[name]
