"""PyTorch's ``torch.utils`` counterparts: ``minidl.utils.data`` (datasets, samplers, DataLoader) and
``minidl.utils.checkpoint`` (activation checkpointing)."""
from . import checkpoint, data

__all__ = ["checkpoint", "data"]
from . import benchmark, hooks  # noqa: E402,F401  (torch.utils.benchmark, torch.utils.hooks)
__all__ += ["benchmark", "hooks"]
