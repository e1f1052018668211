"""``minidl.nn.parallel``: DistributedDataParallel (PyTorch's ``torch.nn.parallel``)."""
from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
