"""``minidl train MODEL --precision fp16|bf16``: mixed-precision training from the command line.

Every zoo model trains in fp16 (autocast + GradScaler) and bf16 (autocast); the scaler's state is
in the checkpoint and a stopped fp16 run resumes bit for bit; the activation memory kept for
backward is measured on one batch in fp32 and in the run's precision, without changing the run.
"""
import csv
import json
import os
import signal

import numpy as np
import pytest

import minidl as md
from minidl.amp import grad_scaler
from minidl.cli import main, tasks
from minidl.train import metrics
from minidl.train.memory import graph_bytes
from minidl.train.precision import Precision

TINY = {
    "lenet": ["--batch-size", "8"],
    "resnet8": ["--batch-size", "8", "--width", "4"],
    "resnet20": ["--batch-size", "4", "--width", "4"],
    "vgg_small": ["--batch-size", "8"],
    "gpt": ["--batch-size", "2", "--block-size", "8", "--d-model", "16", "--n-layer", "1", "--n-head", "2"],
    "encoder": ["--batch-size", "4", "--d-model", "16", "--n-layer", "1", "--n-head", "2"],
    "vit": ["--batch-size", "4", "--d-model", "16", "--n-layer", "1", "--n-head", "2"],
    "lstm": ["--batch-size", "2", "--block-size", "8", "--hidden-size", "16", "--embed-dim", "8", "--n-layer", "1"],
}
# float16 runs overflow now and then (the scaler's test scale 2**30 at once); NumPy warns about each
pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")
RESNET = ["train", "resnet8", "--steps", "6", "--eval-every", "2", "--no-progress", *TINY["resnet8"]]


@pytest.fixture(autouse=True)
def no_plots(monkeypatch):
    monkeypatch.setattr(metrics, "plot_loss", lambda *a, **k: None)


def _losses(out):
    with open(os.path.join(out, "metrics.csv")) as f:
        return [float(r["loss"]) for r in csv.DictReader(f)]


def _summary(out):
    with open(os.path.join(out, "metrics.json")) as f:
        return json.load(f)["summary"]


def _ckpt(out):
    return md.load(os.path.join(out, "checkpoint.npz"))


@pytest.mark.parametrize("model", sorted(TINY))
def test_every_zoo_model_trains_in_fp16_and_bf16(model, tmp_path, capsys):
    for precision in ("fp16", "bf16"):
        out = str(tmp_path / precision)
        argv = ["train", model, "--steps", "2", "--eval-every", "2", "--no-progress", "--precision", precision,
                *TINY[model], "--out", out]
        assert main(argv) == 0, capsys.readouterr().out
        printed = capsys.readouterr().out
        assert f"{precision} mixed precision: activations kept for backward:" in printed
        assert all(np.isfinite(_losses(out)))
        summary, ckpt = _summary(out), _ckpt(out)
        assert summary["precision"] == precision and ckpt["args"]["precision"] == precision
        mem = summary["activation_bytes"]
        assert set(mem) == {"fp32", precision}
        assert all(v["saved"] > 0 and v["held"] >= v["saved"] for v in mem.values())
        assert set(mem["fp32"]["saved_by_dtype"]) <= {"float32", "float64", "int64", "bool"}   # float64: BN stats
        for p in ckpt["model"].values():                                      # master weights stay float32
            assert p.dtype != np.float16
        if precision == "fp16":
            assert set(ckpt["scaler"]) == {"scale", "growth_factor", "backoff_factor", "growth_interval",
                                           "_growth_tracker"}
            assert summary["loss_scale"] == ckpt["scaler"]["scale"]
        else:
            assert ckpt["scaler"] is None and "loss_scale" not in summary


class LivelyScaler(grad_scaler.GradScaler):
    """A scale that overflows float16 at once (2**30) and grows every 2 clean steps, so that six
    steps back off and grow several times and a resume that lost the scaler's state would show."""

    def __init__(self, device="cuda", **kw):
        super().__init__(device, init_scale=2.0 ** 30, growth_interval=2)


@pytest.fixture
def lively_scaler(monkeypatch):
    monkeypatch.setattr(grad_scaler, "GradScaler", LivelyScaler)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("fp16-ref"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(grad_scaler, "GradScaler", LivelyScaler)
        mp.setattr(metrics, "plot_loss", lambda *a, **k: None)
        assert main(RESNET + ["--precision", "fp16", "--out", out]) == 0
    ckpt = _ckpt(out)
    assert ckpt["scaler"]["scale"] < 2.0 ** 30 and ckpt["scaler"]["growth_interval"] == 2
    return _losses(out), ckpt


def _stop_during_step_3(monkeypatch, out):
    """Run RESNET in fp16 with a SIGINT arriving during step 3: it finishes the step, saves, exits 130."""
    real_batch = tasks.ImageTask.batch
    fired = []

    def batch(task, step):
        if step == 2 and not fired:   # batch(2) is fetched by step 3 (the memory probe fetches batch 0)
            fired.append(step)
            os.kill(os.getpid(), signal.SIGINT)
        return real_batch(task, step)
    monkeypatch.setattr(tasks.ImageTask, "batch", batch)
    assert main(RESNET + ["--precision", "fp16", "--out", out]) == 130
    assert _ckpt(out)["step"] == 3
    monkeypatch.setattr(tasks.ImageTask, "batch", real_batch)


def test_a_stopped_fp16_run_resumes_bit_for_bit(tmp_path, monkeypatch, reference, lively_scaler):
    out = str(tmp_path / "run")
    _stop_during_step_3(monkeypatch, out)
    assert main(RESNET + ["--out", out, "--resume"]) == 0      # the stored precision holds
    ref_losses, ref_ckpt = reference
    assert _losses(out) == ref_losses
    got = _ckpt(out)
    assert got["scaler"] == ref_ckpt["scaler"] and got["args"]["precision"] == "fp16"
    for k in ref_ckpt["model"]:
        np.testing.assert_array_equal(got["model"][k], ref_ckpt["model"][k], err_msg=k)


def test_the_scaler_state_is_what_makes_the_resume_exact(tmp_path, monkeypatch, reference, lively_scaler):
    """Resuming with the scaler back at its initial scale diverges from the uninterrupted run when
    the first steps backed the scale off (float16 overflows at S = 2**16 here)."""
    ref_losses, ref_ckpt = reference
    out = str(tmp_path / "run")
    _stop_during_step_3(monkeypatch, out)
    stopped = _ckpt(out)["scaler"]
    assert stopped["scale"] < 2.0 ** 30, "expected the first fp16 steps to overflow and back the scale off"
    monkeypatch.setattr(Precision, "load_state_dict", lambda self, state: None)
    assert main(RESNET + ["--out", out, "--resume"]) == 0
    assert _ckpt(out)["scaler"] != ref_ckpt["scaler"]


def test_measuring_memory_does_not_change_the_run(tmp_path, monkeypatch, reference, lively_scaler):
    out = str(tmp_path / "unmeasured")
    monkeypatch.setattr(Precision, "measure_memory", lambda self, *a: None)
    monkeypatch.setattr(Precision, "memory_line", lambda self: "")
    assert main(RESNET + ["--precision", "fp16", "--out", out]) == 0
    ref_losses, ref_ckpt = reference
    assert _losses(out) == ref_losses
    for k in ref_ckpt["model"]:    # BatchNorm's running statistics included
        np.testing.assert_array_equal(_ckpt(out)["model"][k], ref_ckpt["model"][k], err_msg=k)


def test_precision_at_resume_must_agree_and_old_checkpoints_are_fp32(tmp_path, capsys):
    out = str(tmp_path / "run")
    argv = ["train", "lenet", "--steps", "2", "--eval-every", "2", "--no-progress", *TINY["lenet"], "--out", out]
    assert main(argv) == 0
    assert _ckpt(out)["args"]["precision"] == "fp32" and _summary(out)["precision"] == "fp32"
    with pytest.raises(SystemExit):
        main(argv[:3] + ["3"] + argv[4:] + ["--resume", "--precision", "fp16"])
    assert "--precision 'fp16' conflicts with the run being resumed" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "lenet", "--precision", "fp8"])
    assert "invalid choice: 'fp8'" in capsys.readouterr().err


def test_graph_bytes_counts_saved_activations_once_and_not_the_parameters():
    lin = md.nn.Linear(8, 4)
    x = md.randn(16, 8)
    y = lin(x).relu().sum()
    got = graph_bytes(y)
    # saved: the Linear keeps x (16x8 float32) for dW, the ReLU its 16x4 bool mask; held adds the
    # Linear's and the ReLU's outputs (16x4 float32 each), inputs of the next nodes; no parameter counts
    assert got.nodes == 3 and got.by_dtype == {"float32": 16 * 8 * 4, "bool": 16 * 4}
    assert got.saved == 16 * 8 * 4 + 16 * 4 and got.held == got.saved + 2 * 16 * 4 * 4
    assert graph_bytes(md.ones(3)).saved == 0
    twice = graph_bytes(lin(x).sum() + lin(x).sum())      # x saved by two nodes: one storage, counted once
    assert twice.by_dtype == {"float32": 16 * 8 * 4}
    with md.autocast("cpu", dtype=md.float16):
        half = graph_bytes(lin(x).relu().sum())
    assert half.nodes > got.nodes and sum(half.by_dtype.values()) == half.saved   # autocast's casts are nodes too


def test_precision_step_clips_the_unscaled_gradients_and_counts_skips():
    md.manual_seed(0)
    lin = md.nn.Linear(4, 2)
    x = md.randn(3, 4)
    ref = md.nn.Linear(4, 2)
    ref.load_state_dict(lin.state_dict())
    ref(x).square().mean().backward()
    expected = [p.grad.numpy().copy() for p in ref.parameters()]
    prec = Precision("fp16", "cpu")
    assert prec.scaler.get_scale() == 2.0 ** 16
    prec.scaler = grad_scaler.GradScaler("cpu", init_scale=64.0)   # 2**16 overflows this float16 graph's dW
    seen = []
    opt = md.optim.SGD(lin.parameters(), lr=0.1)
    with prec.autocast():
        loss = lin(x).square().mean()
    assert prec.backward_and_step(loss, opt, lambda: seen.extend(p.grad.numpy().copy() for p in lin.parameters()))
    for got, want in zip(seen, expected):      # what clipping sees: true gradients (to float16 rounding)
        np.testing.assert_allclose(got, want, rtol=2e-2, atol=1e-3)
    lin.weight.data.fill_(float("inf"))
    with prec.autocast():
        loss = lin(x).square().mean()
    assert not prec.backward_and_step(loss, opt, None) and prec.skipped == 1
    assert prec.describe()["skipped_steps"] == 1 and prec.describe()["loss_scale"] == 32.0
    with pytest.raises(ValueError, match="expected one of fp32, fp16, bf16"):
        Precision("fp8")
