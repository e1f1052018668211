"""Datasets and the DataLoader: batching, drop_last, reproducible shuffling; the digits split."""
import numpy as np
import pytest

import minidl as md
from minidl.data import DataLoader, Dataset, TensorDataset


def make_ds(n=10):
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    y = np.arange(n, dtype=np.int64)
    return TensorDataset(md.from_numpy(x), md.from_numpy(y))


def test_tensor_dataset_items_and_errors():
    ds = make_ds(4)
    assert len(ds) == 4
    x, y = ds[2]
    np.testing.assert_array_equal(x.numpy(), [6, 7, 8])
    assert int(y.item()) == 2
    with pytest.raises(ValueError, match="same size in dim 0"):
        TensorDataset(md.zeros(3, 2), md.zeros(4))


@pytest.mark.parametrize("drop_last,sizes", [(False, [4, 4, 2]), (True, [4, 4])])
def test_batching_and_drop_last(drop_last, sizes):
    loader = DataLoader(make_ds(10), batch_size=4, drop_last=drop_last)
    batches = list(loader)
    assert len(loader) == len(sizes)
    assert [b[0].shape[0] for b in batches] == sizes
    assert all(isinstance(t, md.Tensor) for b in batches for t in b)
    assert batches[0][0].shape == (4, 3) and batches[0][1].dtype == md.int64
    ys = np.concatenate([b[1].numpy() for b in batches])
    np.testing.assert_array_equal(ys, np.arange(sum(sizes)))   # in order without shuffle


def test_shuffle_with_seed_is_reproducible_and_varies_per_epoch():
    def epochs(loader, n):
        return [np.concatenate([b[1].numpy() for b in loader]) for _ in range(n)]
    a = epochs(DataLoader(make_ds(20), batch_size=3, shuffle=True, seed=7), 3)
    b = epochs(DataLoader(make_ds(20), batch_size=3, shuffle=True, seed=7), 3)
    c = epochs(DataLoader(make_ds(20), batch_size=3, shuffle=True, seed=8), 1)
    for e in range(3):
        np.testing.assert_array_equal(a[e], b[e])
        assert sorted(a[e]) == list(range(20))              # a permutation: every sample once
    assert not np.array_equal(a[0], a[1])
    assert not np.array_equal(a[0], c[0])
    # set_epoch lets a resumed run pick up at epoch 2
    resumed = DataLoader(make_ds(20), batch_size=3, shuffle=True, seed=7)
    resumed.set_epoch(2)
    np.testing.assert_array_equal(np.concatenate([b[1].numpy() for b in resumed]), a[2])


def test_shuffle_without_seed_follows_manual_seed():
    def order():
        return np.concatenate([b[1].numpy() for b in DataLoader(make_ds(20), batch_size=5, shuffle=True)])
    md.manual_seed(3)
    a = order()
    md.manual_seed(3)
    b = order()
    np.testing.assert_array_equal(a, b)
    state = md.get_rng_state()
    c = order()
    md.set_rng_state(state)
    np.testing.assert_array_equal(order(), c)


def test_generic_dataset_is_collated():
    class Squares(Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return {"x": np.full(2, i * i, np.float64), "y": i, "w": 0.5}

    batches = list(DataLoader(Squares(), batch_size=2))
    assert len(batches) == 3
    assert batches[1]["x"].shape == (2, 2) and batches[1]["x"].dtype == md.float64
    np.testing.assert_array_equal(batches[1]["y"].numpy(), [2, 3])
    # Python ints and floats collate to int64 and float64 tensors, as PyTorch's default_collate
    assert batches[0]["y"].dtype == md.int64 and batches[0]["w"].dtype == md.float64


def test_bad_batch_size():
    with pytest.raises(ValueError, match="batch_size"):
        DataLoader(make_ds(), batch_size=0)


def test_digits_shapes_and_fixed_split():
    pytest.importorskip("sklearn")
    from minidl.data import digits_arrays, load_digits
    from minidl.data.digits import split_indices
    train, test = load_digits("train"), load_digits("test")
    assert len(train) == 1437 and len(test) == 360
    x, y = train.tensors
    assert x.shape == (1437, 1, 8, 8) and x.dtype == md.float32 and y.dtype == md.int64
    assert float(x.numpy().min()) == 0.0 and float(x.numpy().max()) == 1.0
    counts = np.bincount(test.tensors[1].numpy(), minlength=10)
    assert counts.sum() == 360 and counts.min() >= 35 and counts.max() <= 37     # stratified
    # deterministic: the same split every call; train and test are disjoint and cover all
    tr1, te1 = split_indices(_all_labels())
    tr2, te2 = split_indices(_all_labels())
    np.testing.assert_array_equal(te1, te2)
    assert len(np.intersect1d(tr1, te1)) == 0 and len(tr1) + len(te1) == 1797
    xs, _ = digits_arrays("train", normalize="standard")
    assert abs(float(xs.mean())) < 1e-4 and abs(float(xs.std()) - 1) < 1e-4
    xt, yt = digits_arrays("test")
    np.testing.assert_array_equal(xt, test.tensors[0].numpy())


def _all_labels():
    from minidl.data.digits import _raw
    return _raw()[1]


def test_digits_missing_sklearn_says_how_to_install(monkeypatch):
    import sys

    from minidl.data import digits
    monkeypatch.setattr(digits, "_cache", {})
    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(ImportError, match=r'pip install "minidl\[digits\]"'):
        digits.load_digits()


def test_pad_to():
    from minidl.data import pad_to
    x = np.ones((2, 1, 8, 8), np.float32)
    y = pad_to(md.from_numpy(x), 12)
    assert isinstance(y, md.Tensor) and y.shape == (2, 1, 12, 12)
    assert float(y.numpy().sum()) == 128 and float(y.numpy()[0, 0, 2:10, 2:10].sum()) == 64
