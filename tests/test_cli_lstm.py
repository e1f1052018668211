"""``minidl train lstm`` and ``minidl sample`` of its run: the char-level LSTM trains on the GPT's
text corpus through the same trainer (metrics, plot, checkpoint, exact resume), with --norm
choosing nn.LSTM, LayerNormLSTM or BatchNormLSTM; its flags are validated like every other."""
import os
import signal

import numpy as np
import pytest

from minidl import nn
from minidl.cli import main, sample, tasks
from minidl.train import loop, metrics
from minidl.zoo import CharLSTM
from test_cli_resume import assert_same_state, checkpoint, losses

LSTM = ["train", "lstm", "--steps", "4", "--batch-size", "2", "--block-size", "6", "--embed-dim", "4",
        "--hidden-size", "6", "--n-layer", "2", "--eval-every", "2", "--no-progress"]


def _error(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(err)
    return err[-1]   # the one line saying what is wrong (argparse prints the usage above it)


@pytest.fixture(autouse=True)
def no_plots(monkeypatch):
    monkeypatch.setattr(metrics, "plot_loss", lambda *a, **k: None)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted runs per --norm: {norm: (out, steps, losses, final checkpoint)}."""
    out = {}
    for norm in ("none", "batch"):
        d = str(tmp_path_factory.mktemp(f"ref-lstm-{norm}"))
        assert main(LSTM + ["--norm", norm, "--out", d]) == 0
        out[norm] = (d, *losses(d), checkpoint(d))
    return out


@pytest.mark.parametrize("norm, layer", [("none", nn.LSTM), ("layer", nn.LayerNormLSTM),
                                         ("batch", nn.BatchNormLSTM)])
def test_norm_chooses_the_recurrent_layer(norm, layer):
    assert type(CharLSTM(7, 4, 6, 1, norm=norm).lstm) is layer


def test_a_run_writes_the_trainers_outputs_with_the_lstms_config(reference):
    out, steps, run_losses, ckpt = reference["none"]
    for name in ("metrics.csv", "metrics.json", "checkpoint.npz"):
        assert os.path.getsize(os.path.join(out, name)) > 0
    assert steps == [1, 2, 3, 4] and all(np.isfinite(run_losses))
    assert ckpt["model_name"] == "lstm" and ckpt["tokenizer"]
    assert {k: v for k, v in ckpt["config"].items() if k != "vocab_size"} == {
        "embed_dim": 4, "hidden_size": 6, "num_layers": 2, "norm": "none", "dropout": 0.0}
    assert [e["step"] for e in ckpt["evals"]] == [2, 4] and "val_loss" in ckpt["evals"][-1]
    assert "lstm.norm_ih_l0_running_mean" in reference["batch"][3]["model"]   # BatchNormLSTM's per-step statistics


@pytest.mark.parametrize("norm", ["none", "batch"])
def test_a_run_stopped_by_ctrl_c_resumes_bit_for_bit(tmp_path, monkeypatch, capsys, reference, norm):
    out = str(tmp_path / "run")
    real_batch = tasks.TextTask.batch

    def batch(task, step):   # Ctrl-C while step 3 fetches its data: that step finishes and is saved
        if step == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return real_batch(task, step)
    monkeypatch.setattr(tasks.TextTask, "batch", batch)
    assert main(LSTM + ["--norm", norm, "--out", out]) == 130
    assert f"continue with: python -m minidl train lstm --out {out} --resume" in capsys.readouterr().out
    assert checkpoint(out)["step"] == 3
    monkeypatch.setattr(tasks.TextTask, "batch", real_batch)
    assert main(LSTM + ["--norm", norm, "--out", out, "--resume"]) == 0
    _, steps, ref_losses, ref_ckpt = reference[norm]
    assert losses(out) == (steps, ref_losses)
    assert_same_state(checkpoint(out), ref_ckpt)


def test_a_keyboard_interrupt_mid_step_resumes_from_the_last_checkpoint(tmp_path, monkeypatch, capsys, reference):
    out = str(tmp_path / "run")
    real_step, calls = loop.train_step, {"n": 0}

    def flaky(*a, **k):
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt
        return real_step(*a, **k)
    monkeypatch.setattr(loop, "train_step", flaky)
    assert main(LSTM + ["--out", out]) == 130
    assert checkpoint(out)["step"] == 2
    monkeypatch.setattr(loop, "train_step", real_step)
    assert main(["train", "lstm", "--out", out, "--resume", "--no-progress"]) == 0   # the stored flags hold
    _, steps, ref_losses, ref_ckpt = reference["none"]
    assert losses(out) == (steps, ref_losses)
    assert_same_state(checkpoint(out), ref_ckpt)


@pytest.mark.parametrize("flag, given, stored", [("--hidden-size", "8", "6"), ("--n-layer", "1", "2"),
                                                 ("--norm", "layer", "'none'"), ("--block-size", "5", "6")])
def test_an_architecture_flag_given_at_resume_must_agree(capsys, reference, flag, given, stored):
    out = reference["none"][0]
    err = _error(capsys, ["train", "lstm", "--out", out, "--resume", flag, given])
    assert f"conflicts with the run being resumed" in err and f"which has {flag} {stored}" in err


def test_sample_continues_the_prompt_reproducibly(capsys, reference):
    out = reference["none"][0]
    capsys.readouterr()
    args = ["sample", out, "--prompt", "The ", "--length", "10", "--seed", "2", "--top-k", "5"]
    assert main(args) == 0
    text = capsys.readouterr().out.rstrip("\n")
    assert text.startswith("The ") and len(text) == 4 + 10
    assert main(args) == 0
    assert capsys.readouterr().out.rstrip("\n") == text
    model, tok = sample.load_model(out)
    assert isinstance(model, CharLSTM) and model.hidden_size == 6 and tok.vocab_size == model.vocab_size
    assert main(["sample", reference["batch"][0], "--length", "5"]) == 0   # BatchNormLSTM samples too


@pytest.mark.parametrize("argv, message", [
    (["--hidden-size", "0"], "argument --hidden-size: expected a positive integer, got '0'"),
    (["--embed-dim", "x"], "argument --embed-dim: expected a positive integer, got 'x'"),
    (["--n-layer", "-1"], "argument --n-layer: expected a positive integer, got '-1'"),
    (["--block-size", "1.5"], "argument --block-size: expected a positive integer, got '1.5'"),
    (["--norm", "rms"], "--norm 'rms' is not available for lstm; choose from none, layer, batch"),
    (["--norm", "cosine"], "argument --norm: invalid choice: 'cosine'"),
    (["--d-model", "8"], "--d-model applies to the Transformers (gpt, encoder, vit), not lstm"),
    (["--norm-position", "post"], "--norm-position applies to the Transformers (gpt, encoder, vit), not lstm"),
])
def test_bad_lstm_flags_are_one_line_errors(capsys, argv, message):
    assert message in _error(capsys, ["train", "lstm", "--steps", "1"] + argv)


@pytest.mark.parametrize("model, flag", [("gpt", "--hidden-size"), ("gpt", "--embed-dim"), ("lenet", "--n-layer")])
def test_lstm_flags_given_to_other_models_are_errors(capsys, model, flag):
    assert f"{flag} applies to" in _error(capsys, ["train", model, "--steps", "1", flag, "4"])
