"""minidl.distributed's collectives over k ranks run as threads (run_ranks), and in a world of
one process: PyTorch's semantics, and clear errors (not hangs) for calls that differ across
ranks."""
import datetime

import numpy as np
import pytest

import minidl as md
import minidl.distributed as dist
from minidl.distributed.testing import run_ranks


def _values(rank, shape=(2, 3), dtype=np.float64):
    return (np.arange(np.prod(shape)).reshape(shape) * (rank + 1) + rank).astype(dtype)


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("op, fn", [("SUM", np.sum), ("PRODUCT", np.prod), ("MIN", np.min), ("MAX", np.max),
                                    ("AVG", np.mean)])
def test_all_reduce_every_op(k, op, fn):
    def body(rank):
        t = md.tensor(_values(rank))
        assert dist.all_reduce(t, op=getattr(dist.ReduceOp, op)) is None
        return t.numpy()
    expected = fn(np.stack([_values(r) for r in range(k)]), axis=0)
    for got in run_ranks(k, body):
        np.testing.assert_allclose(got, expected, rtol=1e-15)


def test_all_reduce_gives_every_rank_the_same_bits():
    rng = np.random.default_rng(0)
    data = rng.standard_normal((4, 1000)).astype(np.float32)

    def body(rank):
        t = md.tensor(data[rank])
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        return t.numpy()
    out = run_ranks(4, body)
    for o in out[1:]:
        assert o.tobytes() == out[0].tobytes()


@pytest.mark.parametrize("op, expected", [("BAND", 0b0100), ("BOR", 0b1111), ("BXOR", 0b1100 ^ 0b0110 ^ 0b0101)])
def test_all_reduce_bitwise_on_integers(op, expected):
    ints = [0b1100, 0b0110, 0b0101]

    def body(rank):
        t = md.tensor([ints[rank]], dtype=md.int64)
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        return int(t.item())
    assert run_ranks(3, body) == [expected] * 3


def test_reduce_op_that_does_not_apply_to_the_dtype_raises():
    def body(rank):
        with pytest.raises(ValueError, match="ReduceOp.BAND needs an integer"):
            dist.all_reduce(md.ones(2), op=dist.ReduceOp.BAND)
        with pytest.raises(ValueError, match="ReduceOp.AVG needs a floating-point"):
            dist.all_reduce(md.ones(2, dtype=md.int32), op=dist.ReduceOp.AVG)
        with pytest.raises(ValueError, match="op must be a dist.ReduceOp"):
            dist.all_reduce(md.ones(2), op="median")
    run_ranks(2, body)


def test_all_reduce_float16_is_reduced_in_float32_and_rounded_once():
    # 2048 + 1 + 1 in float16 steps: 2048 + 1 rounds back to 2048 each time; summed in float32 it is 2050
    vals = [2048.0, 1.0, 1.0]

    def body(rank):
        t = md.tensor([vals[rank]], dtype=md.float16)
        dist.all_reduce(t)
        return t.dtype, float(t.item())
    assert run_ranks(3, body) == [(md.float16, 2050.0)] * 3


def test_all_reduce_of_a_non_contiguous_view_writes_through():
    def body(rank):
        base = md.tensor(_values(rank, (4, 4)))
        view = base[:, 1]            # a strided view
        dist.all_reduce(view)
        return base.numpy()
    expected = np.stack([_values(r, (4, 4)) for r in range(2)]).sum(0)
    for got, r in zip(run_ranks(2, body), range(2)):
        np.testing.assert_array_equal(got[:, 1], expected[:, 1])
        np.testing.assert_array_equal(np.delete(got, 1, axis=1), np.delete(_values(r, (4, 4)), 1, axis=1))


def test_all_reduce_counts_as_an_in_place_write():
    def body(rank):
        x = md.tensor([1.0, 2.0], requires_grad=True)
        y = x * 1.0
        z = (y * y).sum()      # saves y
        dist.all_reduce(y.detach())        # detach() shares y's version counter
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            z.backward()
    run_ranks(2, body)


def test_async_all_reduce_returns_a_work_handle():
    def body(rank):
        t = md.tensor([float(rank)])
        work = dist.all_reduce(t, async_op=True)
        assert isinstance(work, dist.Work)
        assert work.wait() is True
        assert work.is_completed() and work.is_success()
        assert work.result()[0] is t
        return t.item()
    assert run_ranks(3, body) == [3.0] * 3


def test_several_async_collectives_in_flight_complete_in_any_wait_order():
    def body(rank):
        a, b = md.tensor([1.0 + rank]), md.tensor([10.0 * rank])
        wa = dist.all_reduce(a, async_op=True)
        wb = dist.all_reduce(b, op=dist.ReduceOp.MAX, async_op=True)
        wb.wait()
        wa.wait()
        return a.item(), b.item()
    assert run_ranks(2, body) == [(3.0, 10.0)] * 2


@pytest.mark.parametrize("src", [0, 2])
def test_broadcast(src):
    def body(rank):
        t = md.tensor(_values(rank))
        dist.broadcast(t, src=src)
        return t.numpy()
    for got in run_ranks(3, body):
        np.testing.assert_array_equal(got, _values(src))


def test_broadcast_needs_a_valid_source():
    def body(rank):
        with pytest.raises(ValueError, match="src must be a rank in"):
            dist.broadcast(md.ones(1), src=5)
        with pytest.raises(ValueError, match="`src` must be given"):
            dist.broadcast(md.ones(1))
    run_ranks(2, body)


def test_all_gather_fills_the_list_in_rank_order():
    def body(rank):
        out = [md.zeros(2, 3, dtype=md.float64) for _ in range(3)]
        dist.all_gather(out, md.tensor(_values(rank)))
        return [o.numpy() for o in out]
    for got in run_ranks(3, body):
        for r in range(3):
            np.testing.assert_array_equal(got[r], _values(r))


def test_all_gather_checks_the_list():
    def body(rank):
        with pytest.raises(ValueError, match="one tensor per rank"):
            dist.all_gather([md.zeros(2)], md.zeros(2))
        with pytest.raises(ValueError, match=r"tensor_list\[1\] has shape"):
            dist.all_gather([md.zeros(2), md.zeros(3)], md.zeros(2))
        with pytest.raises(TypeError, match="List"):
            dist.all_gather(md.zeros(2), md.zeros(2))
    run_ranks(2, body)


@pytest.mark.parametrize("stacked", [True, False])
def test_all_gather_into_tensor(stacked):
    def body(rank):
        out = md.zeros(*((3, 2, 3) if stacked else (6, 3)), dtype=md.float64)
        dist.all_gather_into_tensor(out, md.tensor(_values(rank)))
        return out.numpy()
    expected = np.stack([_values(r) for r in range(3)])
    for got in run_ranks(3, body):
        np.testing.assert_array_equal(got.reshape(expected.shape), expected)


def test_all_gather_into_tensor_checks_the_output_size():
    def body(rank):
        with pytest.raises(ValueError, match="world_size \\(2\\) times the size"):
            dist.all_gather_into_tensor(md.zeros(5, 3), md.zeros(2, 3))
        with pytest.raises(ValueError, match="dtype"):
            dist.all_gather_into_tensor(md.zeros(4, 3, dtype=md.float64), md.zeros(2, 3))
    run_ranks(2, body)


@pytest.mark.parametrize("op", ["SUM", "MAX", "AVG"])
def test_reduce_scatter_and_reduce_scatter_tensor(op):
    k = 3
    inputs = {r: [_values(r * k + q) for q in range(k)] for r in range(k)}
    fn = {"SUM": np.sum, "MAX": np.max, "AVG": np.mean}[op]

    def body(rank):
        out_list, out_tensor = md.zeros(2, 3, dtype=md.float64), md.zeros(2, 3, dtype=md.float64)
        dist.reduce_scatter(out_list, [md.tensor(v) for v in inputs[rank]], op=getattr(dist.ReduceOp, op))
        big = md.tensor(np.concatenate(inputs[rank]))        # (k * 2, 3): concatenated along dim 0
        dist.reduce_scatter_tensor(out_tensor, big, op=getattr(dist.ReduceOp, op))
        return out_list.numpy(), out_tensor.numpy()
    for rank, (a, b) in enumerate(run_ranks(k, body)):
        expected = fn(np.stack([inputs[r][rank] for r in range(k)]), axis=0)
        np.testing.assert_allclose(a, expected, rtol=1e-15)
        np.testing.assert_allclose(b, expected, rtol=1e-15)


def test_ranks_take_turns_unless_concurrent():
    import threading
    import time
    running, most = [0], [0]
    lock = threading.Lock()

    def body(rank):
        for _ in range(3):
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            time.sleep(0.02)
            with lock:
                running[0] -= 1
            dist.barrier()
    run_ranks(3, body)
    assert most[0] == 1
    run_ranks(3, body, concurrent=True)
    assert most[0] > 1


def test_barrier_waits_for_every_rank():
    import threading
    arrived = []
    lock = threading.Lock()

    def body(rank):
        with lock:
            arrived.append(rank)
        dist.barrier()
        with lock:
            return len(arrived)
    assert run_ranks(3, body) == [3, 3, 3]


# -- calls that differ across ranks ------------------------------------------------------------

def test_different_shapes_across_ranks_raise_on_every_rank_naming_them():
    def body(rank):
        with pytest.raises(RuntimeError) as info:
            dist.all_reduce(md.zeros(2 + rank))
        return str(info.value)
    for rank, message in enumerate(run_ranks(2, body)):
        assert message.startswith(f"rank {rank}:")
        assert "(shape)" in message and "rank 0 called all_reduce of a float32 tensor of shape (2,)" in message
        assert "rank 1 called all_reduce of a float32 tensor of shape (3,)" in message


def test_different_dtypes_or_collectives_across_ranks_raise():
    def body(rank):
        with pytest.raises(RuntimeError, match=r"\(dtype\).*float32.*float64"):
            dist.all_reduce(md.zeros(2, dtype=md.float32 if rank == 0 else md.float64))
        with pytest.raises(RuntimeError, match=r"rank 0 called all_reduce.*rank 1 called broadcast"):
            if rank == 0:
                dist.all_reduce(md.zeros(2))
            else:
                dist.broadcast(md.zeros(2), src=0)
        with pytest.raises(RuntimeError, match=r"\(op\)"):
            dist.all_reduce(md.zeros(2), op=dist.ReduceOp.SUM if rank == 0 else dist.ReduceOp.MAX)
        with pytest.raises(RuntimeError, match=r"\(src\)"):
            dist.broadcast(md.zeros(2), src=rank)
        t = md.tensor([1.0])           # the ranks are still in step after the errors
        dist.all_reduce(t)
        return t.item()
    assert run_ranks(2, body) == [2.0, 2.0]


def test_a_rank_that_raises_fails_the_others_at_once_and_is_reported():
    def body(rank):
        if rank == 1:
            raise KeyError("broken rank")
        dist.all_reduce(md.zeros(1))
    with pytest.raises(KeyError, match="broken rank") as info:
        run_ranks(3, body, timeout=30)
    assert any("rank 1 of 3" in note for note in getattr(info.value, "__notes__", ["rank 1 of 3"]))


def test_a_rank_that_returns_early_fails_the_waiting_ranks():
    def body(rank):
        if rank == 0:
            dist.all_reduce(md.zeros(1))
    with pytest.raises(RuntimeError, match="can never complete: rank 1 has finished"):
        run_ranks(2, body, timeout=30)


def test_a_collective_that_never_completes_times_out():
    def body(rank):
        if rank == 0:
            work = dist.all_reduce(md.zeros(1), async_op=True)
            work.wait(timeout=datetime.timedelta(seconds=0.2))
        else:
            import time
            time.sleep(1.0)
    with pytest.raises(RuntimeError, match=r"timed out after 0.2 s waiting for ranks \[1\]"):
        run_ranks(2, body, timeout=30, concurrent=True)


# -- the default group ---------------------------------------------------------------------------

@pytest.fixture
def alone():
    """A world of one in the test's own process, destroyed afterwards."""
    assert not dist.is_initialized()
    dist.init_process_group("mpi")
    yield
    dist.destroy_process_group()


def test_a_single_process_is_rank_0_of_1_and_collectives_are_identities(alone):
    assert dist.is_initialized() and dist.get_rank() == 0 and dist.get_world_size() == 1
    assert dist.get_backend() == "mpi"
    t = md.tensor([1.5, -2.0])
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    dist.broadcast(t, src=0)
    out = md.zeros(1, 2)
    dist.all_gather_into_tensor(out, t)
    dist.barrier()
    assert t.tolist() == [1.5, -2.0] and out.tolist() == [[1.5, -2.0]]
    assert dist.all_reduce(t, async_op=True).wait()


def test_init_twice_raises(alone):
    with pytest.raises(ValueError, match="trying to initialize the default process group twice!"):
        dist.init_process_group("mpi")


def test_init_then_destroy_then_init_again():
    dist.init_process_group()
    dist.destroy_process_group()
    assert not dist.is_initialized()
    dist.init_process_group("MPI", timeout=datetime.timedelta(seconds=5))
    dist.destroy_process_group()


@pytest.mark.parametrize("backend, match", [("gloo", "not available in minidl"), ("nccl", "not available in minidl"),
                                            ("carrier-pigeon", "Invalid backend")])
def test_unknown_backend_raises(backend, match):
    with pytest.raises(ValueError, match=match):
        dist.init_process_group(backend)
    assert not dist.is_initialized()


def test_placement_that_disagrees_with_the_launcher_raises():
    with pytest.raises(ValueError, match="world_size=4 was asked"):
        dist.init_process_group("mpi", world_size=4, rank=0)
    with pytest.raises(ValueError, match="init_method"):
        dist.init_process_group("mpi", init_method="tcp://10.0.0.1:23456")
    assert not dist.is_initialized()


def test_without_a_group_collectives_and_queries_raise():
    message = "Default process group has not been initialized"
    for call in (lambda: dist.get_rank(), lambda: dist.get_world_size(), lambda: dist.all_reduce(md.zeros(1)),
                 lambda: dist.barrier(), lambda: dist.destroy_process_group()):
        with pytest.raises(ValueError, match=message):
            call()
    assert dist.is_available() and not dist.is_initialized()


def test_non_tensor_arguments_raise_type_error(alone):
    with pytest.raises(TypeError, match="Expected parameter `tensor` of type minidl.Tensor"):
        dist.all_reduce(np.zeros(2))
    with pytest.raises(TypeError, match="group must be"):
        dist.all_reduce(md.zeros(1), group="world")


def test_group_world_names_the_default_group():
    def body(rank):
        t = md.tensor([1.0])
        dist.all_reduce(t, group=dist.group.WORLD)
        return t.item(), dist.get_world_size(dist.group.WORLD)
    assert run_ranks(2, body) == [(2.0, 2)] * 2


def test_ranks_that_initialise_themselves_as_a_script_does():
    def script(rank):
        assert not dist.is_initialized()
        dist.init_process_group(backend="mpi")
        t = md.tensor([float(dist.get_rank())])
        dist.all_reduce(t)
        dist.destroy_process_group()
        return t.item()
    assert run_ranks(3, script, init=False) == [3.0] * 3


def test_threaded_groups_do_not_leak_into_the_calling_thread():
    run_ranks(2, lambda rank: dist.get_world_size())
    assert not dist.is_initialized()


def test_run_ranks_checks_its_arguments():
    with pytest.raises(ValueError, match="positive integer"):
        run_ranks(0, lambda r: r)
    with pytest.raises(TypeError, match="callable"):
        run_ranks(2, None)


def test_cuda_tensors_are_staged_through_the_host():
    pytest.importorskip("numba.cuda")
    if not md.cuda.is_available():
        pytest.skip("no cuda device (nor the simulator)")

    def body(rank):
        t = md.tensor([1.0 + rank, 2.0], device="cuda")
        dist.all_reduce(t)
        b = md.tensor([float(rank)] * 3, device="cuda")
        dist.broadcast(b, src=1)
        out = md.zeros(4, device="cuda")
        dist.all_gather_into_tensor(out, md.tensor([rank, rank + 0.5], device="cuda"))
        return str(t.device), t.cpu().tolist(), b.cpu().tolist(), out.cpu().tolist()
    for device, reduced, broadcast, gathered in run_ranks(2, body):
        assert device.startswith("cuda")
        assert reduced == [3.0, 4.0] and broadcast == [1.0] * 3 and gathered == [0.0, 0.5, 1.0, 1.5]


def test_new_group_of_all_ranks_is_the_default_group():
    def body(rank):
        g = dist.new_group()
        assert dist.new_group(ranks=[1, 0]) is g and g.size() == 2 and g.rank() == rank
        t = md.tensor([1.0])
        dist.all_reduce(t, group=g)
        with pytest.raises(NotImplementedError, match="only the group of all 2 ranks"):
            dist.new_group(ranks=[0])
        return t.item()
    assert run_ranks(2, body) == [2.0, 2.0]
    assert not dist.is_nccl_available() and not dist.is_gloo_available()


def test_empty_tensors_pass_through_every_collective():
    def body(rank):
        t = md.zeros(0)
        dist.all_reduce(t)
        dist.broadcast(t, src=0)
        out = md.zeros(0)
        dist.all_gather_into_tensor(out, t)
        dist.reduce_scatter_tensor(md.zeros(0), md.zeros(0))
        return t.shape, out.shape
    assert run_ranks(2, body) == [((0,), (0,))] * 2
