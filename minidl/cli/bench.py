"""``minidl bench [NAME ...]``: run the scripts in benchmarks/ (bench_NAME.py), each in its own
Python process, and report which ran.

    python -m minidl bench                  # all of them
    python -m minidl bench norms --quick    # a short run of one (each script takes --quick)
    python -m minidl bench --args="--threads 1" cnn transformer

Outputs go under runs/ (bench_norms writes runs/bench/), never over the files in the source
tree. Without PyTorch the benchmarks measure minidl alone, and this says so once. Without a GPU
the GPU benchmark is skipped with a note (a script that exits with status 77 was skipped)."""
import argparse
import importlib.util
import os
import shlex
import subprocess
import sys
import time

from .args import positive_float

SKIPPED = 77          # the exit status of a benchmark that cannot run here (bench_gpu without a GPU)
NO_TORCH = "MINIDL_BENCH_NO_TORCH"   # benchmarks/_peer.py: measure minidl only, silently
TORCH_NOTICE = "PyTorch is not installed: minidl's numbers only, no PyTorch columns (pip install torch to compare)"


def benchmarks_dir():
    """benchmarks/ next to the minidl package (a source checkout), else under the current directory."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for d in (os.path.join(here, "benchmarks"), os.path.join(os.getcwd(), "benchmarks")):
        if os.path.isdir(d):
            return d
    return None


def available():
    d = benchmarks_dir()
    if d is None:
        return {}
    return {f[len("bench_"):-3]: os.path.join(d, f) for f in sorted(os.listdir(d))
            if f.startswith("bench_") and f.endswith(".py")}


def add_arguments(p):
    names = sorted(available())
    p.add_argument("names", nargs="*", metavar="NAME",
                   help="benchmarks to run (default: all): " + (", ".join(names) or "none found"))
    p.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    p.add_argument("--quick", action="store_true", help="a short run of each (passes --quick to every script)")
    p.add_argument("--no-torch", action="store_true", help="measure minidl only, not PyTorch")
    p.add_argument("--timeout", type=positive_float, default=None, help="seconds per benchmark")
    p.add_argument("--args", type=shell_words, default="",
                   help="arguments for every script, as one string: --args=\"--quick\"")
    return p


def shell_words(text):
    """--args as given, once it splits into words as a shell would (quotes balanced)."""
    try:
        shlex.split(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected arguments as a shell would split them, got {text!r} ({exc})")
    return text


def check(args):
    """The names that are not benchmarks (the CLI turns them into an argparse error)."""
    return [n for n in args.names if n not in available()]


def torch_installed():
    return importlib.util.find_spec("torch") is not None


def _status(rc):
    if rc == 0:
        return "ok"
    return "skipped" if rc == SKIPPED else f"FAILED ({rc})"


def run(args):
    benches = available()
    if not benches:
        print("no benchmarks/ directory found (run from a source checkout)", file=sys.stderr)
        return 1
    if args.list:
        for name, path in benches.items():
            print(f"{name:14s} {path}")
        return 0
    names = args.names or list(benches)
    env = dict(os.environ)
    if args.no_torch or not torch_installed():
        if not args.no_torch:
            print(TORCH_NOTICE, flush=True)
        env[NO_TORCH] = "1"   # said once here: the scripts measure minidl alone without repeating it
    extra = shlex.split(args.args) + (["--quick"] if args.quick else [])
    results = []
    for name in names:
        print(f"==== bench {name} ({benches[name]}) ====", flush=True)
        t0 = time.perf_counter()
        try:
            rc = subprocess.call([sys.executable, benches[name], *extra], timeout=args.timeout, env=env)
        except subprocess.TimeoutExpired:
            rc = "timeout"
        results.append((name, rc, time.perf_counter() - t0))
    print("\nbenchmark       status   seconds")
    for name, rc, dt in results:
        print(f"{name:14s}  {_status(rc):8s} {dt:7.1f}")
    return 0 if all(rc in (0, SKIPPED) for _, rc, _ in results) else 1
