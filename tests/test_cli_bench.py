"""``minidl bench``: it writes only under runs/, never over the files in the source tree; a machine
without a GPU skips the GPU benchmark with a note and does not fail; without PyTorch it says so
once, however many scripts run; and every script takes --quick (the README's invocations work)."""
import hashlib
import importlib.util
import os
import subprocess
import sys

import pytest

from minidl.cli import bench, main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARKS = os.path.join(ROOT, "benchmarks")


def load_peer():
    spec = importlib.util.spec_from_file_location("bench_peer", os.path.join(BENCHMARKS, "_peer.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def snapshot(*dirs):
    """{path: sha256} of every file under ``dirs``."""
    out = {}
    for d in dirs:
        for base, _, files in os.walk(os.path.join(ROOT, d)):
            for name in files:
                if "__pycache__" not in base:
                    with open(os.path.join(base, name), "rb") as f:
                        out[os.path.join(base, name)] = hashlib.sha256(f.read()).hexdigest()
    return out


def test_bench_norms_writes_under_runs_and_leaves_the_source_tree_alone(tmp_path, monkeypatch, capfd):
    before = snapshot("benchmarks", "docs")
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "norms", "--quick", "--no-torch", "--args=--only LayerNorm"]) == 0
    assert "norms           ok" in capfd.readouterr().out
    assert sorted(os.listdir(tmp_path / "runs" / "bench")) == ["bench_norms.json", "bench_norms.png",
                                                               "bench_norms.txt"]
    assert snapshot("benchmarks", "docs") == before


def test_without_a_gpu_the_gpu_benchmark_is_skipped_with_a_note(capfd):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["NUMBA_DISABLE_CUDA"] = "1"   # as on a machine without CUDA, even where there is a GPU
    r = subprocess.run([sys.executable, "-m", "minidl", "bench", "gpu"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "bench_gpu: skipped, no CUDA GPU here" in r.stdout
    assert r.stdout.strip().splitlines()[-1].split()[:2] == ["gpu", "skipped"]


def test_the_simulator_runs_the_gpu_benchmark_only_at_tiny_sizes():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    r = subprocess.run([sys.executable, os.path.join(BENCHMARKS, "bench_gpu.py")], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == bench.SKIPPED and "the CUDA simulator runs only --tiny" in r.stdout


def test_a_script_that_exits_77_is_skipped_and_the_others_still_count(tmp_path, monkeypatch, capfd):
    (tmp_path / "bench_ok.py").write_text("print('ran')\n")
    (tmp_path / "bench_gpu.py").write_text("print('no GPU here'); raise SystemExit(77)\n")
    monkeypatch.setattr(bench, "benchmarks_dir", lambda: str(tmp_path))
    assert main(["bench"]) == 0
    table = capfd.readouterr().out.split("benchmark       status")[1]
    assert "gpu             skipped" in table and "ok              ok" in table
    (tmp_path / "bench_bad.py").write_text("raise SystemExit(3)\n")
    assert main(["bench"]) == 1


def test_missing_pytorch_is_said_once_for_all_the_scripts(tmp_path, monkeypatch, capfd):
    for name in ("one", "two"):   # each asks about torch as the real scripts do, twice
        (tmp_path / f"bench_{name}.py").write_text(
            f"import sys; sys.path.insert(0, {BENCHMARKS!r}); import _peer\n"
            f"print('{name}:', _peer.torch_installed(), _peer.import_torch(), _peer.run(__file__))\n")
    monkeypatch.setattr(bench, "benchmarks_dir", lambda: str(tmp_path))
    monkeypatch.setattr(bench, "torch_installed", lambda: False)
    assert main(["bench"]) == 0
    out = capfd.readouterr().out
    assert out.count("PyTorch is not installed") == 1 and out.startswith(bench.TORCH_NOTICE)
    assert "one: False None None" in out and "two: False None None" in out
    monkeypatch.setattr(bench, "torch_installed", lambda: True)
    assert main(["bench", "--no-torch"]) == 0     # not wanted: minidl only, and no notice
    out = capfd.readouterr().out
    assert "PyTorch is not installed" not in out and "one: False None None" in out


def test_a_script_run_alone_without_pytorch_says_so_once(monkeypatch, capsys):
    peer = load_peer()
    monkeypatch.delenv(peer.NO_TORCH, raising=False)
    monkeypatch.setattr(peer.importlib.util, "find_spec", lambda name: None)
    assert [peer.torch_installed(), peer.import_torch(), peer.run(__file__)] == [False, None, None]
    assert capsys.readouterr().out.count(peer.NOTICE) == 1
    assert peer.NOTICE == bench.TORCH_NOTICE and peer.NO_TORCH == bench.NO_TORCH


def test_every_benchmark_script_takes_quick(capfd):
    assert main(["bench", "--args=--help"]) == 0
    out = capfd.readouterr().out
    sections = out.split("==== bench ")[1:]
    assert sorted(s.split()[0] for s in sections) == sorted(bench.available())
    for s in sections:
        assert "--quick" in s, s.split()[0]


@pytest.mark.slow
def test_bench_quick_runs_the_short_autograd_benchmark(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "autograd", "--args=--quick", "--no-torch"]) == 0
    out = capfd.readouterr().out
    assert "Deep chain: 10,000 ops" in out and "autograd        ok" in out
