"""Run a benchmark's PyTorch half in a process of its own.

Each framework is timed in its own process, at its own defaults, as its users run it. In one
process they would share a thread runtime: PyTorch brings a libgomp and Numba's pool uses one
too, a process holds only one, and whichever loads first fixes the settings (such as the spin
count minidl chooses, see minidl.kernels.cpu.thread_pool) for both.

A script calls ``run(__file__)`` in its main process; that starts the same script again with
the same arguments plus ``--peer-json FILE``, and the child, seeing the flag, runs only its
PyTorch measurements and writes them with ``write``. Thread-count variables the parent set
before starting its pools are inherited, so both sides use the same number of threads.
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


def torch_installed():
    return importlib.util.find_spec("torch") is not None


def run(script, argv=None):
    """The JSON the PyTorch half of ``script`` wrote, or None (with a line saying why) when
    PyTorch is not installed or the child failed."""
    if not torch_installed():
        print("torch: not installed, no peer measurements")
        return None
    argv = sys.argv[1:] if argv is None else argv
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "peer.json")
        proc = subprocess.run([sys.executable, os.path.abspath(script), *argv, FLAG, path])
        if proc.returncode != 0 or not os.path.exists(path):
            print(f"torch peer process failed (exit status {proc.returncode}); no peer measurements")
            return None
        with open(path) as f:
            return json.load(f)


def write(path, results):
    with open(path, "w") as f:
        json.dump(results, f)
