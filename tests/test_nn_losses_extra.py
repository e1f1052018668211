"""Elementwise losses (binary cross entropy on probabilities and logits, l1, smooth l1,
huber, kl_div) and cosine_similarity: NumPy references and gradcheck through OpSpec,
PyTorch as the oracle for values and gradients of every option, modules, and bad input."""
import warnings

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.testing import OpSpec, check_forward, check_gradcheck, forward_cases, spec_id
from test_nn_losses import _broadcast_on_purpose


def _sp(z):
    return np.logaddexp(0, z)


def _reduce(l, reduction):
    return {"none": l, "sum": l.sum(), "mean": l.mean(), "batchmean": l.sum() / l.shape[0]}[reduction]


def _probs(rng, shape):
    return rng.uniform(0.05, 0.95, shape)


SPECS = []
for red in ("mean", "sum", "none"):
    SPECS += [
        OpSpec(f"bce_{red}", lambda x, y, w, red=red: F.binary_cross_entropy(x, y, w, reduction=red),
               lambda x, y, w, red=red: _reduce(-w * (y * np.log(x) + (1 - y) * np.log(1 - x)), red),
               lambda rng: (_probs(rng, (3, 4)), _probs(rng, (3, 4)), rng.uniform(0.5, 2, 4)), grad_inputs=[0, 1]),
        OpSpec(f"bce_logits_{red}",
               lambda x, y, w, p, red=red: F.binary_cross_entropy_with_logits(x, y, w, reduction=red, pos_weight=p),
               lambda x, y, w, p, red=red: _reduce(w * (p * y * _sp(-x) + (1 - y) * _sp(x)), red),
               lambda rng: (rng.standard_normal((3, 4)) * 3, _probs(rng, (3, 4)), rng.uniform(0.5, 2, (3, 1)),
                            rng.uniform(0.5, 3, 4)), grad_inputs=[0, 1]),
        OpSpec(f"l1_{red}", lambda x, y, red=red: F.l1_loss(x, y, reduction=red),
               lambda x, y, red=red: _reduce(np.abs(x - y), red),
               lambda rng: (rng.standard_normal((3, 4)), rng.standard_normal((3, 4)))),
        OpSpec(f"smooth_l1_{red}", lambda x, y, red=red: F.smooth_l1_loss(x, y, reduction=red, beta=0.7),
               lambda x, y, red=red: _reduce(np.where(np.abs(x - y) < 0.7, 0.5 * (x - y) ** 2 / 0.7,
                                                      np.abs(x - y) - 0.35), red),
               lambda rng: (rng.standard_normal((3, 4)), rng.standard_normal((3, 4)))),
        OpSpec(f"huber_{red}", lambda x, y, red=red: F.huber_loss(x, y, reduction=red, delta=0.6),
               lambda x, y, red=red: _reduce(np.where(np.abs(x - y) < 0.6, 0.5 * (x - y) ** 2,
                                                      0.6 * (np.abs(x - y) - 0.3)), red),
               lambda rng: (rng.standard_normal((3, 4)), rng.standard_normal((3, 4)))),
    ]
for red in ("mean", "sum", "none", "batchmean"):
    SPECS += [
        OpSpec(f"kl_div_{red}", lambda x, y, red=red: F.kl_div(x, y, reduction=red),
               lambda x, y, red=red: _reduce(y * (np.log(y) - x), red),
               lambda rng: (np.log(_probs(rng, (3, 4))), _probs(rng, (3, 4)))),
        OpSpec(f"kl_div_log_target_{red}", lambda x, y, red=red: F.kl_div(x, y, reduction=red, log_target=True),
               lambda x, y, red=red: _reduce(np.exp(y) * (y - x), red),
               lambda rng: (np.log(_probs(rng, (3, 4))), np.log(_probs(rng, (3, 4))))),
    ]
SPECS += [
    OpSpec("l1_broadcast", _broadcast_on_purpose(lambda x, y: F.l1_loss(x, y, reduction="sum")), lambda x, y: np.abs(x - y).sum(),
           lambda rng: (rng.standard_normal((3, 4)), rng.standard_normal(4))),
    OpSpec("cosine_similarity_dim1", lambda a, b: F.cosine_similarity(a, b),
           lambda a, b: (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1),
           lambda rng: (rng.standard_normal((3, 4)), rng.standard_normal((3, 4)))),
    OpSpec("cosine_similarity_broadcast_last", lambda a, b: F.cosine_similarity(a, b, dim=-1),
           lambda a, b: (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1),
           lambda rng: (rng.standard_normal((2, 3, 4)), rng.standard_normal(4))),
]


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward_matches_numpy_reference(spec, dtype, device):
    check_forward(spec, dtype, device)


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck(spec):
    assert check_gradcheck(spec)


# PyTorch as the oracle ---------------------------------------------------------------------

def _both(fn_name, arrays, grads, **kwargs):
    """Run F.<fn_name> in minidl and torch on the same float64 arrays; return both outputs and the
    gradients (of a random cotangent) of the arrays at the positions in ``grads``."""
    torch = pytest.importorskip("torch")
    tF = torch.nn.functional
    ours = [md.tensor(a, requires_grad=i in grads) if a is not None else None for i, a in enumerate(arrays)]
    theirs = [torch.tensor(a, requires_grad=i in grads) if a is not None else None for i, a in enumerate(arrays)]
    kw_ours = {k: (md.tensor(v) if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()}
    kw_theirs = {k: (torch.tensor(v) if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()}
    out = getattr(F, fn_name)(*ours, **kw_ours)
    ref = getattr(tF, fn_name)(*theirs, **kw_theirs)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-10, atol=1e-12)
    v = np.random.default_rng(1).standard_normal(out.shape)
    out.backward(md.tensor(v))
    ref.backward(torch.tensor(v))
    for i in grads:
        np.testing.assert_allclose(ours[i].grad.numpy(), theirs[i].grad.numpy(), rtol=1e-7, atol=1e-12,
                                   err_msg=f"{fn_name} gradient of argument {i}")


REDUCTIONS = ("mean", "sum", "none")
rng = np.random.default_rng(0)
P, Q = _probs(rng, (4, 3)), _probs(rng, (4, 3))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy_matches_torch(reduction, weighted):
    w = {"weight": rng.uniform(0.5, 2, 3)} if weighted else {}
    _both("binary_cross_entropy", [P, Q], [0, 1], reduction=reduction, **w)


def test_binary_cross_entropy_at_0_and_1_is_finite_as_torch():
    """Logs are clamped at -100 and the gradient's denominator at 1e-12."""
    _both("binary_cross_entropy", [np.array([0.0, 1.0, 0.5, 1.0]), np.array([1.0, 0.0, 0.3, 1.0])], [0],
          reduction="sum")


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("options", ["plain", "weight", "pos_weight", "both"])
def test_binary_cross_entropy_with_logits_matches_torch(reduction, options):
    kw = {}
    if options in ("weight", "both"):
        kw["weight"] = rng.uniform(0.5, 2, (4, 1))
    if options in ("pos_weight", "both"):
        kw["pos_weight"] = rng.uniform(0.5, 3, 3)
    _both("binary_cross_entropy_with_logits", [rng.standard_normal((4, 3)) * 30, Q], [0, 1],
          reduction=reduction, **kw)


@pytest.mark.parametrize("fn, name", [("binary_cross_entropy", "weight"),
                                      ("binary_cross_entropy_with_logits", "weight"),
                                      ("binary_cross_entropy_with_logits", "pos_weight")])
def test_a_bce_weight_that_requires_grad_is_refused_as_torch_refuses_it(fn, name):
    x = md.tensor(P, requires_grad=True)
    w = md.tensor(rng.uniform(0.5, 2, 3), requires_grad=True)
    with pytest.raises(RuntimeError, match=f"not differentiable with respect to argument '{name}'"):
        getattr(F, fn)(x, md.tensor(Q), **{name: w})
    with md.no_grad():     # evaluation: nothing would be differentiated
        assert getattr(F, fn)(x, md.tensor(Q), **{name: w}).shape == ()


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name,kw", [("l1_loss", {}), ("smooth_l1_loss", {}), ("smooth_l1_loss", {"beta": 0.3}),
                                     ("smooth_l1_loss", {"beta": 0.0}), ("huber_loss", {}),
                                     ("huber_loss", {"delta": 0.4})])
def test_regression_losses_match_torch(name, kw, reduction):
    x = rng.standard_normal((4, 3))
    y = x + rng.standard_normal((4, 3))
    y[0, 0] = x[0, 0]          # d = 0: the subgradient PyTorch picks
    _both(name, [x, y], [0, 1], reduction=reduction, **kw)


@pytest.mark.parametrize("reduction", REDUCTIONS + ("batchmean",))
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_matches_torch(reduction, log_target):
    x = np.log(P)
    t = np.log(Q) if log_target else Q.copy()
    if not log_target:
        t[0, 0] = 0.0          # a zero probability contributes 0
    grads = [0, 1] if log_target else [0]
    with pytest.warns(UserWarning) if reduction == "mean" else _nothing():
        _both("kl_div", [x, t], grads, reduction=reduction, log_target=log_target)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("shapes,dim", [(((4, 3), (4, 3)), 1), (((2, 3, 4), (3, 1)), 1), (((2, 5), (5,)), -1)])
def test_cosine_similarity_matches_torch(shapes, dim):
    a, b = (rng.standard_normal(s) for s in shapes)
    _both("cosine_similarity", [a, b], [0, 1], dim=dim)


def test_cosine_similarity_of_a_zero_vector_has_torch_value_and_gradient():
    a = np.zeros((2, 3))
    a[1] = [1e-9, 0, 0]
    _both("cosine_similarity", [a, rng.standard_normal((2, 3))], [0, 1])


# modules ------------------------------------------------------------------------------------

MODULES = [
    ("BCELoss", {}, True), ("BCELoss", {"reduction": "sum"}, True), ("BCEWithLogitsLoss", {}, False),
    ("BCEWithLogitsLoss", {"pos_weight": np.array([1.0, 2.0, 3.0])}, False), ("L1Loss", {}, False),
    ("SmoothL1Loss", {"beta": 0.5}, False), ("HuberLoss", {"delta": 0.5}, False),
    ("KLDivLoss", {"reduction": "batchmean"}, True), ("KLDivLoss", {"reduction": "sum", "log_target": True}, True),
]


@pytest.mark.parametrize("name,kw,log_probs", MODULES)
def test_loss_modules_match_torch(name, kw, log_probs):
    torch = pytest.importorskip("torch")
    x = np.log(P) if name == "KLDivLoss" else (P if log_probs else rng.standard_normal((4, 3)))
    y = np.log(Q) if kw.get("log_target") else Q
    ours = getattr(nn, name)(**{k: md.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()})
    theirs = getattr(torch.nn, name)(**{k: torch.tensor(v) if isinstance(v, np.ndarray) else v
                                        for k, v in kw.items()})
    np.testing.assert_allclose(ours(md.tensor(x), md.tensor(y)).numpy(),
                               theirs(torch.tensor(x), torch.tensor(y)).numpy(), rtol=1e-10)
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]


def test_cosine_similarity_module_matches_torch():
    torch = pytest.importorskip("torch")
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 4))
    np.testing.assert_allclose(nn.CosineSimilarity(dim=2, eps=1e-6)(md.tensor(a), md.tensor(b)).numpy(),
                               torch.nn.CosineSimilarity(dim=2, eps=1e-6)(torch.tensor(a), torch.tensor(b)).numpy())


def test_legacy_size_average_and_reduce_map_to_a_reduction():
    x, y = md.tensor(P), md.tensor(Q)
    assert nn.L1Loss(reduce=False).reduction == "none"
    assert nn.BCELoss(size_average=False).reduction == "sum"
    np.testing.assert_allclose(F.l1_loss(x, y, size_average=False).numpy(), np.abs(P - Q).sum())


# bad input ---------------------------------------------------------------------------------

def _t(shape, low=0.1, high=0.9):
    return md.tensor(np.random.default_rng(0).uniform(low, high, shape))


@pytest.mark.parametrize("call,exc,match", [
    (lambda: F.binary_cross_entropy(_t((3, 2)), _t(3)), ValueError, r"target size \(\[3\]\).*input size \(\[3, 2\]\)"),
    (lambda: F.binary_cross_entropy(_t((3, 2), 0.5, 1.5), _t((3, 2))), RuntimeError, "between 0 and 1"),
    (lambda: F.binary_cross_entropy(_t((3, 2)), _t((3, 2)), weight=_t(4)), RuntimeError,
     r"weight broadcastable to the input's shape \[3, 2\], got weight of shape \[4\]"),
    (lambda: F.binary_cross_entropy_with_logits(_t((3, 2)), _t(3)), ValueError,
     r"Target size \(\[3\]\) must be the same as input size \(\[3, 2\]\)"),
    (lambda: F.binary_cross_entropy_with_logits(_t((3, 2)), _t((3, 2)), pos_weight=_t(3)), RuntimeError,
     r"pos_weight broadcastable"),
    (lambda: F.l1_loss(_t((3, 2)), _t(4)), RuntimeError, r"target of shape \[4\] does not broadcast.*\[3, 2\]"),
    (lambda: F.l1_loss(_t((3, 2)), _t((3, 2)), reduction="avg"), ValueError, "avg is not a valid value"),
    (lambda: F.kl_div(_t((3, 2)), _t((3, 2)), reduction="avg"), ValueError, "'batchmean'"),
    (lambda: F.smooth_l1_loss(_t(3), _t(3), beta=-1.0), RuntimeError, "negative values for beta.*got -1.0"),
    (lambda: F.huber_loss(_t(3), _t(3), delta=0.0), RuntimeError, "non-positive values for delta.*got 0.0"),
    (lambda: F.l1_loss(md.tensor([1, 2]), md.tensor([1, 2])), RuntimeError, "floating point input, got dtype .*int64"),
    (lambda: F.l1_loss(_t(3), _t(3).float()), RuntimeError, "dtypes differ"),
    (lambda: F.cosine_similarity(_t((3, 2)), _t((4, 2))), RuntimeError, r"\[3, 2\].*\[4, 2\] do not broadcast"),
    (lambda: F.cosine_similarity(_t((3, 2)), _t((3, 2)), dim=3), IndexError,
     r"expected to be in range of \[-2, 1\], but got 3"),
])
def test_bad_input_raises_torch_exception_type_naming_expected_and_got(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_integer_target_is_promoted_to_the_input_dtype():
    x = md.tensor([0.5, 2.0])
    np.testing.assert_allclose(F.l1_loss(x, md.tensor([1, 2])).numpy(), 0.25)


def test_empty_input_gives_nan_mean_and_zero_sum_as_torch():
    e = md.zeros(0, 3)
    assert np.isnan(F.l1_loss(e, e).item())
    assert F.binary_cross_entropy(e, e, reduction="sum").item() == 0.0
    assert F.kl_div(e, e, reduction="none").shape == (0, 3)


@pytest.mark.parametrize("loss", [F.mse_loss, F.l1_loss, F.smooth_l1_loss, F.huber_loss])
def test_regression_losses_warn_when_the_target_only_broadcasts(loss):
    """(N, 1) against (N,) broadcasts to (N, N): PyTorch warns, and so does minidl."""
    with pytest.warns(UserWarning, match=r"target size \(\[3\]\) that is different to the input size \(\[3, 1\]\)"):
        loss(md.randn(3, 1), md.randn(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss(md.randn(3, 1), md.randn(3, 1))
