"""The likelihood, margin and CTC losses: poisson_nll_loss, gaussian_nll_loss, soft_margin_loss,
multilabel_soft_margin_loss, multi_margin_loss, multilabel_margin_loss,
triplet_margin_with_distance_loss and ctc_loss, with their modules. NumPy references (CTC's by
summing over every path) and gradcheck through OpSpec, PyTorch as the oracle for values and
gradients, PyTorch's definition of the CTC gradient, and bad input."""
import itertools
import os

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.autograd import gradcheck
from minidl.testing import OpSpec, check_forward, check_gradcheck, forward_cases, spec_id

REDUCTIONS = ("none", "mean", "sum")


def _reduce(l, reduction):
    return {"none": l, "sum": l.sum(), "mean": l.mean()}[reduction]


def _log_sigmoid(z):
    return -np.logaddexp(0, -z)


def _stirling(y):
    ys = np.where(y > 1, y, 2.0)
    return np.where(y > 1, ys * np.log(ys) - ys + 0.5 * np.log(2 * np.pi * ys), 0.0)


def _poisson_ref(x, y, log_input, full):
    l = np.exp(x) - y * x if log_input else x - y * np.log(x + 1e-8)
    return l + _stirling(y) if full else l


def _gaussian_ref(x, y, v, full=False, eps=1e-6):
    c = np.maximum(v, eps)
    return 0.5 * (np.log(c) + (x - y) ** 2 / c) + (0.5 * np.log(2 * np.pi) if full else 0.0)


def _multi_margin_ref(x, t, p=1, margin=1.0, w=None):
    x = np.atleast_2d(x)
    out = np.zeros(len(x))
    for n, (row, y) in enumerate(zip(x, np.reshape(t, -1))):
        for i in range(len(row)):
            z = margin - row[y] + row[i]
            if i != y and z > 0:
                out[n] += (1.0 if w is None else w[y]) * z ** p
    return out / x.shape[1]


def _multilabel_margin_ref(x, t):
    x, t = np.atleast_2d(x), np.atleast_2d(t)
    out = np.zeros(len(x))
    for n, (row, tgt) in enumerate(zip(x, t)):
        listed = list(itertools.takewhile(lambda c: c >= 0, tgt))
        for j in listed:
            for i in range(len(row)):
                if i not in listed:
                    out[n] += max(0.0, 1 - row[j] + row[i])
    return out / x.shape[1]


def _collapse(path, blank):
    out, prev = [], None
    for c in path:
        if c != prev and c != blank:
            out.append(c)
        prev = c
    return out


def _ctc_ref(lp, targets, input_lengths, target_lengths, blank=0):
    """-log of the summed probability of every path that reads as the target: (N,) losses from
    log-probabilities (T, N, C) and padded targets, by enumerating all C**T paths."""
    out = []
    for n, (T, S) in enumerate(zip(input_lengths, target_lengths)):
        target = list(targets[n][:S])
        total = -np.inf
        for path in itertools.product(range(lp.shape[2]), repeat=int(T)):
            if _collapse(path, blank) == target:
                total = np.logaddexp(total, sum(lp[t, n, c] for t, c in enumerate(path)))
        out.append(-total)
    return np.array(out)


def _log_softmax(z, axis):
    z = z - z.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def _ctc_reduce(l, target_lengths, reduction):
    if reduction == "mean":
        return (l / np.maximum(target_lengths, 1)).mean()
    return _reduce(l, reduction)


CTC_TARGETS = np.array([[1, 2], [2, 2], [1, 0]])
CTC_IN, CTC_TL = np.array([4, 4, 3]), np.array([2, 2, 1])
SPECS = []
for red in REDUCTIONS:
    for log_input, full in itertools.product((True, False), (True, False)):
        SPECS.append(OpSpec(
            f"poisson_nll_log{int(log_input)}_full{int(full)}_{red}",
            lambda x, y, li=log_input, fu=full, red=red: F.poisson_nll_loss(x, y, log_input=li, full=fu, reduction=red),
            lambda x, y, li=log_input, fu=full, red=red: _reduce(_poisson_ref(x, y, li, fu), red),
            lambda rng, li=log_input: (rng.standard_normal((3, 4)) if li else rng.uniform(0.2, 3, (3, 4)),
                                       np.where(rng.random((3, 4)) < 0.5, rng.uniform(0.1, 0.8, (3, 4)),
                                                rng.uniform(1.3, 5, (3, 4))))))
    SPECS += [
        OpSpec(f"gaussian_nll_hetero_full_{red}",
               lambda x, y, v, red=red: F.gaussian_nll_loss(x, y, v, full=True, reduction=red),
               lambda x, y, v, red=red: _reduce(_gaussian_ref(x, y, v, True), red),
               lambda rng: (rng.standard_normal((3, 4)), rng.standard_normal((3, 4)), rng.uniform(0.3, 2, (3, 4)))),
        OpSpec(f"gaussian_nll_one_dim_short_{red}",
               lambda x, y, v, red=red: F.gaussian_nll_loss(x, y, v, reduction=red),
               lambda x, y, v, red=red: _reduce(_gaussian_ref(x, y, v[:, None]), red),
               lambda rng: (rng.standard_normal((3, 4)), rng.standard_normal((3, 4)), rng.uniform(0.3, 2, 3))),
        OpSpec(f"gaussian_nll_size1_dim_broadcast_target_{red}",
               lambda x, y, v, red=red: F.gaussian_nll_loss(x, y, v, reduction=red),
               lambda x, y, v, red=red: _reduce(_gaussian_ref(x, y, v), red),
               lambda rng: (rng.standard_normal((3, 4)), rng.standard_normal(4), rng.uniform(0.3, 2, (1, 4)))),
        OpSpec(f"soft_margin_{red}", lambda x, y, red=red: F.soft_margin_loss(x, y, reduction=red),
               lambda x, y, red=red: _reduce(np.logaddexp(0, -y * x), red),
               lambda rng: (rng.standard_normal((3, 4)) * 3, np.sign(rng.standard_normal((3, 4)))), grad_inputs=[0]),
        OpSpec(f"multilabel_soft_margin_weight_{red}",
               lambda x, y, w, red=red: F.multilabel_soft_margin_loss(x, y, w, reduction=red),
               lambda x, y, w, red=red: _reduce((-(y * _log_sigmoid(x) + (1 - y) * _log_sigmoid(-x)) * w).mean(-1),
                                                red),
               lambda rng: (rng.standard_normal((3, 4)) * 3, rng.random((3, 4)), rng.uniform(0.5, 2, 4))),
        OpSpec(f"multilabel_margin_{red}", lambda x, t, red=red: F.multilabel_margin_loss(x, t, reduction=red),
               lambda x, t, red=red: _reduce(_multilabel_margin_ref(x, t), red),
               lambda rng: (rng.standard_normal((4, 5)),
                            np.array([[3, 0, -1, 1, 1], [2, -1, 0, 0, 0], [-1, 1, 2, 3, 4], [4, 4, 1, 0, 2]]))),
        OpSpec(f"triplet_with_distance_default_swap_{red}",
               lambda a, p, n, red=red: F.triplet_margin_with_distance_loss(a, p, n, swap=True, margin=2.0,
                                                                            reduction=red),
               lambda a, p, n, red=red: _reduce(np.maximum(0, 2.0 + np.linalg.norm(a - p + 1e-6, axis=-1) - np.minimum(
                   np.linalg.norm(a - n + 1e-6, axis=-1), np.linalg.norm(p - n + 1e-6, axis=-1))), red),
               lambda rng: tuple(rng.standard_normal((4, 3)) for _ in range(3))),
        OpSpec(f"triplet_with_distance_custom_{red}",
               lambda a, p, n, red=red: F.triplet_margin_with_distance_loss(
                   a, p, n, distance_function=lambda u, v: 1 - F.cosine_similarity(u, v), margin=0.5, reduction=red),
               lambda a, p, n, red=red: _reduce(np.maximum(0, 0.5 + _cos_dist(a, p) - _cos_dist(a, n)), red),
               lambda rng: tuple(rng.standard_normal((4, 3)) for _ in range(3))),
        OpSpec(f"ctc_through_log_softmax_{red}",
               lambda z, red=red: F.ctc_loss(F.log_softmax(z, 2), CTC_TARGETS, md.tensor(CTC_IN), md.tensor(CTC_TL),
                                             reduction=red),
               lambda z, red=red: _ctc_reduce(_ctc_ref(_log_softmax(z, 2), CTC_TARGETS, CTC_IN, CTC_TL), CTC_TL, red),
               lambda rng: (rng.standard_normal((4, 3, 3)),)),
    ]
    for p, weighted in itertools.product((1, 2), (False, True)):
        SPECS.append(OpSpec(
            f"multi_margin_p{p}_w{int(weighted)}_{red}",
            lambda x, t, w, p=p, wt=weighted, red=red: F.multi_margin_loss(x, t, p=p, margin=0.7,
                                                                           weight=w if wt else None, reduction=red),
            lambda x, t, w, p=p, wt=weighted, red=red: _reduce(_multi_margin_ref(x, t, p, 0.7, w if wt else None), red),
            lambda rng: (rng.standard_normal((4, 5)), np.array([0, 3, 4, 3]), rng.uniform(0.5, 2, 5)),
            grad_inputs=[0]))


def _cos_dist(a, b):
    return 1 - (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


SPECS += [
    OpSpec("multi_margin_unbatched", lambda x, t: F.multi_margin_loss(x, t, reduction="none"),
           lambda x, t: _multi_margin_ref(x, t)[0], lambda rng: (rng.standard_normal(5), np.array(2))),
    OpSpec("multilabel_margin_unbatched", lambda x, t: F.multilabel_margin_loss(x, t, reduction="none"),
           lambda x, t: _multilabel_margin_ref(x, t)[0],
           lambda rng: (rng.standard_normal(5), np.array([4, 1, -1, 2, 2]))),
    OpSpec("ctc_unbatched_concatenated_blank2",
           lambda z: F.ctc_loss(F.log_softmax(z, 1), np.array([1, 0]), (4,), (2,), blank=2, reduction="none"),
           lambda z: _ctc_ref(_log_softmax(z, 1)[:, None], [[1, 0]], [4], [2], blank=2)[0],
           lambda rng: (rng.standard_normal((4, 3)),)),
]


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward_matches_numpy_reference(spec, dtype, device):
    check_forward(spec, dtype, device)


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck(spec):
    assert check_gradcheck(spec)


def _f64(a, requires_grad=False):
    return md.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


# the gradients' special cases ----------------------------------------------------------------

def test_ctc_gradient_is_pytorchs_definition():
    """With respect to free (unnormalised) log_probs the gradient is d(nll)/d(lp) + exp(lp)
    inside each input length and 0 past it."""
    rng = np.random.default_rng(3)
    lp0 = rng.standard_normal((4, 2, 3)) - 1.0
    tg, il, tl = np.array([[1, 2], [2, 0]]), np.array([4, 3]), np.array([2, 1])
    lp = _f64(lp0, requires_grad=True)
    F.ctc_loss(lp, tg, il, tl, reduction="sum").backward()
    numeric = np.zeros_like(lp0)
    for idx in np.ndindex(lp0.shape):
        hi, lo = lp0.copy(), lp0.copy()
        hi[idx] += 1e-6
        lo[idx] -= 1e-6
        numeric[idx] = (_ctc_ref(hi, tg, il, tl).sum() - _ctc_ref(lo, tg, il, tl).sum()) / 2e-6
    inside = (np.arange(4)[:, None] < il)[:, :, None]
    np.testing.assert_allclose(lp.grad.numpy(), np.where(inside, numeric + np.exp(lp0), 0.0), atol=1e-6)


def test_ctc_impossible_target_is_inf_with_nan_gradient_unless_zero_infinity():
    lp0 = _log_softmax(np.random.default_rng(0).standard_normal((3, 1, 4)), 2)
    tg = np.array([[1, 1, 2]])   # needs 4 frames (a blank between the repeated 1s)
    lp = _f64(lp0, requires_grad=True)
    loss = F.ctc_loss(lp, tg, (3,), (3,), reduction="sum")
    assert loss.item() == np.inf
    loss.backward()
    assert np.isnan(lp.grad.numpy()).all()
    lp = _f64(lp0, requires_grad=True)
    loss = F.ctc_loss(lp, tg, (3,), (3,), reduction="sum", zero_infinity=True)
    loss.backward()
    assert loss.item() == 0.0 and (lp.grad.numpy() == 0).all()


def test_ctc_padded_and_concatenated_targets_agree_and_mean_divides_by_target_lengths():
    z = np.random.default_rng(1).standard_normal((5, 3, 4))
    lp = F.log_softmax(_f64(z), 2)
    padded, tl = np.array([[1, 2, 3], [3, 9, 9], [2, 2, 9]]), np.array([3, 1, 2])
    cat = np.array([1, 2, 3, 3, 2, 2])
    il = md.tensor([5, 4, 5])
    none = F.ctc_loss(lp, md.tensor(padded), il, md.tensor(tl), reduction="none").numpy()
    ref = _ctc_ref(_log_softmax(z, 2), padded, [5, 4, 5], tl)
    np.testing.assert_allclose(none, ref, rtol=1e-10)
    np.testing.assert_allclose(F.ctc_loss(lp, md.tensor(cat), il, md.tensor(tl), reduction="none").numpy(), ref)
    np.testing.assert_allclose(F.ctc_loss(lp, md.tensor(padded), il, md.tensor(tl)).item(), (ref / tl).mean())
    assert F.ctc_loss(lp[:, 0], md.tensor([1, 2, 3]), md.tensor(5), md.tensor(3), reduction="none").shape == ()


def test_gaussian_nll_var_gradient_passes_the_eps_clamp():
    x, y = _f64([[0.5, -1.0, 2.0]], True), _f64([[0.0, 0.0, 1.0]])
    v = _f64([[1e-9, 0.5, 0.0]], True)
    F.gaussian_nll_loss(x, y, v, eps=1e-3, reduction="sum").backward()
    c, d = np.array([1e-3, 0.5, 1e-3]), np.array([0.5, -1.0, 1.0])
    np.testing.assert_allclose(v.grad.numpy()[0], 0.5 * (1 / c - d * d / c ** 2))
    np.testing.assert_allclose(x.grad.numpy()[0], d / c)


def test_gaussian_nll_float_var_and_poisson_target_gradient_at_zero():
    x = _f64([[0.5, -1.0]], True)
    loss = F.gaussian_nll_loss(x, _f64([[0.0, 1.0]]), 2.0, reduction="none")
    np.testing.assert_allclose(loss.detach().numpy(),
                               _gaussian_ref(np.array([[0.5, -1.0]]), np.array([[0.0, 1.0]]), 2.0))
    y = _f64([0.0, 0.5, 3.0], True)
    F.poisson_nll_loss(_f64([0.1, 0.2, 0.3], True), y, full=True, reduction="sum").backward()
    g = y.grad.numpy()   # PyTorch's: nan at 0 (0 * log 0 through its masked Stirling term), 0 up to 1
    assert np.isnan(g[0]) and g[1] == pytest.approx(-0.2) and g[2] == pytest.approx(-0.3 + np.log(3) + 1 / 6)


def test_deprecated_size_average_and_reduce_map_to_a_reduction():
    x, y = _f64(np.random.default_rng(0).standard_normal((3, 4))), _f64(np.ones((3, 4)))
    t = md.tensor([0, 1, 3])
    for fn, args in [(F.soft_margin_loss, (x, y)), (F.multilabel_soft_margin_loss, (x, y)),
                     (F.multi_margin_loss, (x, t)), (F.poisson_nll_loss, (x, y)),
                     (F.multilabel_margin_loss, (x, md.tensor([[0, -1, 0, 0]] * 3)))]:
        np.testing.assert_allclose(fn(*args, size_average=False).numpy(), fn(*args, reduction="sum").numpy())
        np.testing.assert_allclose(fn(*args, reduce=False).numpy(), fn(*args, reduction="none").numpy())


# modules -------------------------------------------------------------------------------------

def test_modules_match_functional_and_keep_weights_as_buffers():
    rng = np.random.default_rng(0)
    x, y, v = _f64(rng.standard_normal((3, 4))), _f64(rng.uniform(0.1, 2, (3, 4))), _f64(rng.uniform(0.5, 2, (3, 4)))
    w, t = _f64(rng.uniform(0.5, 2, 4)), md.tensor([0, 3, 1])
    s = _f64(np.sign(rng.standard_normal((3, 4))))
    pairs = [(nn.PoissonNLLLoss(log_input=False, full=True)(y, v), F.poisson_nll_loss(y, v, False, True)),
             (nn.GaussianNLLLoss(full=True, reduction="sum")(x, y, v), F.gaussian_nll_loss(x, y, v, True, 1e-6, "sum")),
             (nn.SoftMarginLoss(reduction="none")(x, s), F.soft_margin_loss(x, s, reduction="none")),
             (nn.MultiLabelSoftMarginLoss(w)(x, y), F.multilabel_soft_margin_loss(x, y, w)),
             (nn.MultiMarginLoss(p=2, margin=0.5, weight=w)(x, t), F.multi_margin_loss(x, t, 2, 0.5, w)),
             (nn.MultiLabelMarginLoss(size_average=False)(x, md.tensor([[1, -1, 0, 0]] * 3)),
              F.multilabel_margin_loss(x, md.tensor([[1, -1, 0, 0]] * 3), reduction="sum")),
             (nn.TripletMarginWithDistanceLoss(swap=True)(x, y, v),
              F.triplet_margin_with_distance_loss(x, y, v, swap=True)),
             (nn.CTCLoss(blank=3, zero_infinity=True)(F.log_softmax(x[:, None], 2), md.tensor([[1, 2]]), (3,), (2,)),
              F.ctc_loss(F.log_softmax(x[:, None], 2), md.tensor([[1, 2]]), (3,), (2,), 3, "mean", True))]
    for module_out, functional_out in pairs:
        np.testing.assert_allclose(module_out.numpy(), functional_out.numpy())
    assert "weight" in dict(nn.MultiMarginLoss(weight=w).named_buffers())
    assert "weight" in dict(nn.MultiLabelSoftMarginLoss(weight=w).named_buffers())
    assert isinstance(nn.TripletMarginWithDistanceLoss().distance_function, nn.PairwiseDistance)
    ctc = nn.CTCLoss()
    assert (ctc.blank, ctc.reduction, ctc.zero_infinity) == (0, "mean", False)
    p = nn.PoissonNLLLoss()
    assert (p.log_input, p.full, p.eps, p.reduction) == (True, False, 1e-8, "mean")
    g = nn.GaussianNLLLoss()
    assert (g.full, g.eps, g.reduction) == (False, 1e-6, "mean")


@pytest.mark.parametrize("make, error, match", [
    (lambda: nn.MultiMarginLoss(p=3), ValueError, "only p == 1 and p == 2"),
    (lambda: nn.MultiMarginLoss(weight=md.ones(2, 2)), ValueError, "1D tensor"),
    (lambda: nn.TripletMarginWithDistanceLoss(margin=0.0), ValueError, "greater than 0"),
    (lambda: nn.GaussianNLLLoss(True), TypeError, "positional"),
    (lambda: nn.TripletMarginWithDistanceLoss(None), TypeError, "positional"),
])
def test_module_arguments_are_checked(make, error, match):
    with pytest.raises(error, match=match):
        make()


# bad input -----------------------------------------------------------------------------------

X = md.tensor(np.random.default_rng(0).standard_normal((3, 5)))
LP = F.log_softmax(md.randn(6, 3, 5), 2)
TG, IL, TL = md.tensor([[1, 2, 3]] * 3), md.tensor([6, 5, 4]), md.tensor([3, 2, 0])

BAD = [
    (lambda: F.poisson_nll_loss(md.ones(2), md.ones(2), reduction="avg"), ValueError, "not a valid value"),
    (lambda: F.poisson_nll_loss(md.ones(2), md.ones(3)), RuntimeError, "broadcast"),
    (lambda: F.gaussian_nll_loss(md.ones(2, 3), md.ones(2, 3), -md.ones(2, 3)), ValueError, "negative"),
    (lambda: F.gaussian_nll_loss(md.ones(2, 3), md.ones(2, 3), -1.0), ValueError, "negative"),
    (lambda: F.gaussian_nll_loss(md.ones(2, 3), md.ones(2, 3), md.ones(2, 2)), ValueError, "incorrect size"),
    (lambda: F.gaussian_nll_loss(md.ones(2, 3), md.ones(2, 3), md.ones(3)), ValueError, "incorrect size"),
    (lambda: F.gaussian_nll_loss(md.ones(2, 3), md.ones(2, 3), md.ones(1, 1)), ValueError, "incorrect size"),
    (lambda: F.gaussian_nll_loss(md.ones(2, 3), md.ones(2, 3), md.ones(2, 3), reduction="x"), ValueError, "not valid"),
    (lambda: F.soft_margin_loss(md.ones(2), md.ones(3, 2)), RuntimeError, "doesn't match the broadcast shape"),
    (lambda: F.soft_margin_loss(md.ones(2), md.ones(2, requires_grad=True)), RuntimeError, "not differentiable"),
    (lambda: F.soft_margin_loss(md.tensor([1, 2]), md.ones(2)), RuntimeError, "floating point"),
    (lambda: F.multi_margin_loss(X, md.tensor([1, 0, 5])), RuntimeError, "out of range"),
    (lambda: F.multi_margin_loss(X, md.tensor([1, 0])), RuntimeError, r"Expected target size \[3\], but got \[2\]"),
    (lambda: F.multi_margin_loss(X, md.tensor([1.0, 0.0, 1.0])), RuntimeError, "integer class indices"),
    (lambda: F.multi_margin_loss(md.zeros(2, 3, 4), md.tensor([0, 0])), RuntimeError, "vector or matrix"),
    (lambda: F.multi_margin_loss(X, md.tensor([1, 0, 1]), p=3), ValueError, "only p == 1 and p == 2"),
    (lambda: F.multi_margin_loss(X, md.tensor([1, 0, 1]), weight=md.ones(4)), RuntimeError, "inconsistent weight"),
    (lambda: F.multi_margin_loss(X, md.tensor([1, 0, 1]), weight=md.ones(1, 5)), ValueError, "one-dimensional"),
    (lambda: F.multi_margin_loss(X, md.tensor([1, 0, 1]), weight=md.ones(5, dtype=md.float64, requires_grad=True)),
     RuntimeError,
     "not differentiable with respect to argument 'weight'"),
    (lambda: F.multi_margin_loss(md.tensor([[1, 2]]), md.tensor([1])), NotImplementedError, "floating point"),
    (lambda: F.multilabel_margin_loss(X, md.tensor([[1, 5, -1, 0, 0]] * 3)), RuntimeError, "out of range"),
    (lambda: F.multilabel_margin_loss(X, md.tensor([[1, -2, -1, 0, 0]] * 3)), RuntimeError, "out of range"),
    (lambda: F.multilabel_margin_loss(X, md.tensor([[1, 2, -1, 0]] * 3)), RuntimeError, "inconsistent target size"),
    (lambda: F.triplet_margin_with_distance_loss(X, X, X, margin=0), ValueError, "greater than 0"),
    (lambda: F.triplet_margin_with_distance_loss(X, X[0], X), RuntimeError, "same number of dimensions"),
    (lambda: F.triplet_margin_with_distance_loss(X, X, X, reduction="x"), ValueError, "not a valid value"),
    (lambda: F.ctc_loss(LP, TG, IL, TL, reduction="x"), ValueError, "not a valid value"),
    (lambda: F.ctc_loss(LP, TG, IL, TL, blank=5), RuntimeError, "blank must be in label range"),
    (lambda: F.ctc_loss(LP, TG, md.tensor([7, 5, 4]), TL), RuntimeError, "input_lengths"),
    (lambda: F.ctc_loss(LP, TG, md.tensor([-1, 5, 4]), TL), RuntimeError, "input_lengths"),
    (lambda: F.ctc_loss(LP, TG, IL, md.tensor([4, 2, 0])), RuntimeError, "at least max"),
    (lambda: F.ctc_loss(LP, TG, IL, md.tensor([-1, 2, 0])), RuntimeError, "at least 0"),
    (lambda: F.ctc_loss(LP, TG, IL[:2], TL), RuntimeError, "input_lengths must be of size batch_size"),
    (lambda: F.ctc_loss(LP, TG, IL, TL[:2]), RuntimeError, "target_lengths must be of size batch_size"),
    (lambda: F.ctc_loss(LP, TG, md.tensor([6.0, 5.0, 4.0]), TL), RuntimeError, "must be integral"),
    (lambda: F.ctc_loss(LP, TG, 6, TL), TypeError, "input_lengths"),
    (lambda: F.ctc_loss(LP, md.tensor([1, 2, 3, 4]), IL, TL), RuntimeError, "sum\\(target_lengths\\) = 5"),
    (lambda: F.ctc_loss(LP, md.tensor([[[1, 2, 3]]] * 3), IL, TL), RuntimeError, "1 to 2 dimensions"),
    (lambda: F.ctc_loss(LP[None], TG, IL, TL), RuntimeError, r"\(T, N, C\) or \(T, C\)"),
    (lambda: F.ctc_loss(LP[:0], TG, md.tensor([0, 0, 0]), TL), RuntimeError, "must not be empty"),
    (lambda: F.ctc_loss(LP.to(md.float16), TG, IL, TL), NotImplementedError, "float32 or float64"),
    (lambda: F.ctc_loss(LP, md.tensor([[1, 7, 3]] * 3), IL, TL), RuntimeError, r"class indices in \[0, 5\)"),
    (lambda: F.ctc_loss(LP, md.tensor([[1, 0, 3]] * 3), IL, TL), RuntimeError, "cannot contain the blank"),
]


@pytest.mark.parametrize("call, error, match", BAD)
def test_bad_input_raises(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_cuda_runs_the_elementwise_losses_and_refuses_the_indexed_ones():
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        pytest.skip("checked under numba's CUDA simulator")
    from minidl import backends
    try:
        backends.get("cuda")
    except RuntimeError as exc:
        pytest.skip(f"cuda device unavailable: {exc}")
    x, y = np.array([[0.3, -0.4]]), np.array([[2.0, 0.5]])
    out = []
    for device in ("cpu", "cuda"):
        xt = md.tensor(x, requires_grad=True, device=device)
        loss = F.poisson_nll_loss(xt, md.tensor(y, device=device), full=True)
        loss.backward()
        out.append((loss.cpu().detach().numpy(), xt.grad.cpu().detach().numpy()))
    np.testing.assert_allclose(out[0][0], out[1][0])
    np.testing.assert_allclose(out[0][1], out[1][1])
    with pytest.raises(NotImplementedError, match="ctc_loss is not implemented for device 'cuda"):
        F.ctc_loss(md.zeros(2, 3, device="cuda"), md.tensor([1]), (2,), (1,))


# PyTorch as the oracle -----------------------------------------------------------------------

def _both(torch, a, requires_grad=True, dtype=np.float64):
    a = np.asarray(a, dtype=dtype)
    return md.tensor(a, requires_grad=requires_grad), torch.tensor(a, requires_grad=requires_grad)


def _compare(torch, ours, theirs, leaves, tol):
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=tol, atol=tol)
    cot = np.random.default_rng(7).standard_normal(tuple(ours.shape))
    ours.backward(md.tensor(cot.astype(ours.detach().numpy().dtype)))
    theirs.backward(torch.tensor(cot, dtype=theirs.dtype))
    for m, t in leaves:
        np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_against_torch_elementwise_and_margin_losses(dtype, reduction):
    torch = pytest.importorskip("torch")
    TF = torch.nn.functional
    tol = 1e-5 if dtype == np.float32 else 1e-10
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((4, 3)), rng.uniform(0.1, 4, (4, 3))
    var, w = rng.uniform(0.0, 2, (4, 1)), rng.uniform(0.5, 2, 3)
    var[0] = 1e-8
    labels, idx = np.sign(rng.standard_normal((4, 3))), np.array([2, 0, 1, 1])
    ml = np.array([[0, 2, -1], [1, -1, 2], [-1, 0, 0], [2, 1, 0]])
    cases = [
        (lambda L, a, b: L.poisson_nll_loss(a, b, reduction=reduction), [x, y], [True, True]),
        (lambda L, a, b: L.poisson_nll_loss(a, b, log_input=False, full=True, reduction=reduction),
         [np.abs(x) + 0.1, y], [True, True]),
        (lambda L, a, b, v: L.gaussian_nll_loss(a, b, v, full=True, reduction=reduction), [x, y, var], [True] * 3),
        (lambda L, a, b, v: L.gaussian_nll_loss(a, b, v, reduction=reduction), [x, y, var[:, 0]], [True] * 3),
        (lambda L, a, b: L.soft_margin_loss(a, b, reduction=reduction), [x * 3, labels], [True, False]),
        (lambda L, a, b, c: L.multilabel_soft_margin_loss(a, b, c, reduction=reduction), [x, y / 4, w], [True] * 3),
        (lambda L, a, c: L.multi_margin_loss(a, _int(L, idx), p=2, margin=0.6, weight=c, reduction=reduction),
         [x, w], [True, False]),
        (lambda L, a: L.multi_margin_loss(a, _int(L, idx), reduction=reduction), [x], [True]),
        (lambda L, a: L.multilabel_margin_loss(a, _int(L, ml), reduction=reduction), [x], [True]),
        (lambda L, a, b, c: L.triplet_margin_with_distance_loss(a, b, c, swap=True, margin=1.5, reduction=reduction),
         [x, y, labels], [True] * 3),
    ]
    for fn, arrays, grads in cases:
        ours, theirs = zip(*[_both(torch, a, g, dtype) for a, g in zip(arrays, grads)])
        _compare(torch, fn(F, *ours), fn(TF, *theirs), [(m, t) for m, t, g in zip(ours, theirs, grads) if g], tol)


def _int(L, a):
    """An int64 tensor of minidl or torch (L: either library or its nn.functional)."""
    lib = md if L.__name__.startswith("minidl") else __import__("torch")
    return lib.tensor(np.asarray(a, dtype=np.int64))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_against_torch_ctc(dtype, reduction):
    torch = pytest.importorskip("torch")
    TF = torch.nn.functional
    tol = 1e-5 if dtype == np.float32 else 1e-10
    rng = np.random.default_rng(1)
    T, N, C = 12, 4, 6
    lp0 = _log_softmax(rng.standard_normal((T, N, C)), 2)
    padded = rng.integers(1, C, (N, 5))
    padded[1, :3] = [2, 2, 2]                       # repeats: need blanks between them
    il, tl = np.array([12, 9, 7, 1]), np.array([5, 3, 0, 2])   # the last is impossible
    cat = np.concatenate([padded[n, :tl[n]] for n in range(N)])
    for targets, zero_infinity, blank in [(padded, True, 0), (cat, True, 0), (padded, False, 0)]:
        ours, theirs = _both(torch, lp0, dtype=dtype)
        args = (_int(md, targets), _int(md, il), _int(md, tl))
        targs = (_int(torch, targets), _int(torch, il), _int(torch, tl))
        out = F.ctc_loss(ours, *args, reduction=reduction, zero_infinity=zero_infinity)
        ref = TF.ctc_loss(theirs, *targs, reduction=reduction, zero_infinity=zero_infinity)
        if zero_infinity:
            _compare(torch, out, ref, [(ours, theirs)], tol)
        else:   # inf and nan where PyTorch has them
            np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=tol)
    shifted = np.where(padded == 5, 0, padded)        # blank 5: class 0 is a label now
    ours, theirs = _both(torch, lp0[:, 0], dtype=dtype)
    _compare(torch, F.ctc_loss(ours, _int(md, shifted[0]), (12,), (5,), blank=5, reduction=reduction),
             TF.ctc_loss(theirs, _int(torch, shifted[0]), (12,), (5,), blank=5, reduction=reduction),
             [(ours, theirs)], tol)


def test_against_torch_ctc_impossible_gradient_is_nan_where_torchs_is():
    torch = pytest.importorskip("torch")
    lp0 = _log_softmax(np.random.default_rng(2).standard_normal((5, 2, 3)), 2)
    ours, theirs = _both(torch, lp0)
    tg, il, tl = np.array([[1, 1, 2], [1, 2, 1]]), np.array([5, 2]), np.array([3, 3])
    F.ctc_loss(ours, _int(md, tg), _int(md, il), _int(md, tl), reduction="sum").backward()
    torch.nn.functional.ctc_loss(theirs, _int(torch, tg), _int(torch, il), _int(torch, tl), reduction="sum").backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-10, atol=1e-12, equal_nan=True)
    assert np.isnan(ours.grad.numpy()[:2, 1]).all()


def test_gradcheck_ctc_longer_sequences_with_repeats():
    rng = np.random.default_rng(4)
    z = _f64(rng.standard_normal((9, 2, 4)), True)
    tg, il, tl = md.tensor([[1, 1, 3], [2, 3, 2]]), md.tensor([9, 7]), md.tensor([3, 3])
    assert gradcheck(lambda z: F.ctc_loss(F.log_softmax(z, 2), tg, il, tl, reduction="none"), (z,))
