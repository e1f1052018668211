"""Every lab experiment's quick mode: the table has the expected rows, the figure exists, and
the effects that quick mode is expected to show (exact identities, zero gaps) hold."""
import json
import math
import os

import pytest

from minidl import lab
from minidl.cli import main

pytestmark = pytest.mark.slow


def _run(name, tmp_path):
    out = str(tmp_path / name)
    r = lab.run(name, quick=True, out=out)
    assert os.path.getsize(r.figure) > 10_000 and r.figure.startswith(out)
    with open(os.path.join(out, "result.json")) as f:
        assert json.load(f)["name"] == name
    assert r.conclusion and name in r.format()
    return r


def test_registry_lists_every_experiment_and_each_has_a_run():
    assert list(lab.EXPERIMENTS) == ["padding", "batch-size", "train-eval", "pre-post", "deepnorm", "rmsnorm",
                                     "groupnorm", "precision", "axes", "fp16-eps", "qk-norm", "sync-bn",
                                     "ln-lstm", "renorm", "weight-std", "signal-prop", "landscape"]
    for name in lab.EXPERIMENTS:
        assert callable(lab.get(name).run), name
    with pytest.raises(ValueError, match="expected one of"):
        lab.get("nope")


def test_axes_measures_each_layers_reduction_set(tmp_path, capsys):
    assert main(["lab", "axes", "--out", str(tmp_path / "axes")]) == 0     # through the CLI once
    printed = capsys.readouterr().out
    assert "BatchNorm2d" in printed and "figure:" in printed
    r = lab.run("axes", out=str(tmp_path / "axes2"))
    got = {row["layer"].split("(")[0]: (row["reduces over"], row["group size"]) for row in r.tables[0].rows}
    assert got == {"BatchNorm2d": ("N,H,W", 4 * 9), "LayerNorm": ("C,H,W", 6 * 9), "InstanceNorm2d": ("H,W", 9),
                   "GroupNorm": ("C,H,W", 2 * 9)}


def test_groupnorm_goes_from_layernorm_to_instancenorm(tmp_path):
    r = _run("groupnorm", tmp_path)
    rows = r.tables[0].rows
    assert [row["groups G"] for row in rows] == [1, 2, 4, 8, 16]
    assert rows[0]["max |GN - LN|"] < 1e-12 and rows[-1]["max |GN - IN|"] < 1e-12
    assert all(row["max |GN - LN|"] > 1e-3 for row in rows[1:])
    assert all(row["max |GN - IN|"] > 1e-3 for row in rows[:-1])


def test_precision_float32_accumulation_beats_float16(tmp_path):
    r = _run("precision", tmp_path)
    rows = r.tables[0].rows
    assert len(rows) == 12 and {row["eps"] for row in rows} == {1e-6, 1e-5, 1e-3}
    for row in rows:
        assert row["minidl (f32 acc.)"] < 3e-3 < row["f16 accumulation"]
    # a large eps shrinks low-variance outputs whatever the precision
    assert [row["output std"] for row in rows if row["eps"] == 1e-3][-1] < 0.5


def test_rmsnorm_times_and_trains(tmp_path):
    r = _run("rmsnorm", tmp_path)
    timing, training = r.tables
    assert [row["norm"] for row in timing.rows] == ["LayerNorm", "RMSNorm"]
    assert all(row["fwd+bwd ms"] > 0 for row in timing.rows)
    for row in training.rows:
        assert row["final train loss (mean of last 10)"] < row["first loss"] - 0.5


def test_train_eval_gap_is_zero_for_layernorm_only(tmp_path):
    r = _run("train-eval", tmp_path)
    rows = r.tables[0].rows
    ln = [row["relative gap"] for row in rows if row["norm"] == "LayerNorm"]
    bn = [row["relative gap"] for row in rows if row["norm"] == "BatchNorm"]
    assert len(ln) == len(bn) >= 5
    assert max(ln) == 0.0 and min(bn) > 1e-3


def test_batch_size_sweep(tmp_path):
    r = _run("batch-size", tmp_path)
    rows = r.tables[0].rows
    pairs = {(row["norm"], row["batch size"]) for row in rows}
    for norm in ("BatchNorm", "GroupNorm", "LayerNorm"):
        for b in (2, 4, 16, 64):
            assert (norm, b) in pairs
    assert ("BatchNorm", 1) in pairs
    assert all(0 <= row["test acc"] <= 1 for row in rows if row["test acc"] != "error")
    # only BatchNorm's test accuracy depends on whose statistics normalize the test images
    bn = [row for row in rows if row["norm"] == "BatchNorm" and row["batch size"] > 1]
    assert all(0 <= row["BN batch-stats acc"] <= 1 for row in bn)
    assert any(row["BN batch-stats acc"] != row["test acc"] for row in bn)
    assert all(row["BN batch-stats acc"] == "-" for row in rows if row["norm"] != "BatchNorm")


def test_padding(tmp_path):
    r = _run("padding", tmp_path)
    acc, drift = r.tables
    assert [row["model"] for row in acc.rows] == ["LayerNorm", "masked BatchNorm", "BatchNorm (no mask)"]
    # per-token LayerNorm and masked BatchNorm do not see the padding at all
    for row in acc.rows[:2]:
        vals = [v for k, v in row.items() if k.startswith("batch stats")]
        assert len(vals) == 3 and max(vals) == min(vals)
    shifts = [row["|mean shift| / std"] for row in drift.rows]
    assert len(shifts) == 4 and shifts == sorted(shifts) and shifts[-1] > shifts[0]


def test_pre_post(tmp_path):
    r = _run("pre-post", tmp_path)
    grads, training = r.tables
    assert len(grads.rows) == 12 and all(row["Pre-LN |dL/dW_fc2|"] > 0 for row in grads.rows)
    assert {(row["placement"], row["warm-up"] > 0) for row in training.rows} == {
        ("Pre-LN", False), ("Post-LN", False), ("Post-LN", True)}
    # Xavier init: Post-LN's gradients grow towards the output, Pre-LN's do not (Xiong et al., Fig. 3)
    pre = [row["Pre-LN |dL/dW_fc2|"] for row in grads.rows]
    post = [row["Post-LN |dL/dW_fc2|"] for row in grads.rows]
    assert post[-1] > post[0] and pre[-1] < pre[0]


def test_deepnorm(tmp_path):
    r = _run("deepnorm", tmp_path)
    rows = r.tables[0].rows
    assert [row["model"] for row in rows] == ["Post-LN", "DeepNorm"]
    assert "48" in r.tables[0].title
    assert all(math.isfinite(row["first loss"]) for row in rows)


# progress -------------------------------------------------------------------------------------
def _fake_experiment(monkeypatch, tmp_path):
    """Replace train-eval by a 3-step loop over the lab's progress helper."""
    from minidl.lab import _common

    def run(quick=True, out=None, seed=0):
        for _ in _common.progress(range(3), "fake loop"):
            pass
        os.makedirs(out, exist_ok=True)
        return lab.LabResult("train-eval", [], os.path.join(out, "none.png"), "done", quick)
    monkeypatch.setattr(lab.get("train-eval"), "run", run)


def test_full_mode_shows_a_progress_bar_for_each_training_loop(tmp_path, monkeypatch, capsys):
    _fake_experiment(monkeypatch, tmp_path)
    assert main(["lab", "train-eval", "--full", "--out", str(tmp_path / "full")]) == 0
    err = capsys.readouterr().err
    assert "fake loop:" in err and "/3 [" in err   # a tqdm bar over the loop's 3 steps
    for argv in (["--quick"], ["--full", "--no-progress"]):   # quick mode and --no-progress: no bars
        assert main(["lab", "train-eval", *argv, "--out", str(tmp_path / "q")]) == 0
        assert "fake loop" not in capsys.readouterr().err


def test_the_experiments_training_loops_report_progress(tmp_path, capsys):
    lab.run("train-eval", quick=True, out=str(tmp_path / "te"), progress=True)
    err = capsys.readouterr().err
    assert "batch norm:" in err and "layer norm:" in err and "/40 [" in err   # its 40 quick-mode steps
