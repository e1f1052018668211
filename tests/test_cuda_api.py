"""md.cuda's torch.cuda API: memory accounting of minidl's device tensors, the allocator's
statistics and summary, OutOfMemoryError, streams and events, device properties and selection,
the GPU's random state and the legacy GPU tensor types. Under numba's CUDA simulator (tests/
conftest.py) on tiny shapes; and, in a child process without any CUDA device, PyTorch's answers
there (0, {}, [], False, or its no-driver RuntimeError)."""
import gc
import json
import os
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl import backends

try:
    backends.get("cuda")
    HAVE_CUDA = True
except RuntimeError:   # pragma: no cover - only without numba.cuda and its simulator
    HAVE_CUDA = False

needs_cuda = pytest.mark.skipif(not HAVE_CUDA, reason="no cuda device (nor numba's simulator)")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _allocated():
    gc.collect()
    return md.cuda.memory_allocated()


# memory accounting -----------------------------------------------------------------------------

@needs_cuda
def test_memory_allocated_counts_the_bytes_of_live_device_tensors():
    before = _allocated()
    x = md.zeros(3, 5, device="cuda")                       # float32: 60 bytes
    y = md.ones(7, dtype=md.float64, device="cuda")         # 56 bytes
    b = md.zeros(4, dtype=md.bfloat16, device="cuda")       # 8 bytes (its uint16 bits)
    assert md.cuda.memory_allocated() - before == 60 + 56 + 8
    for device in (0, "cuda:0", "cuda", md.device("cuda", 0)):
        assert md.cuda.memory_allocated(device) == before + 124
    v = x[1:, ::2].t()                                      # a view shares its base's buffer
    assert md.cuda.memory_allocated() - before == 124
    del x, b
    assert _allocated() - before == 56 + 60                  # the view keeps x's buffer alive
    del v, y
    assert _allocated() == before
    assert md.cuda.memory_reserved() == md.cuda.memory_allocated()   # no cache of freed blocks


@needs_cuda
def test_an_op_result_is_counted_and_the_peak_remembers_it():
    x = md.ones(16, device="cuda")
    _allocated()
    md.cuda.reset_peak_memory_stats()
    base = md.cuda.memory_allocated()
    assert md.cuda.max_memory_allocated() == md.cuda.max_memory_reserved() == base
    y = (x * 3).sum()                                       # a 64-byte temporary, then a 4-byte result
    np.testing.assert_allclose(y.cpu().numpy(), 48.0)
    assert md.cuda.max_memory_allocated() >= base + 64
    peak = md.cuda.max_memory_allocated()
    del y
    gc.collect()
    assert md.cuda.max_memory_allocated() == peak
    md.cuda.reset_peak_memory_stats()
    assert md.cuda.max_memory_allocated() == md.cuda.memory_allocated()
    with pytest.warns(FutureWarning, match="reset_peak_memory_stats"):
        md.cuda.reset_max_memory_allocated()


@needs_cuda
def test_memory_stats_has_torchs_keys_and_pools():
    gc.collect()
    s0 = md.cuda.memory_stats()
    small = md.zeros(10, device="cuda")                     # 40 B: small pool
    large = md.zeros(300_000, device="cuda")                # 1.2 MB > 1 MiB: large pool
    s1 = md.cuda.memory_stats()
    for key in ("allocated_bytes", "reserved_bytes", "active_bytes", "requested_bytes", "allocation", "segment"):
        for pool in ("all", "large_pool", "small_pool"):
            for kind in ("current", "peak", "allocated", "freed"):
                assert f"{key}.{pool}.{kind}" in s1
    assert s1["allocated_bytes.all.current"] - s0["allocated_bytes.all.current"] == 1_200_040
    assert s1["allocated_bytes.large_pool.current"] - s0["allocated_bytes.large_pool.current"] == 1_200_000
    assert s1["allocated_bytes.small_pool.current"] - s0["allocated_bytes.small_pool.current"] == 40
    assert s1["allocation.all.current"] - s0["allocation.all.current"] == 2
    assert s1["allocation.all.allocated"] - s0["allocation.all.allocated"] == 2
    del small, large
    gc.collect()
    s2 = md.cuda.memory_stats()
    assert s2["allocated_bytes.all.freed"] - s1["allocated_bytes.all.freed"] == 1_200_040
    assert s2["allocated_bytes.all.current"] == s0["allocated_bytes.all.current"]
    assert list(s2) == sorted(s2)
    nested = md.cuda.memory_stats_as_nested_dict()
    assert nested["allocated_bytes"]["large_pool"]["peak"] == s2["allocated_bytes.large_pool.peak"]
    assert nested["num_ooms"] == s2["num_ooms"]
    md.cuda.reset_accumulated_memory_stats()
    assert md.cuda.memory_stats()["allocated_bytes.all.allocated"] == 0


@needs_cuda
def test_memory_summary_and_the_deprecated_names():
    text = md.cuda.memory_summary()
    assert "minidl CUDA memory summary, device ID 0" in text and "from large pool" in text
    assert "from large pool" not in md.cuda.memory_summary(abbreviated=True)
    assert all(len(line) == 77 for line in text.splitlines())
    with pytest.warns(FutureWarning, match="memory_reserved"):
        assert md.cuda.memory_cached() == md.cuda.memory_reserved()
    with pytest.warns(FutureWarning, match="max_memory_reserved"):
        assert md.cuda.max_memory_cached() == md.cuda.max_memory_reserved()


@needs_cuda
def test_memory_functions_check_their_device_argument():
    with pytest.raises(ValueError, match="Expected a cuda device, but got: cpu"):
        md.cuda.memory_allocated("cpu")
    with pytest.raises(AssertionError, match="Invalid device id 7"):
        md.cuda.memory_stats(7)
    with pytest.raises(ValueError, match="specified index or an integer"):
        md.cuda.memory_allocated(1.5)


@needs_cuda
def test_mem_get_info_and_empty_cache():
    free, total = md.cuda.mem_get_info()
    assert isinstance(free, int) and isinstance(total, int) and 0 < free <= total
    assert total == md.cuda.get_device_properties(0).total_memory
    x = md.zeros(8, device="cuda")
    del x
    md.cuda.empty_cache()
    assert md.cuda.mem_get_info()[1] == total


@needs_cuda
def test_out_of_memory_raises_OutOfMemoryError():
    assert issubclass(md.cuda.OutOfMemoryError, RuntimeError) and md.OutOfMemoryError is md.cuda.OutOfMemoryError
    x = md.ones(1, device="cuda").expand(2 ** 24, 2 ** 24)  # a view: its product would need 1 PiB
    before, ooms = _allocated(), md.cuda.memory_stats()["num_ooms"]
    with pytest.raises(md.cuda.OutOfMemoryError, match="CUDA out of memory. Tried to allocate 1024.00 TiB"):
        x * 2
    assert md.cuda.memory_stats()["num_ooms"] == ooms + 1
    assert _allocated() == before


# streams and events --------------------------------------------------------------------------

@needs_cuda
def test_events_time_the_work_between_them_in_milliseconds():
    start, end = md.cuda.Event(enable_timing=True), md.cuda.Event(enable_timing=True)
    assert start.query() and repr(start) == "<minidl.cuda.Event uninitialized>"
    md.cuda.synchronize()
    start.record()
    y = (md.ones(8, device="cuda") * 2).sum()
    time.sleep(0.02)
    end.record()
    end.synchronize()
    assert end.query()
    ms = start.elapsed_time(end)
    assert 19.0 <= ms < 10_000.0    # at least the sleep, on the simulator's host clock or the GPU's
    np.testing.assert_allclose(y.cpu().numpy(), 16.0)


@needs_cuda
def test_event_errors():
    plain, timed = md.cuda.Event(), md.cuda.Event(enable_timing=True)
    plain.record()
    timed.record()
    with pytest.raises(RuntimeError, match="enable_timing=True"):
        plain.elapsed_time(timed)
    with pytest.raises(RuntimeError, match="must be recorded"):
        timed.elapsed_time(md.cuda.Event(enable_timing=True))
    with pytest.raises(NotImplementedError, match="interprocess"):
        md.cuda.Event(interprocess=True)
    plain.wait()   # nothing to wait for: returns
    md.cuda.Event().wait(md.cuda.Stream())


@needs_cuda
def test_stream_context_switches_the_current_stream_and_restores_it():
    default = md.cuda.default_stream()
    assert md.cuda.current_stream() == default and default.cuda_stream == 0
    s, t = md.cuda.Stream(), md.cuda.Stream()
    assert s != default and s != t and s.device == md.device("cuda", 0)
    with md.cuda.stream(s):
        assert md.cuda.current_stream() is s
        with md.cuda.StreamContext(t):
            assert md.cuda.current_stream() is t
        assert md.cuda.current_stream() is s
        seen = []
        th = threading.Thread(target=lambda: seen.append(md.cuda.current_stream()))
        th.start()
        th.join()
        assert seen == [default]        # the current stream is per thread
        y = md.tensor([1.0, 2.0], device="cuda") * 3   # minidl's kernels: the default stream, right values
    assert md.cuda.current_stream() == default
    np.testing.assert_allclose(y.cpu().numpy(), [3.0, 6.0])
    with pytest.raises(ZeroDivisionError):
        with md.cuda.stream(s):
            1 / 0
    assert md.cuda.current_stream() == default
    with md.cuda.stream(None):
        assert md.cuda.current_stream() == default
    md.cuda.set_stream(s)
    try:
        assert md.cuda.current_stream() is s
    finally:
        md.cuda.set_stream(default)


@needs_cuda
def test_stream_synchronization_methods():
    s = md.cuda.Stream()
    event = s.record_event()
    assert isinstance(event, md.cuda.Event)
    s.wait_stream(md.cuda.default_stream())
    s.wait_event(md.cuda.default_stream().record_event())
    s.synchronize()
    assert s.query() and event.query()
    assert "minidl.cuda.Stream device=cuda:0" in repr(s)
    assert len({s, md.cuda.default_stream(), md.cuda.default_stream()}) == 2


# devices ---------------------------------------------------------------------------------------

@needs_cuda
def test_device_properties():
    props = md.cuda.get_device_properties(0)
    assert props.name == md.cuda.get_device_name() == md.cuda.get_device_name(0)
    assert (props.major, props.minor) == md.cuda.get_device_capability("cuda:0")
    assert props.total_memory > 0 and props.multi_processor_count >= 1
    assert f"sm_{props.major}{props.minor}" in md.cuda.get_arch_list()
    assert md.cuda.is_bf16_supported() is True     # kept as bits, computed in float32
    assert md.cuda.is_bf16_supported(including_emulation=False) == ((props.major, props.minor) >= (8, 0))
    assert "total_memory=" in repr(props)
    with pytest.raises(AssertionError, match="Invalid device id 3"):
        md.cuda.get_device_properties(3)


@needs_cuda
def test_set_device_and_the_device_context_managers():
    md.cuda.set_device(0)
    md.cuda.set_device("cuda:0")
    md.cuda.set_device(-1)          # PyTorch: a negative index does nothing
    assert md.cuda.current_device() == 0
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        md.cuda.set_device(md.cuda.device_count())
    with pytest.raises(ValueError, match="Expected a cuda device, but got: cpu"):
        md.cuda.set_device("cpu")
    with pytest.raises(ValueError, match="specified index"):
        md.cuda.set_device("cuda")
    with md.cuda.device(0):
        assert md.cuda.current_device() == 0
    with md.cuda.device(None):
        assert md.cuda.current_device() == 0
    assert md.cuda.device_of(md.zeros(1, device="cuda")).idx == 0
    assert md.cuda.device_of(md.zeros(1)).idx == -1
    with md.cuda.device_of(md.zeros(1)):
        assert md.cuda.current_device() == 0
    md.cuda.init()
    md.cuda.ipc_collect()
    assert md.cuda.is_initialized()


@needs_cuda
def test_rng_state_is_the_global_generators_and_restores_gpu_dropout():
    md.manual_seed(123)
    assert md.cuda.initial_seed() == md.initial_seed() == 123
    state = md.cuda.get_rng_state()
    assert state.dtype == md.uint8 and state.device == "cpu"
    np.testing.assert_array_equal(state.numpy(), md.default_generator.get_state().numpy())
    x = md.ones(64, device="cuda")
    a, r = F.dropout(x, 0.5).cpu().numpy(), md.rand(3).cpu().numpy()
    md.cuda.set_rng_state(state)
    np.testing.assert_array_equal(F.dropout(x, 0.5).cpu().numpy(), a)
    np.testing.assert_array_equal(md.rand(3).numpy(), r)
    states = md.cuda.get_rng_state_all()
    assert len(states) == md.cuda.device_count()
    md.cuda.set_rng_state_all(states)
    np.testing.assert_array_equal(md.default_generator.get_state().numpy(), states[0].numpy())


@needs_cuda
def test_legacy_gpu_tensor_types():
    x = md.cuda.FloatTensor(2, 3)
    assert x.device == "cuda" and x.dtype == md.float32 and x.shape == (2, 3)
    np.testing.assert_array_equal(x.cpu().numpy(), np.zeros((2, 3), np.float32))
    y = md.cuda.LongTensor([1, 2, 3])
    assert y.dtype == md.int64 and y.device == "cuda"
    np.testing.assert_array_equal(y.cpu().numpy(), [1, 2, 3])
    assert isinstance(x, md.cuda.FloatTensor) and not isinstance(x, md.cuda.DoubleTensor)
    assert not isinstance(md.zeros(2), md.cuda.FloatTensor)
    with pytest.raises(RuntimeError, match="expects device type: cuda"):
        md.cuda.FloatTensor(2, device="cpu")
    with pytest.raises(TypeError, match="expected type minidl.cuda.FloatTensor"):
        md.cuda.FloatTensor(md.zeros(2))
    with pytest.raises(AttributeError):
        md.cuda.NoSuchTensor


# without a device --------------------------------------------------------------------------------

_NO_DEVICE_SCRIPT = r"""
import json, warnings
warnings.simplefilter("ignore")
import minidl as md
c = md.cuda
out = {}
calls = {
    "is_available": c.is_available, "device_count": c.device_count, "memory_allocated": c.memory_allocated,
    "max_memory_allocated": c.max_memory_allocated, "memory_reserved": c.memory_reserved,
    "max_memory_reserved": c.max_memory_reserved, "memory_stats": c.memory_stats, "memory_cached": c.memory_cached,
    "get_arch_list": c.get_arch_list, "is_bf16_supported": c.is_bf16_supported,
    "get_rng_state_all": c.get_rng_state_all,
    "is_initialized": c.is_initialized, "empty_cache": c.empty_cache, "set_device_negative": lambda: c.set_device(-1),
    "event_query": lambda: c.Event().query(), "stream_none": lambda: c.stream(None).__enter__(),
    "isinstance": lambda: isinstance(md.zeros(1), c.FloatTensor),
    "reset_peak_memory_stats": c.reset_peak_memory_stats, "memory_summary": c.memory_summary,
    "mem_get_info": c.mem_get_info, "event_record": lambda: c.Event().record(), "Stream": c.Stream,
    "current_stream": c.current_stream, "default_stream": c.default_stream,
    "get_device_properties": c.get_device_properties, "get_device_capability": c.get_device_capability,
    "get_device_name": c.get_device_name, "set_device": lambda: c.set_device(0),
    "device_enter": lambda: c.device(0).__enter__(), "get_rng_state": c.get_rng_state,
    "initial_seed": c.initial_seed, "ipc_collect": c.ipc_collect, "init": c.init, "current_device": c.current_device,
}
for name, f in calls.items():
    try:
        out[name] = ["ok", f()]
    except Exception as e:
        out[name] = [type(e).__name__, str(e)]
print(json.dumps(out))
"""


def test_without_a_device_the_functions_answer_as_pytorch_does():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", NUMBA_CUDA_DRIVER="0")   # numba: no driver, no simulator
    proc = subprocess.run([sys.executable, "-c", _NO_DEVICE_SCRIPT], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["is_available"] == ["ok", False] and out["device_count"] == ["ok", 0]
    for name in ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
                 "memory_cached"):
        assert out[name] == ["ok", 0], name
    assert out["memory_stats"] == ["ok", {}] and out["get_arch_list"] == ["ok", []]
    assert out["get_rng_state_all"] == ["ok", []]
    for name in ("is_bf16_supported", "is_initialized", "isinstance"):
        assert out[name] == ["ok", False], name
    for name in ("empty_cache", "set_device_negative", "stream_none"):
        assert out[name] == ["ok", None], name
    assert out["event_query"] == ["ok", True]
    for name in ("reset_peak_memory_stats", "memory_summary", "mem_get_info", "event_record", "Stream",
                 "current_stream", "default_stream", "get_device_properties", "get_device_capability",
                 "get_device_name", "set_device", "device_enter", "get_rng_state", "initial_seed", "ipc_collect",
                 "init", "current_device"):
        kind, message = out[name]
        assert kind == "RuntimeError" and "Found no NVIDIA driver" in message and "minidl.cuda." in message, name


# against PyTorch -------------------------------------------------------------------------------

@needs_cuda
def test_memory_summary_matches_torchs_layout(monkeypatch):
    torch = pytest.importorskip("torch")
    import torch.cuda.memory as tmem
    x = md.zeros(300_000, device="cuda")    # something in both pools
    y = md.zeros(5, device="cuda")
    stats = md.cuda.memory_stats()
    monkeypatch.setattr(tmem, "memory_stats", lambda device=None: stats)
    monkeypatch.setattr(tmem, "_get_device_index", lambda device, optional=False: 0)
    for abbreviated in (False, True):
        ours = md.cuda.memory_summary(0, abbreviated=abbreviated)
        theirs = torch.cuda.memory_summary(0, abbreviated=abbreviated)
        header = "CUDA memory summary, device ID 0 "
        assert ours == theirs.replace("PyTorch " + header, "minidl " + header + " ")
    del x, y


def test_the_api_covers_torchs_names():
    torch = pytest.importorskip("torch")
    names = ["memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
             "reset_peak_memory_stats", "reset_max_memory_allocated", "memory_stats", "memory_stats_as_nested_dict",
             "memory_summary", "mem_get_info", "memory_cached", "max_memory_cached", "reset_accumulated_memory_stats",
             "Event", "Stream", "current_stream", "default_stream", "stream", "StreamContext", "set_stream",
             "get_device_properties", "get_device_capability", "get_arch_list", "is_bf16_supported", "set_device",
             "device", "device_of", "get_rng_state", "set_rng_state", "get_rng_state_all", "set_rng_state_all",
             "initial_seed", "ipc_collect", "init", "OutOfMemoryError", "FloatTensor", "LongTensor", "BFloat16Tensor"]
    for name in names:
        assert hasattr(torch.cuda, name), name
        assert hasattr(md.cuda, name), name
    for cls, theirs in ((md.cuda.Stream, torch.cuda.Stream), (md.cuda.Event, torch.cuda.Event)):
        public = {n for n in dir(theirs) if not n.startswith("_")}
        assert public <= set(dir(cls)), public - set(dir(cls))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.cuda._utils import _get_device_index
    for bad in ("cpu", "cuda", None):
        with pytest.raises(ValueError) as theirs:
            _get_device_index(bad)
        with pytest.raises(ValueError) as ours:
            md.cuda.set_device(bad)
        assert str(ours.value).replace("minidl", "torch") == str(theirs.value)
