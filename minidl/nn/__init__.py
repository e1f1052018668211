"""Neural-network layers (``import minidl.nn as nn``), with PyTorch's names and defaults."""
from . import functional  # noqa: F401
from . import init, utils  # noqa: F401
from . import parallel  # noqa: F401
from .modules import *  # noqa: F401,F403
from .modules import Module  # noqa: F401
from .parameter import Buffer, Parameter  # noqa: F401
