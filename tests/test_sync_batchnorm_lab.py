"""The lab's ``sync-bn`` experiment: in quick mode the identities it measures hold exactly, every
setup trains, the figure and result.json are written, and the conclusion is the numbers'; the
full mode's ranks run under ``mpiexec -n 2`` (at a tiny size here) and compute what the
simulated 4 x 2 ranks compute, or, without MPI, are simulated with a message saying so."""
import functools
import json
import os

import numpy as np
import pytest

import minidl as md
from minidl import lab
from minidl.lab import sync_bn, sync_bn_mpi

pytestmark = pytest.mark.slow


def test_ghost_batchnorm_is_batchnorm_per_chunk():
    x = md.tensor(np.random.default_rng(0).standard_normal((6, 2, 3, 3)))
    g = sync_bn.GhostBatchNorm2d(2, ghost=2).double()
    bn = md.nn.BatchNorm2d(2).double()
    want = np.concatenate([bn(x[i:i + 2]).detach().numpy() for i in range(0, 6, 2)])
    np.testing.assert_allclose(g(x).detach().numpy(), want, atol=1e-14)
    np.testing.assert_allclose(g.running_mean.numpy(), bn.running_mean.numpy(), atol=1e-14)   # each chunk folds in
    g.eval()
    np.testing.assert_allclose(g(x).detach().numpy(), bn.eval()(x).detach().numpy(), atol=1e-14)


def test_quick_mode(tmp_path):
    out = str(tmp_path / "sync-bn")
    r = lab.run("sync-bn", quick=True, out=out)
    assert os.path.getsize(r.figure) > 10_000 and r.figure.startswith(out)
    with open(os.path.join(out, "result.json")) as f:
        assert json.load(f)["name"] == "sync-bn"
    ident, small, large = r.tables
    assert all(row["max relative difference"] < 1e-10 for row in ident.rows)
    assert [row["norm"].split(" (")[0] for row in small.rows] == ["BatchNorm per rank", "SyncBatchNorm", "GroupNorm"]
    assert len(large.rows) == 4
    for row in small.rows + large.rows:
        assert 0 <= row["test acc"] <= 1 and np.isfinite(row["final train loss"])
    curves = r.data["curves"]
    assert all(np.mean(c[-20:]) < np.mean(c[:20]) for c in curves.values())     # every setup learns
    # the conclusion states the measured accuracies
    assert f"{100 * r.data['acc']['sync']:.1f}%" in r.conclusion and "reproduces BatchNorm" in r.conclusion


def test_per_rank_batchnorm_is_batchnorm_per_pair_with_the_first_pairs_running_estimates():
    from minidl.lab.sync_bn_mpi import PerRankBatchNorm2d
    rng = np.random.default_rng(1)
    x = md.tensor(rng.standard_normal((6, 3, 2, 2)), requires_grad=True)
    cot = rng.standard_normal((6, 3, 2, 2))
    p = PerRankBatchNorm2d(3, per_rank=2).double()
    ref = [md.nn.BatchNorm2d(3).double() for _ in range(3)]
    xs = [md.tensor(x.detach().numpy()[i:i + 2], requires_grad=True) for i in range(0, 6, 2)]
    want = [bn(xi) for bn, xi in zip(ref, xs)]
    (p(x) * md.tensor(cot)).sum().backward()
    for i, (w, xi) in enumerate(zip(want, xs)):
        (w * md.tensor(cot[2 * i:2 * i + 2])).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.concatenate([xi.grad.numpy() for xi in xs]), atol=1e-13)
    # the running estimates are the first pair's (rank 0's), counted once per batch
    np.testing.assert_allclose(p.running_mean.numpy(), ref[0].running_mean.numpy(), atol=1e-14)
    np.testing.assert_allclose(p.running_var.numpy(), ref[0].running_var.numpy(), atol=1e-14)
    assert int(p.num_batches_tracked.item()) == 1


def _tiny_full_mode(monkeypatch):
    # width, data-parallel steps, large batch, its steps, ghost batches: seconds, not the full run's minutes
    monkeypatch.setitem(sync_bn.SIZES, False, (2, 3, 32, 2, (16,)))


def test_full_mode_runs_its_ranks_under_mpiexec(tmp_path, monkeypatch):
    from minidl.data.digits import digits_arrays
    if sync_bn.mpiexec_path() is None:
        pytest.skip("needs mpi4py and an mpiexec (the [distributed] extra)")
    _tiny_full_mode(monkeypatch)
    # the mpiexec job has a timeout, so a rank stuck in a collective fails the test instead of hanging it
    monkeypatch.setattr(sync_bn_mpi, "launch", functools.partial(sync_bn_mpi.launch, timeout=150.0))
    r = lab.run("sync-bn", quick=False, out=str(tmp_path / "full"), progress=False)
    job = r.data["mpiexec"]
    assert job["processes"] == 2 and job["share"] == 4
    assert "2 mpiexec processes x 4" in r.tables[1].title
    ident = r.tables[0]
    assert len(ident.rows) == 4 and all(row["max relative difference"] < 1e-10 for row in ident.rows)
    assert "mpiexec processes" in ident.rows[2]["compared"]
    assert all(s == 0.0 for s in job["spread"].values())          # DDP kept the processes' parameters equal
    assert "on mpiexec processes" in r.conclusion and os.path.getsize(r.figure) > 10_000
    # 2 processes x 4 images compute the 4 x 2 protocol: the simulated ranks' losses, to float32 rounding
    xtr, ytr = digits_arrays("train")
    xte, yte = digits_arrays("test")
    for norm in ("bn", "sync"):
        losses, acc = sync_bn.train_data_parallel(norm, 3, 2, 0, xtr, ytr, xte, yte)
        np.testing.assert_allclose(r.data["curves"][norm], losses, rtol=1e-5)
        assert r.data["acc"][norm] == acc


def test_full_mode_without_mpi_says_so_and_simulates_the_ranks(monkeypatch, capsys):
    from minidl.data.digits import digits_arrays
    monkeypatch.setattr(sync_bn, "mpiexec_path", lambda: None)
    data = digits_arrays("train") + digits_arrays("test")
    curves, acc, where, real_gaps, job = sync_bn.data_parallel(2, 2, 0, data, real=True, norms=["group"])
    assert "mpi4py or mpiexec is missing" in capsys.readouterr().out
    assert where == "4 simulated ranks x 2 images (mpiexec unavailable)" and job is None and real_gaps is None
    assert len(curves["group"]) == 2 and 0 <= acc["group"] <= 1
    # quick mode simulates without a word about MPI
    sync_bn.data_parallel(1, 2, 0, data, real=False, norms=["group"])
    assert capsys.readouterr().out == ""
