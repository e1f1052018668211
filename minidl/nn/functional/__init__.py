"""The functional forms of the layers (``import minidl.nn.functional as F``).

Each family lives in its own file; the ops they call (with hand-written backwards) are
in ``minidl.ops``.
"""
from ...ops import log_softmax, relu, sigmoid, softmax, tanh  # noqa: F401
from .activation import dropout, gelu  # noqa: F401
from .conv import conv2d  # noqa: F401
from .linear import linear  # noqa: F401
from .loss import cross_entropy, mse_loss, nll_loss  # noqa: F401
from .pooling import adaptive_avg_pool2d, avg_pool2d, max_pool2d  # noqa: F401
from .sparse import embedding  # noqa: F401
from .attention import scaled_dot_product_attention  # noqa: F401
from .normalization import layer_norm, rms_norm, scale_norm  # noqa: F401
from .channel_normalization import batch_norm, group_norm, instance_norm, masked_batch_norm  # noqa: F401
