"""The ``fp16-eps`` lab experiment: quick mode runs, its table, figure and conclusion come from its
own numbers, and the float16-statistics norms behave as the experiment says they do."""
import json
import math
import os

import numpy as np
import pytest

import minidl as md
from minidl import lab
from minidl.lab import fp16_eps

# float16 overflow is what these tests provoke; NumPy's RuntimeWarnings about it are expected
pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")


def test_the_float16_statistics_norm_overflows_in_backward_only_for_small_eps():
    """d/dv (v + eps) ** -0.5 = -0.5 (v + eps) ** -1.5 exceeds float16's 65504 once v + eps < 6.1e-4."""
    x = md.tensor(np.full((4, 16), 0.3, np.float32) + np.random.default_rng(0).standard_normal((4, 16)).astype(
        np.float32) * 3e-3)        # rows with variance ~1e-5
    for eps, finite in ((1e-5, False), (1e-3, True)):
        layer = fp16_eps.HalfStatsLayerNorm(16, eps)
        xi = x.clone().requires_grad_()
        y = layer(xi)
        assert y.dtype == md.float16 and np.isfinite(y.detach().numpy()).all()
        (y.float() * md.tensor(np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32))).sum().backward()
        assert bool(np.isfinite(xi.grad.numpy()).all()) == finite, eps
        ref = md.nn.LayerNorm(16, eps=eps)        # float32 statistics: finite at every eps
        xr = x.clone().to(md.float16).requires_grad_()
        (ref(xr).float() * 1000).sum().backward()
        assert np.isfinite(xr.grad.numpy()).all()


def test_the_float16_statistics_norms_match_float32_on_ordinary_inputs():
    rng = np.random.default_rng(0)
    x = md.tensor(rng.standard_normal((3, 8, 4, 4)).astype(np.float32))
    gn = fp16_eps.HalfStatsGroupNorm(4, 8, 1e-5)(x)
    ref = md.nn.GroupNorm(4, 8, eps=1e-5)(x)
    np.testing.assert_allclose(gn.float().detach().numpy(), ref.detach().numpy(), atol=1e-2)
    ln = fp16_eps.HalfStatsLayerNorm(16, 1e-5)(x.reshape(3, 8, 16))
    ref = md.nn.LayerNorm(16)(x.reshape(3, 8, 16))
    np.testing.assert_allclose(ln.float().detach().numpy(), ref.detach().numpy(), atol=1e-2)


def test_watched_records_where_non_finite_values_appear():
    rec = fp16_eps.Recorder()
    w = fp16_eps.Watched(fp16_eps.HalfStatsLayerNorm(4, 1e-5), rec)
    x = md.tensor(np.array([[1.0, 1.0, 1.0, 1.0]], np.float32), requires_grad=True)   # variance 0
    y = w(x)
    assert not rec.forward_bad
    (y.float() * md.tensor([[1.0, -2.0, 3.0, 0.5]])).sum().backward()
    assert rec.norm_backward_bad
    rec2 = fp16_eps.Recorder()
    fp16_eps.Watched(md.nn.LayerNorm(4), rec2)(md.tensor([[np.inf, 1.0, 1.0, 1.0]]))
    assert rec2.forward_bad


@pytest.mark.slow
def test_quick_mode(tmp_path):
    out = str(tmp_path / "fp16-eps")
    r = lab.run("fp16-eps", quick=True, out=out)
    assert os.path.getsize(r.figure) > 10_000 and r.figure.startswith(out)
    with open(os.path.join(out, "result.json")) as f:
        assert json.load(f)["name"] == "fp16-eps"
    rows = r.tables[0].rows
    assert len(rows) == 2 * (1 + 2 * 3)
    row = {(x["model"].split()[0], x["statistics"], x["eps"]): x for x in rows}
    for model in ("GPT", "CNN"):
        ref = row[model, "float32 run (no autocast)", 1e-5]
        assert ref["final loss"] < ref["first loss"] - 1.0          # both models learn in quick mode
        for stats in ("float32", "float16"):
            for eps in (1e-5, 1e-4, 1e-3):
                x = row[model, stats, eps]
                assert math.isfinite(x["first loss"]) and x["final scale"] > 0
                assert x["trains"] == (math.isfinite(x["final loss"]) and x["final loss"] <= ref["final loss"] + 0.1 * (
                    ref["first loss"] - ref["final loss"]))
    # the GPT's LayerNorms see a float32 residual stream: float32 statistics never overflow in backward
    assert all(row["GPT", "float32", eps]["norm-backward inf steps"] == 0 for eps in (1e-5, 1e-4, 1e-3))
    assert all(row["GPT", "float32", eps]["trains"] for eps in (1e-5, 1e-4, 1e-3))
    # the claim, at this scale: float16 statistics with a small eps overflow in backward at any loss scale
    small = row["GPT", "float16", 1e-5]
    assert not small["trains"] and small["skipped steps"] == 60 and small["lowest S at norm inf"] < 1
    assert small["min row var"] < fp16_eps.OVERFLOW_BELOW
    assert row["GPT", "float16", 1e-3]["trains"]
    assert "float16 statistics at eps 1e-3" in r.conclusion and "no loss scale avoids it" in r.conclusion
    scales = r.data["runs"]["gpt/float32/1e-05"]["scale"]
    assert scales[0] == 2.0 ** 16 and max(scales) > 2.0 ** 16      # the trajectory grows and backs off
