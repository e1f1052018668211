"""Stopping and resuming the example training scripts, as ``minidl train`` (tests/test_cli_resume.py):
a signal lets the step in flight finish and saves it (mid-epoch too), a KeyboardInterrupt mid-step
saves nothing, and the resumed run equals the uninterrupted one bit for bit, including the RNG
streams that shuffle, augment, drop out and draw batches."""
import importlib.util
import os
import signal

import numpy as np
import pytest

import minidl as md
from minidl.tensor.tensor import Tensor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# 3 steps per epoch (1,437 images in batches of 512); BatchNorm, shuffling and augmentation all resume
CNN = ["--model", "lenet", "--norm", "batch", "--epochs", "2", "--batch-size", "512", "--augment", "--no-progress"]
# dropout draws from md's RNG, as do the training and evaluation batches
GPT = ["--d-model", "16", "--n-layer", "1", "--n-head", "2", "--block-size", "16", "--batch-size", "4",
       "--max-iters", "6", "--eval-interval", "3", "--eval-iters", "2", "--dropout", "0.1", "--sample-len", "8",
       "--no-progress"]


def load_example(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", os.path.join(ROOT, "examples", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.save_plot = lambda *a, **k: None
    return module


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


def assert_same_model(a, b):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


@pytest.fixture(scope="module")
def cnn_reference(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("cnn-ref"))
    load_example("train_cnn").main(CNN + ["--out", out])
    return md.load(os.path.join(out, "lenet_batch.ckpt"))


@pytest.mark.parametrize("how, call, saved", [
    ("sigint", 5, (1, 2)),    # epoch 2, after its 2nd step: saved mid-epoch
    ("sigint", 3, (1, 0)),    # the last step of epoch 1: stops after its evaluation and checkpoint
    ("raise", 5, (1, 0)),     # mid-step: the checkpoint of epoch 1 stays
])
def test_train_cnn_resumes_bit_for_bit(tmp_path, monkeypatch, capsys, cnn_reference, how, call, saved):
    out = str(tmp_path / "run")
    path = os.path.join(out, "lenet_batch.ckpt")
    interrupt_backward(monkeypatch, call, how)
    with pytest.raises(SystemExit) as exc:
        load_example("train_cnn").main(CNN + ["--out", out])
    assert exc.value.code == 130
    ck = md.load(path)
    assert (ck["epoch"], ck["batch"]) == saved
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.endswith(f"continue with: python examples/train_cnn.py --resume {path} --out {out}")
    if how == "sigint":
        assert last.startswith(f"SIGINT at {'epoch 2, step 2/3' if saved[1] else 'the end of epoch 1'}: "
                               f"checkpoint saved to {path}")
    monkeypatch.undo()
    summary = load_example("train_cnn").main(["--resume", path, "--out", out, "--no-progress"])
    ck = md.load(path)
    assert ck["history"]["step_loss"] == cnn_reference["history"]["step_loss"]
    assert ck["history"]["test_acc"] == cnn_reference["history"]["test_acc"]
    assert_same_model(ck["model"], cnn_reference["model"])
    assert ck["rng"] == cnn_reference["rng"] and ck["aug_rng"] == cnn_reference["aug_rng"]
    assert summary["final_test_acc"] == cnn_reference["history"]["test_acc"][-1]


def test_train_cnn_resume_checks_its_flags_and_length(tmp_path, capsys, cnn_reference):
    out = str(tmp_path / "run")
    script = load_example("train_cnn")
    script.main(CNN + ["--out", out, "--epochs", "1"])
    path = os.path.join(out, "lenet_batch.ckpt")
    for argv, message in [(["--lr", "0.1"], "--lr 0.1 conflicts with the run being resumed from"),
                          (["--model", "resnet8"], "--model 'resnet8' conflicts"),
                          (["--optimizer", "adam"], "--optimizer 'adam' conflicts")]:
        with pytest.raises(SystemExit) as exc:
            script.main(["--resume", path, "--out", out] + argv)
        assert exc.value.code == 2 and message in capsys.readouterr().err
    assert script.main(["--resume", path, "--out", out]) is None     # complete: nothing to train
    assert "nothing to train" in capsys.readouterr().out
    summary = script.main(["--resume", path, "--out", out, "--epochs", "2", "--no-progress"])   # extend
    assert summary["epochs"] == 2 and len(md.load(path)["history"]["test_acc"]) == 2


@pytest.fixture(scope="module")
def gpt_reference(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("gpt-ref"))
    val = load_example("train_gpt").main(GPT + ["--out-dir", out])
    return val, md.load(os.path.join(out, "ckpt.npz"))


@pytest.mark.parametrize("how, saved", [("sigterm", 5), ("raise", 3)])
def test_train_gpt_resumes_bit_for_bit(tmp_path, monkeypatch, capsys, gpt_reference, how, saved):
    out = str(tmp_path / "run")
    interrupt_backward(monkeypatch, 5, how)
    with pytest.raises(SystemExit) as exc:
        load_example("train_gpt").main(GPT + ["--out-dir", out])
    assert exc.value.code == (143 if how == "sigterm" else 130)
    path = os.path.join(out, "ckpt.npz")
    assert md.load(path)["iter"] == saved
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.endswith(f"continue with: python examples/train_gpt.py --out-dir {out} --resume")
    monkeypatch.undo()
    val = load_example("train_gpt").main(["--out-dir", out, "--resume", "--no-progress", "--sample-len", "8"])
    ref_val, ref = gpt_reference
    ck = md.load(path)
    assert val == ref_val and ck["history"] == ref["history"] and ck["rng_state"] == ref["rng_state"]
    assert_same_model(ck["model"], ref["model"])


def test_train_gpt_resume_checks_its_flags_and_length(tmp_path, capsys, gpt_reference):
    out = str(tmp_path / "run")
    script = load_example("train_gpt")
    script.main(GPT + ["--out-dir", out])
    capsys.readouterr()
    for argv, message in [(["--lr", "0.1"], "--lr 0.1 conflicts with the run being resumed from"),
                          (["--d-model", "32"], "--d-model 32 conflicts"),
                          (["--eval-iters", "3"], "--eval-iters 3 conflicts"),
                          (["--max-iters", "4"], "--max-iters 4 is fewer than the 6 steps")]:
        with pytest.raises(SystemExit) as exc:
            script.main(["--out-dir", out, "--resume"] + argv)
        assert exc.value.code == 2 and message in capsys.readouterr().err
    before = md.load(os.path.join(out, "ckpt.npz"))["iter"]
    script.main(["--out-dir", out, "--resume", "--sample-len", "4"])   # complete: nothing to train, samples
    assert "nothing to train" in capsys.readouterr().out and before == 6
