"""PyTorch's ``torch.utils`` counterparts: ``minidl.utils.data`` (datasets, samplers, DataLoader) and
``minidl.utils.checkpoint`` (activation checkpointing)."""
from . import checkpoint, data

__all__ = ["checkpoint", "data"]
