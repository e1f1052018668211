"""F.embedding (``minidl.ops.embedding``)."""
from ...ops.embedding import embedding  # noqa: F401
