"""Saving and loading checkpoints (``md.save`` / ``md.load``): .npz files with no pickle."""
from .checkpoint import CheckpointError, load, save

__all__ = ["CheckpointError", "load", "save"]
