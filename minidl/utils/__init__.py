"""PyTorch's ``torch.utils`` counterparts: ``minidl.utils.data`` (datasets, samplers, DataLoader)."""
from . import data

__all__ = ["data"]
