"""CUDA streams and events, as torch.cuda.Stream / Event, over numba.cuda's.

minidl's kernels and copies all run on the default (legacy) stream, whatever ``current_stream``
says: ``with md.cuda.stream(s):`` makes ``s`` the stream that events record on and streams
wait for by default, not the one minidl's ops are queued on. The streams made here are
blocking streams, which the legacy default stream synchronizes with, so work queued on them by
other numba code stays ordered with minidl's. An Event recorded on the current stream therefore
marks the point reached by everything minidl queued before it, which is what timing a step
needs::

    start, end = md.cuda.Event(enable_timing=True), md.cuda.Event(enable_timing=True)
    start.record(); loss = step(); end.record(); end.synchronize()
    start.elapsed_time(end)     # milliseconds

Under numba's simulator every kernel has finished when its launch returns: streams have nothing
to wait for, events are complete once recorded, and an event records the host's clock, so
``elapsed_time`` is the wall time the simulated work took.
"""
import itertools
import threading
import time

from . import _device

_tls = threading.local()        # .stream: the stream set by set_stream / StreamContext in this thread
_defaults = {}                  # device index -> its default Stream
_sim_handles = itertools.count(1)


class Stream:
    """A CUDA stream (torch.cuda.Stream): ``Stream()`` makes a new one on the current device.
    minidl's own kernels run on the default stream, not on this one (see the module docstring):
    a Stream is for ordering events and other numba code's work. numba makes streams of one
    priority: ``priority`` is accepted and the stream's is 0."""

    def __init__(self, device=None, priority=0, **kwargs):
        idx = _device.checked_index(device, "Stream")
        self.priority = 0
        self.device = _cuda_device(idx)
        if kwargs.get("_default"):
            self._nb = None if _device.simulated() else _device.numba_cuda().default_stream()
            self.cuda_stream = 0
        elif _device.simulated():
            self._nb = _device.numba_cuda().stream()
            self.cuda_stream = next(_sim_handles)
        else:
            self._nb = _device.numba_cuda().stream()
            self.cuda_stream = int(self._nb)

    def query(self):
        """Whether all work queued on the stream has finished."""
        if self._nb is None or _device.simulated():
            return True
        event = _device.numba_cuda().event(timing=False)
        event.record(self._nb)
        return bool(event.query())

    def synchronize(self):
        """Wait until all work queued on the stream has finished."""
        if self._nb is not None:
            self._nb.synchronize()

    def wait_event(self, event):
        """Make work queued on this stream from now on wait for ``event`` (returns at once)."""
        event.wait(self)

    def wait_stream(self, stream):
        """Make work queued on this stream from now on wait for the work queued on ``stream``."""
        if stream != self:
            self.wait_event(stream.record_event())

    def record_event(self, event=None):
        """Record ``event`` (a new Event when None) on this stream; returns it."""
        event = Event() if event is None else event
        event.record(self)
        return event

    def __eq__(self, other):
        if not isinstance(other, Stream):
            return NotImplemented
        return self.cuda_stream == other.cuda_stream and self.device == other.device

    def __hash__(self):
        return hash((self.cuda_stream, self.device.index))

    def __repr__(self):
        return f"<minidl.cuda.Stream device={self.device} cuda_stream={self.cuda_stream:#x}>"


class Event:
    """A CUDA event (torch.cuda.Event): a mark in a stream, to wait for, synchronize on, or time
    (``enable_timing=True``). Made on the GPU at its first ``record``. ``blocking`` is accepted:
    ``synchronize`` waits either way. numba has no interprocess events: ``interprocess=True``
    raises NotImplementedError."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False, external=False):
        if interprocess:
            raise NotImplementedError("minidl.cuda.Event(interprocess=True): numba.cuda has no interprocess "
                                      "(IPC) events")
        self.enable_timing, self.blocking, self.interprocess = bool(enable_timing), bool(blocking), False
        self._nb = None         # numba's event, made at the first record
        self._time = None       # simulator: the host clock at the last record
        self._recorded = False

    @classmethod
    def from_ipc_handle(cls, device, handle):
        raise NotImplementedError("minidl.cuda.Event.from_ipc_handle: numba.cuda has no interprocess events")

    def ipc_handle(self):
        raise NotImplementedError("minidl.cuda.Event.ipc_handle: numba.cuda has no interprocess events")

    def record(self, stream=None):
        """Mark the current point of ``stream`` (the current stream when None)."""
        stream = current_stream() if stream is None else stream
        if _device.simulated():
            self._time = time.perf_counter()
        else:
            if self._nb is None:
                self._nb = _device.numba_cuda().event(timing=self.enable_timing)
            self._nb.record(stream._nb)
        self._recorded = True

    def wait(self, stream=None):
        """Make work queued on ``stream`` (the current stream when None) from now on wait for
        this event; nothing to wait for before it is recorded."""
        stream = current_stream() if stream is None else stream
        if self._nb is not None:
            self._nb.wait(stream._nb)

    def query(self):
        """Whether the work before the last ``record`` has finished (True before any record)."""
        return True if self._nb is None else bool(self._nb.query())

    def synchronize(self):
        """Wait until the work before the last ``record`` has finished."""
        if self._nb is not None:
            self._nb.synchronize()

    def elapsed_time(self, end_event):
        """Milliseconds from this event's record to ``end_event``'s (both made with
        ``enable_timing=True`` and recorded; the end one finished, e.g. after its synchronize)."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if not (self._recorded and end_event._recorded):
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        if _device.simulated():
            return (end_event._time - self._time) * 1000.0
        try:
            return float(self._nb.elapsed_time(end_event._nb))
        except Exception as exc:    # numba's CudaAPIError: CUDA_ERROR_NOT_READY and the like
            raise RuntimeError(f"CUDA error in Event.elapsed_time: {exc}; synchronize on the end event "
                               f"first") from exc

    @property
    def cuda_event(self):
        if self._nb is None:
            return 0
        handle = self._nb.handle
        return int(getattr(handle, "value", handle) or 0)

    def __repr__(self):
        return "<minidl.cuda.Event uninitialized>" if not self._recorded else \
            f"<minidl.cuda.Event {self.cuda_event:#x}>"


def _cuda_device(idx):
    from ..tensor.device import device
    return device("cuda", idx)


def default_stream(device=None):
    """The device's default stream, the one minidl's kernels run on."""
    idx = _device.checked_index(device, "default_stream")
    if idx not in _defaults:
        _defaults[idx] = Stream(idx, _default=True)
    return _defaults[idx]


def current_stream(device=None):
    """The stream set by ``set_stream`` / ``with md.cuda.stream(s)`` in this thread, else the
    default stream (minidl's kernels run on the default stream regardless)."""
    idx = _device.checked_index(device, "current_stream")
    stream = getattr(_tls, "stream", None)
    return stream if stream is not None and stream.device.index == idx else default_stream(idx)


def set_stream(stream):
    """Make ``stream`` this thread's current stream (None: leave it as it is)."""
    if stream is not None:
        _tls.stream = stream


class StreamContext:
    """``with StreamContext(s):`` makes ``s`` the current stream for the block (None: nothing
    changes), and restores the previous one after it."""

    def __init__(self, stream):
        self.stream = stream
        self._prev = None

    def __enter__(self):
        if self.stream is None:
            return
        self._prev = getattr(_tls, "stream", None)
        _tls.stream = self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            _tls.stream = self._prev


def stream(stream):
    """``with md.cuda.stream(s):``: StreamContext(s). minidl's kernels inside the block still run
    on the default stream."""
    return StreamContext(stream)
