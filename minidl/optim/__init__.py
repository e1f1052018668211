"""Optimizers (``import minidl.optim as optim``) and learning-rate schedules
(``optim.lr_scheduler``), with PyTorch's names, signatures and update formulas."""
from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Adam", "AdamW", "Optimizer", "SGD", "lr_scheduler"]
