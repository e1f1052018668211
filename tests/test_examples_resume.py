"""The example training scripts use minidl.train's loop, as ``minidl train`` does
(tests/test_cli_resume.py): the same flags (--out, --resume, --steps/--epochs), the same
checkpoint (OUT/checkpoint.npz, the same keys), the same resume rule and the same Ctrl-C message.
A signal lets the step in flight finish and saves it (mid-epoch too), a KeyboardInterrupt mid-step
saves nothing, and the resumed run equals the uninterrupted one bit for bit, including the RNG
streams that shuffle, drop out and draw batches."""
import importlib.util
import os
import signal

import numpy as np
import pytest

import minidl as md
from minidl.cli import main as cli
from minidl.tensor.tensor import Tensor
from minidl.train import metrics

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# 3 steps per epoch (1,437 images in batches of 512); BatchNorm, shuffling and augmentation all resume
CNN = ["--model", "lenet", "--norm", "batch", "--epochs", "2", "--batch-size", "512", "--augment", "--no-progress"]
# dropout draws from md's RNG, as do the training and evaluation batches
GPT = ["--d-model", "16", "--n-layer", "1", "--n-head", "2", "--block-size", "16", "--batch-size", "4",
       "--steps", "6", "--eval-every", "3", "--eval-iters", "2", "--dropout", "0.1", "--sample-len", "8",
       "--no-progress"]
# what every training program's checkpoint holds (minidl.train.loop)
CHECKPOINT_KEYS = {"format", "program", "args", "config", "model", "optimizer", "scheduler", "step", "total_steps",
                   "rng", "data", "history", "evals"}


@pytest.fixture(autouse=True)
def no_plots(monkeypatch):
    monkeypatch.setattr(metrics, "plot_loss", lambda *a, **k: None)


def load_example(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", os.path.join(ROOT, "examples", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def checkpoint(out):
    return md.load(os.path.join(out, "checkpoint.npz"))


def interrupt_backward(monkeypatch, call, how):
    """Interrupt the ``call``-th loss.backward() (one per step): a signal, or KeyboardInterrupt."""
    real, calls = Tensor.backward, [0]

    def backward(*a, **k):
        calls[0] += 1
        if calls[0] == call:
            if how == "raise":
                raise KeyboardInterrupt
            os.kill(os.getpid(), signal.SIGTERM if how == "sigterm" else signal.SIGINT)
        return real(*a, **k)
    monkeypatch.setattr(Tensor, "backward", backward)


def assert_same_run(a, b):
    """Two checkpoints hold the same step, losses, evaluations, RNG state and model."""
    assert a["step"] == b["step"] and a["history"]["loss"] == b["history"]["loss"]
    assert a["evals"] == b["evals"] and a["rng"] == b["rng"]
    assert a["model"].keys() == b["model"].keys()
    for k in a["model"]:
        np.testing.assert_array_equal(a["model"][k], b["model"][k], err_msg=k)


@pytest.fixture(scope="module")
def cnn_reference(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("cnn-ref"))
    assert load_example("train_cnn").main(CNN + ["--out", out]).status == 0
    return checkpoint(out)


@pytest.mark.parametrize("how, call, saved", [
    ("sigint", 5, 5),    # epoch 2, after its 2nd step: saved mid-epoch
    ("sigint", 3, 3),    # the last step of epoch 1: stops after its evaluation and checkpoint
    ("raise", 5, 3),     # mid-step: the checkpoint of epoch 1 stays
])
def test_train_cnn_resumes_bit_for_bit(tmp_path, monkeypatch, capsys, cnn_reference, how, call, saved):
    out = str(tmp_path / "run")
    path = os.path.join(out, "checkpoint.npz")
    interrupt_backward(monkeypatch, call, how)
    assert load_example("train_cnn").main(CNN + ["--out", out]).status == 130
    assert checkpoint(out)["step"] == saved
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.endswith(f"continue with: python examples/train_cnn.py --out {out} --resume")
    if how == "sigint":
        assert last.startswith(f"SIGINT at step {saved}/6: checkpoint saved to {path}")
    monkeypatch.undo()
    monkeypatch.setattr(metrics, "plot_loss", lambda *a, **k: None)
    result = load_example("train_cnn").main(["--out", out, "--resume", "--no-progress"])
    assert result.status == 0 and result.trained == 6 - saved
    assert_same_run(checkpoint(out), cnn_reference)
    assert result.last_eval == cnn_reference["evals"][-1]


def test_train_cnn_resume_checks_its_flags_and_length(tmp_path, capsys):
    out = str(tmp_path / "run")
    script = load_example("train_cnn")
    script.main(CNN + ["--out", out, "--epochs", "1"])
    for argv, message in [(["--lr", "0.1"], "--lr 0.1 conflicts with the run being resumed from"),
                          (["--model", "resnet8"], "--model 'resnet8' conflicts"),
                          (["--optimizer", "adam"], "--optimizer 'adam' conflicts")]:
        with pytest.raises(SystemExit) as exc:
            script.main(["--out", out, "--resume"] + argv)
        assert exc.value.code == 2 and message in capsys.readouterr().err
    assert script.main(["--out", out, "--resume"]).trained == 0     # complete: nothing to train
    assert "nothing to train" in capsys.readouterr().out
    result = script.main(["--out", out, "--resume", "--epochs", "2", "--no-progress"])   # extend
    assert result.step == 6 and [e["step"] for e in result.evals] == [3, 6]


@pytest.fixture(scope="module")
def gpt_reference(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("gpt-ref"))
    assert load_example("train_gpt").main(GPT + ["--out", out]).status == 0
    return out, checkpoint(out)


@pytest.mark.parametrize("how, saved", [("sigterm", 5), ("raise", 3)])
def test_train_gpt_resumes_bit_for_bit(tmp_path, monkeypatch, capsys, gpt_reference, how, saved):
    out = str(tmp_path / "run")
    interrupt_backward(monkeypatch, 5, how)
    assert load_example("train_gpt").main(GPT + ["--out", out]).status == (143 if how == "sigterm" else 130)
    assert checkpoint(out)["step"] == saved
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.endswith(f"continue with: python examples/train_gpt.py --out {out} --resume")
    monkeypatch.undo()
    monkeypatch.setattr(metrics, "plot_loss", lambda *a, **k: None)
    result = load_example("train_gpt").main(["--out", out, "--resume", "--no-progress", "--sample-len", "8"])
    assert result.status == 0
    assert_same_run(checkpoint(out), gpt_reference[1])


def test_train_gpt_resume_checks_its_flags_and_length(tmp_path, capsys):
    out = str(tmp_path / "run")
    script = load_example("train_gpt")
    script.main(GPT + ["--out", out])
    capsys.readouterr()
    for argv, message in [(["--lr", "0.1"], "--lr 0.1 conflicts with the run being resumed from"),
                          (["--d-model", "32"], "--d-model 32 conflicts"),
                          (["--eval-iters", "3"], "--eval-iters 3 conflicts"),
                          (["--eval-every", "2"], "--eval-every 2 conflicts"),
                          (["--steps", "4"], "--steps 4 is fewer than the 6 steps")]:
        with pytest.raises(SystemExit) as exc:
            script.main(["--out", out, "--resume"] + argv)
        assert exc.value.code == 2 and message in capsys.readouterr().err
    result = script.main(["--out", out, "--resume", "--sample-len", "4"])   # complete: nothing to train, samples
    printed = capsys.readouterr().out
    assert "nothing to train" in printed and "---- sample ----" in printed
    assert result.trained == 0 and checkpoint(out)["step"] == 6


# one trainer for all ---------------------------------------------------------------------------
RUN_FLAGS = {"--epochs", "--steps", "--eval-every", "--seed", "--out", "--resume", "--device", "--no-progress"}


def test_every_training_program_takes_the_same_run_flags():
    from minidl.cli import build_parser
    parsers = [build_parser()._subparsers_by_name["train"], load_example("train_cnn").build_parser(),
               load_example("train_gpt").build_parser()]
    for parser in parsers:
        flags = {s for a in parser._actions for s in a.option_strings}
        assert RUN_FLAGS <= flags and not flags & {"--out-dir", "--max-iters", "--eval-interval"}


def test_the_cli_and_the_examples_write_the_same_checkpoint_and_metrics(tmp_path, gpt_reference, cnn_reference):
    cli_out = str(tmp_path / "cli")
    assert cli(["train", "lenet", "--steps", "2", "--batch-size", "16", "--no-progress", "--out", cli_out]) == 0
    gpt_out, gpt = gpt_reference
    for ck, program in [(checkpoint(cli_out), "minidl train"), (cnn_reference, "examples/train_cnn.py"),
                        (gpt, "examples/train_gpt.py")]:
        assert CHECKPOINT_KEYS <= set(ck) and ck["format"] == "minidl-train" and ck["program"] == program
        assert set(ck["history"]) == set(metrics.COLUMNS) and ck["total_steps"] == ck["step"]
    assert cnn_reference["data"]["epoch_rng"] is not None   # the DataLoader's epoch order resumes
    for out in (cli_out, gpt_out):
        assert {"checkpoint.npz", "metrics.csv", "metrics.json"} <= set(os.listdir(out))


def test_a_program_resumes_only_its_own_runs(tmp_path, capsys, gpt_reference):
    gpt_out, _ = gpt_reference
    with pytest.raises(SystemExit) as exc:
        cli(["train", "gpt", "--out", gpt_out, "--resume"])
    assert exc.value.code == 2
    assert "was written by examples/train_gpt.py, not by minidl train" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        load_example("train_cnn").main(["--out", gpt_out, "--resume"])
    assert exc.value.code == 2
    assert "was written by examples/train_gpt.py, not by examples/train_cnn.py" in capsys.readouterr().err


def test_minidl_sample_reads_the_gpt_examples_checkpoint(gpt_reference, capsys):
    from minidl.cli import sample
    model, tok = sample.load_model(gpt_reference[0])   # the --out directory: its checkpoint.npz
    assert model.block_size == 16 and tok.vocab_size == model.vocab_size
    capsys.readouterr()
    assert cli(["sample", gpt_reference[0], "--prompt", "a", "--length", "5"]) == 0
    assert capsys.readouterr().out.startswith("a")
