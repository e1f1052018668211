"""TensorBoard logging, as ``torch.utils.tensorboard``: ``SummaryWriter`` writes scalars, histograms,
images, text, hyperparameters, embeddings and PR curves to event files that TensorBoard reads.

The files are written by the ``tensorboard`` package's own pieces (its ``EventFileWriter``, which
frames and checksums the records, and its protobuf messages), so they are the files TensorBoard
and ``torch.utils.tensorboard`` produce. The package is optional (``pip install "minidl[tensorboard]"``):
``import minidl`` never imports it, and importing this module without it raises ImportError, as
PyTorch's does.
"""
try:
    import tensorboard as _tensorboard
except ImportError as exc:
    raise ImportError("TensorBoard logging requires TensorBoard version 1.15 or above, which is not installed; "
                      "install it with: pip install tensorboard") from exc


def _version_tuple(text):
    parts = []
    for piece in str(text).split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


if _version_tuple(getattr(_tensorboard, "__version__", "0")) < (1, 15):
    raise ImportError(f"TensorBoard logging requires TensorBoard version 1.15 or above; found "
                      f"{getattr(_tensorboard, '__version__', 'an unknown version')}: pip install -U tensorboard")
del _tensorboard

from tensorboard.summary.writer.record_writer import RecordWriter  # noqa: E402

from .writer import FileWriter, SummaryWriter  # noqa: E402

__all__ = ["FileWriter", "RecordWriter", "SummaryWriter"]
