"""Layers as Modules. One file per family; each module's forward calls nn.functional."""
from .module import Module
from .activation import GELU, LogSoftmax, ReLU, Sigmoid, Softmax, Tanh  # noqa: F401
from .container import ModuleDict, ModuleList, Sequential  # noqa: F401
from .conv import Conv2d  # noqa: F401
from .dropout import Dropout  # noqa: F401
from .flatten import Flatten  # noqa: F401
from .linear import Identity, Linear  # noqa: F401
from .loss import CrossEntropyLoss, MSELoss, NLLLoss  # noqa: F401
from .pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d  # noqa: F401
from .sparse import Embedding  # noqa: F401
from .normalization import FixNorm, LayerNorm, RMSNorm, ScaleNorm  # noqa: F401
from .batchnorm import BatchNorm1d, BatchNorm2d  # noqa: F401
from .instancenorm import InstanceNorm1d, InstanceNorm2d  # noqa: F401
from .groupnorm import GroupNorm  # noqa: F401
from .attention import MultiheadAttention  # noqa: F401
from .positional import LearnedPositionalEmbedding, RotaryEmbedding, SinusoidalPositionalEncoding  # noqa: F401
