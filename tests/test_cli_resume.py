"""Stopping and resuming ``minidl train``.

A run stopped at any point of a step (by SIGINT or SIGTERM, in-process or from outside, or by a
KeyboardInterrupt raised inside the step) and then resumed trains exactly the steps of the
uninterrupted run: the same losses, bit for bit, and the same final model, optimizer and RNG.
A signal lets the step in flight finish and saves it; a KeyboardInterrupt mid-step saves
nothing and leaves the last checkpoint. At resume the stored run length, hyper-parameters and
architecture hold: flags that disagree are errors, --steps sets a new length.
"""
import csv
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import minidl as md
from minidl.cli import main
from minidl.cli import tasks
from minidl.optim import implementation, lr_scheduler
from minidl.optim.adam import AdamW
from minidl.optim.optimizer import Optimizer
from minidl.optim.sgd import SGD
from minidl.tensor.tensor import Tensor
from minidl.train import loop, metrics

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LENET = ["train", "lenet", "--steps", "6", "--batch-size", "16", "--eval-every", "2", "--no-progress"]
GPT = ["train", "gpt", "--steps", "6", "--batch-size", "4", "--block-size", "16", "--d-model", "16",
       "--n-layer", "1", "--n-head", "2", "--eval-every", "2", "--no-progress"]
RUNS = {"lenet": LENET, "gpt": GPT}


def losses(out):
    with open(os.path.join(out, "metrics.csv")) as f:
        rows = list(csv.DictReader(f))
    return [int(r["step"]) for r in rows], [float(r["loss"]) for r in rows]


def checkpoint(out):
    return md.load(os.path.join(out, "checkpoint.npz"))


def assert_same_state(a, b):
    """Two checkpoints hold the same model, optimizer state, RNG state and step."""
    assert a["step"] == b["step"] and a["rng"] == b["rng"]
    assert a["model"].keys() == b["model"].keys()
    for k in a["model"]:
        np.testing.assert_array_equal(a["model"][k], b["model"][k], err_msg=k)
    sa, sb = a["optimizer"]["state"], b["optimizer"]["state"]
    assert sa.keys() == sb.keys()
    for i in sa:
        for k in sa[i]:
            np.testing.assert_array_equal(sa[i][k], sb[i][k], err_msg=f"optimizer state {i} {k}")
    assert a["scheduler"]["last_epoch"] == b["scheduler"]["last_epoch"]


@pytest.fixture(autouse=True)
def no_plots(monkeypatch):
    monkeypatch.setattr(metrics, "plot_loss", lambda *a, **k: None)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted runs: {name: (steps, losses, final checkpoint)}."""
    out = {}
    for name, argv in RUNS.items():
        d = str(tmp_path_factory.mktemp(f"ref-{name}"))
        assert main(argv + ["--out", d]) == 0
        out[name] = (*losses(d), checkpoint(d))
    return out


class Interrupt:
    """Interrupts step ``at`` (1-based) at ``point``: ``how`` is "sigint"/"sigterm" (a signal to
    this process, as Ctrl-C or `kill` would send) or "raise" (KeyboardInterrupt right there)."""

    def __init__(self, monkeypatch, point, at, how):
        self.point, self.at, self.how = point, at, how
        self.step, self.fired, self.updates = 0, 0, 0
        self.times = 1

        def wrap(owner, name, before=False, after=False, when=lambda *a: True):
            real = getattr(owner, name)

            def wrapper(*args, **kwargs):
                if before and when(*args):
                    self.fire()
                result = real(*args, **kwargs)
                if after and when(*args):
                    self.fire()
                return result
            monkeypatch.setattr(owner, name, wrapper)

        for cls in (tasks.ImageTask, tasks.TextTask):   # the data fetch: every step starts with it
            real_batch = cls.batch

            def batch(task, step, real_batch=real_batch):
                self.step, self.updates = step + 1, 0
                if point == "data":
                    self.fire()
                return real_batch(task, step)
            monkeypatch.setattr(cls, "batch", batch)
        if point == "data":
            pass
        elif point == "backward":
            wrap(Tensor, "backward", before=True)
        elif point == "between groups":
            for cls in (SGD, AdamW):
                wrap(cls, "_update_group", after=True, when=lambda opt, group: group is opt.param_groups[0])
        elif point == "mid-update":   # after the first parameter's update, before the second's
            real_fused = implementation.fused

            def fused(*a):
                self.updates += 1
                if self.updates == 2:
                    self.fire()
                return real_fused(*a)
            monkeypatch.setattr(implementation, "fused", fused)
        elif point == "after opt.step":
            wrap(Optimizer, "step", after=True)
        elif point == "before scheduler":
            wrap(lr_scheduler.LRScheduler, "step", before=True)
        elif point == "after scheduler":
            wrap(lr_scheduler.LRScheduler, "step", after=True)
        elif point == "evaluation":
            for cls in (tasks.ImageTask, tasks.TextTask):
                wrap(cls, "evaluate", before=True)
        elif point == "saving":
            wrap(loop, "save", before=True)
        else:
            raise AssertionError(point)

    def fire(self):
        if self.step != self.at or self.fired >= self.times:
            return
        self.fired += 1
        if self.how == "raise":
            raise KeyboardInterrupt
        os.kill(os.getpid(), signal.SIGTERM if self.how == "sigterm" else signal.SIGINT)


IN_STEP = ("data", "backward", "between groups", "mid-update", "after opt.step", "before scheduler",
           "after scheduler")
AT_EVAL = ("evaluation", "saving")   # these happen at steps 2, 4 and 6 only


@pytest.mark.parametrize("how", ["sigint", "raise"])
@pytest.mark.parametrize("point", IN_STEP + AT_EVAL)
def test_a_run_interrupted_anywhere_in_a_step_resumes_bit_for_bit(tmp_path, monkeypatch, capsys, reference,
                                                                   point, how):
    at = 4 if point in AT_EVAL else 5
    out = str(tmp_path / "run")
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    inj = Interrupt(monkeypatch, point, at, how)
    assert main(LENET + ["--out", out]) == 130
    assert inj.fired == 1
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers
    printed = capsys.readouterr().out.strip().splitlines()[-1]
    ckpt_path = os.path.join(out, "checkpoint.npz")
    resume = f"continue with: python -m minidl train lenet --out {out} --resume"
    if how == "raise" and point in AT_EVAL:   # step `at` is done but not saved: the checkpoint of at-2 stays
        saved = at - 2
        assert printed == (f"interrupted during the evaluation after step {at}: steps after {saved} are not saved; "
                           f"{ckpt_path} holds step {saved}; {resume}")
    elif how == "raise":   # mid-step: nothing more is saved; the checkpoint of step at-1 stays
        saved = at - 1
        assert printed == f"interrupted during step {at}: {ckpt_path} holds step {saved}; {resume}"
    else:                # the signal lets step `at` finish, then it is saved
        saved = at
        assert printed == f"SIGINT at step {at}/6: checkpoint saved to {ckpt_path}; {resume}"
    assert checkpoint(out)["step"] == saved and checkpoint(out)["total_steps"] == 6
    with open(os.path.join(out, "metrics.json")) as f:
        summary = json.load(f)["summary"]
    assert summary["interrupted"] is True and summary["checkpoint_step"] == saved

    monkeypatch.undo()
    monkeypatch.setattr(metrics, "plot_loss", lambda *a, **k: None)
    assert main(LENET + ["--out", out, "--resume"]) == 0
    steps, ref_losses, ref_ckpt = reference["lenet"]
    assert losses(out) == (steps, ref_losses)
    assert_same_state(checkpoint(out), ref_ckpt)
    with open(os.path.join(out, "metrics.json")) as f:
        assert json.load(f)["summary"]["interrupted"] is False


@pytest.mark.parametrize("point, how", [("mid-update", "sigterm"), ("after opt.step", "raise"), ("data", "sigint")])
def test_a_gpt_run_with_adamw_resumes_bit_for_bit(tmp_path, monkeypatch, capsys, reference, point, how):
    out = str(tmp_path / "run")
    Interrupt(monkeypatch, point, 3, how)
    assert main(GPT + ["--out", out]) == (143 if how == "sigterm" else 130)
    assert checkpoint(out)["step"] == (2 if how == "raise" else 3)
    if how == "sigterm":
        assert "SIGTERM at step 3/6: checkpoint saved to" in capsys.readouterr().out
    monkeypatch.undo()
    assert main(GPT + ["--out", out, "--resume"]) == 0
    steps, ref_losses, ref_ckpt = reference["gpt"]
    assert losses(out) == (steps, ref_losses)
    assert_same_state(checkpoint(out), ref_ckpt)


def test_a_second_ctrl_c_quits_mid_step_without_saving(tmp_path, monkeypatch, capsys, reference):
    out = str(tmp_path / "run")
    inj = Interrupt(monkeypatch, "backward", 5, "sigint")
    inj.times = 2
    real_backward = Tensor.backward

    def backward(*a, **k):   # two Ctrl-C's in a row, before the update
        inj.fire()
        inj.fire()
        return real_backward(*a, **k)
    monkeypatch.setattr(Tensor, "backward", backward)
    assert main(LENET + ["--out", out]) == 130
    assert inj.fired == 2
    assert "interrupted during step 5: " in capsys.readouterr().out
    assert checkpoint(out)["step"] == 4
    monkeypatch.undo()
    monkeypatch.setattr(metrics, "plot_loss", lambda *a, **k: None)
    assert main(LENET + ["--out", out, "--resume"]) == 0
    assert losses(out)[1] == reference["lenet"][1]


def test_a_second_ctrl_c_while_saving_lets_the_checkpoint_complete(tmp_path, monkeypatch, reference):
    out = str(tmp_path / "run")
    inj = Interrupt(monkeypatch, "backward", 5, "sigint")
    real_save = loop.save

    def save(obj, path):   # the stop request's checkpoint of step 5, Ctrl-C'd again half way
        if obj["step"] == 5:
            os.kill(os.getpid(), signal.SIGINT)
        return real_save(obj, path)
    monkeypatch.setattr(loop, "save", save)
    assert main(LENET + ["--out", out]) == 130
    assert inj.fired == 1 and checkpoint(out)["step"] == 5
    monkeypatch.undo()
    monkeypatch.setattr(metrics, "plot_loss", lambda *a, **k: None)
    assert main(LENET + ["--out", out, "--resume"]) == 0
    assert losses(out)[1] == reference["lenet"][1]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_real_signal_to_a_training_process_saves_a_whole_step(tmp_path, sig):
    out = str(tmp_path / "run")
    argv = ["train", "lenet", "--steps", "100", "--batch-size", "16", "--no-progress", "--out", out]
    proc = subprocess.Popen([sys.executable, "-m", "minidl", *argv, "--eval-every", "1"], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        for line in proc.stdout:   # wait until it is inside the training loop
            if line.startswith("step 3/100"):
                break
        proc.send_signal(sig)
        rest, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 128 + sig, err
    step = checkpoint(out)["step"]
    assert 3 <= step < 100
    assert f"{sig.name} at step {step}/100: checkpoint saved to" in rest
    assert "Traceback" not in err
    ref = str(tmp_path / "ref")
    assert main(argv[:-1] + [ref]) == 0
    assert main(argv + ["--resume"]) == 0
    assert losses(out) == losses(ref)
    assert_same_state(checkpoint(out), checkpoint(ref))


# resume: run length and stored hyper-parameters ----------------------------------------------
@pytest.fixture(scope="module")
def done4(tmp_path_factory):
    """Finished 4-step runs of lenet and gpt (only read by the tests that use them)."""
    out = {}
    for name, argv in RUNS.items():
        d = str(tmp_path_factory.mktemp(f"done4-{name}"))
        assert main([a if a != "6" else "4" for a in argv] + ["--out", d]) == 0
        out[name] = d
    return out


def _files(d):
    out = {}
    for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name), "rb") as f:
            out[name] = f.read()
    return out


@pytest.mark.parametrize("extra", [[], ["--steps", "4"]])
def test_resuming_a_complete_run_trains_nothing_and_rewrites_nothing(done4, capsys, extra):
    before = _files(done4["lenet"])
    assert main(LENET[:2] + ["--out", done4["lenet"], "--resume", *extra]) == 0
    assert "nothing to train" in capsys.readouterr().out
    assert _files(done4["lenet"]) == before


def test_resuming_with_fewer_steps_than_done_is_an_error(done4, capsys):
    before = _files(done4["lenet"])
    with pytest.raises(SystemExit) as exc:
        main(LENET[:2] + ["--out", done4["lenet"], "--resume", "--steps", "3"])
    assert exc.value.code == 2
    assert "--steps 3 is fewer than the 4 steps the checkpoint in" in capsys.readouterr().err
    assert _files(done4["lenet"]) == before


def test_more_steps_at_resume_extend_the_run_on_a_schedule_for_the_new_length(tmp_path, monkeypatch, reference):
    out = str(tmp_path / "run")
    argv = [a if a != "6" else "4" for a in LENET] + ["--out", out]
    assert main(argv) == 0
    four = losses(out)
    used = []
    real_step = loop.train_step

    def train_step(loss, batch, opt, *rest):
        used.append(opt.param_groups[0]["lr"])
        return real_step(loss, batch, opt, *rest)
    monkeypatch.setattr(loop, "train_step", train_step)
    assert main(argv + ["--resume", "--steps", "7"]) == 0
    steps, loss = losses(out)
    assert steps == list(range(1, 8)) and loss[:4] == four[1]
    assert checkpoint(out)["total_steps"] == 7
    # steps 5..7 follow the warm-up-cosine schedule of 7 steps (warm-up 1, stored from the 4-step run)
    expected = [0.05 * lr_scheduler.warmup_cosine_factor(t, 1, 7, 0.1) for t in (4, 5, 6)]
    np.testing.assert_allclose(used, expected, rtol=1e-12)


CONFLICTS = [
    ("lenet", "--lr", "0.1", "0.05"), ("lenet", "--batch-size", "32", "16"), ("lenet", "--optimizer", "adamw", "'sgd'"),
    ("lenet", "--seed", "1", "0"), ("lenet", "--weight-decay", "0.1", "0.0005"), ("lenet", "--warmup", "2", "1"),
    ("lenet", "--norm", "batch", "'none'"), ("lenet", "--data", "digits2", "'digits'"),
    ("gpt", "--d-model", "32", "16"), ("gpt", "--n-head", "4", "2"), ("gpt", "--n-layer", "2", "1"),
    ("gpt", "--block-size", "32", "16"), ("gpt", "--norm-position", "post", "'pre'"),
    ("gpt", "--norm", "rms", "'layer'"), ("gpt", "--data", "README.md", "'pydoc'"),
]


@pytest.mark.parametrize("model, flag, given, stored", CONFLICTS)
def test_a_hyper_parameter_given_at_resume_must_agree_with_the_stored_run(done4, capsys, model, flag, given, stored):
    before = _files(done4[model])
    with pytest.raises(SystemExit) as exc:
        main(["train", model, "--out", done4[model], "--resume", "--steps", "5", flag, given])
    assert exc.value.code == 2
    shown = repr(given) if stored.startswith("'") else given
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"minidl train: error: {flag} {shown} conflicts with the run being resumed from")
    assert f"which has {flag} {stored};" in last
    assert _files(done4[model]) == before


def test_flags_that_agree_or_may_change_are_accepted_at_resume(tmp_path):
    out = str(tmp_path / "run")
    assert main([a if a != "6" else "4" for a in LENET] + ["--out", out]) == 0
    assert main(["train", "lenet", "--out", out, "--resume", "--steps", "5", "--lr", "0.05", "--batch-size", "16",
                 "--seed", "0", "--norm", "none", "--eval-every", "1"]) == 0
    assert checkpoint(out)["step"] == 5


def test_resume_without_a_checkpoint_or_with_another_model_is_an_error(done4, tmp_path, capsys):
    for argv, message in [(["train", "lenet", "--out", str(tmp_path), "--resume"], "no checkpoint at"),
                          (["train", "resnet8", "--out", done4["lenet"], "--resume"], "holds a 'lenet' model")]:
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2 and message in capsys.readouterr().err
