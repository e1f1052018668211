"""The README's commands work: CI runs its test command verbatim, and every other fenced shell
command runs here in a quick form (the same program and flags, shortened as ``QUICK`` says)."""
import configparser
import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SETUP = re.compile(r'^python3 -m venv \.venv && \.venv/bin/pip install -e "\.\[(\w+)\]" && (.*)$')

# How each README command is shortened here (argument -> replacement); anything else runs as written.
#   --epochs N, --steps N      -> --steps 2 (a run of two steps, then its checkpoint)
#   --out DIR, a runs/ path    -> the same path under a temporary directory (a training run
#                                 without --out gets one there), and training runs get --no-progress
#   sample                     -> also --length 5
#   gradcheck -k GLOB          -> -k layer_norm (one case)
#   bench --quick              -> bench --quick --no-torch autograd (the shortest benchmark)
#   lab NAME                   -> lab NAME --help (the quick mode of every experiment is tests/test_lab.py)
#   pytest ...                 -> pytest ... --collect-only -q tests/test_readme.py
#   .venv/bin/mpiexec -n K CMD -> the environment's mpiexec -n K, then CMD's quick form (1 thread per rank)
QUICK_STEPS = ["--steps", "2"]


def _readme():
    return (ROOT / "README.md").read_text()


def _commands(text):
    """Every line of every ```bash block, comments stripped."""
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            line = line.split("  #")[0].strip()
            if line:
                lines.append(line)
    return lines


def _extras():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    return set(cfg["options.extras_require"])


def quick_form(command, tmp):
    """(argv, what it must print or None) for one README command, shortened as documented above."""
    setup = SETUP.match(command)
    if setup:
        assert setup.group(1) in _extras(), f"no extra [{setup.group(1)}] in setup.cfg"
        command = setup.group(2)
    argv = shlex.split(command)
    launcher = []
    if argv[0] == ".venv/bin/mpiexec":
        assert argv[1] == "-n", f"README: expected mpiexec -n K in {command}"
        launcher, argv = [os.path.join(os.path.dirname(sys.executable), "mpiexec"), "-n", argv[2]], argv[3:]
    program, args = argv[0], argv[1:]
    if program in (".venv/bin/minidl", "minidl"):
        program, args = [sys.executable, "-m", "minidl"], args
    elif program == ".venv/bin/python":
        program = [sys.executable]
    else:
        raise AssertionError(f"README command with an unknown program: {command}")
    out, i = [], 0
    while i < len(args):
        a = args[i]
        if a in ("--epochs", "--steps"):
            out += QUICK_STEPS
            i += 2
            continue
        if a == "--out":
            out += ["--out", str(tmp / args[i + 1])]
            i += 2
            continue
        out.append(str(tmp / a) if a.startswith("runs/") else a)
        i += 1
    if out[:1] == ["sample"]:
        out += ["--length", "5"]
    if out[:1] == ["gradcheck"] and "-k" in out:
        out[out.index("-k") + 1] = "layer_norm"
    if out[:2] == ["bench", "--quick"]:
        out += ["--no-torch", "autograd"]
    if out[:1] == ["lab"]:
        out += ["--help"]
    if out[:2] == ["-m", "pytest"]:
        out += ["--collect-only", "-q", str(ROOT / "tests" / "test_readme.py")]
    trains = out[:1] == ["train"] or any(a.startswith("examples/train_") for a in out)
    if trains and "--out" not in out:
        out += ["--out", str(tmp / "runs" / "example")]
    if trains:
        out += ["--no-progress"]
    return launcher + program + out


def test_ci_runs_the_readme_test_command_verbatim():
    commands = [c for c in _commands(_readme()) if "pytest" in c]
    assert commands, "the README's quick start has no test command"
    assert commands[0] in (ROOT / ".ci" / "run").read_text()


def test_every_readme_command_has_a_quick_form():
    commands = _commands(_readme())
    assert len(commands) >= 8
    for c in commands:
        quick_form(c, pathlib.Path("/tmp"))


def test_readme_is_a_short_guide_that_links_the_results_and_the_lab():
    text = _readme()
    assert len(text.splitlines()) < 200
    for link in ("docs/results.md", "docs/lab.md", '.[gpu]'):
        assert link in text
    for path in re.findall(r"\]\(((?:docs/)?[\w./-]+\.md)\)", text):
        assert (ROOT / path).is_file(), path


@pytest.mark.slow
def test_every_readme_command_runs_in_its_quick_form(tmp_path):
    for command in _commands(_readme()):
        argv = quick_form(command, tmp_path)
        env = dict(os.environ, **({v: "1" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")}
                                  if "mpiexec" in argv[0] else {}))
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
        assert done.returncode == 0, f"{command}\n-> {argv}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
