"""``Timer``: PyTorch's torch.utils.benchmark.Timer, over the standard library's ``timeit``.

It runs ``stmt`` after ``setup`` in a namespace holding ``globals`` (plus ``minidl`` and
``md``), with ``minidl.set_num_threads(num_threads)`` in force while it measures (restored
after): by default one thread, so that a number measured here does not depend on the machine's
core count. The clock is ``timeit.default_timer`` (time.perf_counter), read after waiting for
the GPU's queued work when there is a GPU, so GPU ops are timed to completion.

``timeit(number)`` is one block after a warm-up; ``blocked_autorange`` first finds a block size
(``number``) that makes the loop's own overhead negligible, then times blocks until
``min_run_time`` has passed; ``adaptive_autorange`` keeps timing blocks until the spread
(IQR / median) falls below ``threshold`` or ``max_run_time`` is spent.
"""
import enum
import textwrap
import timeit as _timeit_module

import numpy as np

from . import common

__all__ = ["Timer", "timer", "Language"]


def timer():
    """The clock: ``timeit.default_timer()``, after synchronizing the GPU when there is one."""
    from ... import cuda
    if cuda.is_available():
        cuda.synchronize()
    return _timeit_module.default_timer()


class Language(enum.Enum):
    PYTHON = 0
    CPP = 1


class Timer:
    """Time the Python statement ``stmt`` (a string), run after ``setup``.

    ``label``, ``sub_label``, ``description`` and ``env`` only name the Measurement (``Compare``
    lays rows and columns out by them); ``num_threads`` is minidl's thread count for the runs.
    PyTorch's C++ timing (``language="cpp"``) and Callgrind counts are not available."""

    _timer_cls = _timeit_module.Timer

    def __init__(self, stmt="pass", setup="pass", global_setup="", timer=timer, globals=None, label=None,
                 sub_label=None, description=None, env=None, num_threads=1, language=Language.PYTHON):
        if not isinstance(stmt, str):
            raise ValueError("Currently only a `str` stmt is supported.")
        if language in (Language.CPP, "cpp", "c++"):
            raise NotImplementedError("Timer: C++ statements (language='cpp') are not supported in minidl; "
                                      "time Python statements")
        if language not in (Language.PYTHON, "py", "python"):
            raise ValueError(f"Invalid language `{language}`.")
        if global_setup:
            raise ValueError(f"global_setup is C++ only, got `{global_setup}`. Most likely this code can simply be "
                             "moved to `setup`.")
        import minidl
        self._globals = dict(globals or {})
        self._globals.setdefault("minidl", minidl)
        self._globals.setdefault("md", minidl)
        self._language = Language.PYTHON
        stmt = textwrap.dedent(stmt)
        stmt = (stmt[1:] if stmt and stmt[0] == "\n" else stmt).rstrip()
        setup = textwrap.dedent(setup)
        setup = (setup[1:] if setup and setup[0] == "\n" else setup).rstrip()
        self._timer = self._timer_cls(stmt=stmt, setup=setup, timer=timer, globals=self._globals)
        self._task_spec = common.TaskSpec(stmt=stmt, setup=setup, global_setup=global_setup, label=label,
                                          sub_label=sub_label, description=description, env=env,
                                          num_threads=num_threads)

    def _timeit(self, number):
        # a zero would make the relative overhead and the statistics divide by zero
        return max(self._timer.timeit(number), 1e-9)

    def timeit(self, number=1000000):
        """One block of ``number`` runs (after a warm-up of ``number // 100``, at least 2)."""
        with common.set_torch_threads(self._task_spec.num_threads):
            self._timeit(number=max(int(number // 100), 2))
            return common.Measurement(number_per_run=number, raw_times=[self._timeit(number=number)],
                                      task_spec=self._task_spec)

    def repeat(self, repeat=-1, number=-1):
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def autorange(self, callback=None):
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def _threaded_measurement_loop(self, number, time_hook, stop_hook, min_run_time, max_run_time=None,
                                   callback=None):
        """Time blocks until at least ``min_run_time`` is spent and ``stop_hook(times)`` agrees,
        or ``max_run_time`` is exceeded."""
        total_time = 0.0
        can_stop = False
        times = []
        with common.set_torch_threads(self._task_spec.num_threads):
            while total_time < min_run_time or not can_stop:
                time_spent = time_hook()
                times.append(time_spent)
                total_time += time_spent
                if callback:
                    callback(number, time_spent)
                can_stop = stop_hook(times)
                if max_run_time and total_time > max_run_time:
                    break
        return times

    def _estimate_block_size(self, min_run_time):
        """The smallest power of ten of runs per block whose time dwarfs the empty loop's
        (overhead at most 1e-4 of it) and is at least min_run_time / 1000, or exceeds
        min_run_time."""
        with common.set_torch_threads(self._task_spec.num_threads):
            overhead = float(np.median([self._timeit(0) for _ in range(5)]))
            number = 1
            while True:
                time_taken = self._timeit(number)
                relative_overhead = overhead / time_taken
                if relative_overhead <= 1e-4 and time_taken >= min_run_time / 1000:
                    break
                if time_taken > min_run_time:
                    break
                if number * 10 > 2147483647:   # timeit's C loop counter
                    break
                number *= 10
        return number

    def blocked_autorange(self, callback=None, min_run_time=0.2):
        """Blocks of an estimated size until ``min_run_time`` seconds are spent;
        ``callback(number, seconds)`` after each block."""
        number = self._estimate_block_size(min_run_time)
        times = self._threaded_measurement_loop(number, lambda: self._timeit(number), lambda times: True,
                                                min_run_time=min_run_time, callback=callback)
        return common.Measurement(number_per_run=number, raw_times=times, task_spec=self._task_spec)

    def adaptive_autorange(self, threshold=0.1, *, min_run_time=0.01, max_run_time=10.0, callback=None):
        """Blocks until there are more than 3 of them with IQR / median < ``threshold`` (and
        ``min_run_time`` is spent), or ``max_run_time`` is exceeded."""
        number = self._estimate_block_size(min_run_time=0.05)

        def stop_hook(times):
            if len(times) > 3:
                return common.Measurement(number_per_run=number, raw_times=times,
                                          task_spec=self._task_spec).meets_confidence(threshold=threshold)
            return False

        times = self._threaded_measurement_loop(number, lambda: self._timeit(number), stop_hook, min_run_time,
                                                max_run_time, callback=callback)
        return common.Measurement(number_per_run=number, raw_times=times, task_spec=self._task_spec)

    def collect_callgrind(self, number=100, *, repeats=None, collect_baseline=True, retain_out_file=False):
        raise NotImplementedError("Timer.collect_callgrind: Callgrind instruction counts are not supported in "
                                  "minidl; use blocked_autorange or adaptive_autorange")
