"""SyncBatchNorm's op through a simulated exchange: k ranks (threads) of B samples give exactly
BatchNorm over the k*B samples (outputs, input and parameter gradients, running statistics), in
float64, for equal and unequal batch sizes, a rank without samples, masked sequences, both
implementations; Chan's merge; a gradcheck of one rank with fixed peers."""
import threading

import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl.nn.modules.syncbatchnorm import sync_batch_norm
from minidl.ops.normalization.sync_batch_norm import merge_moments, pack_moments

TOL = 1e-12


class ThreadExchange:
    """k ranks as threads meeting at a barrier: ``gather`` stacks every rank's vector in rank
    order, ``sum`` adds the stacked rows in rank order (as the real exchange's contract)."""

    def __init__(self, k):
        self.k, self.slots = k, [None] * k
        self.barrier = threading.Barrier(k, timeout=20)

    def rank(self, r):
        ex = self

        class View:
            def gather(self, v):
                ex.slots[r] = np.array(v, np.float64)
                ex.barrier.wait()
                table = np.stack(ex.slots)
                ex.barrier.wait()          # nobody overwrites a slot before everyone has read
                return table

            def sum(self, v):
                return self.gather(v).sum(axis=0)
        return View()


def run_threads(k, fn):
    """fn(rank, exchange) on k threads; returns the k results (re-raises the first error)."""
    ex = ThreadExchange(k)
    out, errors = [None] * k, []

    def body(r):
        try:
            out[r] = fn(r, ex.rank(r))
        except BaseException as e:   # noqa: BLE001  (re-raised below)
            errors.append(e)
            ex.barrier.abort()

    threads = [threading.Thread(target=body, args=(r,)) for r in range(k)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    if errors:
        raise errors[0]
    return out


def _t(a, grad=False):
    return md.tensor(np.asarray(a, np.float64), requires_grad=grad)


def sync_vs_batchnorm(parts, dys, momentum=0.1, eps=1e-5, masks=None, affine=True):
    """Run SyncBatchNorm over the ranks' ``parts`` and BatchNorm over their concatenation; return
    both sides' (y, dx, dw, db, running_mean, running_var), y and dx concatenated."""
    c = parts[0].shape[1]
    rng = np.random.default_rng(1)
    w0, b0 = rng.standard_normal(c), rng.standard_normal(c)
    rm0, rv0 = rng.standard_normal(c), rng.uniform(0.5, 2, c)

    def rank(r, ex):
        x = _t(parts[r], True)
        w, b = (_t(w0, True), _t(b0, True)) if affine else (None, None)
        rm, rv = _t(rm0), _t(rv0)
        m = None if masks is None else masks[r]
        y = sync_batch_norm(x, rm, rv, w, b, momentum, eps, m, ex)
        (y * _t(dys[r])).sum().backward()
        return (y.detach().numpy(), x.grad.numpy(), w.grad.numpy() if affine else None,
                b.grad.numpy() if affine else None, rm.numpy(), rv.numpy())

    got = run_threads(len(parts), rank)
    x = _t(np.concatenate(parts), True)
    w, b = (_t(w0, True), _t(b0, True)) if affine else (None, None)
    rm, rv = _t(rm0), _t(rv0)
    if masks is None:
        y = F.batch_norm(x, rm, rv, w, b, training=True, momentum=momentum, eps=eps)
    else:
        y = F.masked_batch_norm(x, np.concatenate(masks), rm, rv, w, b, training=True, momentum=momentum, eps=eps)
    (y * _t(np.concatenate(dys))).sum().backward()
    want = (y.detach().numpy(), x.grad.numpy(), w.grad.numpy() if affine else None, b.grad.numpy() if affine else None,
            rm.numpy(), rv.numpy())
    mine = (np.concatenate([g[0] for g in got]), np.concatenate([g[1] for g in got]),
            sum(g[2] for g in got) if affine else None, sum(g[3] for g in got) if affine else None)
    # every rank holds the same running statistics
    for g in got[1:]:
        np.testing.assert_array_equal(g[4], got[0][4])
        np.testing.assert_array_equal(g[5], got[0][5])
    return mine + (got[0][4], got[0][5]), want


def _assert_same(mine, want, tol=TOL):
    names = ("output", "input grad", "weight grad", "bias grad", "running_mean", "running_var")
    for name, a, b in zip(names, mine, want):
        if b is None:
            assert a is None
            continue
        scale = max(1.0, float(np.abs(b).max())) if b.size else 1.0
        np.testing.assert_allclose(a, b, rtol=0, atol=tol * scale, err_msg=name)


def _parts(rng, sizes, rest, shift=0.0):
    return [rng.standard_normal((n,) + rest) * 2 + shift for n in sizes]



@pytest.mark.parametrize("sizes,rest", [((4, 4, 4), (3, 5)), ((3, 3), (2, 2, 3)), ((5, 5), (3,)),
                                         ((1, 3, 0, 5), (3,)), ((2, 0, 1), (2, 4)), ((0, 3), (2, 2, 2, 2))])
def test_k_ranks_equal_batchnorm_over_the_concatenated_batch(sizes, rest, impl):
    rng = np.random.default_rng(sum(sizes))
    parts = _parts(rng, sizes, rest, shift=0.7)
    dys = [rng.standard_normal(p.shape) for p in parts]
    _assert_same(*sync_vs_batchnorm(parts, dys))


def test_without_affine_and_with_a_large_mean(impl):
    rng = np.random.default_rng(3)
    # |mean| / std = 1e6: sums of x and x^2 would lose 12 of float64's 16 digits here
    parts = _parts(rng, (3, 2, 4), (2, 3), shift=2e6)
    dys = [rng.standard_normal(p.shape) for p in parts]
    mine, want = sync_vs_batchnorm(parts, dys, affine=False)
    _assert_same(mine, want, tol=1e-9)   # BatchNorm's own two-pass statistics are the yardstick


def test_masked_sequences_count_the_real_tokens_of_every_rank():
    rng = np.random.default_rng(4)
    L = 5
    sizes = (2, 3, 1)
    parts = _parts(rng, sizes, (3, L), shift=-0.4)
    masks = [rng.random((n, L)) < 0.6 for n in sizes]
    masks[2][:] = False                     # a rank whose sequence is all padding
    masks[0][0, :2] = True
    dys = [rng.standard_normal(p.shape) for p in parts]
    mine, want = sync_vs_batchnorm(parts, dys, masks=masks)
    _assert_same(mine, want)
    assert np.all(mine[0][np.concatenate(masks)[:, None, :].repeat(3, 1) == 0] == 0)   # padding: y = 0


def test_one_value_in_all_is_an_error_on_every_rank():
    def rank(r, ex):
        with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
            sync_batch_norm(_t(np.ones((1 - r, 2))), None, None, None, None, 0.1, 1e-5, None, ex)
        return True
    assert run_threads(2, rank) == [True, True]


def test_no_samples_anywhere_leaves_the_running_statistics():
    def rank(r, ex):
        rm, rv = _t([1.0, 2.0]), _t([3.0, 4.0])
        y = sync_batch_norm(_t(np.ones((0, 2, 3))), rm, rv, None, None, 0.1, 1e-5, None, ex)
        return y.shape, rm.numpy().tolist(), rv.numpy().tolist()
    assert run_threads(3, rank) == [((0, 2, 3), [1.0, 2.0], [3.0, 4.0])] * 3


def test_chan_merge_of_unequal_parts_is_exact_and_stable():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((40, 3)) + 1e8      # E[x^2] - E[x]^2 = 1e16 - 1e16: nothing left in float64
    cuts = [0, 1, 1, 17, 40]
    rows = []
    for a, b in zip(cuts, cuts[1:]):
        part = x[a:b]
        n = len(part)
        mean = part.mean(0) if n else np.zeros(3)
        rows.append(pack_moments(n, mean, ((part - mean) ** 2).sum(0) if n else np.zeros(3)))
    n, mean, var = merge_moments(np.stack(rows))
    assert n == 40
    np.testing.assert_allclose(mean, x.mean(0), rtol=1e-15)
    np.testing.assert_allclose(var, x.var(0), rtol=1e-7)   # the limit: the parts' means rounded at 1e8 (ulp 1.5e-8)
    naive = (x * x).mean(0) - x.mean(0) ** 2
    assert np.abs(naive - x.var(0)).max() > 0.1     # what the merge avoids
    assert merge_moments(np.zeros((2, 7)))[0] == 0


class FixedPeers:
    """The exchange as rank 0 sees it when the other ranks hold fixed data and receive a zero
    output gradient: their statistics enter rank 0's forward, their gradient sums are 0."""

    def __init__(self, peers):
        self.rows = [pack_moments(len(p) * int(np.prod(p.shape[2:])), p.mean(axis=(0, 2)),
                                  ((p - p.mean(axis=(0, 2))[None, :, None]) ** 2).sum(axis=(0, 2))) for p in peers]

    def gather(self, v):
        return np.stack([v] + self.rows)

    def sum(self, v):
        return np.asarray(v, np.float64)


def test_gradcheck_of_one_rank_with_fixed_peers(impl):
    rng = np.random.default_rng(6)
    peers = [rng.standard_normal((3, 2, 4)) + 1, rng.standard_normal((1, 2, 4)) - 2]
    ex = FixedPeers(peers)
    x, w, b = _t(rng.standard_normal((2, 2, 4)), True), _t(rng.standard_normal(2), True), _t(rng.standard_normal(2),
                                                                                              True)
    assert md.autograd.gradcheck(lambda x, w, b: sync_batch_norm(x, None, None, w, b, 0.1, 1e-5, None, ex), (x, w, b))
    # and the peers change this rank's output: the statistics are global, not local
    y_sync = sync_batch_norm(x, None, None, w, b, 0.1, 1e-5, None, ex).detach().numpy()
    y_local = F.batch_norm(x, None, None, w, b, training=True).detach().numpy()
    assert np.abs(y_sync - y_local).max() > 1e-2


def test_float32_and_float16_follow_batchnorm():
    rng = np.random.default_rng(7)
    for dtype, tol in ((np.float32, 1e-5), (np.float16, 2e-3)):
        parts = [rng.standard_normal((n, 3, 4)).astype(dtype) for n in (2, 3)]

        def rank(r, ex):
            return sync_batch_norm(md.tensor(parts[r]), None, None, None, None, 0.1, 1e-5, None, ex).numpy()
        got = np.concatenate(run_threads(2, rank))
        want = F.batch_norm(md.tensor(np.concatenate(parts)), None, None, training=True).numpy()
        assert got.dtype == dtype
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), atol=tol)


def test_cuda_is_staged_through_the_host_and_matches_the_cpu():
    from minidl import backends
    try:
        backends.get("cuda")
    except RuntimeError as exc:
        pytest.skip(f"cuda device unavailable: {exc}")
    rng = np.random.default_rng(8)
    peers = [rng.standard_normal((2, 2, 3)) - 1]
    x0, dy, w0 = rng.standard_normal((1, 2, 3)), rng.standard_normal((1, 2, 3)), rng.standard_normal(2)
    mask = np.array([[True, True, False]])

    def run(device, masked):
        x, w = _t(x0).to(device).requires_grad_(True), _t(w0).to(device).requires_grad_(True)
        rv = _t(np.ones(2)).to(device)
        m = md.tensor(mask).to(device) if masked else None
        y = sync_batch_norm(x, None, rv, w, None, 0.1, 1e-5, m, FixedPeers(peers))
        (y * _t(dy).to(device)).sum().backward()
        return y.detach().cpu().numpy(), x.grad.cpu().numpy(), w.grad.cpu().numpy(), rv.cpu().numpy()

    for masked in (False, True):
        for a, b in zip(run("cuda", masked), run("cpu", masked)):
            np.testing.assert_allclose(a, b, atol=1e-12)
