"""F.conv2d (im2col + GEMM, ``minidl.ops.conv``), conv1d on it, transposed convolutions, fold/unfold."""
from ...ops.conv import conv2d  # noqa: F401
from ...ops.conv1d import conv1d  # noqa: F401
from ...ops.conv_transpose import conv_transpose1d, conv_transpose2d  # noqa: F401
from ...ops.fold import fold, unfold  # noqa: F401
from ...ops.conv3d import conv3d, conv_transpose3d  # noqa: F401
