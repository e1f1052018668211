"""DataLoader worker processes: the same batches in the same order as num_workers=0, distinct
per-worker seeds (base_seed + worker_id) and get_worker_info(), persistent workers, iterable
datasets split across workers, and failures that raise in the main process instead of
hanging (a worker's exception, a dead worker, a timeout)."""
import os
import signal
import time

import numpy as np
import pytest

import minidl as md
from minidl.utils import data

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGALRM"), reason="the no-hang guard needs SIGALRM")


@pytest.fixture(autouse=True)
def no_hang():
    """Fail, rather than hang the suite, if a test waits on its workers for too long."""
    def expire(*_):
        raise TimeoutError("the DataLoader test took more than 60 s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


class Squares(data.Dataset):
    def __init__(self, n=11, fail_at=None, exit_at=None, sleep=0.0):
        self.n, self.fail_at, self.exit_at, self.sleep = n, fail_at, exit_at, sleep

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.fail_at:
            raise ValueError(f"sample {i} is corrupt")
        if i == self.exit_at:
            os._exit(3)
        time.sleep(self.sleep)
        info = data.get_worker_info()
        return {"x": np.full(2, i * i, np.float64), "i": i, "worker": -1 if info is None else info.id}


def batches(loader):
    return [(b["x"].numpy().tolist(), b["i"].numpy().tolist()) for b in loader]


@pytest.mark.parametrize("shuffle", [False, True])
def test_workers_give_the_batches_of_the_main_process(shuffle):
    md.manual_seed(5)
    expected = batches(data.DataLoader(Squares(), batch_size=3, shuffle=shuffle))
    md.manual_seed(5)
    loader = data.DataLoader(Squares(), batch_size=3, shuffle=shuffle, num_workers=2, timeout=20)
    assert batches(loader) == expected
    workers = {w for b in loader for w in b["worker"].numpy().tolist()}
    assert workers == {0, 1}                                 # the batches really came from both workers


def test_workers_are_seeded_base_seed_plus_id_and_run_worker_init_fn():
    class Seeds(data.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            info = data.get_worker_info()
            return np.array([info.id, info.seed, info.num_workers, md.random.generator().integers(1 << 30),
                             os.environ.get("MINIDL_TEST_WORKER", -1)], dtype=np.int64)

    def init(worker_id):
        os.environ["MINIDL_TEST_WORKER"] = str(worker_id * 10)

    def run():
        loader = data.DataLoader(Seeds(), batch_size=1, num_workers=2, worker_init_fn=init, timeout=20)
        return np.concatenate([b.numpy() for b in loader])
    md.manual_seed(0)
    rows = run()
    ids, seeds = rows[:, 0], rows[:, 1]
    assert ids.tolist() == [0, 1, 0, 1] and rows[:, 2].tolist() == [2] * 4 and rows[:, 4].tolist() == [0, 10, 0, 10]
    assert seeds[1] == seeds[0] + 1 and seeds[2] == seeds[0]
    assert rows[0, 3] != rows[1, 3]                           # the workers' minidl generators differ
    md.manual_seed(0)
    np.testing.assert_array_equal(run(), rows)                # and are reproducible under md.manual_seed
    assert data.get_worker_info() is None                     # in the main process


def test_persistent_workers_serve_several_epochs():
    loader = data.DataLoader(Squares(), batch_size=4, num_workers=2, persistent_workers=True, timeout=20)
    first = batches(loader)
    it = iter(loader)
    next(it)                                                  # an epoch abandoned after one batch
    assert batches(loader) == first == batches(data.DataLoader(Squares(), batch_size=4))
    assert loader._iterator is it


def test_iterable_dataset_split_across_workers():
    class Range(data.IterableDataset):
        def __iter__(self):
            info = data.get_worker_info()
            start, step = (0, 1) if info is None else (info.id, info.num_workers)
            return iter(range(start, 10, step))
    loader = data.DataLoader(Range(), batch_size=2, num_workers=2, timeout=20)
    got = [b.numpy().tolist() for b in loader]
    assert got == [[0, 2], [1, 3], [4, 6], [5, 7], [8], [9]]      # round-robin over the workers, as PyTorch
    assert sorted(v for b in got for v in b) == list(range(10))


def test_a_worker_exception_is_raised_in_the_main_process():
    loader = data.DataLoader(Squares(fail_at=4), batch_size=2, num_workers=2, timeout=20)
    it = iter(loader)
    assert next(it)["i"].numpy().tolist() == [0, 1]
    with pytest.raises(ValueError, match=r"(?s)Caught ValueError in DataLoader worker process 0\..*"
                                         r"sample 4 is corrupt"):
        for _ in it:
            pass


def test_an_exception_in_worker_init_fn_is_raised():
    def init(worker_id):
        raise KeyError("no config")
    with pytest.raises(KeyError, match="Caught KeyError in DataLoader worker process"):
        list(data.DataLoader(Squares(), num_workers=1, worker_init_fn=init, timeout=20))


def test_a_dead_worker_is_reported_not_waited_for():
    loader = data.DataLoader(Squares(exit_at=3), batch_size=2, num_workers=2)
    with pytest.raises(RuntimeError, match="DataLoader worker exited unexpectedly .*exit code 3"):
        list(loader)


def test_timeout_raises():
    loader = data.DataLoader(Squares(n=2, sleep=1.5), batch_size=1, num_workers=1, timeout=0.3)
    with pytest.raises(RuntimeError, match="DataLoader timed out after 0.3 seconds"):
        next(iter(loader))


def test_spawned_workers():
    ds = data.TensorDataset(md.from_numpy(np.arange(12.0).reshape(6, 2)), md.from_numpy(np.arange(6)))
    loader = data.DataLoader(ds, batch_size=4, num_workers=1, multiprocessing_context="spawn", timeout=60)
    got = [[t.numpy().tolist() for t in b] for b in loader]
    assert got == [[t.numpy().tolist() for t in b] for b in data.DataLoader(ds, batch_size=4)]
