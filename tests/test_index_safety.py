"""Backward reads only what forward checked: the integer and bool arrays an op keeps for its
backward (indices, targets, masks) are its own copies. A caller that writes to its arrays
between forward and backward (an index array, a Tensor's data, the indices max_pool2d
returned) changes neither the gradient nor memory outside an array.

Each test computes the gradients twice, once with the caller's arrays left alone and once
with them overwritten after forward, and asserts they are equal. The cases where an unchecked
kernel would write out of bounds run in a child process, so a crash fails the test instead of
ending the test run."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl import backends


def same_grads_with_or_without_mutation(run):
    """``run(mutate)`` builds fresh leaves, runs forward, overwrites the caller's arrays when
    ``mutate``, runs backward and returns the gradients: the overwrite must change none."""
    expected, got = run(False), run(True)
    assert len(expected) == len(got)
    for e, g in zip(expected, got):
        np.testing.assert_array_equal(g, e)


def run_in_child(code):
    """Run ``code`` in a fresh interpreter; a crash (a signal) fails with its output."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, f"the child exited with {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert proc.stdout.strip().endswith("ok"), proc.stdout


def leaf(shape, seed=0):
    return md.tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=True)


def weighted_sum(y, seed=1):
    """A loss with a distinct weight per output element, so every gradient entry differs."""
    return (y * md.tensor(np.random.default_rng(seed).standard_normal(y.shape))).sum()


# ops whose kernels trust their indices: a crash must fail the test, not the test run ---------------------

def test_embedding_backward_ignores_indices_changed_after_forward():
    run_in_child("""
        import numpy as np, minidl as md, minidl.nn as nn, minidl.nn.functional as F
        from minidl.ops._kernel_switch import implementation

        def grads(impl, as_tensor, bad):
            with implementation(impl):
                w = md.tensor(np.arange(15.0).reshape(5, 3), requires_grad=True)
                idx = np.array([[0, 1], [2, 1]])
                tokens = md.tensor(idx) if as_tensor else idx
                out = F.embedding(tokens, w)
                if bad is not None:   # out of range, negative (would wrap), far below
                    (tokens.data if as_tensor else tokens)[0, 1] = bad
                (out * md.tensor(np.arange(12.0).reshape(2, 2, 3))).sum().backward()
                return w.grad.numpy()

        for impl in ("numba", "reference"):
            for as_tensor in (False, True):
                clean = grads(impl, as_tensor, None)
                for bad in (10**7, -1, -10**7):
                    np.testing.assert_array_equal(grads(impl, as_tensor, bad), clean, err_msg=f"{impl} {bad}")

        emb = nn.Embedding(6, 2, padding_idx=0)
        tokens = md.tensor([[1, 0, 3]])
        out = emb(tokens)
        tokens.data[...] = 10**9
        out.sum().backward()
        np.testing.assert_array_equal(emb.weight.grad.numpy()[:, 0], [0, 1, 0, 1, 0, 0])
        print("ok")
    """)


def test_max_pool2d_backward_ignores_writes_to_the_returned_indices():
    run_in_child("""
        import numpy as np, minidl as md, minidl.nn.functional as F
        from minidl.ops._kernel_switch import implementation

        def grads(impl, shape, mutate):
            with implementation(impl):
                x = md.tensor(np.random.default_rng(0).permutation(np.prod(shape)).reshape(shape) * 1.0,
                              requires_grad=True)
                out, idx = F.max_pool2d(x, 2, return_indices=True)
                before = idx.numpy().copy()
                if mutate:
                    idx.data[...] = 10**9
                    idx.data.reshape(-1)[0] = -10**9
                out.sum().backward()
                return x.grad.numpy(), before

        for impl in ("numba", "reference"):
            for shape in ((2, 3, 4, 4), (3, 4, 6)):   # batched, and unbatched (C, H, W)
                (clean, idx), (got, _) = grads(impl, shape, False), grads(impl, shape, True)
                np.testing.assert_array_equal(got, clean)
                assert clean.sum() == idx.size   # one selected element per window
        print("ok")
    """)


# ops whose backward would use a changed array silently (or raise): checked in-process -------------------

@pytest.mark.parametrize("kind", ["ndarray", "tensor", "bool_mask", "tuple", "mixed_with_slice"])
def test_advanced_indexing_backward_uses_the_indices_of_forward(kind):
    def run(mutate):
        x = leaf((4, 5))
        if kind == "bool_mask":
            index = np.random.default_rng(2).random((4, 5)) > 0.5
        elif kind == "tuple":
            index = (np.array([0, 3, 3]), np.array([1, 1, 4]))
        elif kind == "mixed_with_slice":
            index = (slice(None), np.array([4, 0, 4]))
        else:
            index = np.array([2, 0, 2, 3])
        given = md.tensor(index) if kind == "tensor" else index
        y = x[given]
        if mutate:
            arrays = [given.data] if kind == "tensor" else [a for a in (given if isinstance(given, tuple) else (given,))
                                                            if isinstance(a, np.ndarray)]
            for a in arrays:
                a[...] = ~a if a.dtype == bool else 1
        weighted_sum(y).backward()
        return [x.grad.numpy()]
    same_grads_with_or_without_mutation(run)


@pytest.mark.parametrize("as_tensor", [False, True])
def test_where_and_masked_fill_backward_use_the_mask_of_forward(as_tensor):
    def run(mutate):
        a, b = leaf((3, 4)), leaf((3, 4), seed=1)
        mask = np.random.default_rng(3).random((3, 4)) > 0.5
        given = md.tensor(mask) if as_tensor else mask
        y = md.where(given, a, b) + a.masked_fill(given, 0.0) * 2
        if mutate:
            raw = given.data if as_tensor else given
            raw[...] = ~raw
        weighted_sum(y).backward()
        return [a.grad.numpy(), b.grad.numpy()]
    same_grads_with_or_without_mutation(run)


def test_masked_batch_norm_backward_uses_the_mask_of_forward():
    def run(mutate):
        x = leaf((2, 3, 5))
        w, b = leaf((3,), seed=1), leaf((3,), seed=2)
        mask = np.array([[True, True, True, False, False], [True, True, True, True, False]])
        y = F.masked_batch_norm(x, mask, None, None, w, b, training=True)
        if mutate:
            mask[...] = True
        weighted_sum(y).backward()
        return [x.grad.numpy(), w.grad.numpy(), b.grad.numpy()]
    same_grads_with_or_without_mutation(run)


@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
@pytest.mark.parametrize("as_tensor", [False, True])
def test_loss_backward_uses_the_targets_of_forward(loss, as_tensor):
    def run(mutate):
        x = leaf((4, 3))
        target = np.array([0, 2, -100, 1])
        given = md.tensor(target) if as_tensor else target
        out = getattr(F, loss)(x, given, weight=md.tensor([0.5, 1.0, 2.0]))
        if mutate:   # another class, an ignored one, and one out of range
            raw = given.data if as_tensor else given
            raw[:3] = [1, -100, 10**6]
        out.backward()
        return [x.grad.numpy()]
    same_grads_with_or_without_mutation(run)


def test_attention_backward_uses_the_mask_of_forward():
    def run(mutate):
        q, k, v = leaf((1, 2, 3, 4)), leaf((1, 2, 3, 4), seed=1), leaf((1, 2, 3, 4), seed=2)
        mask = np.array([[True, False, True], [True, True, False], [False, True, True]])
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        if mutate:
            mask[...] = ~mask
        weighted_sum(y).backward()
        return [q.grad.numpy(), k.grad.numpy(), v.grad.numpy()]
    same_grads_with_or_without_mutation(run)


def test_selections_backward_ignore_writes_to_the_returned_indices():
    """topk, sort and max(dim) return indices that share nothing with what backward reads."""
    def run(mutate):
        x = leaf((3, 5))
        picks = [x.topk(2, dim=1), x.sort(dim=0), x.max(dim=1)]
        if mutate:
            for r in picks:
                r.indices.data[...] = 0
        weighted_sum(picks[0].values).backward(retain_graph=True)
        weighted_sum(picks[1].values, seed=2).backward(retain_graph=True)
        weighted_sum(picks[2].values, seed=3).backward()
        return [x.grad.numpy()]
    same_grads_with_or_without_mutation(run)


def test_adaptive_max_pool2d_backward_ignores_writes_to_the_returned_indices():
    def run(mutate):
        x = md.tensor(distinct_values((2, 2, 5, 4)), requires_grad=True)
        out, idx = F.adaptive_max_pool2d(x, (2, 3), return_indices=True)
        if mutate:
            idx.data[...] = -1
        weighted_sum(out).backward()
        return [x.grad.numpy()]
    same_grads_with_or_without_mutation(run)


def test_masked_select_and_index_assignment_backward_use_the_arrays_of_forward():
    def run(mutate):
        x, v = leaf((3, 4)), leaf((2, 4), seed=1)
        mask = np.random.default_rng(4).random((3, 4)) > 0.4
        rows = np.array([2, 0])
        picked = md.masked_select(x, mask)
        y = x * 1.0
        y[rows] = v
        if mutate:
            mask[...] = ~mask
            rows[...] = 1
        (weighted_sum(picked) + weighted_sum(y, seed=2)).backward()
        return [x.grad.numpy(), v.grad.numpy()]
    same_grads_with_or_without_mutation(run)


def distinct_values(shape):
    return np.random.default_rng(0).permutation(int(np.prod(shape))).reshape(shape).astype(np.float64)


# what forward accepts -------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [-1, -5, 5, 10**12])
def test_embedding_rejects_negative_and_too_large_indices_as_pytorch(bad):
    """PyTorch raises IndexError("index out of range in self") for every index outside
    [0, num_embeddings), negative ones included (they do not wrap as in NumPy)."""
    with pytest.raises(IndexError, match="index out of range in self"):
        F.embedding(np.array([0, bad]), md.randn(5, 3))
    torch = pytest.importorskip("torch")
    with pytest.raises(IndexError, match="index out of range in self"):
        torch.nn.functional.embedding(torch.tensor([0, bad]), torch.randn(5, 3))


# the device path ------------------------------------------------------------------------------------------

@pytest.fixture
def cuda():
    try:
        backends.get("cuda")
    except RuntimeError as exc:   # pragma: no cover
        pytest.skip(f"cuda device unavailable: {exc}")
    return "cuda"


def test_device_backward_ignores_indices_changed_after_forward(cuda):
    """On the device the index kernels clamp (they never leave the array), so an unprotected
    index would give a wrong gradient, not a crash: the saved copies give the right one."""
    def run(mutate):
        w = md.tensor(np.arange(12.0).reshape(4, 3), requires_grad=True, device=cuda)
        x = md.tensor(np.arange(16.0).reshape(1, 1, 4, 4), requires_grad=True, device=cuda)
        tokens = md.tensor(np.array([0, 3, 3]), device=cuda)
        rows = md.tensor(np.array([1, 1, 2]), device=cuda)
        pooled, idx = F.max_pool2d(x, 2, return_indices=True)
        y = F.embedding(tokens, w).sum() + w[rows].sum() * 2 + pooled.sum()
        if mutate:
            for t in (tokens, rows, idx):
                t.data[...] = 0
        y.backward()
        return [w.grad.cpu().numpy(), x.grad.cpu().numpy()]
    same_grads_with_or_without_mutation(run)
