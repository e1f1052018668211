"""Bad values on the command line: every flag of every subcommand, and of the example training
scripts, refuses an invalid value with argparse's one-line error naming the flag, what it expects
and what came (exit status 2, no traceback), before anything runs."""
import importlib.util
import os

import pytest

from minidl.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

POSITIVE_INT = "expected a positive integer"
NONNEGATIVE_INT = "expected an integer >= 0"
SEED = "expected a seed (an integer >= 0)"
POSITIVE = "expected a positive finite number"
NONNEGATIVE = "expected a finite number >= 0"

# (command line up to the flag, flag, bad value, what is expected)
BAD_VALUES = [
    *[(["train", "gpt"], f, v, POSITIVE_INT) for f in ("--batch-size", "--d-model", "--n-layer", "--n-head",
                                                       "--block-size", "--steps", "--eval-every")
      for v in ("0", "-1", "2.5", "x")],
    (["train", "resnet8"], "--width", "0", POSITIVE_INT),
    *[(["train", "lenet"], "--epochs", v, POSITIVE) for v in ("0", "-1", "nan", "inf", "one")],
    *[(["train", "lenet"], "--lr", v, POSITIVE) for v in ("0", "-1", "nan", "-inf")],
    (["train", "lenet"], "--weight-decay", "-0.1", NONNEGATIVE),
    (["train", "lenet"], "--weight-decay", "nan", NONNEGATIVE),
    (["train", "lenet"], "--warmup", "-1", NONNEGATIVE_INT),
    (["train", "lenet"], "--seed", "-1", SEED),
    (["sample", "checkpoint.npz"], "--temperature", "-1", NONNEGATIVE),
    (["sample", "checkpoint.npz"], "--temperature", "nan", NONNEGATIVE),
    (["sample", "checkpoint.npz"], "--top-k", "0", POSITIVE_INT),
    (["sample", "checkpoint.npz"], "--length", "-1", NONNEGATIVE_INT),
    (["sample", "checkpoint.npz"], "--num-samples", "0", POSITIVE_INT),
    (["sample", "checkpoint.npz"], "--seed", "-3", SEED),
    (["gradcheck"], "--eps", "0", POSITIVE),
    (["gradcheck"], "--atol", "-1e-5", NONNEGATIVE),
    (["gradcheck"], "--rtol", "nan", NONNEGATIVE),
    (["bench"], "--timeout", "0", POSITIVE),
    (["bench"], "--args", "'--quick", "expected arguments as a shell would split them"),
    (["lab", "padding"], "--seed", "-1", SEED),
]


def _usage_error(capsys, call):
    with pytest.raises(SystemExit) as exc:
        call()
    assert exc.value.code == 2
    captured = capsys.readouterr()
    err = captured.err
    assert "Traceback" not in err + captured.out
    errors = [ln for ln in err.splitlines() if "error:" in ln]
    assert len(errors) == 1, err
    return errors[0]


@pytest.mark.parametrize("before, flag, value, expected", BAD_VALUES,
                         ids=[f"{b[0]} {f} {v}" for b, f, v, _ in BAD_VALUES])
def test_a_bad_value_is_a_one_line_error_naming_flag_expectation_and_value(capsys, before, flag, value, expected):
    line = _usage_error(capsys, lambda: main(before + [f"{flag}={value}"]))   # "=": "-inf" is not an option
    assert line.startswith(f"minidl {before[0]}: error: argument {flag}")
    assert f"{expected}, got {value!r}" in line


# combinations only the subcommand can judge: the same one-line error
COMBINATIONS = [
    (["train", "gpt", "--n-head", "3", "--d-model", "64"], "--n-head 3 must divide --d-model 64"),
    (["train", "vit", "--n-head", "4", "--d-model", "6"], "--n-head 4 must divide --d-model 6"),
    (["train", "lenet", "--d-model", "32"], "--d-model applies to the Transformers (gpt, encoder, vit), not lenet"),
    (["train", "vgg_small", "--width", "8"], "--width applies to the ResNets"),
    (["train", "encoder", "--block-size", "8"], "--block-size applies to gpt and lstm, not encoder"),
    (["train", "lenet", "--batch-size", "5000"], "--batch-size 5000 exceeds the 1437 training images"),
    (["train", "lenet", "--steps", "2", "--warmup", "3"], "--warmup 3 exceeds the 2 training steps"),
    (["train", "gpt", "--block-size", "100000"], "--block-size 100000: the text's smaller split has"),
    (["train", "gpt", "--data", "no/such/file.txt"], "expected 'pydoc' or the path of a text file"),
    (["train", "lenet", "--out", "README.md"], "--out 'README.md' is a file; expected a directory"),
    (["gradcheck", "-k", "no_such_case*"], "no gradcheck case matches"),
]


@pytest.mark.parametrize("argv, message", COMBINATIONS, ids=[" ".join(a) for a, _ in COMBINATIONS])
def test_a_bad_combination_is_a_one_line_error(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(ROOT)   # README.md is a file there
    out = [] if "--out" in argv else ["--out", str(tmp_path / "run")]
    line = _usage_error(capsys, lambda: main(argv + out + ["--no-progress"] if argv[0] == "train" else argv))
    assert message in line
    assert not os.path.exists(tmp_path / "run")


def test_sample_refuses_a_file_that_is_not_a_checkpoint(capsys):
    line = _usage_error(capsys, lambda: main(["sample", os.path.join(ROOT, "README.md")]))
    assert line.startswith("minidl sample: error:") and "README.md" in line


# the example training scripts -------------------------------------------------------------------
def load_example(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", os.path.join(ROOT, "examples", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EXAMPLE_BAD_VALUES = [
    ("train_cnn", "--batch-size", "0", POSITIVE_INT), ("train_cnn", "--steps", "0", POSITIVE_INT),
    *[("train_cnn", "--epochs", v, POSITIVE) for v in ("0", "nan")], ("train_cnn", "--eval-every", "0", POSITIVE_INT),
    ("train_cnn", "--lr", "nan", POSITIVE), ("train_cnn", "--lr", "-1", POSITIVE),
    ("train_cnn", "--weight-decay", "-1", NONNEGATIVE), ("train_cnn", "--warmup-epochs", "-1", NONNEGATIVE),
    ("train_cnn", "--seed", "-1", SEED),
    *[("train_gpt", f, "0", POSITIVE_INT) for f in ("--block-size", "--n-layer", "--n-head", "--d-model",
                                                   "--batch-size", "--eval-every", "--eval-iters", "--top-k",
                                                   "--steps")],
    ("train_gpt", "--dropout", "1", "expected a number in [0, 1)"),
    ("train_gpt", "--val-fraction", "0", "expected a number in (0, 1)"),
    ("train_gpt", "--min-lr-ratio", "2", "expected a number in [0, 1]"),
    ("train_gpt", "--epochs", "0", POSITIVE), ("train_gpt", "--warmup", "-1", NONNEGATIVE_INT),
    ("train_gpt", "--sample-len", "-1", NONNEGATIVE_INT), ("train_gpt", "--lr", "-1", POSITIVE),
    ("train_gpt", "--lr", "nan", POSITIVE), ("train_gpt", "--weight-decay", "-1", NONNEGATIVE),
    ("train_gpt", "--grad-clip", "-1", NONNEGATIVE), ("train_gpt", "--temperature", "-1", NONNEGATIVE),
    ("train_gpt", "--seed", "-1", SEED),
]


@pytest.mark.parametrize("script, flag, value, expected", EXAMPLE_BAD_VALUES,
                         ids=[f"{s} {f} {v}" for s, f, v, _ in EXAMPLE_BAD_VALUES])
def test_the_example_scripts_refuse_bad_values_the_same_way(capsys, script, flag, value, expected):
    line = _usage_error(capsys, lambda: load_example(script).main([f"{flag}={value}"]))
    assert f"error: argument {flag}: " in line
    assert f"{expected}, got {value!r}" in line


@pytest.mark.parametrize("argv, message", [
    (["--n-head", "3", "--d-model", "64"], "--n-head 3 must divide --d-model 64"),
    (["--pos", "rotary", "--n-head", "4", "--d-model", "12"], "rotary positions need an even number"),
    (["--prompt", "\u2603"], "is not in the vocabulary"),
    (["--prompt", ""], "--prompt must not be empty"),
    (["--block-size", "100000"], "--block-size 100000: the text's smaller split has"),
])
def test_train_gpt_refuses_bad_combinations(capsys, tmp_path, argv, message):
    line = _usage_error(capsys, lambda: load_example("train_gpt").main(argv + ["--out", str(tmp_path)]))
    assert message in line
