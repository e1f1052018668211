"""``torch.profiler``: the profiler with activities, a step schedule and trace handlers, over
minidl's autograd profiler (``minidl.autograd.profiler``: host-clock timing of every op and
``record_function`` region).

With a ``schedule``, ``prof.step()`` marks the end of each training step and the schedule says,
per step, whether to record: NONE (not recording), WARMUP (PyTorch warms its tracer up; here it
records nothing), RECORD, and RECORD_AND_SAVE, the last step of a cycle, after which the cycle's
events are kept as the profile's result and ``on_trace_ready(prof)`` is called (for example
``tensorboard_trace_handler(dir)``, which writes them as a Chrome trace). Each recorded step is a
region named ``ProfilerStep*`` (one row in key_averages, as PyTorch's; ``ProfilerStep#<n>`` in the
trace). Without a schedule every step is recorded and the trace is ready when the profile stops.

Activities: minidl times on the host, so the CPU activity is what is recorded; asking for CUDA
warns (a cuda op is timed as the host sees it, with no device timeline).
"""
import enum
import os
import socket
import time
import warnings

from .autograd import profiler as _autograd_profiler
from .autograd.profiler import record_function

__all__ = ["ProfilerAction", "ProfilerActivity", "kineto_available", "profile", "record_function", "schedule",
           "supported_activities", "tensorboard_trace_handler"]


class ProfilerActivity(enum.Enum):
    """The activity groups PyTorch can trace; minidl records CPU."""
    CPU = 0
    XPU = 1
    MTIA = 2
    CUDA = 3
    HPU = 4
    PrivateUse1 = 5


class ProfilerAction(enum.Enum):
    """What the profiler does during a step, as a schedule returns it."""
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def supported_activities():
    """The activities minidl's profiler records: the host (CPU)."""
    return {ProfilerActivity.CPU}


def kineto_available():
    """False: minidl has no Kineto (PyTorch's tracing library); its profiler is its own."""
    return False


def schedule(*, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0):
    """The schedule PyTorch's ``torch.profiler.schedule`` makes: skip ``skip_first`` steps, then
    cycles of ``wait`` steps not recording, ``warmup`` steps warming up and ``active`` steps
    recording (the last one RECORD_AND_SAVE); ``repeat`` cycles (0: until the profile ends).
    ``skip_first_wait`` drops the wait of the first cycle."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise AssertionError(f"Invalid profiler schedule arguments. Got wait={wait} (need >= 0), warmup={warmup} "
                             f"(need >= 0), active={active} (need > 0), repeat={repeat} (need >= 0), "
                             f"skip_first={skip_first} (need >= 0).")
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results", stacklevel=2)

    def schedule_fn(step):
        if step < 0:
            raise AssertionError(f"Step must be non-negative. Got {step}.")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait != 0:
            step += wait
        num_steps = wait + warmup + active
        if repeat > 0 and step / num_steps >= repeat:
            return ProfilerAction.NONE
        mod_step = step % num_steps
        if mod_step < wait:
            return ProfilerAction.NONE
        if mod_step < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if mod_step < num_steps - 1 else ProfilerAction.RECORD_AND_SAVE

    return schedule_fn


def _default_schedule(_):
    return ProfilerAction.RECORD


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False, use_python_export=False):
    """An ``on_trace_ready`` that writes each trace to ``dir_name`` as
    ``<worker_name>.<time in ns>.pt.trace.json`` (gzipped, with ``.gz``, if ``use_gzip``);
    ``worker_name`` defaults to ``<hostname>_<pid>``."""
    def handler_fn(prof):
        nonlocal worker_name
        if not os.path.isdir(dir_name):
            try:
                os.makedirs(dir_name, exist_ok=True)
            except Exception as e:
                raise RuntimeError("Can't create directory: " + dir_name) from e
        if not worker_name:
            worker_name = f"{socket.gethostname()}_{os.getpid()}"
        file_name = os.path.join(dir_name, f"{worker_name}.{time.time_ns()}.pt.trace.json")
        if use_gzip:
            import gzip
            import shutil
            prof.export_chrome_trace(file_name)
            with open(file_name, "rb") as src, gzip.open(file_name + ".gz", "wb") as dst:
                shutil.copyfileobj(src, dst)
            os.remove(file_name)
        else:
            prof.export_chrome_trace(file_name)
    return handler_fn


_RECORDING = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


class profile:  # noqa: N801  (PyTorch's name)
    """``with profile(activities=[ProfilerActivity.CPU], schedule=..., on_trace_ready=...) as prof:``
    then ``prof.step()`` after each step (see the module docstring); ``prof.key_averages()``,
    ``prof.events()`` and ``prof.export_chrome_trace(path)`` give the last saved cycle (the
    whole run without a schedule). ``profile_memory``, ``with_stack``, ``with_flops`` and
    ``with_modules`` ask for what minidl does not measure: they warn."""

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, execution_trace_observer=None, acc_events=False, use_cuda=None,
                 custom_trace_id_callback=None, post_processing_timeout_s=None):
        self.activities = set(activities) if activities is not None else supported_activities()
        for a in self.activities:
            if not isinstance(a, ProfilerActivity):
                raise TypeError(f"profile: activities must be ProfilerActivity values, got {type(a).__name__}")
        if use_cuda:
            self.activities.add(ProfilerActivity.CUDA)
        if self.activities - {ProfilerActivity.CPU}:
            names = ", ".join(sorted(a.name for a in self.activities - {ProfilerActivity.CPU}))
            warnings.warn(f"minidl's profiler records the CPU activity only; {names} is timed on the host",
                          UserWarning, stacklevel=2)
        _autograd_profiler._warn_unrecorded(profile_memory=profile_memory, with_stack=with_stack,
                                            with_flops=with_flops, with_modules=with_modules)
        self.schedule = schedule if schedule is not None else _default_schedule
        self.record_steps = schedule is not None
        self.on_trace_ready = on_trace_ready
        self.record_shapes = record_shapes
        self.step_num = 0
        self.current_action = self.schedule(0)
        self.profiler = None          # the autograd profiler of the cycle being recorded, or last saved
        self._recorder = None
        self._step_region = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self):
        self._transit(ProfilerAction.NONE, self.current_action)
        self._enter_step()

    def stop(self):
        self._leave_step()
        self._transit(self.current_action, None)

    def step(self):
        """The current step ended: move to the next one and do what the schedule says for it."""
        self._leave_step()
        previous = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        self._transit(previous, self.current_action)
        self._enter_step()

    def _enter_step(self):
        if self.record_steps and self._recorder is not None:
            self._step_region = record_function("ProfilerStep*")   # one key for all steps, as PyTorch
            self._step_region.__enter__()
            event = self._step_region._events[-1]
            if event is not None:
                event.trace_name = f"ProfilerStep#{self.step_num}"

    def _leave_step(self):
        if self._step_region is not None:
            self._step_region.__exit__(None, None, None)
            self._step_region = None

    def _transit(self, previous, current):
        """What PyTorch's action map does between two steps' actions (``current`` None: stopping)."""
        recording = previous in _RECORDING
        if recording and (previous is ProfilerAction.RECORD_AND_SAVE or current is None):
            self._save()
            recording = False
        elif recording and current not in _RECORDING:
            warnings.warn(f"Incorrect schedule: {previous.name} followed by {current.name}", stacklevel=3)
            self._save()
            recording = False
        if current in _RECORDING and not recording:
            self._recorder = _autograd_profiler.profile(record_shapes=self.record_shapes)
            self._recorder.__enter__()

    def _save(self):
        recorder, self._recorder = self._recorder, None
        if recorder is None:
            return
        recorder.__exit__(None, None, None)
        self.profiler = recorder
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def _finished(self):
        if self.profiler is None:
            raise RuntimeError("Profiler didn't finish running")
        return self.profiler

    def events(self):
        return self._finished().events()

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        return self._finished().key_averages(group_by_input_shape, group_by_stack_n, group_by_overload_name)

    def export_chrome_trace(self, path):
        return self._finished().export_chrome_trace(path)
