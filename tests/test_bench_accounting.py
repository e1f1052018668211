"""The benchmarks' step accounting and their generated blocks of docs/results.md.

The accounting counts every GEMM's FLOPs from its operands' shapes, splits an op's time into its
GEMMs and the rest, and leaves NumPy and the ops as it found them. ``--write-results`` replaces
only its own block of the results file, and never a file without one."""
import importlib.util
import os

import numpy as np
import pytest

import minidl as md
from minidl import nn, optim
from minidl.autograd.op_function import Function

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def load(name):
    spec = importlib.util.spec_from_file_location("bench_" + name, os.path.join(BENCHMARKS, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def two_layer_step(batch=16):
    md.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 6), nn.ReLU(), nn.Linear(6, 4))
    opt = optim.SGD(model.parameters(), lr=0.1)
    x = md.tensor(np.random.default_rng(0).standard_normal((batch, 8)).astype(np.float32))

    def step():
        opt.zero_grad()
        model(x).square().sum().backward()
        opt.step()
    return step, opt


def test_gemm_flops_are_counted_from_the_shapes_of_every_product():
    acc = load("_step_accounting")
    step, opt = two_layer_step()
    a = acc.account(step, opt, Function, repeat=1)
    fwd1, fwd2 = 2 * 16 * 8 * 6, 2 * 16 * 6 * 4
    # forward both; backward: the second layer's dx and dW, the first layer's dW only (x needs no grad)
    assert a["gemm_flops"] == fwd1 + fwd2 + 2 * fwd2 + fwd1
    assert a["model_flops"] == 3 * (fwd1 + fwd2)         # forward, dx, dW of each Linear
    rows = {label: calls for label, _, _, calls in a["rows"]}
    assert rows["Linear.forward"] == 2 and rows["Linear.backward"] == 2 and rows["optimizer.step"] == 1
    assert 0 < a["gemm_s"] + a["op_s"] <= a["step_s"]


def test_a_caller_may_give_the_model_flops():
    acc = load("_step_accounting")
    step, opt = two_layer_step()
    assert acc.account(step, opt, Function, repeat=1, model_flops=12345)["model_flops"] == 12345


def test_the_instrumentation_is_undone_after_the_step():
    acc = load("_step_accounting")
    step, opt = two_layer_step()
    matmul = np.matmul
    classes, todo = [], [Function]
    while todo:
        classes += todo[-1].__subclasses__()
        todo = todo[:-1] + todo[-1].__subclasses__()
    before = {cls: dict(vars(cls)) for cls in classes}
    acc.account(step, opt, Function, repeat=1)
    assert np.matmul is matmul
    assert "step" not in vars(opt)
    for cls, attrs in before.items():
        for name in ("forward", "backward"):
            assert vars(cls).get(name) is attrs.get(name), (cls, name)


def test_the_table_row_splits_the_step_into_its_parts():
    acc = load("_step_accounting")
    a = {"step_s": 0.010, "gemm_s": 0.004, "gemm_flops": 4e8, "model_flops": 6e8, "op_s": 0.005, "op_bytes": 2e7,
         "rows": []}
    (row,) = acc.table("m", a, bandwidth=1e10, peak=2e11)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert len(cells) == len(acc.HEADER[0].strip("|").split("|"))
    assert cells == ["m", "10.0", "0.60", "0.40", "4.0 (40%)", "100 (50% of 200)", "5.0 (50%)",
                     "20 MB: 2.0 ms at copy speed (40%)", "1.0 (10%)"]


DOC = """# Results

prose before

<!-- bench_x: begin (written by benchmarks/bench_x.py --write-results) -->
old table
<!-- bench_x: end -->

<!-- bench_y: begin (written by benchmarks/bench_y.py --write-results) -->
y's table
<!-- bench_y: end -->

prose after
"""


def test_write_block_replaces_only_its_own_block(tmp_path):
    results = load("_results")
    path = tmp_path / "results.md"
    path.write_text(DOC)
    assert results.write_block("bench_x", "new table\n\n| a |", path=str(path))
    text = path.read_text()
    assert text == DOC.replace("old table", "new table\n\n| a |")
    assert results.write_block("bench_x", "again", path=str(path))
    assert path.read_text() == DOC.replace("old table", "again")
    assert not os.path.exists(str(path) + ".tmp")


@pytest.mark.parametrize("doc", ["no markers at all\n",
                                 "<!-- bench_x: end -->\n<!-- bench_x: begin (written by benchmarks/bench_x.py "
                                 "--write-results) -->\n"])
def test_write_block_leaves_a_file_without_its_block_alone(tmp_path, doc, capsys):
    results = load("_results")
    path = tmp_path / "results.md"
    path.write_text(doc)
    assert not results.write_block("bench_x", "table", path=str(path))
    assert path.read_text() == doc
    assert "not written" in capsys.readouterr().out


def test_the_block_names_its_command_and_the_rounds_median_and_range():
    results = load("_results")

    class Args:
        threads, rounds, steps, cpu_time = 2, 5, 15, False
    header = results.run_header("bench_x", Args, None)
    assert header.startswith("`python benchmarks/bench_x.py --threads 2 --rounds 5 --steps 15 --write-results`")
    assert "PyTorch not run" in header and "wall-clock" in header
    assert results.ratio_cell([1.10, 0.90, 1.00, 1.30]) == "**1.05** (0.90-1.30), 4"


def test_the_results_file_has_a_block_for_each_benchmark_that_writes_one():
    results = load("_results")
    with open(results.RESULTS, encoding="utf-8") as f:
        doc = f.read()
    for script in ("bench_cnn", "bench_transformer"):
        begin, end = results.markers(script)
        assert doc.count(begin) == 1 and doc.count(end) == 1 and doc.index(begin) < doc.index(end)
