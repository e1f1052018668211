"""minidl.utils.data without worker processes: datasets, samplers, default_collate and the
DataLoader's batching, against PyTorch's structure (optional oracle) and on their own."""
import collections

import numpy as np
import pytest

import minidl as md
from minidl.utils import data

Point = collections.namedtuple("Point", "x label")


class Samples(data.Dataset):
    """Samples of one of several shapes PyTorch's default_collate handles."""

    def __init__(self, kind, n=7):
        self.kind, self.n = kind, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        x = np.arange(3, dtype=np.float32) + i
        if self.kind == "tuple":
            return x, i
        if self.kind == "dict":
            return {"x": x, "w": 0.5 * i, "name": f"s{i}", "flag": i % 2 == 0, "n": np.int32(i)}
        if self.kind == "namedtuple":
            return Point(x, i)
        if self.kind == "list":
            return [x, [i, 2 * i]]
        return x


def structure(batch):
    """A batch as plain Python: tensors (minidl's or PyTorch's) as (dtype name, values)."""
    if hasattr(batch, "numpy") and hasattr(batch, "shape"):
        a = batch.detach().numpy() if hasattr(batch, "detach") else batch.numpy()
        return ("tensor", str(a.dtype), a.tolist())
    if isinstance(batch, dict):
        return {k: structure(v) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return (type(batch).__name__, [structure(b) for b in batch])
    return batch


@pytest.mark.parametrize("kind", ["array", "tuple", "dict", "namedtuple", "list"])
@pytest.mark.parametrize("batch_size,drop_last", [(3, False), (3, True), (None, False)])
def test_batches_have_pytorchs_structure(kind, batch_size, drop_last):
    pytest.importorskip("torch")
    import torch.utils.data as tdata
    ds = Samples(kind)
    expected = [structure(b) for b in tdata.DataLoader(ds, batch_size=batch_size, drop_last=drop_last)]
    loader = data.DataLoader(ds, batch_size=batch_size, drop_last=drop_last)
    got = [structure(b) for b in loader]
    assert got == expected
    assert len(loader) == len(tdata.DataLoader(ds, batch_size=batch_size, drop_last=drop_last))


def test_tensor_dataset_batches_equal_pytorchs():
    torch = pytest.importorskip("torch")
    import torch.utils.data as tdata
    x, y = np.arange(20, dtype=np.float32).reshape(10, 2), np.arange(10)
    expected = [structure(b) for b in tdata.DataLoader(tdata.TensorDataset(torch.from_numpy(x),
                                                                           torch.from_numpy(y)), batch_size=4)]
    got = [structure(b) for b in data.DataLoader(data.TensorDataset(md.from_numpy(x), md.from_numpy(y)),
                                                 batch_size=4)]
    assert got == expected and got[0][0] == "list"


def test_random_split_fraction_lengths_equal_pytorchs():
    pytest.importorskip("torch")
    import torch.utils.data as tdata
    for n, fractions in ((10, [0.3, 0.3, 0.4]), (7, [0.5, 0.5]), (11, [0.1, 0.2, 0.7])):
        expected = [len(s) for s in tdata.random_split(range(n), fractions)]
        assert [len(s) for s in data.random_split(range(n), fractions)] == expected


# shuffling ------------------------------------------------------------------------------------
def labels(loader):
    return [int(v) for b in loader for v in b[1].numpy()]


def dataset(n=12):
    return data.TensorDataset(md.from_numpy(np.zeros((n, 2), np.float32)), md.from_numpy(np.arange(n)))


def test_every_shuffled_epoch_is_a_new_permutation_reproducible_under_manual_seed():
    loader = data.DataLoader(dataset(), batch_size=5, shuffle=True)
    md.manual_seed(4)
    epochs = [labels(loader) for _ in range(3)]
    assert all(sorted(e) == list(range(12)) for e in epochs)
    assert epochs[0] != epochs[1] != epochs[2]
    md.manual_seed(4)
    assert [labels(loader) for _ in range(3)] == epochs


def test_shuffle_from_a_numpy_generator():
    def run(seed):
        return labels(data.DataLoader(dataset(), batch_size=5, shuffle=True,
                                      generator=np.random.default_rng(seed)))
    assert run(1) == run(1) != run(2)


def test_random_sampler_with_replacement_and_num_samples():
    sampler = data.RandomSampler(range(5), replacement=True, num_samples=50, generator=np.random.default_rng(0))
    draws = list(sampler)
    assert len(draws) == len(sampler) == 50 and set(draws) <= set(range(5)) and len(set(draws)) > 1
    more = list(data.RandomSampler(range(4), num_samples=10, generator=np.random.default_rng(0)))
    assert len(more) == 10 and sorted(more[:4]) == sorted(more[4:8]) == [0, 1, 2, 3]


def test_batch_sampler_and_custom_sampler():
    assert list(data.BatchSampler(data.SequentialSampler(range(7)), 3, drop_last=False)) == [[0, 1, 2], [3, 4, 5],
                                                                                              [6]]
    assert len(data.BatchSampler(range(7), 3, drop_last=True)) == 2
    loader = data.DataLoader(dataset(6), batch_sampler=[[5, 0], [2]])
    assert [b[1].numpy().tolist() for b in loader] == [[5, 0], [2]]
    loader = data.DataLoader(dataset(6), sampler=[3, 1, 4], batch_size=2)
    assert labels(loader) == [3, 1, 4]


# datasets ------------------------------------------------------------------------------------
def test_subset_concat_and_random_split():
    ds = Samples("tuple", n=10)
    sub = data.Subset(ds, [7, 2])
    assert len(sub) == 2 and sub[0][1] == 7
    both = data.ConcatDataset([sub, Samples("tuple", n=3)])
    assert len(both) == 5 and [both[i][1] for i in range(5)] == [7, 2, 0, 1, 2] and both[-1][1] == 2
    assert len(sub + sub) == 4
    parts = data.random_split(ds, [6, 4], generator=np.random.default_rng(0))
    seen = sorted(p[i][1] for p in parts for i in range(len(p)))
    assert [len(p) for p in parts] == [6, 4] and seen == list(range(10))
    md.manual_seed(2)
    a = [p.indices for p in data.random_split(ds, [0.5, 0.5])]
    md.manual_seed(2)
    assert [p.indices for p in data.random_split(ds, [0.5, 0.5])] == a


def test_iterable_dataset_in_the_main_process():
    class Count(data.IterableDataset):
        def __iter__(self):
            return iter(range(7))
    assert [b.numpy().tolist() for b in data.DataLoader(Count(), batch_size=3)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [b.numpy().tolist() for b in data.DataLoader(Count(), batch_size=3, drop_last=True)] == [[0, 1, 2],
                                                                                                    [3, 4, 5]]
    assert [int(b) for b in data.DataLoader(Count(), batch_size=None)] == list(range(7))


def test_minidl_data_names_are_minidl_utils_data_ones():
    import minidl.data
    assert minidl.data.DataLoader is data.DataLoader and minidl.data.TensorDataset is data.TensorDataset
    assert minidl.data.default_collate is data.default_collate and md.utils.data is data


# bad input -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs,error,message", [
    (dict(batch_size=0), ValueError, "batch_size should be a positive integer value, but got batch_size=0"),
    (dict(batch_size=2.5), ValueError, "but got batch_size=2.5"),
    (dict(sampler=[0, 1], shuffle=True), ValueError, "sampler option is mutually exclusive with shuffle"),
    (dict(batch_sampler=[[0]], batch_size=2), ValueError, "batch_sampler option is mutually exclusive"),
    (dict(batch_size=None, drop_last=True), ValueError, "mutually exclusive with drop_last"),
    (dict(num_workers=-1), ValueError, "num_workers option should be non-negative"),
    (dict(persistent_workers=True), ValueError, "persistent_workers option needs num_workers > 0"),
    (dict(prefetch_factor=2), ValueError, "prefetch_factor option could only be specified in multiprocessing"),
    (dict(timeout=-1), ValueError, "timeout option should be non-negative"),
    (dict(generator=42), TypeError, "generator must be None, a minidl.Generator or a numpy.random.Generator, got int"),
    (dict(num_workers=1, multiprocessing_context="teleport"), ValueError, "valid start method"),
])
def test_bad_loader_arguments(kwargs, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        data.DataLoader(dataset(), **kwargs)


def test_iterable_dataset_refuses_shuffle_and_samplers():
    class Count(data.IterableDataset):
        def __iter__(self):
            return iter(range(3))
    with pytest.raises(ValueError, match="IterableDataset: expected unspecified shuffle option, but got shuffle=True"):
        data.DataLoader(Count(), shuffle=True)
    with pytest.raises(TypeError, match="no __getitem__"):
        Count()[0]


def test_collate_errors_name_what_came():
    with pytest.raises(TypeError, match="batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                                        "found <class 'object'>"):
        data.default_collate([object(), object()])
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
        data.default_collate([[1, 2], [3]])


def test_random_split_bad_lengths():
    with pytest.raises(ValueError, match=r"Sum of input lengths does not equal the length of the input dataset! "
                                         r"\(lengths sum to 9, the dataset has 10\)"):
        data.random_split(range(10), [5, 4])
    with pytest.raises(ValueError, match="non-negative integers"):
        data.random_split(range(10), [11, -1])
    with pytest.raises(AssertionError, match="datasets should not be an empty iterable"):
        data.ConcatDataset([])
