"""Work: the handle an ``async_op=True`` collective returns, as PyTorch's.

``wait()`` blocks until the collective finished on this rank and its result is in the
tensors it was given (it raises the collective's error, such as a mismatch across ranks or a
timeout); ``is_completed()`` asks without blocking. A collective called without ``async_op``
is the same Work, waited at once.

A Work is made of a communicator's request (anything with ``test()`` and
``wait(timeout)``) and the steps that run once it is done on this rank: copying a staged
host buffer back into a tensor, casting back from the wire dtype, AVG's division.
"""
import os
import time


class Work:
    def __init__(self, request, finish=(), timeout=None, describe="collective", tensors=()):
        self._request = request
        self._tensors = list(tensors)
        self._finish = list(finish)
        self._timeout = timeout
        self._describe = describe
        self._done = False
        self._error = None

    def _complete(self):
        if self._done:
            return
        self._done = True
        try:
            for step in self._finish:
                step()
        except BaseException as exc:
            self._error = exc
            raise

    def wait(self, timeout=None):
        """Block until done (at most ``timeout`` seconds, a number or a timedelta; the process
        group's timeout by default) and return True; raise the collective's error."""
        if self._error is not None:
            raise self._error
        if not self._done:
            limit = _seconds(timeout) if timeout is not None else self._timeout
            try:
                self._request.wait(limit, self._describe)
            except BaseException as exc:
                self._done, self._error = True, exc
                raise
            self._complete()
        return True

    def is_completed(self):
        if self._done:
            return True
        try:
            ready = self._request.test()
        except BaseException as exc:
            self._done, self._error = True, exc
            return True
        if ready:
            self._complete()
        return ready

    def is_success(self):
        return self.is_completed() and self._error is None

    def exception(self):
        return self._error

    def result(self):
        """The tensors the collective wrote, once done (an empty list for barrier)."""
        self.wait()
        return list(self._tensors)

    def _source_rank(self):
        """The rank a finished receive got its message from (PyTorch's name), after waiting."""
        self.wait()
        source = getattr(self._request, "source", None)
        if source is None:
            raise RuntimeError(f"{self._describe}: only a receive has a source rank")
        return source

    def __repr__(self):
        state = "failed" if self._error is not None else "completed" if self._done else "pending"
        return f"Work({self._describe}, {state})"


def _seconds(timeout):
    return timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)


def poll(test, timeout, describe, rank):
    """Call ``test()`` until it is true; raise after ``timeout`` seconds. MPI advances a
    non-blocking collective only inside MPI calls, so this tests without pause at first, as
    MPI's own blocking wait does (MPICH yields the core after 1000 polls: so do these, for the
    other rank when there are more ranks than free cores); a wait that lasts past 100 ms is
    waiting for a slower rank, and sleeps 0.1 ms between tests."""
    if test():
        return
    start = time.perf_counter()
    deadline = None if timeout is None else start + timeout
    polls = 0
    while not test():
        polls += 1
        if polls < _SPIN_POLLS:
            continue
        now = time.perf_counter()
        if deadline is not None and now > deadline:
            raise RuntimeError(f"rank {rank}: {describe} timed out after {timeout:g} s: another rank never "
                               "reached it (a rank stopped, or the ranks called different collectives)")
        if now - start > 0.1:
            time.sleep(1e-4)
        else:
            _yield()


_SPIN_POLLS = 1000
_yield = getattr(os, "sched_yield", lambda: time.sleep(0))
