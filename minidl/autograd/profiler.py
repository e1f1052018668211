"""The autograd profiler, as ``torch.autograd.profiler``: ``profile``, ``record_function``,
``emit_nvtx``.

While a ``profile`` records, every op call (``Function.apply``) and every ``record_function``
block becomes a ``FunctionEvent`` (profiler_util.py) timed on the host clock: its start and end,
its thread, the events nested inside it, and with ``record_shapes`` the shapes of its Tensor
arguments. An op is named by its Function class (``Mul``, ``Linear``, ...), which is what
PyTorch's ``aten::`` names are to its ops. The backward pass is not broken down into ops: a
region around it (``record_function("backward")``) shows its total.

How ops are timed: ``Function.apply`` is the one place every op goes through, and the profiler
hooks it the way autocast does (op_function.py): the first recording profile installs an apply
that times the op around whichever apply the other seams put there, and the last one to stop
puts that apply back, so ops pay nothing for the profiler while none records. A
``record_function`` block outside any recording profile costs one test of a global.

Events are recorded from every thread (each has its own nesting) and reach every profile
recording at the time, so profiles may nest. minidl reads no hardware counters: memory, FLOPs,
stacks and device (CUDA) times are not recorded; asking for them warns, and an op on a
cuda tensor is timed as the host sees it (its launch, or its run where it synchronizes).
"""
import contextlib
import functools
import itertools
import threading
import time
import warnings

from . import op_function
from .profiler_util import EventList, FunctionEvent, FunctionEventAvg

__all__ = ["EventList", "FunctionEvent", "FunctionEventAvg", "emit_nvtx", "profile", "record_function"]

_EPOCH = time.perf_counter_ns()    # event times are microseconds since this
_recording = []                    # the profiles recording now (process-wide), each a list of events
_shapes = [0]                      # how many of them record input shapes
_lock = threading.Lock()
_ids = itertools.count(1)
_threads = threading.local()       # .open: this thread's events not yet closed, innermost last


def _now_us():
    return (time.perf_counter_ns() - _EPOCH) / 1000.0


def _open(name, shapes, user):
    stack = _threads.__dict__.setdefault("open", [])
    event = FunctionEvent(next(_ids), name, threading.get_native_id(), _now_us(), 0.0, shapes, user)
    if stack:
        event.cpu_parent = stack[-1]
    stack.append(event)
    return event


def _close(event):
    event.time_range.end = _now_us()
    stack = _threads.__dict__.get("open", [])
    if stack and stack[-1] is event:
        stack.pop()
    elif event in stack:
        stack.remove(event)
    parent = event.cpu_parent
    if parent is not None:
        parent.cpu_children.append(event)
        parent.children_time += event.time_range.elapsed_us()
    for events in list(_recording):
        events.append(event)


def _arg_shapes(args):
    Tensor = op_function.Tensor
    return [list(a.shape) if isinstance(a, Tensor) else [] for a in args]


def time_op(cls, args, apply):
    """Function.apply while a profile records: ``apply(cls, *args)``, timed as an event named
    after the op's class."""
    if not _recording:              # the last profile stopped in another thread meanwhile
        return apply(cls, *args)
    event = _open(cls.__name__, _arg_shapes(args) if _shapes[0] else None, False)
    try:
        return apply(cls, *args)
    finally:
        _close(event)


op_function.op_timer = time_op


def _start(events, record_shapes):
    with _lock:
        _recording.append(events)
        _shapes[0] += bool(record_shapes)
        if len(_recording) == 1:
            op_function._install_profiler_seam(True)


def _stop(events, record_shapes):
    with _lock:
        for i, e in enumerate(_recording):
            if e is events:
                del _recording[i]
                break
        _shapes[0] -= bool(record_shapes)
        if not _recording:
            op_function._install_profiler_seam(False)


class record_function(contextlib.ContextDecorator):  # noqa: N801  (PyTorch's name)
    """A named region in the profile: ``with record_function("data"):`` or as a decorator. Its
    event's time includes the ops run inside it; its self time is what is left. Outside a
    recording profile it records nothing. ``args`` (a string PyTorch attaches) is accepted."""

    def __init__(self, name, args=None):
        if not isinstance(name, str):
            raise TypeError(f"record_function(): argument 'name' must be str, not {type(name).__name__}")
        self.name, self.args = name, args
        self._events = []            # open regions of this object (a decorated function may recurse)

    def __enter__(self):
        self._events.append(_open(self.name, None, True) if _recording else None)
        return self

    def __exit__(self, *exc):
        event = self._events.pop() if self._events else None
        if event is not None:
            _close(event)
        return False


def _warn_unrecorded(**flags):
    asked = [k for k, v in flags.items() if v]
    if asked:
        warnings.warn(f"minidl's profiler times ops on the host clock only; {', '.join(asked)} "
                      "record nothing here", UserWarning, stacklevel=3)


class profile:  # noqa: N801  (PyTorch's name)
    """Record the ops and ``record_function`` regions run inside ``with profile() as prof:``;
    afterwards ``prof.key_averages().table(sort_by="self_cpu_time_total")`` summarizes them and
    ``prof.export_chrome_trace(path)`` writes a trace (see the module docstring).

    ``record_shapes`` also records the shapes of each op's arguments (``key_averages(
    group_by_input_shape=True)``). ``use_cuda``/``use_device``, ``profile_memory``, ``with_flops``,
    ``with_stack`` and ``with_modules`` ask for what minidl does not measure: they warn."""

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False, with_flops=False,
                 profile_memory=False, with_stack=False, with_modules=False, use_kineto=False, use_cpu=True,
                 experimental_config=None, acc_events=False, custom_trace_id_callback=None,
                 post_processing_timeout_s=None, activity_filters=None):
        self.enabled = enabled
        self.record_shapes = record_shapes
        self.use_device = "cuda" if use_cuda else use_device
        self.function_events = None
        self.entered = False
        self._events = None
        if enabled:
            _warn_unrecorded(use_cuda=use_cuda, use_device=use_device is not None, with_flops=with_flops,
                             profile_memory=profile_memory, with_stack=with_stack, with_modules=with_modules)

    def __enter__(self):
        if not self.enabled:
            return self
        if self.entered:
            raise RuntimeError("Profiler context manager is not reentrant")
        self.entered = True
        self._start()
        return self

    def __exit__(self, *exc):
        if self.enabled:
            self._stop()
        return False

    def _start(self):
        self._events = []
        _start(self._events, self.record_shapes)

    def _stop(self):
        if self._events is None:
            return
        _stop(self._events, self.record_shapes)
        self.function_events = EventList(sorted(self._events, key=lambda e: (e.time_range.start, -e.time_range.end)))
        self._events = None

    def _check_finish(self):
        if self.function_events is None:
            raise RuntimeError("Profiler didn't finish running")

    def events(self):
        self._check_finish()
        return self.function_events

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        self._check_finish()
        return self.function_events.key_averages(group_by_input_shape, group_by_stack_n, group_by_overload_name)

    def total_average(self):
        self._check_finish()
        return self.function_events.total_average()

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75, max_name_column_width=55,
              max_shapes_column_width=80, header=None, top_level_events_only=False, time_unit=None):
        self._check_finish()
        return self.function_events.table(sort_by, row_limit, max_src_column_width, max_name_column_width,
                                          max_shapes_column_width, header, top_level_events_only, time_unit)

    def export_chrome_trace(self, path):
        self._check_finish()
        self.function_events.export_chrome_trace(path)

    @property
    def self_cpu_time_total(self):
        self._check_finish()
        return self.function_events.self_cpu_time_total

    def __str__(self):
        return "<unfinished profile>" if self.function_events is None else str(self.function_events)


class emit_nvtx:  # noqa: N801  (PyTorch's name)
    """NVTX ranges for the ops, for NVIDIA's Nsight tools. minidl emits none: its CUDA ops are
    numba.cuda kernels launched from Python, with no NVTX instrumentation to switch on, so an
    enabled ``emit_nvtx`` raises NotImplementedError on entry (``enabled=False`` is a no-op).
    ``profile`` times the same ops on the host."""

    def __init__(self, enabled=True, record_shapes=False):
        self.enabled, self.record_shapes = enabled, record_shapes

    def __enter__(self):
        if self.enabled:
            raise NotImplementedError("emit_nvtx is not supported: minidl's ops emit no NVTX ranges (its CUDA "
                                      "kernels are numba.cuda launches without NVTX instrumentation); use "
                                      "minidl.autograd.profiler.profile to time the ops on the host")
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return wrapper
