"""``torch.serialization``'s names for minidl checkpoints: ``save``/``load`` and the globals
``load(..., weights_only=True)`` allows beyond its defaults (see ``minidl.io.pickled``)."""
from .io import (add_safe_globals, clear_safe_globals, get_safe_globals, get_unsafe_globals_in_checkpoint, load,
                 safe_globals, save)

DEFAULT_PROTOCOL = 2

__all__ = ["DEFAULT_PROTOCOL", "add_safe_globals", "clear_safe_globals", "get_safe_globals",
           "get_unsafe_globals_in_checkpoint", "load", "safe_globals", "save"]
