"""F.max_pool2d, F.avg_pool2d, F.adaptive_avg_pool2d and F.relu_max_pool2d (``minidl.ops.pooling``)."""
from ...ops.pooling import adaptive_avg_pool2d, avg_pool2d, max_pool2d, relu_max_pool2d  # noqa: F401
from ...ops.adaptive_max_pool import adaptive_max_pool2d  # noqa: F401
from ...ops.pooling1d import adaptive_avg_pool1d, adaptive_max_pool1d, avg_pool1d, max_pool1d  # noqa: F401
from ...ops.pooling3d import adaptive_avg_pool3d, adaptive_max_pool3d, avg_pool3d, max_pool3d  # noqa: F401
