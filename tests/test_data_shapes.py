"""The procedurally drawn shapes: shapes and ranges, balanced classes, determinism under a seed,
difficulty that really adds nuisance, classes that really differ, and clear errors."""
import numpy as np
import pytest

from minidl.data import SHAPE_NAMES, load_shapes, shapes_arrays
from minidl.data.shapes import render


def test_arrays_shapes_dtypes_range_and_balanced_labels():
    x, y = shapes_arrays("train", n=50, num_classes=4, size=16)
    assert x.shape == (50, 3, 16, 16) and x.dtype == np.float32
    assert y.shape == (50,) and y.dtype == np.int64
    assert 0.0 <= x.min() and x.max() <= 1.0
    assert np.bincount(y).tolist() == [13, 13, 12, 12]
    x, y = shapes_arrays("test", n=24, num_classes=12)
    assert x.shape == (24, 3, 32, 32) and sorted(set(y.tolist())) == list(range(12))
    assert len(SHAPE_NAMES) == 12


def test_deterministic_under_a_seed_and_split():
    a, ya = shapes_arrays("train", n=20, size=16, seed=3)
    b, yb = shapes_arrays("train", n=20, size=16, seed=3)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(ya, yb)
    c, _ = shapes_arrays("train", n=20, size=16, seed=4)
    t, _ = shapes_arrays("test", n=20, size=16, seed=3)
    assert not np.allclose(a, c) and not np.allclose(a, t)


def _roughness(x):
    """Mean absolute difference of horizontally adjacent pixels: noise, texture and clutter raise it."""
    return float(np.abs(np.diff(x, axis=-1)).mean())


def test_difficulty_adds_noise_and_clutter():
    easy, _ = shapes_arrays("train", n=60, size=24, difficulty=0.0)
    mid, _ = shapes_arrays("train", n=60, size=24, difficulty=0.5)
    hard, _ = shapes_arrays("train", n=60, size=24, difficulty=1.0)
    assert _roughness(easy) < _roughness(mid) < _roughness(hard)
    assert _roughness(hard) > 2 * _roughness(easy)


def _object_area(images, background):
    """Fraction of pixels far from each image's background colour (the corner pixel)."""
    return (np.abs(images - background[:, :, None, None]).max(axis=1) > 0.15).mean(axis=(1, 2))


def test_the_label_is_the_shape_drawn():
    # at difficulty 0 the object is flat-coloured on a near-flat background: its mean area tells a
    # disc (pi r^2 = 3.1 r^2) from a ring (a disc with a hole, 2.2 r^2) and a bar (1.1 r^2)
    n = 30
    labels = np.repeat([SHAPE_NAMES.index("disc"), SHAPE_NAMES.index("bar"), SHAPE_NAMES.index("ring")], n)
    x = render(labels, difficulty=0.0, size=32, rng=np.random.default_rng(0))
    area = _object_area(x, x[:, :, 0, 0])
    disc, bar, ring = area[:n], area[n:2 * n], area[2 * n:]
    assert disc.mean() > 1.2 * ring.mean() and ring.mean() > 1.5 * bar.mean() and bar.min() > 0.03
    assert disc.min() > bar.max()       # the radius varies by 1.6x in area: only this pair never overlaps


def test_load_shapes_is_a_dataset_and_empty_is_allowed():
    ds = load_shapes("test", n=6, num_classes=3, size=8)
    assert len(ds) == 6
    img, label = ds[0]
    assert tuple(img.shape) == (3, 8, 8) and 0 <= int(label.item()) < 3
    x, y = shapes_arrays("train", n=0)
    assert x.shape == (0, 3, 32, 32) and y.shape == (0,)


@pytest.mark.parametrize("kwargs,match", [
    ({"split": "val"}, "split must be"),
    ({"num_classes": 1}, "num_classes must be an int from 2 to 12"),
    ({"num_classes": 13}, "num_classes must be"),
    ({"difficulty": 1.5}, "difficulty must be a number from 0 to 1"),
    ({"difficulty": "hard"}, "difficulty must be"),
    ({"size": 4}, "size must be an int >= 8"),
    ({"n": -1}, "n must be a non-negative int"),
    ({"n": 2.5}, "n must be"),
])
def test_bad_arguments_name_what_was_expected(kwargs, match):
    args = {"split": "train", "n": 4}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        shapes_arrays(**args)


def test_render_rejects_labels_outside_the_shape_list():
    with pytest.raises(ValueError, match="labels must index SHAPE_NAMES"):
        render([0, 12])
