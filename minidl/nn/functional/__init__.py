"""The functional forms of the layers (``import minidl.nn.functional as F``).

Each family lives in its own file; the ops they call (with hand-written backwards) are
in ``minidl.ops``.
"""
from ...ops import log_softmax, relu, sigmoid, softmax, tanh  # noqa: F401
