"""The lab's ``sync-bn`` experiment in quick mode: the identities it measures hold exactly, every
setup trains, the figure and result.json are written, and the conclusion is the numbers'."""
import json
import os

import numpy as np
import pytest

import minidl as md
from minidl import lab
from minidl.lab import sync_bn

pytestmark = pytest.mark.slow


def test_ghost_batchnorm_is_batchnorm_per_chunk():
    x = md.tensor(np.random.default_rng(0).standard_normal((6, 2, 3, 3)))
    g = sync_bn.GhostBatchNorm2d(2, ghost=2).double()
    bn = md.nn.BatchNorm2d(2).double()
    want = np.concatenate([bn(x[i:i + 2]).numpy() for i in range(0, 6, 2)])
    np.testing.assert_allclose(g(x).numpy(), want, atol=1e-14)
    np.testing.assert_allclose(g.running_mean.numpy(), bn.running_mean.numpy(), atol=1e-14)   # each chunk folds in
    g.eval()
    np.testing.assert_allclose(g(x).numpy(), bn.eval()(x).numpy(), atol=1e-14)


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
