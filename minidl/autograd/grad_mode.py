"""Whether ops record the graph: ``md.no_grad()`` switches recording off."""
import functools

_enabled = True


def is_grad_enabled():
    return _enabled


def set_grad_enabled(mode):
    global _enabled
    _enabled = bool(mode)


class _GradMode:
    mode = True

    def __enter__(self):
        self._prev = is_grad_enabled()
        set_grad_enabled(self.mode)
        return self

    def __exit__(self, *exc):
        set_grad_enabled(self._prev)
        return False

    def __call__(self, fn):  # also usable as a decorator
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradMode):
    """Context manager (and decorator) under which no graph is recorded."""
    mode = False


class enable_grad(_GradMode):
    mode = True
