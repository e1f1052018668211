"""Run a benchmark's PyTorch half in a process of its own.

Each framework is timed in its own process, at its own defaults, as its users run it. In one
process they would share a thread runtime: PyTorch brings a libgomp and Numba's pool uses one
too, a process holds only one, and whichever loads first fixes the settings (such as the spin
count minidl chooses, see minidl.runtime.thread_pool) for both.

A script calls ``run(__file__)`` in its main process; that starts the same script again with
the same arguments plus ``--peer-json FILE``, and the child, seeing the flag, runs only its
PyTorch measurements and writes them with ``write``. Thread-count variables the parent set
before starting its pools are inherited, so both sides use the same number of threads.
Without PyTorch every script measures minidl alone and says so in one line (``torch_installed``).
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

FLAG = "--peer-json"


def add_argument(parser):
    parser.add_argument(FLAG, default=None, help=argparse.SUPPRESS)


# Set by ``minidl bench`` for the scripts it starts when PyTorch is missing (it has said so once
# itself) or not wanted (``--no-torch``): measure minidl only, and say nothing about it.
NO_TORCH = "MINIDL_BENCH_NO_TORCH"
NOTICE = "PyTorch is not installed: minidl's numbers only, no PyTorch columns (pip install torch to compare)"
_noticed = []


def torch_installed():
    """PyTorch is importable and wanted (see NO_TORCH); the first time it is not installed, a
    line says so (once per process: a script may ask for every case)."""
    if os.environ.get(NO_TORCH) == "1":
        return False
    if importlib.util.find_spec("torch") is not None:
        return True
    if not _noticed:
        _noticed.append(True)
        print(NOTICE, flush=True)
    return False


def import_torch():
    """The torch module, or None (see torch_installed), for scripts that time it in-process."""
    if not torch_installed():
        return None
    import torch
    return torch


def run(script, argv=None, env=None):
    """The JSON the PyTorch half of ``script`` wrote, or None when PyTorch is not installed (or
    not wanted) or the child failed (with a line saying so). ``env``: variables to set in the
    child on top of this process's environment."""
    if not torch_installed():
        return None
    argv = sys.argv[1:] if argv is None else argv
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "peer.json")
        child_env = None if env is None else {**os.environ, **env}
        proc = subprocess.run([sys.executable, os.path.abspath(script), *argv, FLAG, path], env=child_env)
        if proc.returncode != 0 or not os.path.exists(path):
            print(f"torch peer process failed (exit status {proc.returncode}); no peer measurements")
            return None
        with open(path) as f:
            return json.load(f)


def write(path, results):
    with open(path, "w") as f:
        json.dump(results, f)
