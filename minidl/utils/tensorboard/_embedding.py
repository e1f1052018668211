"""The files TensorBoard's Projector reads for ``SummaryWriter.add_embedding``: under
``LOGDIR/<step, 5 digits>/<tag>/`` the vectors (``tensors.tsv``), their labels (``metadata.tsv``)
and a sprite of their images (``sprite.png``), and in LOGDIR a ``projector_config.pbtxt`` listing
every embedding written so far (rewritten whole each time, since not every file system appends).
Written through TensorBoard's ``gfile`` so remote log directories work as for the event files.
"""
import io
import math

import numpy as np
from tensorboard.compat import tf
from tensorboard.plugins.projector.projector_config_pb2 import EmbeddingInfo

from ._convert import make_grid


def _join(a, b):
    # the join API differs between TensorBoard's TensorFlow stub and TensorFlow itself
    if hasattr(tf.io.gfile, "join"):
        return tf.io.gfile.join(a, b)
    return tf.io.gfile.get_filesystem(a).join(a, b)


def _write(path, data):
    with tf.io.gfile.GFile(path, "wb") as f:
        f.write(tf.compat.as_bytes(data))


def make_tsv(metadata, save_path, metadata_header=None):
    """One label per line, or with ``metadata_header`` a header row and one tab-separated row per point."""
    if not metadata_header:
        lines = [str(x) for x in metadata]
    else:
        if len(metadata_header) != len(metadata[0]):
            raise AssertionError("len of header must be equal to the number of columns in metadata")
        lines = ["\t".join(str(e) for e in row) for row in [metadata_header] + list(metadata)]
    _write(_join(save_path, "metadata.tsv"), "\n".join(lines) + "\n")


def make_sprite(label_img, save_path):
    """Tile the N,C,H,W images (floats in [0, 1]) into a square sprite, ceil(sqrt(N)) per row."""
    from PIL import Image

    nrow = math.ceil(label_img.shape[0] ** 0.5)
    grid = make_grid(label_img, ncols=nrow).transpose(1, 2, 0)
    square = np.zeros((grid.shape[1], grid.shape[1], 3))
    square[:grid.shape[0]] = grid
    with io.BytesIO() as out:
        Image.fromarray(np.uint8((square * 255).clip(0, 255))).save(out, format="PNG")
        _write(_join(save_path, "sprite.png"), out.getvalue())


def make_mat(mat, save_path):
    _write(_join(save_path, "tensors.tsv"), "".join("\t".join(str(v.item()) for v in row) + "\n" for row in mat))


def embedding_info(metadata, label_img, subdir, global_step, tag):
    info = EmbeddingInfo(tensor_name=f"{tag}:{str(global_step).zfill(5)}", tensor_path=_join(subdir, "tensors.tsv"))
    if metadata is not None:
        info.metadata_path = _join(subdir, "metadata.tsv")
    if label_img is not None:
        info.sprite.image_path = _join(subdir, "sprite.png")
        info.sprite.single_image_dim.extend([label_img.shape[3], label_img.shape[2]])
    return info


def write_pbtxt(save_path, contents):
    _write(_join(save_path, "projector_config.pbtxt"), contents)
