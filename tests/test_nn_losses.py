"""Losses: cross_entropy with every option against a NumPy reference written from PyTorch's
documented formulas, gradcheck, nll_loss and mse_loss, modules, and PyTorch as an oracle."""
import itertools
import warnings

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.testing import OpSpec, check_forward, check_gradcheck, forward_cases, spec_id


def _broadcast_on_purpose(loss):
    """A target that broadcasts on purpose: PyTorch's size warning (tested on its own) is expected."""
    def run(*args):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Using a target size")
            return loss(*args)
    return run


def log_softmax_ref(x):
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def ce_reference(x, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """Per element, with classes moved last: loss = (1-e) * -w[y] logp[y] + e/C * -sum_c w[c] logp[c];
    mean divides by the summed target weights of non-ignored elements."""
    C = x.shape[1]
    logp = np.moveaxis(log_softmax_ref(x), 1, -1).reshape(-1, C)
    t = target.reshape(-1)
    w = np.ones(C) if weight is None else weight
    losses, wsum = [], 0.0
    for lp, y in zip(logp, t):
        if y == ignore_index:
            losses.append(0.0)
            continue
        losses.append((1 - label_smoothing) * -w[y] * lp[y] + label_smoothing / C * -(w * lp).sum())
        wsum += w[y]
    losses = np.array(losses).reshape(target.shape)
    if reduction == "none":
        return losses
    return losses.sum() / wsum if reduction == "mean" else losses.sum()


def ce_probs_reference(x, target, weight=None, reduction="mean", label_smoothing=0.0):
    C = x.shape[1]
    t = target * (1 - label_smoothing) + label_smoothing / C
    w = np.ones(C) if weight is None else weight
    losses = -(log_softmax_ref(x) * t * w.reshape((1, C) + (1,) * (x.ndim - 2))).sum(axis=1)
    if reduction == "none":
        return losses
    return losses.sum() / losses.size if reduction == "mean" else losses.sum()


def _targets(rng, shape, C, ignore):
    t = rng.integers(0, C, size=shape)
    if ignore:
        t.reshape(-1)[::3] = -100 if ignore == "default" else 1
    return t


SHAPES = {"2d": (5, 4), "4d": (2, 3, 2, 3)}
CE_CASES = list(itertools.product(SHAPES, (False, True), (None, "default", "one"), ("mean", "sum", "none"),
                                  (0.0, 0.25)))


def _ce_spec(shape_name, weighted, ignore, reduction, smoothing):
    shape = SHAPES[shape_name]
    C = shape[1]
    tshape = (shape[0],) + shape[2:]
    ignore_index = 1 if ignore == "one" else -100

    def inputs(rng):
        x = rng.standard_normal(shape) * 2
        t = _targets(rng, tshape, C, ignore)
        return (x, t) + ((rng.uniform(0.2, 2.0, C),) if weighted else ())

    def op(x, t, w=None):
        return F.cross_entropy(x, t, weight=w, ignore_index=ignore_index, reduction=reduction,
                               label_smoothing=smoothing)

    def reference(x, t, w=None):
        return ce_reference(x, t, w, ignore_index, reduction, smoothing)

    name = f"ce_{shape_name}_w{int(weighted)}_ign{ignore}_{reduction}_ls{smoothing}"
    return OpSpec(name=name, op=op, reference=reference, inputs=inputs, grad_inputs=[0])


CE_SPECS = [_ce_spec(*c) for c in CE_CASES]


def _probs_spec(shape_name, weighted, reduction, smoothing):
    shape = SHAPES[shape_name]

    def inputs(rng):
        t = rng.uniform(size=shape)
        t /= t.sum(axis=1, keepdims=True)
        return (rng.standard_normal(shape), t) + ((rng.uniform(0.2, 2.0, shape[1]),) if weighted else ())

    return OpSpec(name=f"ce_probs_{shape_name}_w{int(weighted)}_{reduction}_ls{smoothing}",
                  op=lambda x, t, w=None: F.cross_entropy(x, t, weight=w, reduction=reduction,
                                                          label_smoothing=smoothing),
                  reference=lambda x, t, w=None: ce_probs_reference(x, t, w, reduction, smoothing),
                  inputs=inputs, grad_inputs=[0, 1])


PROB_SPECS = [_probs_spec(*c) for c in itertools.product(SHAPES, (False, True), ("mean", "sum", "none"), (0.0, 0.2))]

OTHER_SPECS = [
    OpSpec(name="nll_loss_weighted_ignore",
           op=lambda x, t, w: F.nll_loss(x, t, weight=w, ignore_index=2),
           reference=lambda x, t, w: (-(w[np.where(t == 2, 0, t)] * (t != 2)
                                        * np.take_along_axis(x, np.where(t == 2, 0, t)[:, None], 1)[:, 0]).sum()
                                      / (w[np.where(t == 2, 0, t)] * (t != 2)).sum()),
           inputs=lambda rng: (rng.standard_normal((6, 4)), np.array([0, 2, 3, 1, 2, 3]), rng.uniform(0.5, 2, 4)),
           grad_inputs=[0]),
    OpSpec(name="nll_loss_4d_none", op=lambda x, t: F.nll_loss(x, t, reduction="none"),
           reference=lambda x, t: -np.take_along_axis(x, t[:, None], 1)[:, 0],
           inputs=lambda rng: (rng.standard_normal((2, 3, 2, 2)), rng.integers(0, 3, (2, 2, 2))), grad_inputs=[0]),
    OpSpec(name="mse_mean", op=lambda a, b: F.mse_loss(a, b), reference=lambda a, b: ((a - b) ** 2).mean(),
           inputs=lambda rng: (rng.standard_normal((3, 4)), rng.standard_normal((3, 4)))),
    OpSpec(name="mse_sum_broadcast", op=_broadcast_on_purpose(lambda a, b: F.mse_loss(a, b, reduction="sum")),
           reference=lambda a, b: ((a - b) ** 2).sum(),
           inputs=lambda rng: (rng.standard_normal((3, 4)), rng.standard_normal(4))),
    OpSpec(name="mse_none", op=lambda a, b: F.mse_loss(a, b, reduction="none"), reference=lambda a, b: (a - b) ** 2,
           inputs=lambda rng: (rng.standard_normal((2, 3)), rng.standard_normal((2, 3)))),
]

ALL = CE_SPECS + PROB_SPECS + OTHER_SPECS


@pytest.mark.parametrize("spec,dtype,device", forward_cases(ALL))
def test_forward(spec, dtype, device):
    check_forward(spec, dtype, device)


@pytest.mark.parametrize("spec", ALL, ids=spec_id)
def test_gradcheck(spec):
    assert check_gradcheck(spec)


def test_cross_entropy_backward_is_softmax_minus_smoothed_onehot():
    rng = np.random.default_rng(0)
    x = md.tensor(rng.standard_normal((4, 5)), requires_grad=True)
    t = np.array([0, 3, 4, 1])
    F.cross_entropy(x, md.tensor(t), reduction="sum", label_smoothing=0.1).backward()
    p = np.exp(log_softmax_ref(x.detach().numpy()))
    target = np.full((4, 5), 0.1 / 5)
    target[np.arange(4), t] += 0.9
    np.testing.assert_allclose(x.grad.numpy(), p - target, atol=1e-12)
    assert type(F.cross_entropy(x, t)._node).__name__ == "CrossEntropy"   # one fused node


def test_cross_entropy_unbatched_all_ignored_and_errors():
    rng = np.random.default_rng(1)
    x = rng.standard_normal(5)
    loss = F.cross_entropy(md.tensor(x), md.tensor(3))
    assert loss.item() == pytest.approx(-log_softmax_ref(x[None])[0, 3])
    assert F.cross_entropy(md.tensor(x), 3, reduction="none").shape == ()
    xx = md.tensor(rng.standard_normal((2, 5)))
    assert np.isnan(F.cross_entropy(xx, [-100, -100]).item())       # 0 / 0, as PyTorch
    assert F.cross_entropy(xx, [-100, -100], reduction="sum").item() == 0
    with pytest.raises(IndexError, match="out of bounds"):
        F.cross_entropy(xx, [0, 5])
    with pytest.raises(ValueError, match="expected target of shape"):
        F.cross_entropy(xx, [0, 1, 2])
    with pytest.raises(ValueError, match="reduction"):
        F.cross_entropy(xx, [0, 1], reduction="avg")
    with pytest.raises(ValueError, match="weight must have shape"):
        F.cross_entropy(xx, [0, 1], weight=md.ones(4))
    with pytest.raises(ValueError, match="label_smoothing"):
        F.cross_entropy(xx, [0, 1], label_smoothing=1.5)


def test_cross_entropy_large_logits_are_stable():
    x = md.tensor([[1000.0, 0.0, -1000.0]], requires_grad=True)
    loss = F.cross_entropy(x, [2])
    assert loss.item() == pytest.approx(2000.0)
    loss.backward()
    assert np.all(np.isfinite(x.grad.numpy()))


def test_loss_modules():
    rng = np.random.default_rng(2)
    x = md.tensor(rng.standard_normal((6, 3)))
    t = md.tensor(np.array([0, 1, 2, 1, 1, 0]))
    w = md.tensor([1.0, 2.0, 0.5])
    crit = nn.CrossEntropyLoss(weight=w, label_smoothing=0.1, ignore_index=0)
    assert "weight" in crit.state_dict()
    assert crit(x, t).item() == pytest.approx(F.cross_entropy(x, t, w, 0, "mean", 0.1).item())
    assert nn.NLLLoss(reduction="sum")(F.log_softmax(x, 1), t).item() == pytest.approx(
        F.cross_entropy(x, t, reduction="sum").item(), rel=1e-6)
    assert nn.MSELoss()(x, md.zeros(6, 3)).item() == pytest.approx((x.numpy() ** 2).mean(), rel=1e-6)
    with pytest.warns(UserWarning, match="deprecated"):
        assert nn.MSELoss(size_average=False).reduction == "sum"


@pytest.mark.parametrize("case", [c for c in CE_CASES if c[1]] + [c for c in CE_CASES if not c[1]][:6],
                         ids=lambda c: "_".join(map(str, c)))
def test_cross_entropy_matches_torch(case):
    torch = pytest.importorskip("torch")
    shape_name, weighted, ignore, reduction, smoothing = case
    shape = SHAPES[shape_name]
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape)
    t = _targets(rng, (shape[0],) + shape[2:], shape[1], ignore)
    w = rng.uniform(0.2, 2.0, shape[1]) if weighted else None
    ignore_index = 1 if ignore == "one" else -100
    mx, tx = md.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y = F.cross_entropy(mx, md.tensor(t), None if w is None else md.tensor(w), ignore_index, reduction, smoothing)
    ty = torch.nn.functional.cross_entropy(tx, torch.tensor(t), None if w is None else torch.tensor(w),
                                           ignore_index=ignore_index, reduction=reduction, label_smoothing=smoothing)
    g = rng.standard_normal(y.shape)
    y.backward(g)
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(mx.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_prob_targets_and_nll_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 4, 2))
    t = rng.uniform(size=(3, 4, 2))
    t /= t.sum(axis=1, keepdims=True)
    w = rng.uniform(0.5, 2, 4)
    for reduction in ("mean", "sum", "none"):
        y = F.cross_entropy(md.tensor(x), md.tensor(t), md.tensor(w), reduction=reduction, label_smoothing=0.3)
        ty = torch.nn.functional.cross_entropy(torch.tensor(x), torch.tensor(t), torch.tensor(w),
                                               reduction=reduction, label_smoothing=0.3)
        np.testing.assert_allclose(y.numpy(), ty.numpy(), rtol=1e-10)
        lp = log_softmax_ref(x)
        ti = rng.integers(0, 4, (3, 2))
        y = F.nll_loss(md.tensor(lp), md.tensor(ti), md.tensor(w), ignore_index=3, reduction=reduction)
        ty = torch.nn.functional.nll_loss(torch.tensor(lp), torch.tensor(ti), torch.tensor(w), ignore_index=3,
                                          reduction=reduction)
        np.testing.assert_allclose(y.numpy(), ty.numpy(), rtol=1e-10)


# nothing to average: every target ignored ---------------------------------------------------------------
NOTHING_COUNTS = list(itertools.product(["cross_entropy", "nll_loss"], ["mean", "sum", "none"], [0.0, 0.2],
                                        [False, True]))


@pytest.mark.parametrize("loss,reduction,smoothing,weighted", [c for c in NOTHING_COUNTS if c[0] == "cross_entropy"
                                                              or not c[2]], ids=lambda v: str(v))
def test_all_targets_ignored_give_a_zero_gradient(loss, reduction, smoothing, weighted):
    """PyTorch's answer: the mean is 0/0 = nan, but no element takes part, so the gradient
    is exactly 0 (not nan, which an optimizer step would write into every parameter)."""
    x = md.tensor(np.random.default_rng(5).standard_normal((3, 4, 2)), requires_grad=True)
    target = np.full((3, 2), -100)
    kwargs = {"weight": md.tensor([0.5, 1.0, 2.0, 0.1]) if weighted else None, "reduction": reduction}
    if smoothing:
        kwargs["label_smoothing"] = smoothing
    y = getattr(F, loss)(x, target, **kwargs)
    with np.errstate(invalid="ignore"):
        y.sum().backward()
    if reduction == "mean":
        assert np.isnan(y.item())
    else:
        np.testing.assert_array_equal(y.detach().numpy(), 0)
    np.testing.assert_array_equal(x.grad.numpy(), 0)


@pytest.mark.parametrize("loss,reduction,smoothing,weighted", [c for c in NOTHING_COUNTS if c[0] == "cross_entropy"
                                                              or not c[2]], ids=lambda v: str(v))
@pytest.mark.parametrize("targets", ["all_ignored", "some_ignored_rest_zero_weight"])
def test_nothing_to_average_matches_torch(loss, reduction, smoothing, weighted, targets):
    """Also where the non-ignored targets all have class weight 0: PyTorch's gradient is nan
    on those rows (0 * inf) and 0 on the ignored ones; minidl's is the same."""
    torch = pytest.importorskip("torch")
    if targets == "some_ignored_rest_zero_weight" and not weighted:
        pytest.skip("needs class weights")
    x = np.random.default_rng(6).standard_normal((4, 3))
    t = np.array([-100, 0, -100, 2]) if targets != "all_ignored" else np.full(4, -100)
    w = np.array([0.0, 1.5, 0.0]) if weighted else None
    mx, tx = md.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    mkw = {"weight": None if w is None else md.tensor(w), "reduction": reduction}
    tkw = {"weight": None if w is None else torch.tensor(w), "reduction": reduction}
    if smoothing:
        mkw["label_smoothing"] = tkw["label_smoothing"] = smoothing
    y = getattr(F, loss)(mx, md.tensor(t), **mkw)
    ty = getattr(torch.nn.functional, loss)(tx, torch.tensor(t), **tkw)
    with np.errstate(invalid="ignore", divide="ignore"):
        y.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12, equal_nan=True)
    np.testing.assert_allclose(mx.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12, equal_nan=True)
