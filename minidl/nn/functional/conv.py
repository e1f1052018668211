"""F.conv2d (im2col + GEMM, ``minidl.ops.conv``)."""
from ...ops.conv import conv2d  # noqa: F401
