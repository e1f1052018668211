"""minidl.distributed's point-to-point messages (send, recv, isend, irecv, batch_isend_irecv), object
collectives, rank helpers and monitored_barrier: PyTorch's semantics over k ranks run as threads
(run_ranks), its error types for bad input, clear errors (not hangs) for calls that do not match across
ranks; and, for the whole of this surface (the rooted collectives and all-to-alls of
test_distributed_rooted_all_to_all.py included), values and error types against PyTorch and one run under a
real ``mpiexec -n 2``."""
import datetime
import textwrap
import time

import numpy as np
import pytest

import minidl as md
import minidl.distributed as dist
from minidl.distributed.testing import mpiexec_path, run_mpiexec, run_ranks

KS = [1, 2, 3]


def _values(rank, shape=(2, 3), dtype=np.float64):
    return (np.arange(np.prod(shape)).reshape(shape) * (rank + 1) + rank).astype(dtype)


def _raises(exc, match, fn, *args, **kwargs):
    with pytest.raises(exc, match=match):
        fn(*args, **kwargs)


# -- point to point ----------------------------------------------------------------------------------

@pytest.mark.parametrize("k", [2, 3])
def test_send_and_recv_around_a_ring(k):
    def body(rank):
        nxt, prv = (rank + 1) % k, (rank - 1) % k
        got = md.zeros(2, 3, dtype=md.float64)
        if rank == 0:           # a blocking ring works once one rank receives first
            assert dist.send(md.tensor(_values(rank)), dst=nxt) is None
            assert dist.recv(got, src=prv) == prv
        else:
            assert dist.recv(got, src=prv) == prv
            dist.send(md.tensor(_values(rank)), dst=nxt)
        return got.numpy()
    for rank, got in enumerate(run_ranks(k, body)):
        np.testing.assert_array_equal(got, _values((rank - 1) % k))


def test_recv_from_any_source_returns_the_sender_and_tags_pick_the_message():
    def body(rank):
        if rank == 0:
            seen = {}
            for _ in range(2):
                t = md.zeros(1)
                src = dist.recv(t, tag=7)
                seen[src] = t.item()
            a, b = md.zeros(1), md.zeros(1)
            wb = dist.irecv(b, src=1, tag=2)            # posted first, but matches only tag 2
            wa = dist.irecv(a, src=1, tag=1)
            wa.wait()
            wb.wait()
            return seen, a.item(), b.item(), wb._source_rank()
        dist.send(md.tensor([10.0 * rank]), dst=0, tag=7)
        if rank == 1:
            dist.send(md.tensor([1.0]), dst=0, tag=1)
            dist.send(md.tensor([2.0]), dst=0, tag=2)
    assert run_ranks(3, body)[0] == ({1: 10.0, 2: 20.0}, 1.0, 2.0, 1)


def test_isend_irecv_works_complete_when_the_message_arrives():
    def body(rank):
        if rank == 1:
            t = md.zeros(3, dtype=md.int64)
            work = dist.irecv(t, src=0)
            assert isinstance(work, dist.Work) and not work.is_completed()
            dist.barrier()                      # rank 0 sends after the barrier
            assert work.wait() and work.is_completed() and work.is_success()
            return t.tolist()
        dist.barrier()
        work = dist.isend(md.tensor([4, 5, 6]), dst=1)
        work.wait()
        return work.is_completed()
    assert run_ranks(2, body) == [True, [4, 5, 6]]


def test_messages_between_a_pair_arrive_in_order_and_a_rank_may_isend_to_itself():
    def body(rank):
        if rank == 0:
            for i in range(4):
                dist.isend(md.tensor([float(i)]), dst=1)
            me = md.zeros(1)
            w = dist.irecv(me, src=0)
            dist.isend(md.tensor([9.0]), dst=0).wait()
            w.wait()
            return me.item()
        got = []
        for _ in range(4):
            t = md.zeros(1)
            dist.recv(t, src=0)
            got.append(t.item())
        return got
    assert run_ranks(2, body) == [9.0, [0.0, 1.0, 2.0, 3.0]]


def test_a_world_of_one_sends_to_itself_with_isend_and_irecv():
    def body(rank):
        t = md.zeros(2)
        w = dist.irecv(t)
        dist.isend(md.tensor([1.0, 2.0]), dst=0)
        w.wait()
        with pytest.raises(RuntimeError, match="can never complete: the sender is this rank"):
            dist.recv(md.zeros(1), src=0)
        return t.tolist(), w._source_rank()
    assert run_ranks(1, body) == [([1.0, 2.0], 0)]


@pytest.mark.parametrize("k", KS)
def test_send_recv_bad_input(k):
    def body(rank):
        x = md.ones(2)
        _raises(ValueError, "Invalid destination rank: destination rank should not be the same", dist.send, x, rank)
        _raises(RuntimeError, f"invalid destination rank: {k}", dist.send, x, k)
        _raises(RuntimeError, f"invalid destination rank: {k}", dist.isend, x, k)
        _raises(RuntimeError, f"invalid source rank: {k}", dist.recv, x, k)
        _raises(ValueError, "Must specify global_rank or group_rank", dist.send, x)
        _raises(RuntimeError, "Tag must be nonnegative", dist.isend, x, 0, tag=-1)
        _raises(TypeError, "Expected parameter `tensor`", dist.isend, x.numpy(), 0)
        _raises(TypeError, "Expected parameter `tensor`", dist.irecv, 3.0, 0)
    run_ranks(k, body)


def test_a_send_that_does_not_fit_the_recv_raises_on_the_receiver_naming_both():
    def body(rank):
        if rank == 0:
            dist.send(md.zeros(3), dst=1)
            dist.send(md.zeros(2, dtype=md.float64), dst=1)
            dist.send(md.tensor([5.0]), dst=1)
            return None
        with pytest.raises(RuntimeError, match=r"rank 1: recv of a float32 tensor of shape \(2,\) \(tag 0\) met "
                                               r"rank 0's send of a float32 tensor of shape \(3,\)"):
            dist.recv(md.zeros(2), src=0)
        with pytest.raises(RuntimeError, match="float32 tensor of shape \\(2,\\).*float64 tensor of shape \\(2,\\)"):
            dist.recv(md.zeros(2), src=0)
        t = md.zeros(1)
        dist.recv(t, src=0)             # still in step
        return t.item()
    assert run_ranks(2, body) == [None, 5.0]


def test_a_recv_whose_sender_finished_fails_at_once_and_a_late_one_times_out():
    def body(rank):
        if rank == 1:
            dist.recv(md.zeros(1), src=0)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="recv from rank 0 \\(tag 0\\) can never complete: rank 0 has finished"):
        run_ranks(2, body, timeout=30)

    def late(rank):
        if rank == 1:
            dist.irecv(md.zeros(1), src=0).wait(timeout=datetime.timedelta(seconds=0.2))
        else:
            time.sleep(0.6)
            dist.send(md.zeros(1), dst=1)
    with pytest.raises(RuntimeError, match=r"rank 1: recv of a float32 .* timed out after 0.2 s waiting for rank 0"):
        run_ranks(2, late, timeout=30, concurrent=True)
    assert time.monotonic() - start < 10


@pytest.mark.parametrize("k", KS)
def test_batch_isend_irecv_exchanges_around_a_ring_in_any_list_order(k):
    def body(rank):
        nxt, prv = (rank + 1) % k, (rank - 1) % k
        got = md.zeros(4, dtype=md.float64)
        ops = [dist.P2POp(dist.isend, md.full((4,), float(rank), dtype=md.float64), nxt),
               dist.P2POp(dist.irecv, got, prv)]
        works = dist.batch_isend_irecv(ops if rank % 2 else ops[::-1])
        assert len(works) == 2 and all(isinstance(w, dist.Work) for w in works)
        for w in works:
            w.wait()
        return got.tolist(), "isend" in repr(ops[0])
    for rank, (got, named) in enumerate(run_ranks(k, body)):
        assert got == [float((rank - 1) % k)] * 4 and named


def test_batch_isend_irecv_bad_input():
    def body(rank):
        _raises(ValueError, "Invalid ``op``", dist.P2POp, dist.send, md.ones(1), 0)
        _raises(TypeError, "Expected parameter `tensor`", dist.P2POp, dist.isend, [1.0], 0)
        _raises(ValueError, "Must specify global_rank or group_rank", dist.P2POp, dist.isend, md.ones(1))
        _raises(ValueError, "Each op is expected to to be of type", dist.batch_isend_irecv, [md.ones(1)])
        _raises(ValueError, "Each op is expected", dist.batch_isend_irecv, (dist.P2POp(dist.irecv, md.ones(1), 0),))
        _raises(IndexError, "p2p_op_list is empty", dist.batch_isend_irecv, [])
    run_ranks(2, body)


# -- objects -------------------------------------------------------------------------------------------

def _obj(rank):
    return {"rank": rank, "name": "r" * (3 * rank + 1), "array": np.arange(rank + 1)}


def _same(a, b):
    return a.keys() == b.keys() and a["name"] == b["name"] and np.array_equal(a["array"], b["array"])


@pytest.mark.parametrize("k", KS)
def test_all_gather_object_and_gather_object(k):
    def body(rank):
        everyone = [None] * k
        assert dist.all_gather_object(everyone, _obj(rank)) is None
        gathered = [None] * k if rank == k - 1 else None
        dist.gather_object(_obj(10 + rank), gathered, dst=k - 1)
        return everyone, gathered
    for rank, (everyone, gathered) in enumerate(run_ranks(k, body)):
        assert all(_same(everyone[r], _obj(r)) for r in range(k))
        assert (gathered is None) == (rank != k - 1)
        assert gathered is None or all(_same(gathered[r], _obj(10 + r)) for r in range(k))


@pytest.mark.parametrize("k", KS)
def test_broadcast_object_list_and_scatter_object_list(k):
    def body(rank):
        objects = ["foo", 12, {1: (2, None)}] if rank == k - 1 else [None, None, None]
        dist.broadcast_object_list(objects, src=k - 1)
        mine = [None]
        dist.scatter_object_list(mine, [_obj(r) for r in range(k)] if rank == 0 else None)
        return objects, mine[0]
    for rank, (objects, mine) in enumerate(run_ranks(k, body)):
        assert objects == ["foo", 12, {1: (2, None)}] and _same(mine, _obj(rank))


@pytest.mark.parametrize("k", [2, 3])
def test_send_object_list_and_recv_object_list(k):
    def body(rank):
        if rank == k - 1:
            dist.send_object_list([_obj(rank), "x", None], dst=0)
            return None
        if rank == 0:
            got = [None, None, None]
            return dist.recv_object_list(got), got
        return None
    sender, got = run_ranks(k, body)[0]
    assert sender == k - 1 and _same(got[0], _obj(k - 1)) and got[1:] == ["x", None]


def test_object_calls_bad_input():
    def body(rank):
        if rank == 0:
            _raises(ValueError, "``gather_list`` must be specified on destination rank", dist.gather_object, 1, None)
            _raises(ValueError, "source rank must provide non-None scatter_object_input_list",
                    dist.scatter_object_list, [None], None)
        else:
            _raises(ValueError, "must NOT be specified on non-destination ranks", dist.gather_object, 1, [None] * 2)
        _raises(ValueError, "scatter_object_output_list to be a list of size at least 1", dist.scatter_object_list,
                [], [1, 2])
        _raises(ValueError, "Invalid destination rank", dist.send_object_list, [1], dst=rank)
        _raises(RuntimeError, "invalid root rank: 5", dist.broadcast_object_list, [1], src=5)
        if rank == 0:
            dist.send_object_list([1, 2, 3], dst=1)
            return None
        with pytest.raises(RuntimeError, match=r"recv of a int64 tensor of shape \(2,\).*int64 tensor of shape \(3,\)"):
            dist.recv_object_list([None, None], src=0)
        return "raised"
    assert run_ranks(2, body) == [None, "raised"]


# -- helpers -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("k", KS)
def test_rank_helpers(k):
    def body(rank):
        g = dist.new_group()
        assert dist.get_process_group_ranks(g) == dist.get_process_group_ranks(None) == list(range(k))
        assert dist.get_global_rank(g, k - 1) == k - 1 and dist.get_group_rank(g, rank) == rank
        assert dist.get_global_rank(dist.group.WORLD, 7) == 7       # WORLD: identity, unchecked (as PyTorch)
        _raises(ValueError, f"Group rank {k} is not part of group", dist.get_global_rank, g, k)
        _raises(ValueError, "Global rank -1 is not part of group", dist.get_group_rank, g, -1)
        assert not dist.is_torchelastic_launched()
        return dist.get_node_local_rank()
    assert run_ranks(k, body) == list(range(k))


def test_get_node_local_rank_outside_a_threaded_world(monkeypatch):
    for name in ("LOCAL_RANK", "MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(RuntimeError, match="LOCAL_RANK is not in the environment"):
        dist.get_node_local_rank()
    assert dist.get_node_local_rank(fallback_rank=3) == 3
    monkeypatch.setenv("MPI_LOCALRANKID", "1")
    assert dist.get_node_local_rank(fallback_rank=3) == 1
    monkeypatch.setenv("LOCAL_RANK", "2")
    assert dist.get_node_local_rank() == 2


# -- monitored_barrier -----------------------------------------------------------------------------

@pytest.mark.parametrize("k", KS)
def test_monitored_barrier_passes_when_every_rank_arrives(k):
    def body(rank):
        for wait_all in (False, True):
            assert dist.monitored_barrier(timeout=datetime.timedelta(seconds=5), wait_all_ranks=wait_all) is None
        return "passed"
    assert run_ranks(k, body) == ["passed"] * k


@pytest.mark.parametrize("wait_all, reported", [(False, "Rank 1"), (True, "Ranks 1, 2")])
def test_monitored_barrier_names_the_ranks_that_did_not_arrive(wait_all, reported):
    def body(rank):
        if rank:
            time.sleep(0.5)
        try:
            dist.monitored_barrier(timeout=datetime.timedelta(seconds=0.2), wait_all_ranks=wait_all)
        except RuntimeError as exc:
            return str(exc)
    messages = run_ranks(3, body, concurrent=True, timeout=30)
    assert messages[0] == f"[Rank 0]: {reported} failed to pass monitoredBarrier in 200 ms"
    for rank in (1, 2):
        assert messages[rank] == (f"[Rank {rank}]: Rank {rank} successfully reached monitoredBarrier, but rank 0 "
                                  f"reported that {reported} failed to pass monitoredBarrier in 200 ms")


# -- empty and cuda tensors ------------------------------------------------------------------------

def test_empty_tensors_pass_through():
    def body(rank):
        dist.reduce(md.zeros(0), dst=0)
        dist.gather(md.zeros(0), [md.zeros(0), md.zeros(0)] if rank == 0 else None)
        dist.all_to_all_single(md.zeros(0), md.zeros(0))
        if rank == 0:
            dist.send(md.zeros(0, 3), dst=1)
        else:
            assert dist.recv(md.zeros(0, 3)) == 0
        return True
    assert run_ranks(2, body) == [True, True]


def test_cuda_tensors_are_staged_through_the_host():
    pytest.importorskip("numba.cuda")
    if not md.cuda.is_available():
        pytest.skip("no cuda device (nor the simulator)")

    def body(rank):
        t = md.tensor([1.0 + rank, 2.0], device="cuda")
        dist.reduce(t, dst=1)
        g = md.zeros(2, device="cuda")
        if rank == 0:
            dist.send(md.tensor([7.0, 8.0], device="cuda"), dst=1)
        else:
            dist.recv(g, src=0)
        out = md.zeros(2, device="cuda")
        dist.all_to_all_single(out, md.tensor([10.0 * rank, 10.0 * rank + 1], device="cuda"))
        return str(g.device), t.cpu().tolist(), g.cpu().tolist(), out.cpu().tolist()
    (d0, t0, _, a0), (d1, t1, g1, a1) = run_ranks(2, body)
    assert d1.startswith("cuda") and t0 == [1.0, 2.0] and t1 == [3.0, 4.0] and g1 == [7.0, 8.0]
    assert a0 == [0.0, 10.0] and a1 == [1.0, 11.0]


# -- against PyTorch (gloo, a world of one: it cannot send to itself) ------------------------------

BAD_CALLS = {
    "reduce dst out of range": lambda d, T: d.reduce(T([1.0]), dst=3),
    "reduce without dst": lambda d, T: d.reduce(T([1.0])),
    "gather without list": lambda d, T: d.gather(T([1.0]), dst=0),
    "gather list too long": lambda d, T: d.gather(T([1.0]), [T([1.0]), T([1.0])], dst=0),
    "gather list shape": lambda d, T: d.gather(T([1.0]), [T([1.0, 2.0])], dst=0),
    "scatter without list": lambda d, T: d.scatter(T([1.0]), src=0),
    "scatter list too long": lambda d, T: d.scatter(T([1.0]), [T([1.0]), T([1.0])], src=0),
    "send to self": lambda d, T: d.send(T([1.0]), dst=0),
    "send without dst": lambda d, T: d.send(T([1.0])),
    "negative tag": lambda d, T: d.isend(T([1.0]), dst=0, tag=-1),
    "split count": lambda d, T: d.all_to_all_single(T([1.0, 2.0]), T([1.0, 2.0]), [1, 1], [2]),
    "split sum": lambda d, T: d.all_to_all_single(T([1.0, 2.0]), T([1.0, 2.0]), [1], [2]),
    "all_to_all list size": lambda d, T: d.all_to_all([T([1.0])] * 2, [T([1.0])]),
    "scatter_object empty output": lambda d, T: d.scatter_object_list([], [1]),
    "scatter_object no input": lambda d, T: d.scatter_object_list([None], None, src=0),
    "P2POp op": lambda d, T: d.P2POp(d.send, T([1.0]), 0),
    "batch not P2POp": lambda d, T: d.batch_isend_irecv([T([1.0])]),
    "batch empty": lambda d, T: d.batch_isend_irecv([]),
}


@pytest.fixture
def torch_world(tmp_path):
    torch = pytest.importorskip("torch")
    tdist = pytest.importorskip("torch.distributed")
    if not tdist.is_gloo_available():
        pytest.skip("torch without gloo")
    tdist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    dist.init_process_group("mpi")
    yield torch, tdist
    dist.destroy_process_group()
    tdist.destroy_process_group()


def test_values_and_error_types_match_torch(torch_world):
    torch, tdist = torch_world
    for d, T in ((dist, md.tensor), (tdist, torch.tensor)):
        t = T([1.0, 2.0])
        d.reduce(t, dst=0)
        g = [T([0.0, 0.0])]
        d.gather(T([3.0, 4.0]), g, dst=0)
        s = T([0.0])
        d.scatter(s, [T([5.0])], src=0)
        out = T([0.0, 0.0, 0.0])
        d.all_to_all_single(out, T([6.0, 7.0, 8.0]), [3], [3])
        objs, bcast, mine = [None], [{"a": 1}, "b"], [None]
        d.all_gather_object(objs, ("x", 2))
        d.broadcast_object_list(bcast, src=0)
        d.scatter_object_list(mine, [[1, 2]], src=0)
        assert t.tolist() == [1.0, 2.0] and g[0].tolist() == [3.0, 4.0] and s.tolist() == [5.0]
        assert out.tolist() == [6.0, 7.0, 8.0]
        assert objs == [("x", 2)] and bcast == [{"a": 1}, "b"] and mine == [[1, 2]]
        assert d.get_process_group_ranks(None) == [0] and not d.is_torchelastic_launched()
    for name, call in BAD_CALLS.items():
        with pytest.raises(Exception) as theirs:
            call(tdist, torch.tensor)
        with pytest.raises(Exception) as ours:
            call(dist, md.tensor)
        assert type(ours.value) is type(theirs.value), (name, ours.value, theirs.value)


# -- under mpiexec -------------------------------------------------------------------------------------

MPI_SCRIPT = textwrap.dedent('''
    import minidl as md
    import minidl.distributed as dist

    dist.init_process_group("mpi")
    rank, k = dist.get_rank(), dist.get_world_size()
    assert k == 2, k
    t = md.tensor([rank + 1.0, 2.0])
    dist.reduce(t, dst=1)
    assert t.tolist() == ([1.0, 2.0] if rank == 0 else [3.0, 4.0]), t
    g = [md.zeros(2) for _ in range(k)] if rank == 0 else None
    dist.gather(md.tensor([rank, rank + 0.5]), g, dst=0, async_op=True).wait()
    assert rank == 1 or [x.tolist() for x in g] == [[0.0, 0.5], [1.0, 1.5]]
    s = md.zeros(2, dtype=md.float16)
    dist.scatter(s, [md.tensor([r, 10.0 * r], dtype=md.float16) for r in range(k)] if rank == 1 else None, src=1)
    assert s.tolist() == [rank, 10.0 * rank], s
    if rank == 0:
        dist.send(md.tensor([5.0, 6.0]), dst=1)
        dist.send(md.tensor([1.0, 2.0, 3.0]), dst=1, tag=3)
        w = dist.irecv(md.zeros(1), src=1, tag=9)
        dist.isend(md.tensor([7.0]), dst=1, tag=8).wait()
        w.wait()
    else:
        r = md.zeros(2)
        assert dist.recv(r) == 0 and r.tolist() == [5.0, 6.0]
        try:
            dist.recv(md.zeros(2), src=0, tag=3)
        except RuntimeError as e:
            print(f"rank 1 caught: {e}", flush=True)
        big = md.zeros(1)
        w = dist.irecv(big, tag=8)
        dist.send(md.tensor([1.0]), dst=0, tag=9)
        w.wait()
        assert big.item() == 7.0 and w._source_rank() == 0
    out = md.zeros(3, dtype=md.float64)         # uneven: rank 0 sends 1 row to 0 and 2 to 1; rank 1 sends 2 and 1
    splits_in = [1, 2] if rank == 0 else [2, 1]
    dist.all_to_all_single(out, md.arange(3, dtype=md.float64) + 10 * rank, [1, 2] if rank == 0 else [2, 1],
                           splits_in)
    assert out.tolist() == ([0.0, 10.0, 11.0] if rank == 0 else [1.0, 2.0, 12.0]), out
    try:
        dist.all_to_all_single(md.zeros(2), md.zeros(2), None, [0, 2] if rank == 0 else None)
    except RuntimeError as e:
        print(f"rank {rank} caught: {e}", flush=True)
    objs = [None] * k
    dist.all_gather_object(objs, {"rank": rank, "pad": "x" * (100 * rank)})
    assert objs == [{"rank": r, "pad": "x" * (100 * r)} for r in range(k)], objs
    dist.monitored_barrier(timeout=10)
    print(f"rank {rank} ok", flush=True)
''')


@pytest.mark.skipif(mpiexec_path() is None, reason="needs mpi4py and an mpiexec")
def test_rooted_p2p_all_to_all_and_objects_under_mpiexec(tmp_path):
    script = tmp_path / "p2p.py"
    script.write_text(MPI_SCRIPT)
    proc = run_mpiexec(script, n=2, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rank 0 ok" in proc.stdout and "rank 1 ok" in proc.stdout
    assert ("rank 1 caught: rank 1: recv of a float32 tensor of shape (2,) (tag 3) met rank 0's send of a float32 "
            "tensor of shape (3,): the dtype and shape must match") in proc.stdout
    for rank in (0, 1):
        assert (f"rank {rank} caught: rank {rank}: collective #4 (all_to_all_single) does not match across ranks: "
                "rank 0 sends 0 element(s) to rank 0, which expects 1 from rank 0") in proc.stdout
