"""minidl.distributed under a real ``mpiexec -n 2`` (mpi4py over MPICH from the dev extra):
collectives, DDP training that keeps the ranks bit-identical and equals one process at twice
the batch, and errors that end the job instead of hanging it. Each rank runs with one
Numba/BLAS thread; every run has a timeout. Skipped where mpi4py or mpiexec is missing."""
import textwrap
import time

import pytest

from minidl.distributed.testing import mpiexec_path, run_mpiexec

pytestmark = pytest.mark.skipif(mpiexec_path() is None, reason="needs mpi4py and an mpiexec")

TRAINING = textwrap.dedent('''
    import numpy as np
    import minidl as md
    import minidl.distributed as dist
    import minidl.nn as nn
    import minidl.optim as optim
    from minidl.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("mpi")
    rank, k = dist.get_rank(), dist.get_world_size()
    assert k == 2, k

    # collectives
    t = md.tensor([rank + 1.0, 10.0 * rank], dtype=md.float64)
    dist.all_reduce(t)
    assert t.tolist() == [3.0, 10.0], t
    m = md.tensor([float(rank)])
    dist.all_reduce(m, op=dist.ReduceOp.MAX, async_op=True).wait()
    assert m.item() == 1.0
    a = md.tensor([1.5, 2.5], dtype=md.float16)
    dist.all_reduce(a, op=dist.ReduceOp.AVG)
    assert a.dtype == md.float16 and a.tolist() == [1.5, 2.5]
    b = md.tensor([float(rank)] * 3)
    dist.broadcast(b, src=1)
    assert b.tolist() == [1.0] * 3
    g = [md.zeros(2) for _ in range(k)]
    dist.all_gather(g, md.tensor([rank, rank + 0.5]))
    assert [x.tolist() for x in g] == [[0.0, 0.5], [1.0, 1.5]]
    out = md.zeros(2)
    dist.reduce_scatter_tensor(out, md.tensor([1.0, 2.0, 3.0, 4.0]) * (rank + 1))
    assert out.tolist() == ([3.0, 6.0] if rank == 0 else [9.0, 12.0]), out
    dist.barrier()

    # DDP: k ranks at batch B equal one process at batch k*B, and stay bit-identical
    rng = np.random.default_rng(1)
    batches = [(rng.standard_normal((8, 6)), rng.standard_normal((8, 2))) for _ in range(4)]

    def model(seed):
        md.manual_seed(seed)
        return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 2)).double()

    def train(net, shard):
        opt = optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        for x, y in batches:
            x, y = x[shard], y[shard]
            opt.zero_grad()
            ((net(md.tensor(x)) - md.tensor(y)) ** 2).mean().backward()
            opt.step()
        return net

    ddp = train(DDP(model(rank), bucket_cap_mb=0.0002), slice(4 * rank, 4 * rank + 4))
    mine = np.concatenate([p.detach().numpy().ravel() for p in ddp.parameters()])
    both = md.zeros(2, mine.size, dtype=md.float64)
    dist.all_gather_into_tensor(both, md.tensor(mine))
    both = both.numpy()
    assert both[0].tobytes() == both[1].tobytes(), "parameters differ across ranks"
    ref = np.concatenate([p.detach().numpy().ravel() for p in train(model(0), slice(0, 8)).parameters()])
    assert np.abs(ref - mine).max() < 1e-12, np.abs(ref - mine).max()
    assert ddp.last_reduction["buckets"] > 1
    print(f"rank {rank} ok", flush=True)
''')

ERRORS = textwrap.dedent('''
    import sys
    import time
    import minidl as md
    import minidl.distributed as dist
    import minidl.nn as nn
    from minidl.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("mpi")
    rank = dist.get_rank()
    log = []                                 # a file per rank: MPI_Abort may cut the job's stdout short
    try:
        dist.all_reduce(md.zeros(2 + rank))
    except RuntimeError as e:
        log.append(f"caught: {e}")
    try:
        DDP(nn.Linear(3, 4 + rank))
    except RuntimeError as e:
        log.append(f"caught: {e}")
    t = md.ones(1)
    dist.all_reduce(t)                       # still in step after both errors
    log.append(f"in step: {t.item()}")
    with open(f"{sys.argv[1]}/rank{rank}.txt", "w") as f:
        f.write("\\n".join(log))
    dist.barrier()
    if rank == 1:
        raise SystemError("rank 1 stops")    # uncaught: must end the job, not leave rank 0 waiting
    dist.all_reduce(t)
    time.sleep(60)
''')


def test_collectives_and_ddp_training_under_mpiexec(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TRAINING)
    proc = run_mpiexec(script, n=2, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rank 0 ok" in proc.stdout and "rank 1 ok" in proc.stdout


def test_mismatches_raise_on_every_rank_and_an_uncaught_error_ends_the_job(tmp_path):
    script = tmp_path / "errors.py"
    script.write_text(ERRORS)
    start = time.monotonic()
    proc = run_mpiexec(script, n=2, args=[tmp_path], timeout=120)
    assert time.monotonic() - start < 50            # not the rank that sleeps 60 s: the job was aborted
    assert proc.returncode != 0
    for rank in (0, 1):
        log = (tmp_path / f"rank{rank}.txt").read_text().splitlines()
        assert log[0] == (f"caught: rank {rank}: collective #0 differs across ranks (shape): rank 0 called all_reduce "
                          "of a float32 tensor of shape (2,) with ReduceOp.SUM, rank 1 called all_reduce of a float32 "
                          "tensor of shape (3,) with ReduceOp.SUM")
        assert log[1].startswith("caught: DistributedDataParallel: parameter 0 (named 'weight' here")
        assert "shape (4, 3) and dtype float32 on rank 0, shape (5, 3) and dtype float32 on rank 1" in log[1]
        assert log[2] == "in step: 2.0"
    assert "SystemError: rank 1 stops" in proc.stderr
    assert "aborting all 2 ranks" in proc.stderr
