"""Engine settings PyTorch exposes in ``torch.autograd`` that minidl's engine has no use for,
kept so code that sets or reads them runs unchanged, and ``is_tensor_like``.

- ``set_multithreading_enabled(mode)``: PyTorch's engine runs the backward of CUDA (and other
  device) graphs on one worker thread per device; this switch makes it run them on the calling
  thread instead. minidl's engine always runs a backward pass on the thread that called it
  (engine.py), so the switch is recorded, answered by ``is_multithreading_enabled``, and changes
  nothing. Like PyTorch's, it takes effect when called, and as a context manager (or decorator)
  restores the previous setting on exit.
- ``is_view_replay_enabled()``: whether PyTorch regenerates views by replaying the view ops
  (``torch.autograd._force_original_view_tracking``). minidl renews a stale view's history
  from its base (views.py) and has no such mode: False, PyTorch's default.
"""
import functools

from . import op_function

__all__ = ["is_multithreading_enabled", "is_tensor_like", "is_view_replay_enabled", "set_multithreading_enabled"]

_multithreading = [True]     # PyTorch's default


def is_multithreading_enabled():
    """The value last given to ``set_multithreading_enabled`` (True by default); minidl's engine
    is single-threaded either way."""
    return _multithreading[0]


class set_multithreading_enabled:  # noqa: N801  (PyTorch's name)
    """Set whether the engine may run backward on worker threads: recorded only, since minidl's
    engine runs every backward pass on the calling thread (see the module docstring)."""

    def __init__(self, mode):
        self.prev = _multithreading[0]
        self.mode = bool(mode)
        _multithreading[0] = self.mode

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        _multithreading[0] = self.prev
        return False

    def clone(self):
        return self.__class__(self.mode)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)
        return wrapper


def is_view_replay_enabled():
    """False: minidl has no view-replay mode (see the module docstring)."""
    return False


def is_tensor_like(inp):
    """Whether ``inp`` is a Tensor (or subclass) or an object that says it acts like one by
    defining ``__torch_function__``, as ``torch.overrides.is_tensor_like``."""
    return isinstance(inp, op_function.Tensor) or hasattr(inp, "__torch_function__")
