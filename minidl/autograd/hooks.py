"""Hook registries and the handle that removes a hook, shared by tensor and module hooks.

A registry is an ordered dict id -> hook: hooks run in the order they were registered,
and ``handle.remove()`` deletes exactly the one it was returned for (removing twice, or
after the registry is gone, does nothing).
"""
import itertools
import weakref
from collections import OrderedDict

_ids = itertools.count()


class RemovableHandle:
    """Returned by every ``register_*hook``; ``remove()`` unregisters the hook. Also a
    context manager that removes the hook on exit."""

    __slots__ = ("_registry", "id")

    def __init__(self, registry):
        self._registry = weakref.ref(registry)
        self.id = next(_ids)

    def remove(self):
        registry = self._registry()
        if registry is not None:
            registry.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


class HookDict(OrderedDict):
    """An ordered dict that a RemovableHandle can refer to weakly."""
    __slots__ = ()


def add(registry, hook):
    """Register ``hook`` in ``registry`` (a HookDict); return its handle."""
    if not callable(hook):
        raise TypeError(f"a hook must be callable, got {type(hook).__name__}")
    handle = RemovableHandle(registry)
    registry[handle.id] = hook
    return handle
