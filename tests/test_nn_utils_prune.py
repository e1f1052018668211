"""nn.utils.prune: masks, the <name>_orig / <name>_mask reparametrization, iterative and global
pruning, remove; against NumPy references and against PyTorch's torch.nn.utils.prune."""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
from minidl.autograd import gradcheck
from minidl.nn.utils import prune

# distinct magnitudes everywhere, so which entries are the smallest is never a tie
_RNG = np.random.default_rng(0)
_W = ((_RNG.permutation(24) + 1) * _RNG.choice([-1, 1], 24)).reshape(4, 6).astype(np.float32)


def _linear(w=_W):
    m = nn.Linear(w.shape[1], w.shape[0])
    m.weight.data = md.tensor(w.copy())
    return m


def _smallest_mask(scores, k):
    """Reference: ones with the k entries of smallest |score| set to 0."""
    mask = np.ones(scores.size, np.float32)
    mask[np.argsort(np.abs(scores).ravel(), kind="stable")[:k]] = 0
    return mask.reshape(scores.shape)


# the reparametrization ------------------------------------------------------------------------
def test_reparametrization_names_state_dict_and_forward():
    m = _linear()
    assert prune.l1_unstructured(m, "weight", amount=5) is m
    assert [n for n, _ in m.named_parameters()] == ["bias", "weight_orig"]
    assert [n for n, _ in m.named_buffers()] == ["weight_mask"]
    assert list(m.state_dict()) == ["bias", "weight_orig", "weight_mask"]
    assert isinstance(m.weight_orig, nn.Parameter) and not isinstance(m.weight, nn.Parameter)
    mask = _smallest_mask(_W, 5)
    np.testing.assert_array_equal(m.weight_mask.numpy(), mask)
    np.testing.assert_array_equal(m.weight_orig.detach().numpy(), _W)   # _orig keeps the pruned values
    np.testing.assert_array_equal(m.weight.detach().numpy(), _W * mask)
    # the pre-hook recomputes weight from a changed _orig at the next call
    m.weight_orig.data = md.tensor(_W + 1)
    x = np.ones((2, 6), np.float32)
    y = m(md.tensor(x))
    np.testing.assert_array_equal(m.weight.detach().numpy(), (_W + 1) * mask)
    np.testing.assert_allclose(y.detach().numpy(), x @ ((_W + 1) * mask).T + m.bias.detach().numpy(), rtol=1e-6)
    assert prune.is_pruned(m) and prune.is_pruned(nn.Sequential(nn.ReLU(), m))
    assert not prune.is_pruned(nn.Sequential(nn.ReLU(), _linear()))


def test_gradient_reaches_orig_masked():
    m = _linear()
    prune.l1_unstructured(m, "weight", amount=0.25)
    mask = _smallest_mask(_W, 6)
    x = np.random.default_rng(1).standard_normal((3, 6)).astype(np.float32)
    up = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    (m(md.tensor(x)) * md.tensor(up)).sum().backward()
    np.testing.assert_allclose(m.weight_orig.grad.numpy(), mask * (up.T @ x), rtol=1e-5, atol=1e-6)
    assert m.weight_mask.grad is None


def test_gradcheck_pruned_weight_float64():
    m = _linear(_W.astype(np.float64)).double()
    prune.ln_structured(m, "weight", amount=1, n=2, dim=0)
    prune.l1_unstructured(m, "weight", amount=3)
    x = md.tensor(np.random.default_rng(3).standard_normal((2, 6)))

    def f(w):
        m.weight_orig.data = w.detach()
        return (m.weight_mask * w) @ x.t()

    assert gradcheck(f, (md.tensor(_W.astype(np.float64), requires_grad=True),))
    assert gradcheck(lambda t: prune.L1Unstructured(4).prune(t),
                     (md.tensor(_W.astype(np.float64), requires_grad=True),))


def test_remove_makes_pruning_permanent():
    m = _linear()
    orig = m.weight
    prune.random_unstructured(m, "weight", amount=7)
    mask = m.weight_mask.numpy().copy()
    assert prune.remove(m, "weight") is m
    assert m.weight is orig and isinstance(m.weight, nn.Parameter)   # the same Parameter object
    assert list(m.state_dict()) == ["weight", "bias"] or list(m.state_dict()) == ["bias", "weight"]
    assert "weight_mask" not in dict(m.named_buffers()) and not m._forward_pre_hooks
    np.testing.assert_array_equal(m.weight.detach().numpy(), _W * mask)
    assert not prune.is_pruned(m)
    with pytest.raises(ValueError, match="has to be pruned"):
        prune.remove(m, "weight")


def test_state_dict_round_trip_into_pruned_module():
    a, b = _linear(), _linear(_W[::-1].copy())
    prune.l1_unstructured(a, "weight", 4)
    prune.l1_unstructured(b, "weight", 9)
    b.load_state_dict(a.state_dict())
    np.testing.assert_array_equal(b.weight_mask.numpy(), a.weight_mask.numpy())
    b(md.ones(1, 6))
    np.testing.assert_array_equal(b.weight.detach().numpy(), a.weight.detach().numpy())


# the methods ----------------------------------------------------------------------------------
def test_amount_fraction_rounds_half_to_even_and_int_counts():
    w = np.arange(1, 11, dtype=np.float32).reshape(2, 5)
    for amount, k in [(0.25, 2), (0.35, 4), (0.45, 4), (3, 3), (0, 0), (1.0, 10), (10, 10)]:
        pruned = prune.L1Unstructured(amount).prune(md.tensor(w)).numpy()
        np.testing.assert_array_equal(pruned, w * _smallest_mask(w, k))


def test_importance_scores_pick_the_entries():
    m = _linear()
    scores = np.random.default_rng(4).permutation(24).reshape(4, 6).astype(np.float32)
    prune.l1_unstructured(m, "weight", 10, importance_scores=md.tensor(scores))
    np.testing.assert_array_equal(m.weight_mask.numpy(), _smallest_mask(scores, 10))


def test_iterative_pruning_acts_on_what_is_left():
    m = _linear()
    prune.l1_unstructured(m, "weight", 0.5)          # 12 of 24
    prune.l1_unstructured(m, "weight", 0.5)          # 6 of the 12 left
    hook, = m._forward_pre_hooks.values()
    assert isinstance(hook, prune.PruningContainer) and len(hook) == 2
    assert isinstance(hook[0], prune.L1Unstructured) and [type(h) for h in hook] == [prune.L1Unstructured] * 2
    np.testing.assert_array_equal(m.weight_mask.numpy(), _smallest_mask(_W, 18))
    # a structured method sees only the channels still alive: row norms of the kept rows
    prune.ln_structured(m, "weight", amount=1, n=1, dim=0)
    # (the scores are the current, masked weight; rows already all zero are not candidates)
    mask = _smallest_mask(_W, 18)
    norms = np.where(mask.sum(1) != 0, np.abs(_W * mask).sum(1), np.inf)
    expected = mask.copy()
    expected[np.argmin(norms)] = 0
    np.testing.assert_array_equal(m.weight_mask.numpy(), expected)
    assert len(hook) == 3
    # random pruning then never hits an entry already pruned: the zero count adds up
    prune.random_unstructured(m, "weight", 2)
    assert int((m.weight_mask.numpy() == 0).sum()) == int((expected == 0).sum()) + 2
    assert np.all(m.weight_mask.numpy() <= expected)


def test_ln_structured_norms_and_dims():
    w = np.random.default_rng(5).standard_normal((4, 3, 2, 2)).astype(np.float32)
    for n, ref in [(1, lambda a, ax: np.abs(a).sum(ax)), (2, lambda a, ax: np.sqrt((a * a).sum(ax))),
                   (float("inf"), lambda a, ax: np.abs(a).max(ax)), (float("-inf"), lambda a, ax: np.abs(a).min(ax)),
                   ("fro", lambda a, ax: np.sqrt((a * a).sum(ax)))]:
        for dim in (0, 1, -1):
            d = dim % 4
            other = tuple(a for a in range(4) if a != d)
            norms = ref(w, other)
            mask = prune.LnStructured(amount=0.5, n=n, dim=dim).compute_mask(md.tensor(w), md.ones(*w.shape)).numpy()
            drop = np.argsort(norms, kind="stable")[:round(0.5 * w.shape[d])]
            expected = np.ones_like(w)
            idx = [slice(None)] * 4
            idx[d] = drop
            expected[tuple(idx)] = 0
            np.testing.assert_array_equal(mask, expected)


def test_random_methods_use_the_global_generator():
    def run():
        md.manual_seed(7)
        m = _linear()
        prune.random_unstructured(m, "weight", 5)
        prune.random_structured(m, "weight", 2, dim=1)
        return m.weight_mask.numpy().copy()

    a, b = run(), run()
    np.testing.assert_array_equal(a, b)
    dead_cols = np.all(a == 0, axis=0)
    assert dead_cols.sum() >= 2
    md.manual_seed(8)
    m = nn.Conv2d(3, 8, 3)
    prune.random_structured(m, "weight", 0.25, dim=0)
    alive = m.weight_mask.numpy().reshape(8, -1)
    assert sorted(alive.min(1)) == [0, 0] + [1] * 6 and np.all(alive.min(1) == alive.max(1))


def test_identity_and_custom_from_mask():
    m = _linear()
    prune.identity(m, "weight")
    np.testing.assert_array_equal(m.weight_mask.numpy(), np.ones_like(_W))
    custom = (np.arange(24).reshape(4, 6) % 3 != 0).astype(np.float32)
    prune.custom_from_mask(m, "weight", md.tensor(custom))
    np.testing.assert_array_equal(m.weight_mask.numpy(), custom)
    prune.custom_from_mask(m, "weight", md.tensor(custom[::-1].copy()))
    np.testing.assert_array_equal(m.weight_mask.numpy(), custom * custom[::-1])


def test_global_unstructured_across_modules():
    a, b = _linear(), _linear(_W * 1.01 + 0.001)
    prune.l1_unstructured(a, "weight", 4)
    prune.global_unstructured([(a, "weight"), (b, "weight")], prune.L1Unstructured, amount=0.5)
    # among the 44 still unpruned entries (the pruned ones score 0), the 22 smallest go
    flat = np.concatenate([(_W * _smallest_mask(_W, 4)).ravel(), (_W * 1.01 + 0.001).ravel()])
    alive = np.concatenate([_smallest_mask(_W, 4).ravel(), np.ones(24, np.float32)])
    order = [i for i in np.argsort(np.abs(flat), kind="stable") if alive[i]][:22]
    expected = alive.copy()
    expected[order] = 0
    np.testing.assert_array_equal(a.weight_mask.numpy().ravel(), expected[:24])
    np.testing.assert_array_equal(b.weight_mask.numpy().ravel(), expected[24:])
    assert isinstance(b._forward_pre_hooks[next(iter(b._forward_pre_hooks))], prune.CustomFromMask)
    # importance scores per (module, name), and generators of pairs are accepted
    c, d = _linear(), _linear()
    scores = {(c, "weight"): md.zeros(4, 6)}
    prune.global_unstructured(((m, "weight") for m in (c, d)), prune.L1Unstructured, importance_scores=scores,
                              amount=24)
    assert c.weight_mask.numpy().sum() == 0 and d.weight_mask.numpy().sum() == 24


def test_bad_input():
    with pytest.raises(TypeError, match="Invalid type for amount"):
        prune.L1Unstructured("half")
    with pytest.raises(ValueError, match="non-negative integer"):
        prune.RandomUnstructured(-1)
    with pytest.raises(ValueError, match=r"range \[0, 1\]"):
        prune.LnStructured(1.5, n=2)
    m = _linear()
    with pytest.raises(ValueError, match="should be smaller than the number of parameters"):
        prune.l1_unstructured(m, "weight", 25)
    # a failed pruning leaves the module as it was (the parameter registered again, last, as in PyTorch)
    assert [n for n, _ in m.named_parameters()] == ["bias", "weight"] and not prune.is_pruned(m)
    with pytest.raises(ValueError, match="multidimensional"):
        prune.ln_structured(m, "bias", 1, 2, 0)
    with pytest.raises(IndexError, match="Invalid index 2"):
        prune.random_structured(m, "weight", 1, dim=2)
    with pytest.raises(AssertionError, match="same shape"):
        prune.l1_unstructured(m, "weight", 1, importance_scores=md.ones(6, 4))
    with pytest.raises(AttributeError):
        prune.l1_unstructured(m, "nope", 1)
    with pytest.raises(TypeError, match="not an Iterable"):
        prune.global_unstructured(3, prune.L1Unstructured, amount=1)
    with pytest.raises(TypeError, match="must be of type dict"):
        prune.global_unstructured([(m, "weight")], prune.L1Unstructured, importance_scores=[1], amount=1)
    with pytest.raises(TypeError, match='Only "unstructured"'):
        prune.global_unstructured([(m, "weight")], prune.RandomStructured, amount=1)
    with pytest.raises(TypeError, match="not a BasePruningMethod"):
        prune.PruningContainer(prune.Identity()).add_pruning_method(3)
    other = prune.Identity()
    other._tensor_name = "bias"
    first = prune.Identity()
    first._tensor_name = "weight"
    with pytest.raises(ValueError, match="Can only add pruning methods acting on"):
        prune.PruningContainer(first).add_pruning_method(other)
    assert [n for n, _ in m.named_parameters()] == ["bias", "weight"]


# against PyTorch ------------------------------------------------------------------------------
def _torch_pair(kind="linear"):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    if kind == "linear":
        m, t = nn.Linear(6, 4), torch.nn.Linear(6, 4)
    else:
        m, t = nn.Conv2d(3, 4, 2), torch.nn.Conv2d(3, 4, 2)
    n = m.weight.numel()
    w = ((rng.permutation(n) + 1) * rng.choice([-1, 1], n)).reshape(tuple(m.weight.shape)).astype(np.float32)
    m.weight.data = md.tensor(w)
    m.bias.data = md.tensor(np.zeros(4, np.float32))
    with torch.no_grad():
        t.weight.copy_(torch.from_numpy(w.copy()))
        t.bias.zero_()
    return torch, m, t


@pytest.mark.parametrize("kind", ["linear", "conv"])
def test_matches_torch_masks_grads_state_dict_and_remove(kind):
    torch, m, t = _torch_pair(kind)
    tp = pytest.importorskip("torch.nn.utils.prune")
    steps = [("l1_unstructured", dict(amount=0.3)), ("ln_structured", dict(amount=1, n=2, dim=0)),
             ("l1_unstructured", dict(amount=3)), ("ln_structured", dict(amount=0.5, n=float("inf"), dim=-1)),
             ("ln_structured", dict(amount=1, n=1, dim=1)), ("l1_unstructured", dict(amount=0.2))]
    for fn, kw in steps:
        getattr(prune, fn)(m, "weight", **kw)
        getattr(tp, fn)(t, "weight", **kw)
        np.testing.assert_array_equal(m.weight_mask.numpy(), t.weight_mask.numpy(), err_msg=f"{fn} {kw}")
        assert list(m.state_dict()) == list(t.state_dict())
    assert len(next(iter(m._forward_pre_hooks.values()))) == len(next(iter(t._forward_pre_hooks.values())))
    x = np.random.default_rng(12).standard_normal((2, 6) if kind == "linear" else (2, 3, 4, 4)).astype(np.float32)
    m(md.tensor(x)).square().sum().backward()
    t(torch.from_numpy(x)).square().sum().backward()
    np.testing.assert_allclose(m.weight_orig.grad.numpy(), t.weight_orig.grad.numpy(), rtol=1e-5, atol=1e-5)
    prune.remove(m, "weight")
    tp.remove(t, "weight")
    assert list(m.state_dict()) == list(t.state_dict())
    np.testing.assert_array_equal(m.weight.detach().numpy(), t.weight.detach().numpy())


def test_matches_torch_global_and_importance_scores():
    torch, m1, t1 = _torch_pair()
    _, m2, t2 = _torch_pair("conv")
    tp = pytest.importorskip("torch.nn.utils.prune")
    prune.l1_unstructured(m1, "weight", 5)
    tp.l1_unstructured(t1, "weight", 5)
    s = np.random.default_rng(13).permutation(48).reshape(4, 3, 2, 2).astype(np.float32)
    prune.global_unstructured([(m1, "weight"), (m2, "weight")], prune.L1Unstructured, amount=0.4,
                              importance_scores={(m2, "weight"): md.tensor(s)})
    tp.global_unstructured([(t1, "weight"), (t2, "weight")], tp.L1Unstructured, amount=0.4,
                           importance_scores={(t2, "weight"): torch.from_numpy(s)})
    np.testing.assert_array_equal(m1.weight_mask.numpy(), t1.weight_mask.numpy())
    np.testing.assert_array_equal(m2.weight_mask.numpy(), t2.weight_mask.numpy())
    prune.ln_structured(m2, "weight", 2, n=2, dim=0, importance_scores=md.tensor(s))
    tp.ln_structured(t2, "weight", 2, n=2, dim=0, importance_scores=torch.from_numpy(s))
    np.testing.assert_array_equal(m2.weight_mask.numpy(), t2.weight_mask.numpy())
    # "fro" (PyTorch takes it only for norms over at most two dims)
    prune.ln_structured(m1, "weight", 0.5, n="fro", dim=1)
    tp.ln_structured(t1, "weight", 0.5, n="fro", dim=1)
    np.testing.assert_array_equal(m1.weight_mask.numpy(), t1.weight_mask.numpy())


def test_ties_prune_as_many_as_torch():
    """Among equal magnitudes the entries chosen may differ from PyTorch's; the count may not."""
    torch = pytest.importorskip("torch")
    w = np.tile([1.0, -1.0, 2.0], (3, 2)).astype(np.float32)
    ours = prune.L1Unstructured(0.5).prune(md.tensor(w)).numpy()
    tp = pytest.importorskip("torch.nn.utils.prune")
    theirs = tp.L1Unstructured(0.5).prune(torch.from_numpy(w)).numpy()
    assert (ours == 0).sum() == (theirs == 0).sum() == 9
    assert np.all(np.abs(w[ours == 0]) == 1.0)
