"""Quick modes of the lab experiments renorm, weight-std, signal-prop and landscape, and
batch-size on the shapes: each saves its figure and result.json, fills its tables, and states a
conclusion computed from its own numbers (the tests recompute it from the returned numbers)."""
import json
import math
import os

import pytest

from minidl import lab
from minidl.cli import main
from minidl.lab import batch_size, landscape, renorm, signal_prop, weight_std

pytestmark = pytest.mark.slow


def _run(name, tmp_path, **options):
    out = str(tmp_path / name)
    r = lab.run(name, quick=True, out=out, **options)
    assert os.path.getsize(r.figure) > 10_000 and r.figure.startswith(out)
    with open(os.path.join(out, "result.json")) as f:
        assert json.load(f)["name"] == name
    assert r.conclusion and name in r.format()
    return r


def test_registered():
    for name in ("renorm", "weight-std", "signal-prop", "landscape"):
        assert name in lab.EXPERIMENTS and lab.get(name).run
    with pytest.raises(ValueError, match="takes no option 'dataset'"):
        lab.run("groupnorm", dataset="shapes")


def test_renorm(tmp_path):
    r = _run("renorm", tmp_path)
    rows = r.tables[0].rows
    assert [row["model"] for row in rows] == [m for m, _, _ in renorm.MODELS]
    for row in rows:
        assert 0 <= row["eval: moving averages"] <= 1 and 0 <= row["train mode, non-i.i.d. test batches"] <= 1
    assert all(isinstance(row["eval: precise (i.i.d.)"], float) for row in rows[:2])
    assert rows[2]["eval: precise (i.i.d.)"] == "-"
    assert r.conclusion == renorm.conclude(r.data["acc"])


def test_weight_std(tmp_path):
    r = _run("weight-std", tmp_path)
    got = {(row["model"], row["batch size"]) for row in r.tables[0].rows}
    assert got == {(name, b) for name, _, _, sizes in weight_std.RUNS for b in sizes}
    assert all(0 <= row["test acc"] <= 1 and math.isfinite(row["final train loss"]) for row in r.tables[0].rows)
    assert r.conclusion == weight_std.conclude(r.data["acc"])


def test_signal_prop_explodes_without_norm_and_stays_flat_with_skipinit_and_fixup(tmp_path):
    r = _run("signal-prop", tmp_path)
    growth = r.data["growth"]
    assert growth["no norm"] > 1.3 > growth["BatchNorm"]       # the plot's claim, measured at init
    for name in ("SkipInit", "Fixup"):
        assert signal_prop.FLAT[0] < growth[name] < signal_prop.FLAT[1]
    assert [row["variant"] for row in r.tables[1].rows] == [n for n, _, _ in signal_prop.VARIANTS]
    assert r.conclusion == signal_prop.conclude(r.data["stats"], growth, r.data["acc"], signal_prop.QUICK[0])


def test_landscape(tmp_path):
    r = _run("landscape", tmp_path)
    assert [row["model"] for row in r.tables[0].rows] == ["standard (no norm)", "BatchNorm"]
    assert all(row["loss variation"] >= 0 and row["beta-smoothness"] > 0 for row in r.tables[0].rows)
    assert len(r.tables[1].rows) == 3
    assert r.conclusion == landscape.conclude(r.data["summary"])


def test_batch_size_on_shapes_through_the_cli(tmp_path, capsys):
    out = tmp_path / "bs"
    assert main(["lab", "batch-size", "--dataset", "shapes", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "shapes (16x16" in printed and "conclusion: shapes:" in printed
    assert os.path.getsize(out / "batch-size-shapes.png") > 10_000
    with pytest.raises(SystemExit):
        main(["lab", "groupnorm", "--dataset", "shapes"])
    assert "--dataset applies to batch-size" in capsys.readouterr().err
    assert batch_size.load("shapes", True)[0].shape[1:] == (3, 16, 16)
