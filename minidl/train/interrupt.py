"""Stopping a training loop on Ctrl-C (SIGINT) or SIGTERM without saving a half-made step.

A signal can arrive anywhere: after ``opt.step()`` but before the scheduler's step, between two
parameter groups, half way through the optimizer's updates. Saved there, the checkpoint would
be neither the previous step nor this one, and a resumed run would diverge. So the handler of
``StopRequest`` only records the request, and the loop asks ``stop.requested`` at step
boundaries (after the step, the scheduler and the bookkeeping) and then saves and exits.

A second signal quits at once by raising KeyboardInterrupt (the loop then saves nothing: the
state in memory is mid-step, and the last checkpoint on disk stays as it was), except while a
checkpoint is being written (``with stop.saving():``), when it is ignored so the save completes.
The previous handlers come back on leaving the ``with`` block. Outside the main thread Python
cannot install handlers; there a Ctrl-C is a plain KeyboardInterrupt, handled as the second one.
"""
import contextlib
import os
import signal
import threading

SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _notice(text):
    # os.write, not print: a handler runs between two bytecodes of the main thread, possibly
    # inside a print of its own (tqdm writes often), and buffered streams refuse re-entry.
    try:
        os.write(2, text.encode())
    except OSError:
        pass


class StopRequest:
    """``with StopRequest() as stop:`` turns SIGINT/SIGTERM into ``stop.requested``."""

    def __init__(self):
        self.signum = None
        self._saving = False
        self._previous = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for s in SIGNALS:
                self._previous[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc):
        for s, handler in self._previous.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
        self._previous.clear()
        return False

    def _handle(self, signum, frame):
        if self.signum is None:
            self.signum = signum
            _notice(f"\n{self.name}: stopping at the end of this step to save a checkpoint "
                    "(again to quit without saving)\n")
        elif self._saving:
            _notice(f"\n{signal.Signals(signum).name}: writing the checkpoint, stopping right after\n")
        else:
            raise KeyboardInterrupt

    @property
    def requested(self):
        return self.signum is not None

    @property
    def name(self):
        return signal.Signals(self.signum).name if self.signum is not None else "KeyboardInterrupt"

    @property
    def exit_status(self):
        """The shell's convention for a process ended by a signal: 128 + its number."""
        return 128 + (self.signum or signal.SIGINT)

    @contextlib.contextmanager
    def saving(self):
        """Let a further signal wait until the checkpoint written inside is complete."""
        self._saving = True
        try:
            yield
        finally:
            self._saving = False


def saved_message(stop, where, path, command):
    """The one line a loop prints after saving on a stop request."""
    return f"{stop.name} at {where}: checkpoint saved to {path}; continue with: {command}"


def unsaved_message(where, step, saved, path, command):
    """The one line for a quit by KeyboardInterrupt (a second signal) during ``where``: the state
    in memory may be mid-step, so nothing more is saved; says what the checkpoint on disk holds."""
    if saved is None:
        return f"interrupted during {where}: no checkpoint was saved yet"
    lost = "" if saved == step else f"steps after {saved} are not saved; "
    return f"interrupted during {where}: {lost}{path} holds step {saved}; continue with: {command}"
