"""DistributedSampler: PyTorch's split and padding rule, the same order on every rank per
epoch, and its argument checks."""
import math

import pytest

import minidl as md
import minidl.distributed as dist
from minidl.distributed.testing import run_ranks
from minidl.utils.data import DataLoader, TensorDataset
from minidl.utils.data.distributed import DistributedSampler


class Sized:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


def shares(n, k, **kw):
    return [list(DistributedSampler(Sized(n), num_replicas=k, rank=r, **kw)) for r in range(k)]


def test_without_shuffle_rank_r_takes_every_kth_index_and_the_tail_is_padded_from_the_start():
    assert shares(10, 4, shuffle=False) == [[0, 4, 8], [1, 5, 9], [2, 6, 0], [3, 7, 1]]
    assert shares(10, 4, shuffle=False, drop_last=True) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert shares(2, 5, shuffle=False) == [[0], [1], [0], [1], [0]]   # padding longer than the data
    assert shares(0, 3, shuffle=False) == [[], [], []]


@pytest.mark.parametrize("n, k, drop_last", [(10, 4, False), (10, 4, True), (12, 3, False), (7, 2, True),
                                             (3, 8, False)])
def test_lengths_follow_pytorchs_rule(n, k, drop_last):
    got = shares(n, k, drop_last=drop_last, seed=3)
    expected = math.ceil((n - k) / k) if drop_last and n % k else math.ceil(n / k)
    assert [len(s) for s in got] == [expected] * k
    assert all(len(DistributedSampler(Sized(n), k, r, drop_last=drop_last)) == expected for r in range(k))


def test_shuffled_shares_are_disjoint_cover_the_data_and_change_with_the_epoch():
    n, k = 23, 4
    first = shares(n, k, seed=5)
    flat = [i for s in first for i in s]
    assert sorted(set(flat)) == list(range(n)) and len(flat) == 24     # 23 + one padded index
    samplers = [DistributedSampler(Sized(n), k, r, seed=5) for r in range(k)]
    for s in samplers:
        s.set_epoch(1)
    second = [list(s) for s in samplers]
    assert second != first
    assert shares(n, k, seed=5) == first                           # epoch 0 again: the same order
    assert shares(n, k, seed=6) != first


def test_matches_pytorchs_distributed_sampler_without_shuffle():
    torch = pytest.importorskip("torch")
    from torch.utils.data.distributed import DistributedSampler as TorchSampler
    for n, k, drop_last in [(10, 4, False), (10, 4, True), (2, 5, False), (17, 3, True), (9, 3, False)]:
        for r in range(k):
            theirs = list(TorchSampler(list(range(n)), num_replicas=k, rank=r, shuffle=False, drop_last=drop_last))
            assert list(DistributedSampler(Sized(n), k, r, shuffle=False, drop_last=drop_last)) == theirs
    assert torch is not None


def test_with_shuffle_the_padding_repeats_the_permutations_beginning_as_pytorch():
    n, k = 10, 4
    got = shares(n, k, seed=11)
    order = md.randperm(n, generator=md.Generator().manual_seed(11)).tolist()
    padded = order + order[:2]
    assert got == [padded[r::k] for r in range(k)]


def test_num_replicas_and_rank_come_from_the_group():
    def body(rank):
        s = DistributedSampler(Sized(9), shuffle=False)
        return s.num_replicas, s.rank, list(s)
    assert run_ranks(3, body) == [(3, r, [r, r + 3, r + 6]) for r in range(3)]


def test_without_a_group_num_replicas_must_be_given():
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        DistributedSampler(Sized(4))


@pytest.mark.parametrize("kw, error, match", [
    (dict(num_replicas=2, rank=2), ValueError, r"Invalid rank 2, rank should be in the interval \[0, 1\]"),
    (dict(num_replicas=2, rank=-1), ValueError, "Invalid rank -1"),
    (dict(num_replicas=0, rank=0), ValueError, "at least 1"),
    (dict(num_replicas=2.0, rank=0), TypeError, "num_replicas must be an int"),
    (dict(num_replicas=2, rank=0, shuffle="yes"), TypeError, "shuffle must be a bool"),
])
def test_bad_arguments(kw, error, match):
    with pytest.raises(error, match=match):
        DistributedSampler(Sized(4), **kw)
    with pytest.raises(TypeError, match="epoch must be an int"):
        DistributedSampler(Sized(4), 1, 0).set_epoch(1.5)


def test_drives_a_dataloader():
    ds = TensorDataset(md.arange(10))
    loader = DataLoader(ds, batch_size=2, sampler=DistributedSampler(ds, num_replicas=2, rank=1, shuffle=False))
    assert [b[0].tolist() for b in loader] == [[1, 3], [5, 7], [9]]
