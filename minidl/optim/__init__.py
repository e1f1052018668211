"""Optimizers (``import minidl.optim as optim``), learning-rate schedules (``optim.lr_scheduler``)
and weight averaging (``optim.swa_utils``), with PyTorch's names, signatures and update formulas."""
from . import lr_scheduler, swa_utils
from .adafactor import Adafactor
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .asgd import ASGD
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .rprop import Rprop
from .sgd import SGD

__all__ = ["ASGD", "Adadelta", "Adagrad", "Adam", "AdamW", "Adamax", "LBFGS", "NAdam", "Optimizer", "RAdam",
           "RMSprop", "Rprop", "SGD", "lr_scheduler", "swa_utils"]
__all__.append("Adafactor")
