"""The command line: argument errors, gradcheck, train (outputs, Ctrl-C, resume), sample, bench."""
import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import minidl as md
from minidl.autograd.op_function import Function
from minidl.cli import main
from minidl.cli import specs as cli_specs
from minidl.testing import OpSpec
from minidl.train import loop

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _error(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


def test_unknown_names_list_the_valid_choices(capsys):
    err = _error(capsys, ["train", "resnet9"])
    assert "invalid choice: 'resnet9'" in err
    for name in ("lenet", "resnet8", "resnet20", "vgg_small", "gpt", "encoder", "vit"):
        assert name in err
    err = _error(capsys, ["lab", "dropout"])
    for name in ("padding", "batch-size", "train-eval", "pre-post", "deepnorm", "rmsnorm", "groupnorm",
                 "precision", "axes"):
        assert name in err
    err = _error(capsys, ["fly"])
    assert "invalid choice" in err and "train" in err and "gradcheck" in err
    err = _error(capsys, ["train", "gpt", "--norm", "cosine"])
    assert "invalid choice: 'cosine'" in err and "rms" in err
    err = _error(capsys, ["bench", "no_such_bench"])
    assert "invalid choice: 'no_such_bench'" in err and "norms" in err


def test_model_specific_argument_errors(capsys):
    err = _error(capsys, ["train", "resnet8", "--norm", "rms", "--steps", "1"])
    assert "--norm 'rms' is not available for resnet8" in err and "group" in err
    err = _error(capsys, ["train", "gpt", "--norm", "batch", "--steps", "1"])
    assert "not available for gpt" in err
    err = _error(capsys, ["train", "lenet", "--norm-position", "post", "--steps", "1"])
    assert "--norm-position applies to the Transformers" in err


def test_gradcheck_passes_on_every_op_and_layer(capsys):
    assert main(["gradcheck"]) == 0
    out = capsys.readouterr().out
    names = [s.name for s in cli_specs.registry()]
    assert len(names) >= 60
    for name in ("layer_norm", "batch_norm(training)", "masked_batch_norm", "group_norm", "conv2d(stride,pad)",
                 "scaled_dot_product_attention(causal)", "BatchNorm2d", "TransformerBlock(deepnorm)"):
        assert name in names
    lines = [ln for ln in out.splitlines() if ln.split()[:1] and ln.split()[0] in
             ("op", "functional", "norm", "layer", "block")]
    assert len(lines) == len(names) and all(" pass " in ln for ln in lines)
    assert f"{len(names)} passed, 0 failed" in out


class _WrongSquare(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x   # should be 2 g x


def test_gradcheck_reports_failures_with_exit_code_1(capsys, monkeypatch):
    bad = OpSpec("wrong_square", _WrongSquare.apply, None, lambda rng: (rng.standard_normal((2, 3)),))
    bad.group = "op"
    good = [s for s in cli_specs.registry() if s.name == "mul"]
    monkeypatch.setattr(cli_specs, "registry", lambda: good + [bad])
    assert main(["gradcheck"]) == 1
    out = capsys.readouterr().out
    assert "wrong_square" in out and "FAIL" in out and "1 passed, 1 failed" in out
    # a layer whose parameters never reach the output must not pass vacuously
    disconnected = OpSpec("disconnected", lambda x, w: x * 2.0, None,
                          lambda rng: (rng.standard_normal(3), rng.standard_normal(3)))
    disconnected.group = "op"
    monkeypatch.setattr(cli_specs, "registry", lambda: [disconnected])
    assert main(["gradcheck"]) == 1


def _losses(out):
    with open(os.path.join(out, "metrics.csv")) as f:
        rows = list(csv.DictReader(f))
    return [int(r["step"]) for r in rows], [float(r["loss"]) for r in rows]


TRAIN = ["train", "lenet", "--steps", "6", "--batch-size", "16", "--eval-every", "3", "--no-progress"]


def test_train_writes_metrics_plot_checkpoint_and_resume_after_ctrl_c_matches(tmp_path, monkeypatch, capsys):
    ref = str(tmp_path / "ref")
    assert main(TRAIN + ["--out", ref]) == 0
    for name in ("metrics.csv", "metrics.json", "loss.png", "checkpoint.npz"):
        assert os.path.getsize(os.path.join(ref, name)) > 0
    steps, ref_losses = _losses(ref)
    assert steps == [1, 2, 3, 4, 5, 6]
    with open(os.path.join(ref, "metrics.json")) as f:
        meta = json.load(f)
    assert [e["step"] for e in meta["evals"]] == [3, 6] and 0 <= meta["evals"][-1]["test_acc"] <= 1
    ck = md.load(os.path.join(ref, "checkpoint.npz"))
    assert ck["step"] == 6 and ck["model_name"] == "lenet"

    # a KeyboardInterrupt inside the 4th step: that step is not saved, the checkpoint of step 3 stays,
    # and the exit status is 130 (tests/test_cli_resume.py interrupts every point of a step)
    out = str(tmp_path / "interrupted")
    calls = {"n": 0}
    real_step = loop.train_step

    def flaky(*a, **k):
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt
        return real_step(*a, **k)
    monkeypatch.setattr(loop, "train_step", flaky)
    assert main(TRAIN + ["--out", out]) == 130
    assert "interrupted during step 4: " in capsys.readouterr().out
    assert md.load(os.path.join(out, "checkpoint.npz"))["step"] == 3
    monkeypatch.setattr(loop, "train_step", real_step)

    # --resume continues at step 4 and reproduces the uninterrupted run exactly
    assert main(TRAIN + ["--out", out, "--resume"]) == 0
    steps2, losses2 = _losses(out)
    assert steps2 == steps
    np.testing.assert_array_equal(losses2, ref_losses)


def test_a_diverging_run_stops_with_status_1_and_keeps_its_last_checkpoint(tmp_path, capsys):
    out = str(tmp_path / "run")
    with np.errstate(all="ignore"):
        assert main(TRAIN + ["--lr", "1e30", "--out", out]) == 1
    printed = capsys.readouterr().out
    assert "the loss became" in printed and "training stopped, that step is not saved" in printed
    with open(os.path.join(out, "metrics.json")) as f:
        summary = json.load(f)["summary"]
    assert summary["diverged"] is True and summary["interrupted"] is False
    assert all(np.isfinite(_losses(out)[1]))


def test_resume_without_checkpoint_is_an_error(tmp_path, capsys):
    err = _error(capsys, ["train", "lenet", "--steps", "1", "--out", str(tmp_path), "--resume"])
    assert "no checkpoint" in err


def test_sample_from_a_tiny_gpt_checkpoint(tmp_path, capsys):
    out = str(tmp_path / "gpt")
    assert main(["train", "gpt", "--steps", "2", "--batch-size", "2", "--block-size", "8", "--d-model", "8",
                 "--n-layer", "1", "--n-head", "2", "--no-progress", "--out", out]) == 0
    capsys.readouterr()
    from minidl.cli import sample
    args = ["sample", out, "--prompt", "The ", "--length", "12", "--seed", "3"]
    assert main(args) == 0
    text = capsys.readouterr().out.rstrip("\n")
    assert text.startswith("The ") and len(text) == 4 + 12
    main(args)
    assert capsys.readouterr().out.rstrip("\n") == text          # the seed makes it reproducible
    model, tok = sample.load_model(os.path.join(out, "checkpoint.npz"))
    assert model.block_size == 8 and tok.vocab_size == model.vocab_size
    err = _error(capsys, ["sample", str(tmp_path / "missing.npz")])
    assert "no such checkpoint" in err


def test_bench_lists_the_benchmark_scripts(capsys):
    assert main(["bench", "--list"]) == 0
    out = capsys.readouterr().out
    for name in ("autograd", "norms", "cnn", "transformer"):
        assert f"bench_{name}.py" in out


def test_python_dash_m_minidl():
    r = subprocess.run([sys.executable, "-m", "minidl", "--help"], capture_output=True, text=True, cwd=ROOT,
                       timeout=120)
    assert r.returncode == 0
    for cmd in ("train", "sample", "gradcheck", "bench", "lab"):
        assert cmd in r.stdout


def test_bench_runs_each_script_in_a_subprocess(tmp_path, monkeypatch, capfd):
    from minidl.cli import bench
    (tmp_path / "bench_ok.py").write_text("import sys; print('ran ok', sys.argv[1:])\n")
    (tmp_path / "bench_bad.py").write_text("raise SystemExit(3)\n")
    monkeypatch.setattr(bench, "benchmarks_dir", lambda: str(tmp_path))
    assert main(["bench", "ok", "--args=--quick -n 2"]) == 0
    out = capfd.readouterr().out
    assert "==== bench ok" in out and "ran ok ['--quick', '-n', '2']" in out and "ok" in out.splitlines()[-1]
    assert main(["bench"]) == 1                     # all of them; one fails
    out = capfd.readouterr().out
    assert "bad" in out and "FAILED (3)" in out
