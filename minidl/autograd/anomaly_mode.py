"""Anomaly detection for the backward pass, with PyTorch's switches and messages.

An error raised in a backward formula points at the backward code, not at the line of the
model that built the failing node, and a NaN that a backward produces spreads silently into
every gradient before it. While anomaly detection is on:

- ``Function.apply`` records on each graph node it builds the Python stack of the forward call
  (``traceback.format_stack``), and when anything raises while the engine runs that node
  (its backward, the hooks on its outputs, the check of what it saved) the engine first warns
  "Error detected in <Node>. Traceback of forward call that caused the error: ...";
- with ``check_nan``, a backward that returns NaN anywhere in a gradient raises
  ``RuntimeError("Function '<Node>' returned nan values in its <i>th output.")``, i being the
  forward argument the gradient belongs to (PyTorch's wording; minidl names a node by its
  Function class, ``Sqrt`` where PyTorch says ``SqrtBackward0``).

Both cost time (a stack capture per op, a NaN scan per gradient), so the mode is for
debugging. While it is off, ``Function.apply`` pays one test of a module-global flag, which
``on_change`` (installed by op_function.py, as autocast_state installs its seam) keeps in step
with the state here; the engine reads the state once per backward pass. As in PyTorch the
state is process-wide, not per thread.
"""
import functools
import sys
import traceback
import warnings

import numpy as np

_enabled = False     # is anomaly detection on
_check_nan = True    # does the engine scan the gradients each backward returns for NaN
on_change = None     # op_function._set_anomaly(on): keeps Function.apply's flag in step with ``_enabled``


def is_anomaly_enabled():
    """Whether anomaly detection is on."""
    return _enabled


def is_anomaly_check_nan_enabled():
    """Whether anomaly detection, when on, checks the gradients backward returns for NaN."""
    return _check_nan


def set_anomaly_enabled(mode, check_nan=True):
    """Turn anomaly detection on or off (``torch.set_anomaly_enabled``)."""
    global _enabled, _check_nan
    _enabled, _check_nan = bool(mode), bool(check_nan)
    on_change(_enabled)


class detect_anomaly:
    """Context manager (and decorator) that turns anomaly detection on inside it.

    The forward of the code inside records, per graph node, where it was called from; a
    backward inside that raises, or (with ``check_nan``) returns NaN, is reported with that
    traceback. Entering it warns that the mode slows the program down, as PyTorch does.
    """

    def __init__(self, check_nan=True):
        self.check_nan = check_nan
        self.prev = []      # the states to restore, one per region entered and not yet left
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
                      "enabled for debugging.", stacklevel=2)

    def __enter__(self):
        self.prev.append((_enabled, _check_nan))
        set_anomaly_enabled(True, self.check_nan)

    def __exit__(self, *exc):
        set_anomaly_enabled(*self.prev.pop())

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return wrapper


class set_detect_anomaly:
    """Turn anomaly detection on or off: at once when called, and back to what it was when
    used as a context manager and left (``with set_detect_anomaly(False): ...``)."""

    def __init__(self, mode, check_nan=True):
        self.prev = (_enabled, _check_nan)
        set_anomaly_enabled(mode, check_nan)

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        set_anomaly_enabled(*self.prev)


def record(ctx):
    """Keep on node ``ctx`` the stack of the call that is building it, without the frames of
    Function.apply itself (called from apply, which lives in the file of the caller's frame)."""
    frame = sys._getframe(1)
    apply_file = frame.f_code.co_filename
    while frame is not None and frame.f_code.co_filename == apply_file:
        frame = frame.f_back
    ctx._forward_stack = traceback.format_stack(frame)


def check_gradients(node, grads):
    """Raise when a gradient that ``node``'s backward returned holds a NaN (with check_nan)."""
    if not _check_nan:
        return
    for i, g in enumerate(grads):
        if g is None:
            continue
        if type(g) is np.ndarray or np.ndim(g) == 0:
            nan = np.isnan(g).any() if np.asarray(g).dtype.kind in "fc" else False
        else:
            nan = g.dtype.kind in "fc" and bool((g != g).any())   # a device array: NaN is what differs from itself
        if nan:
            raise RuntimeError(f"Function '{type(node).__name__}' returned nan values in its {i}th output.")


def report(node):
    """Warn, as the engine is about to re-raise an error met while running ``node``, with the
    traceback of the forward call that built it (PyTorch's message)."""
    name = type(node).__name__
    stack = node.__dict__.get("_forward_stack")
    if stack is None:
        warnings.warn(f"Error detected in {name}. No forward pass information available. Enable detect anomaly "
                      "during forward pass for more information.", stacklevel=3)
        return
    warnings.warn(f"Error detected in {name}. Traceback of forward call that caused the error:\n{''.join(stack)}",
                  stacklevel=3)
