"""Saving and loading checkpoints (``md.save`` / ``md.load``): .npz files, pickle only for objects
that need it, loaded by default only with safe globals."""
from .checkpoint import CheckpointError, get_unsafe_globals_in_checkpoint, load, save
from .pickled import WeightsOnlyError, add_safe_globals, clear_safe_globals, get_safe_globals, safe_globals

__all__ = ["CheckpointError", "WeightsOnlyError", "add_safe_globals", "clear_safe_globals", "get_safe_globals",
           "get_unsafe_globals_in_checkpoint", "load", "safe_globals", "save"]
