"""F.linear: y = x W^T + b (a fused op, ``minidl.ops.linear``)."""
from ...ops.linear import linear  # noqa: F401
