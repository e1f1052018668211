"""minidl.utils.benchmark (Timer, Measurement, Compare) and minidl.utils.hooks, as PyTorch's
torch.utils.benchmark and torch.utils.hooks. No timing thresholds: only that the measurements
are consistent with themselves and with PyTorch's statistics and printed forms."""
import warnings

import numba
import numpy as np
import pytest

import minidl as md
from minidl.autograd import hooks as autograd_hooks
from minidl.utils import benchmark, hooks
from minidl.utils.benchmark import Compare, Measurement, TaskSpec, Timer


def _measurement(raw, number=10, **task):
    task.setdefault("stmt", "x + 1")
    task.setdefault("setup", "pass")
    return Measurement(number_per_run=number, raw_times=list(raw), task_spec=TaskSpec(**task))


# Timer -------------------------------------------------------------------------------------
def test_timeit_one_block_of_number_runs():
    calls = []
    m = Timer("calls.append(x + y)", setup="y = md.ones(2)", globals={"calls": calls, "x": md.ones(2)},
              label="add", sub_label="2", description="cpu").timeit(number=50)
    assert len(calls) == 50 + 2    # a warm-up of max(50 // 100, 2) runs, then the block
    assert isinstance(m, Measurement) and m.number_per_run == 50 and len(m.raw_times) == 1
    assert m.times == [m.raw_times[0] / 50] and m.times[0] > 0
    assert m.mean == m.median == m.times[0] and m.iqr == 0
    assert (m.stmt, m.setup, m.label, m.sub_label, m.description, m.num_threads) == (
        "calls.append(x + y)", "y = md.ones(2)", "add", "2", "cpu", 1)
    lines = repr(m).splitlines()
    assert lines[0].startswith("<minidl.utils.benchmark.common.Measurement object at 0x")
    assert lines[1:4] == ["add: 2", "cpu", "setup: y = md.ones(2)"]
    assert "Median" not in lines[4] and lines[5] == "  1 measurement, 50 runs , 1 thread"


def test_blocked_autorange_and_callback():
    seen = []
    t = Timer("x * 2", globals={"x": md.ones(3)})
    m = t.blocked_autorange(callback=lambda number, seconds: seen.append((number, seconds)), min_run_time=0.02)
    assert len(seen) == len(m.raw_times) >= 1
    assert all(n == m.number_per_run for n, _ in seen) and [s for _, s in seen] == m.raw_times
    assert sum(m.raw_times) >= 0.02
    assert str(m.number_per_run).strip("0") == "1"    # a power of ten
    times = np.array(m.times)
    np.testing.assert_allclose(times, np.array(m.raw_times) / m.number_per_run)
    np.testing.assert_allclose([m.median, m.mean], [np.median(times), times.mean()])


def test_adaptive_autorange_stops_on_spread_or_time():
    m = Timer("pass").adaptive_autorange(threshold=0.5, min_run_time=0.001, max_run_time=0.3)
    assert len(m.times) > 3 or sum(m.raw_times) > 0.3
    assert len(m.times) <= 3 or m.meets_confidence(0.5) or sum(m.raw_times) > 0.3


def test_num_threads_set_for_the_run_and_restored():
    before = md.get_num_threads()
    seen = []
    Timer("seen.append(md.get_num_threads())", globals={"seen": seen}, num_threads=1).timeit(3)
    assert seen == [1] * 5 and md.get_num_threads() == before
    seen.clear()
    Timer("seen.append(minidl.get_num_threads())", globals={"seen": seen}, num_threads=2).blocked_autorange(
        min_run_time=0.001)
    assert set(seen) == {min(2, numba.config.NUMBA_NUM_THREADS)}   # capped at the size of Numba's pool
    assert md.get_num_threads() == before
    with pytest.raises(RuntimeError, match="num_threads > 0"):
        Timer("pass", num_threads=0).timeit(1)
    assert md.get_num_threads() == before


def test_timer_bad_input():
    with pytest.raises(ValueError, match="only a `str` stmt"):
        Timer(lambda: None)
    with pytest.raises(ValueError, match="global_setup is C\\+\\+ only"):
        Timer("pass", global_setup="int x;")
    with pytest.raises(ValueError, match="Invalid language"):
        Timer("pass", language="rust")
    with pytest.raises(NotImplementedError, match="cpp"):
        Timer("pass", language="cpp")
    for call in (lambda t: t.repeat(), lambda t: t.autorange(), lambda t: t.collect_callgrind()):
        with pytest.raises(NotImplementedError):
            call(Timer("pass"))
    with pytest.raises(NameError):
        Timer("undefined_name + 1").timeit(1)


# Measurement ---------------------------------------------------------------------------------
def test_measurement_statistics_against_numpy():
    raw = [3.1e-4, 2.9e-4, 3.0e-4, 4.5e-4, 3.05e-4, 2.95e-4, 3.2e-4]
    m = _measurement(raw, number=100, num_threads=4)
    t = np.array(raw) / 100
    assert m.times == [r / 100 for r in raw]
    np.testing.assert_allclose(m.median, np.quantile(t, 0.5))
    np.testing.assert_allclose(m.mean, t.mean())
    np.testing.assert_allclose(m.iqr, np.quantile(t, 0.75) - np.quantile(t, 0.25))
    assert m.meets_confidence(0.1) == (m.iqr / m.median < 0.1)
    assert m.has_warnings == (not m.meets_confidence(0.1))
    lines = repr(m).splitlines()
    assert lines[1] == "x + 1"
    assert lines[2] == f"  Median: {m.median * 1e6:.2f} us"
    q25, q75 = np.quantile(t, [0.25, 0.75]) * 1e6
    assert lines[3] == f"  IQR:    {m.iqr * 1e6:.2f} us ({q25:.2f} to {q75:.2f})"
    assert lines[4] == "  7 measurements, 100 runs per measurement, 4 threads"
    merged, = Measurement.merge([m, _measurement(raw[:2], number=100, num_threads=4)])
    assert merged.number_per_run == 1 and merged.times == m.times + [r / 100 for r in raw[:2]]
    assert len(Measurement.merge([m, _measurement(raw, number=100)])) == 2   # different num_threads


def test_select_unit_and_trim_sigfig():
    assert benchmark.select_unit(3e-8) == ("ns", 1e-9)
    assert benchmark.select_unit(3e-5) == ("us", 1e-6)
    assert benchmark.select_unit(0.25) == ("ms", 1e-3)
    assert benchmark.select_unit(7.0) == ("s", 1)
    assert benchmark.trim_sigfig(3.14159, 2) == pytest.approx(3.1)
    assert benchmark.trim_sigfig(123456.0, 3) == pytest.approx(123000.0)
    assert benchmark.unit_to_english("us") == "microsecond"


# Compare -------------------------------------------------------------------------------------
def _compare_inputs(module):
    rng = np.random.default_rng(0)
    out = []
    for threads in (1, 2):
        for size in ("8", "64"):
            for desc, scale in (("minidl", 1.0), ("numpy", 0.6)):
                raw = list((1 + 0.02 * rng.standard_normal(9)) * 1e-3 * scale * int(size) * (3 - threads))
                spec = module.TaskSpec(stmt="f(x)", setup="pass", label="add", sub_label=size, description=desc,
                                       num_threads=threads)
                out.append(module.Measurement(number_per_run=100, raw_times=raw, task_spec=spec))
    return out


def test_compare_table_layout():
    c = Compare(_compare_inputs(benchmark))
    text = str(c)
    lines = text.splitlines()
    assert lines[0].startswith("[") and " add " in lines[0] and lines[0].endswith("]")
    assert "minidl" in lines[1] and "numpy" in lines[1] and lines[1].index("minidl") < lines[1].index("numpy")
    assert lines[2].startswith("1 threads: ") and any(line.startswith("2 threads: ") for line in lines)
    assert [line.split("|")[0].strip() for line in lines if "|" in line][1:] == ["8", "64", "8", "64"]
    assert "Times are in microseconds (us)." in text
    with pytest.raises(ValueError, match="Expected an instance of `Measurement`"):
        c.extend_results([3])
    c.extend_results([_measurement([1e-3], label="other")])
    assert str(c).count("Times are in") == 2


def test_hooks_module():
    assert hooks.RemovableHandle is autograd_hooks.RemovableHandle
    x = md.ones(3, requires_grad=True)
    handle = x.register_hook(lambda g: g * 2)
    assert isinstance(handle, hooks.RemovableHandle)
    with pytest.warns(UserWarning, match="will not be serialized"):
        hooks.warn_if_has_hooks(x)
    handle.remove()
    y = x * 2
    y.register_hook(hooks.unserializable_hook(lambda g: None))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hooks.warn_if_has_hooks(x)        # no hooks left
        hooks.warn_if_has_hooks(y)        # a marked hook
    y.register_hook(lambda g: None)
    with pytest.warns(UserWarning, match="backward hook"):
        hooks.warn_if_has_hooks(y)        # a non-leaf's hooks live on its node


# against PyTorch -----------------------------------------------------------------------------
def test_measurement_repr_and_compare_match_torch():
    tb = pytest.importorskip("torch.utils.benchmark")
    raw = [3.1e-4, 2.9e-4, 3.0e-4, 4.5e-4, 3.05e-4, 2.95e-4, 3.2e-4]
    for kw in (dict(stmt="x + 1", setup="y = 2", label="add", sub_label="s", description="d", num_threads=2),
               dict(stmt="a = 1\nb = a", setup="pass")):
        for r in (raw, raw[:1], raw[:3]):
            ours = _measurement(r, number=7, **kw)
            theirs = tb.Measurement(number_per_run=7, raw_times=list(r), task_spec=tb.TaskSpec(**kw))
            assert repr(ours).splitlines()[1:] == repr(theirs).splitlines()[1:]
            assert (ours.significant_figures, ours.has_warnings) == (theirs.significant_figures, theirs.has_warnings)
    for configure in (lambda c: None, lambda c: c.trim_significant_figures(), lambda c: c.highlight_warnings(),
                      lambda c: c.colorize(), lambda c: c.colorize(rowwise=True)):
        ours, theirs = Compare(_compare_inputs(benchmark)), tb.Compare(_compare_inputs(tb))
        configure(ours)
        configure(theirs)
        assert str(ours) == str(theirs)
    assert [benchmark.select_unit(t) for t in (1e-9, 5e-7, 2e-2, 30.0)] == [
        tb.select_unit(t) for t in (1e-9, 5e-7, 2e-2, 30.0)]
