"""Whether ops record the graph, per thread, as in PyTorch.

``no_grad``, ``enable_grad``, ``set_grad_enabled(mode)`` and ``inference_mode(mode)`` each
work as a context manager and as a decorator, and restore the previous mode on exit (also
when the body raises). ``set_grad_enabled(mode)`` also works as a plain call: it switches
the mode at once, which a ``with`` block then undoes on exit.

The mode lives in a ``threading.local``: a worker thread starts with grad enabled and its
switches never leak into other threads. Ops and the engine read ``_state.enabled``.
"""
import functools
import inspect
import threading
import warnings


class _State(threading.local):
    enabled = True      # class defaults: what each new thread starts with
    inference = False


_state = _State()


def is_grad_enabled():
    """True when ops record the graph in this thread."""
    return _state.enabled


def is_inference_mode_enabled():
    return _state.inference


def _set(mode):
    _state.enabled = bool(mode)


class _Decorating:
    """A context manager that also decorates: the decorated function runs inside a fresh
    copy of the manager (so one decorated function can be called reentrantly and from
    several threads); a generator function has each step run inside it."""

    def _fresh(self):
        return type(self)()

    def __call__(self, fn):
        if inspect.isclass(fn):
            # PyTorch's deprecated class decoration: the class's construction runs in the mode
            warnings.warn("Decorating classes is deprecated and will be disabled in future versions. You should "
                          "only decorate functions or methods. To preserve the current behavior of class "
                          "decoration, you can directly decorate the `__init__` method and nothing else.",
                          FutureWarning, stacklevel=2)
            cls = fn
            fn = lambda *args, **kwargs: cls(*args, **kwargs)  # noqa: E731
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def generator(*args, **kwargs):
                gen = fn(*args, **kwargs)
                with self._fresh():
                    item = next(gen)
                while True:
                    try:
                        sent = yield item
                    except GeneratorExit:
                        gen.close()
                        raise
                    except BaseException as exc:  # forward a throw() into the generator
                        with self._fresh():
                            item = gen.throw(exc)
                    else:
                        try:
                            with self._fresh():
                                item = gen.send(sent)
                        except StopIteration as stop:
                            return stop.value
            return generator

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self._fresh():
                return fn(*args, **kwargs)
        return wrapper


class _GradMode(_Decorating):
    mode = True

    def __new__(cls, orig_func=None):
        # ``@no_grad`` without parentheses, as PyTorch allows
        self = super().__new__(cls)
        if orig_func is not None:
            if not callable(orig_func):
                raise TypeError(f"{cls.__name__}() takes no arguments, got {orig_func!r}")
            return self(orig_func)
        return self

    def __init__(self, orig_func=None):
        pass

    def __enter__(self):
        self._prev = _state.enabled
        _set(self.mode)
        return self

    def __exit__(self, *exc):
        _set(self._prev)
        return False


class no_grad(_GradMode):
    """Context manager (and decorator) under which no graph is recorded."""
    mode = False


class enable_grad(_GradMode):
    """Context manager (and decorator) that turns recording back on, e.g. inside no_grad."""
    mode = True


class set_grad_enabled(_Decorating):
    """``set_grad_enabled(False)`` switches recording off now; used with ``with`` or as a
    decorator it restores the mode that was in force before."""

    def __init__(self, mode):
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled: mode must be a bool, got {type(mode).__name__}")
        self.mode = mode
        self._prev = _state.enabled
        _set(mode)

    def _fresh(self):
        return _Deferred(self.mode)

    def __call__(self, fn):
        _set(self._prev)   # as a decorator it only applies while the function runs
        return super().__call__(fn)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _set(self._prev)
        return False


class _Deferred(_GradMode):
    """set_grad_enabled(mode) as used around each call of a decorated function."""

    def __new__(cls, mode):
        return object.__new__(cls)

    def __init__(self, mode):
        self.mode = mode


class inference_mode(_Decorating):
    """Like no_grad (nothing is recorded), for code that only evaluates.
    ``inference_mode(False)`` switches inference off and recording on, as in PyTorch."""

    def __new__(cls, mode=True):
        if callable(mode) and not isinstance(mode, bool):   # ``@inference_mode`` without parentheses
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode=True):
        if not isinstance(mode, bool):
            raise TypeError(f"inference_mode: mode must be a bool, got {type(mode).__name__}")
        self.mode = mode

    def _fresh(self):
        return inference_mode(self.mode)

    def __enter__(self):
        self._prev = (_state.enabled, _state.inference)
        _state.enabled = not self.mode
        _state.inference = self.mode
        return self

    def __exit__(self, *exc):
        _state.enabled, _state.inference = self._prev
        return False
