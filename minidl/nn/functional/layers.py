"""Layers in functional form beyond the core families: pad, interpolate, pixel_shuffle,
one_hot, normalize, channel dropout, bilinear, embedding_bag and local_response_norm (each
op in its own file under ``minidl.ops``)."""
from ...ops.channel_dropout import dropout1d, dropout2d, dropout3d  # noqa: F401
from ...ops.interpolate import interpolate  # noqa: F401
from ...ops.normalize import normalize  # noqa: F401
from ...ops.one_hot import one_hot  # noqa: F401
from ...ops.pad import pad  # noqa: F401
from ...ops.pixel_shuffle import pixel_shuffle, pixel_unshuffle  # noqa: F401
from ...ops.bilinear import bilinear  # noqa: F401
from .sparse import embedding_bag  # noqa: F401
from ...ops.local_response_norm import local_response_norm  # noqa: F401
from ...ops.channel_shuffle import channel_shuffle  # noqa: F401
from ...ops.distance import pdist  # noqa: F401
