"""Losses and torch.utils.data as a ported PyTorch script meets them: target and logit dtypes
(PyTorch's Long-or-Byte class indices, promoted class probabilities, mse_loss's promotion), the
deprecated size_average / reduce flags of cross_entropy and nll_loss, empty means without
NumPy warnings, collation of string columns, sampler checks, random_split with tensor lengths,
and a forked copy of a DataLoader iterator that must leave the parent's workers alone.
Comparisons with torch skip without it."""
import os
import warnings
from collections import namedtuple

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.autograd import gradcheck
from minidl.utils import data

R = np.random.RandomState(0)
X = R.randn(5, 4)
T = np.array([0, 3, 1, 3, 2])


def t64(a, grad=False):
    return md.tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


def _log_softmax(x):
    s = x - x.max(1, keepdims=True)
    return s - np.log(np.exp(s).sum(1, keepdims=True))


# class-index targets and logits ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.int32, np.int16, np.int8, np.bool_])
@pytest.mark.parametrize("fn", [F.cross_entropy, F.nll_loss], ids=["cross_entropy", "nll_loss"])
def test_class_indices_must_be_int64_or_uint8(fn, dtype):
    with pytest.raises(RuntimeError, match="int64") as info:
        fn(t64(X), md.tensor((T % 2).astype(dtype)))
    assert isinstance(info.value, TypeError)   # what minidl raised for a float target before
    logp = _log_softmax(X)
    ref = -logp[np.arange(5), T % 2].mean()
    assert fn(t64(X if fn is F.cross_entropy else logp), md.tensor((T % 2).astype(np.uint8))).item() == \
        pytest.approx(ref)   # uint8, PyTorch's Byte, is taken


def test_float_targets_of_index_shape_to_nll_loss_are_a_runtime_error():
    with pytest.raises(RuntimeError, match="int64"):
        F.nll_loss(t64(X), t64(T))


@pytest.mark.parametrize("fn", [F.cross_entropy, F.nll_loss], ids=["cross_entropy", "nll_loss"])
def test_integer_logits_are_not_implemented(fn):
    with pytest.raises(NotImplementedError, match="floating point"):
        fn(md.tensor(np.arange(6).reshape(2, 3)), md.tensor(np.array([0, 2])))


def test_a_0d_input_is_a_runtime_error():
    with pytest.raises(RuntimeError, match=r"\(C,\), \(N, C\)"):
        F.cross_entropy(t64(1.0), md.tensor(np.array(0)))


# the deprecated size_average / reduce flags ------------------------------------------------------

@pytest.mark.parametrize("flags,reduction", [(dict(size_average=False), "sum"), (dict(reduce=False), "none"),
                                             (dict(size_average=True, reduce=True), "mean")])
def test_cross_entropy_and_nll_take_legacy_flags_with_a_warning(flags, reduction):
    per = -_log_softmax(X)[np.arange(5), T]
    expected = {"sum": per.sum(), "none": per, "mean": per.mean()}[reduction]
    with pytest.warns(UserWarning, match=f"reduction='{reduction}'"):
        got = F.cross_entropy(t64(X), md.tensor(T), **flags)
    np.testing.assert_allclose(got.numpy(), expected)
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        got = F.nll_loss(t64(_log_softmax(X)), md.tensor(T), **flags)
    np.testing.assert_allclose(got.numpy(), expected)
    for module, inp in ((nn.CrossEntropyLoss, X), (nn.NLLLoss, _log_softmax(X))):
        with pytest.warns(UserWarning):
            crit = module(**flags)
        assert crit.reduction == reduction
        np.testing.assert_allclose(crit(t64(inp), md.tensor(T)).numpy(), expected)


def test_legacy_flags_warn_in_the_pointwise_losses_too():
    with pytest.warns(UserWarning, match="reduction='sum'"):
        assert F.l1_loss(t64([1.0, -2.0]), t64([0.0, 0.0]), size_average=False).item() == 3.0


def test_cross_entropy_with_legacy_sum_gradchecks():
    x = t64(R.randn(3, 4), grad=True)
    t = md.tensor(np.array([1, 0, 3]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        assert gradcheck(lambda a: F.cross_entropy(a, t, size_average=False, label_smoothing=0.1), (x,))


# dtypes of class probabilities and of mse_loss -----------------------------------------------------

def test_class_probabilities_of_another_float_dtype_promote():
    p = np.full((2, 3), 1 / 3)
    x32 = md.zeros(2, 3, requires_grad=True)
    loss = F.cross_entropy(x32, t64(p))
    assert loss.dtype == md.float64 and loss.item() == pytest.approx(np.log(3))
    loss.backward()
    assert x32.grad.dtype == md.float32
    np.testing.assert_allclose(x32.grad.numpy(), 0, atol=1e-7)
    assert F.cross_entropy(md.zeros(2, 3), md.tensor(p, dtype=md.float16)).dtype == md.float32


def test_mse_loss_takes_the_floating_operands_dtype():
    x = md.tensor([1.0, 2.0], requires_grad=True)
    y = md.tensor(np.array([0, 0]))
    loss = F.mse_loss(x, y)
    assert loss.dtype == md.float32 and loss.item() == 2.5
    assert F.mse_loss(y, md.tensor([1.0, 1.0])).dtype == md.float32
    with pytest.raises(NotImplementedError, match="mse_loss"):
        F.mse_loss(md.tensor(np.array([1, 2])), md.tensor(np.array([0, 0])))


@pytest.mark.parametrize("fn", [F.binary_cross_entropy, F.binary_cross_entropy_with_logits],
                         ids=["bce", "bce_with_logits"])
@pytest.mark.parametrize("target", [np.array([1, 0]), np.array([True, False])], ids=["int", "bool"])
def test_binary_cross_entropies_refuse_integer_targets(fn, target):
    with pytest.raises(RuntimeError, match="floating point target"):
        fn(md.tensor([0.5, 0.25]), md.tensor(target))


@pytest.mark.parametrize("margin", [0.0, -1.0])
def test_triplet_margin_loss_needs_a_positive_margin(margin):
    a = t64(R.randn(2, 3))
    with pytest.raises(ValueError, match="margin must be greater than 0"):
        F.triplet_margin_loss(a, a, a, margin=margin)


# no NumPy warnings where PyTorch gives nan quietly ----------------------------------------------------

def test_nan_results_come_without_runtime_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = t64([[0.0, -np.inf, 1.0]], grad=True)
        loss = F.cross_entropy(x, t64([[0.5, 0.0, 0.5]]))
        assert np.isnan(loss.item())      # 0 * log 0, as PyTorch
        loss.backward()
        assert np.isnan(F.mse_loss(md.zeros(0), md.zeros(0)).item())
        e = md.zeros(0, dtype=md.float64, requires_grad=True)
        out = F.binary_cross_entropy(e, md.zeros(0, dtype=md.float64))
        assert np.isnan(out.item())
        out.backward()
        assert e.grad.shape == (0,)


# collation -----------------------------------------------------------------------------------------

Sample = namedtuple("Sample", "image name")


def test_a_column_of_strings_collates_to_a_tuple():
    batch = data.default_collate([(np.ones(2), "a.png"), (np.zeros(2), "b.png")])
    assert isinstance(batch, list) and batch[1] == ("a.png", "b.png")
    named = data.default_collate([Sample(np.ones(1), "a"), Sample(np.zeros(1), "b")])
    assert named.name == ("a", "b")
    nested = data.default_collate([[0, [1.0, "x"]], [1, [2.0, "y"]]])
    assert nested[1][1] == ("x", "y") and nested[1][0].dtype == md.float64
    assert data.default_collate(["a", "b"]) == ["a", "b"]                     # the top level stays a list
    assert data.default_collate([{"k": "a"}, {"k": "b"}]) == {"k": ["a", "b"]}


def test_a_stack_dataset_of_strings_loads_string_tuples():
    class Names(data.Dataset):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return "abc"[i]
    loader = data.DataLoader(data.StackDataset(data.TensorDataset(md.arange(3)), Names()), batch_size=2)
    assert [b[1] for b in loader] == [("a", "b"), ("c",)]


# samplers and splits ---------------------------------------------------------------------------------

def test_random_sampler_of_an_empty_dataset_is_refused():
    with pytest.raises(ValueError, match="num_samples should be a positive integer value, but got num_samples=0"):
        data.RandomSampler([])
    with pytest.raises(ValueError, match="num_samples=0"):
        data.DataLoader([], shuffle=True)


def test_weighted_random_sampler_keeps_float64_weights_and_checks_them():
    s = data.WeightedRandomSampler([1, 0, 3], 20, generator=np.random.default_rng(0))
    assert isinstance(s.weights, md.Tensor) and s.weights.dtype == md.float64
    np.testing.assert_array_equal(s.weights.numpy(), [1.0, 0.0, 3.0])
    drawn = list(s)
    assert len(drawn) == 20 and 1 not in drawn and all(type(i) is int for i in drawn)
    for bad in ([1.0, -1.0], [0.0, 0.0], [np.inf, 1.0]):
        with pytest.raises(RuntimeError, match="invalid multinomial distribution") as info:
            data.WeightedRandomSampler(bad, 2)
        assert isinstance(info.value, ValueError)


def test_random_split_takes_tensor_lengths():
    parts = data.random_split(range(10), md.tensor(np.array([4, 6])), generator=np.random.default_rng(0))
    assert [len(p) for p in parts] == [4, 6]
    assert sorted(i for p in parts for i in p) == list(range(10))
    fractions = data.random_split(range(11), [md.tensor(0.25), 0.25, 0.5], generator=np.random.default_rng(0))
    assert [len(p) for p in fractions] == [3, 3, 5]   # floors 2, 2, 5; the two left over go round-robin


# worker processes --------------------------------------------------------------------------------------

@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_copy_of_a_loader_iterator_leaves_the_workers_alone():
    loader = data.DataLoader(list(range(6)), batch_size=2, num_workers=1, persistent_workers=True, timeout=10)
    assert [b.tolist() for b in loader] == [[0, 1], [2, 3], [4, 5]]
    pid = os.fork()
    if pid == 0:    # the child: its copy of the iterator is finalized (as when garbage collected)
        try:
            loader._iterator._shutdown()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert [b.tolist() for b in loader] == [[0, 1], [2, 3], [4, 5]]
    loader._iterator._shutdown()


# against PyTorch -----------------------------------------------------------------------------------------

def test_legacy_flags_match_torch():
    torch = pytest.importorskip("torch")
    w = R.rand(4)
    out = []
    for lib, fn in ((torch, torch.nn.functional), (md, F)):
        x = lib.tensor(X, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            loss = fn.cross_entropy(x, lib.tensor(T), weight=lib.tensor(w), ignore_index=3, reduce=False)
        (loss * lib.tensor(np.arange(5.0))).sum().backward()
        out.append((loss.detach().numpy(), x.grad.numpy()))
    for a, b in zip(*out):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("target_dtype", ["float64", "float16"])
def test_probability_targets_of_another_dtype_match_torch(target_dtype):
    torch = pytest.importorskip("torch")
    p = R.rand(3, 4)
    p /= p.sum(1, keepdims=True)
    out = []
    for lib, fn in ((torch, torch.nn.functional), (md, F)):
        x = lib.tensor(X[:3], dtype=lib.float32, requires_grad=True)
        loss = fn.cross_entropy(x, lib.tensor(p, dtype=getattr(lib, target_dtype)), label_smoothing=0.1)
        loss.backward()
        out.append((str(loss.dtype).split(".")[-1], str(x.grad.dtype).split(".")[-1], loss.item(), x.grad.numpy()))
    assert out[0][:2] == out[1][:2]
    rtol = 1e-3 if target_dtype == "float16" else 1e-6   # PyTorch smooths the float16 target before promoting
    assert out[1][2] == pytest.approx(out[0][2], rel=rtol)
    np.testing.assert_allclose(out[1][3], out[0][3], rtol=rtol, atol=1e-4 if target_dtype == "float16" else 1e-7)


def test_collated_string_columns_match_torch():
    torch = pytest.importorskip("torch")
    batch = [(np.ones(2, np.float32), "a", [1, "x"]), (np.zeros(2, np.float32), "b", [2, "y"])]
    ours, theirs = data.default_collate(batch), torch.utils.data.default_collate(batch)
    assert ours[1] == theirs[1] and ours[2][1] == theirs[2][1]
    assert type(ours[2]) is type(theirs[2]) and ours[2][0].tolist() == theirs[2][0].tolist()
