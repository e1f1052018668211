"""The UCI handwritten digits: 1,797 grey 8x8 images of the digits 0-9, no download needed.

The pixels come from scikit-learn's bundled copy (``sklearn.datasets.load_digits``;
scikit-learn is the optional extra ``minidl[digits]``). The train/test split is fixed: a
stratified 80/20 split drawn once from ``np.random.default_rng(SPLIT_SEED)``, 1,437 train
and 360 test images, the same on every machine and every scikit-learn version (it depends
only on the order of the bundled data and NumPy's PCG64 stream).

Images are (N, 1, 8, 8) float32 tensors, labels int64. Pixel intensities (0..16 in the
source) are scaled to [0, 1] (``normalize="unit"``) or standardised with the mean and
standard deviation of the *training* pixels (``normalize="standard"``).
"""
import numpy as np

from ..tensor.tensor import Tensor
from ..utils.data.dataset import TensorDataset

SPLIT_SEED = 20240607
N_TEST = 360
_cache = {}


def _raw():
    if "raw" not in _cache:
        try:
            from sklearn.datasets import load_digits as _sk_load_digits
        except ImportError as exc:
            raise ImportError('the digits dataset needs scikit-learn, which is an optional extra: '
                              'pip install "minidl[digits]"') from exc
        bunch = _sk_load_digits()
        images = np.asarray(bunch.images, dtype=np.float32) / 16.0   # source values are 0..16
        _cache["raw"] = (images, np.asarray(bunch.target, dtype=np.int64))
    return _cache["raw"]


def split_indices(labels, n_test=N_TEST, seed=SPLIT_SEED):
    """Stratified split: each class gives its share of ``n_test`` (largest remainders make
    the total exact), the members picked by a fixed permutation. Returns sorted
    (train_idx, test_idx)."""
    rng = np.random.default_rng(seed)
    classes, counts = np.unique(labels, return_counts=True)
    share = counts * n_test / counts.sum()
    take = np.floor(share).astype(int)
    order = np.argsort(-(share - take), kind="stable")
    take[order[:n_test - take.sum()]] += 1
    test = []
    for c, k in zip(classes, take):
        members = np.flatnonzero(labels == c)
        test.append(rng.permutation(members)[:k])
    test = np.sort(np.concatenate(test))
    train = np.setdiff1d(np.arange(len(labels)), test)
    return train, test


def digits_arrays(split="train", normalize="unit"):
    """(images (N,1,8,8) float32, labels (N,) int64) as NumPy arrays."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    if normalize not in ("unit", "standard"):
        raise ValueError(f"normalize must be 'unit' or 'standard', got {normalize!r}")
    images, labels = _raw()
    train, test = split_indices(labels)
    idx = train if split == "train" else test
    x = images[idx][:, None, :, :].copy()
    if normalize == "standard":
        ref = images[train]
        x = (x - ref.mean()) / ref.std()
    return x.astype(np.float32), labels[idx].copy()


def load_digits(split="train", normalize="unit"):
    """The digits ``split`` ("train": 1,437 images, "test": 360) as a TensorDataset of
    (images (N,1,8,8) float32, labels int64)."""
    x, y = digits_arrays(split, normalize)
    return TensorDataset(Tensor._wrap(x, None, 0), Tensor._wrap(y, None, 0))


def pad_to(images, size):
    """Zero-pad (N, C, H, W) images symmetrically to ``size`` x ``size`` (for models that
    need larger inputs); works on arrays and tensors (the result is the same kind)."""
    a = images.numpy(force=True) if isinstance(images, Tensor) else np.asarray(images)
    h, w = a.shape[-2:]
    if size < h or size < w:
        raise ValueError(f"pad_to: size {size} is smaller than the images ({h}x{w})")
    top, left = (size - h) // 2, (size - w) // 2
    out = np.pad(a, [(0, 0)] * (a.ndim - 2) + [(top, size - h - top), (left, size - w - left)])
    return Tensor._wrap(out, None, 0) if isinstance(images, Tensor) else out
