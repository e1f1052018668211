"""F.max_pool2d, F.avg_pool2d, F.adaptive_avg_pool2d (``minidl.ops.pooling``)."""
from ...ops.pooling import adaptive_avg_pool2d, avg_pool2d, max_pool2d  # noqa: F401
