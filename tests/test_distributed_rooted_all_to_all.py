"""minidl.distributed's rooted collectives (reduce, gather, scatter) and all-to-alls (all_to_all_single,
all_to_all): PyTorch's semantics over k ranks run as threads (run_ranks), its error types for bad input,
and clear errors (not hangs) for calls that do not match across ranks. The point-to-point messages, the
object collectives, the rank helpers and the runs against PyTorch and under mpiexec (which cover these
too) are in test_distributed_p2p_objects.py."""
import numpy as np
import pytest

import minidl as md
import minidl.distributed as dist
from minidl.distributed.testing import run_ranks

KS = [1, 2, 3]


def _values(rank, shape=(2, 3), dtype=np.float64):
    return (np.arange(np.prod(shape)).reshape(shape) * (rank + 1) + rank).astype(dtype)


def _raises(exc, match, fn, *args, **kwargs):
    with pytest.raises(exc, match=match):
        fn(*args, **kwargs)


# -- reduce ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("op, fn", [("SUM", np.sum), ("PRODUCT", np.prod), ("MAX", np.max), ("AVG", np.mean)])
def test_reduce_puts_the_result_on_dst_only(k, op, fn):
    dst = k - 1

    def body(rank):
        t = md.tensor(_values(rank))
        assert dist.reduce(t, dst=dst, op=getattr(dist.ReduceOp, op)) is None
        return t.numpy()
    expected = fn(np.stack([_values(r) for r in range(k)]), axis=0)
    for rank, got in enumerate(run_ranks(k, body)):
        np.testing.assert_allclose(got, expected if rank == dst else _values(rank), rtol=1e-15)


def test_reduce_async_float16_and_group_dst():
    vals = [2048.0, 1.0, 1.0]       # summed in float16 steps this would stay 2048; in float32 it is 2050

    def body(rank):
        t = md.tensor([vals[rank]], dtype=md.float16)
        work = dist.reduce(t, group_dst=1, async_op=True)
        assert isinstance(work, dist.Work) and work.wait()
        return t.dtype, t.item()
    assert run_ranks(3, body) == [(md.float16, 2048.0), (md.float16, 2050.0), (md.float16, 1.0)]


@pytest.mark.parametrize("k", KS)
def test_reduce_bad_input(k):
    def body(rank):
        _raises(RuntimeError, f"invalid root rank: {k}", dist.reduce, md.ones(2), dst=k)
        _raises(RuntimeError, "invalid root rank: -1", dist.reduce, md.ones(2), dst=-1)
        _raises(ValueError, "Must specify global_rank or group_rank", dist.reduce, md.ones(2))
        _raises(ValueError, "Can't specify both", dist.reduce, md.ones(2), dst=0, group_dst=0)
        _raises(TypeError, "Expected parameter `tensor` of type minidl.Tensor", dist.reduce, [md.ones(2)], dst=0)
        _raises(ValueError, "ReduceOp.BAND needs an integer", dist.reduce, md.ones(2), dst=0, op=dist.ReduceOp.BAND)
        t = md.ones(1)          # the ranks are still in step
        dist.reduce(t, dst=0)
        return t.item()
    assert run_ranks(k, body)[0] == k


def test_reduce_to_different_roots_or_of_different_shapes_raises_on_every_rank():
    def body(rank):
        with pytest.raises(RuntimeError) as info:
            dist.reduce(md.ones(2), dst=rank)
        with pytest.raises(RuntimeError, match=r"\(shape\)"):
            dist.reduce(md.ones(2 + rank), dst=0)
        return str(info.value)
    for rank, message in enumerate(run_ranks(2, body)):
        assert message.startswith(f"rank {rank}: collective #0 differs across ranks (src)")
        assert "rank 0 called reduce of a float32 tensor of shape (2,) with ReduceOp.SUM to rank 0" in message
        assert "rank 1 called reduce of a float32 tensor of shape (2,) with ReduceOp.SUM to rank 1" in message


# -- gather and scatter ----------------------------------------------------------------------------

@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("dst", ["default", "last"])
def test_gather_fills_the_list_on_dst(k, dst):
    root = 0 if dst == "default" else k - 1

    def body(rank):
        out = [md.zeros(2, 3, dtype=md.float64) for _ in range(k)] if rank == root else None
        kwargs = {} if dst == "default" else {"dst": root}
        dist.gather(md.tensor(_values(rank)), out, **kwargs)
        return None if out is None else [o.numpy() for o in out]
    got = run_ranks(k, body)
    assert all(g is None for r, g in enumerate(got) if r != root)
    for r in range(k):
        np.testing.assert_array_equal(got[root][r], _values(r))


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("src", ["default", "last"])
def test_scatter_sends_one_piece_to_each_rank(k, src):
    root = 0 if src == "default" else k - 1

    def body(rank):
        out = md.zeros(2, 3, dtype=md.float64)
        pieces = [md.tensor(_values(10 + r)) for r in range(k)] if rank == root else None
        work = dist.scatter(out, pieces, async_op=True, **({} if src == "default" else {"src": root}))
        work.wait()
        return out.numpy()
    for rank, got in enumerate(run_ranks(k, body)):
        np.testing.assert_array_equal(got, _values(10 + rank))


@pytest.mark.parametrize("k", KS)
def test_gather_and_scatter_bad_input(k):
    def body(rank):
        x = md.ones(3)
        if rank == 0:
            _raises(ValueError, "``gather_list`` must be specified on destination rank", dist.gather, x, dst=0)
            _raises(RuntimeError, f"Incorrect output list size {k + 1}. Output list size should be {k}",
                    dist.gather, x, [md.ones(3)] * (k + 1), dst=0)
            _raises(RuntimeError, r"invalid tensor size at index 0 \(expected \(3,\), got \(2,\)\)",
                    dist.gather, x, [md.ones(2)] * k, dst=0)
            _raises(ValueError, "different dtypes", dist.gather, x, [md.ones(3, dtype=md.float64)] * k, dst=0)
            _raises(ValueError, "``scatter_list`` must be specified on source rank", dist.scatter, x, src=0)
            _raises(RuntimeError, f"Incorrect input list size {k + 1}. Input list size should be {k}",
                    dist.scatter, x, [md.ones(3)] * (k + 1), src=0)
            _raises(RuntimeError, r"invalid tensor size at index 0", dist.scatter, x, [md.ones(4)] * k, src=0)
            _raises(TypeError, "List", dist.scatter, x, (md.ones(3),) * k, src=0)
        else:
            _raises(ValueError, "must NOT be specified on non-destination ranks", dist.gather, x, [x] * k, dst=0)
            _raises(ValueError, "must NOT be specified on non-source ranks", dist.scatter, x, [x] * k, src=0)
        _raises(RuntimeError, f"invalid root rank: {k}", dist.gather, x, dst=k)
        _raises(RuntimeError, f"invalid root rank: {k + 2}", dist.scatter, x, src=k + 2)
        dist.barrier()
    run_ranks(k, body)


def test_gather_of_different_shapes_across_ranks_raises_on_every_rank():
    def body(rank):
        with pytest.raises(RuntimeError, match=r"differs across ranks \(shape\).*gather of a float32 tensor "
                                               r"of shape \(2,\) to rank 0.*shape \(3,\) to rank 0"):
            dist.gather(md.ones(2 + rank), [md.ones(2), md.ones(2)] if rank == 0 else None)
    run_ranks(2, body)


# -- all to all ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("k", KS)
def test_all_to_all_single_even_and_uneven_splits(k):
    # rank i sends (i + j + 1) rows of width 2 to rank j
    rows = [[i + j + 1 for j in range(k)] for i in range(k)]
    data = {i: np.arange(sum(rows[i]) * 2, dtype=np.float64).reshape(-1, 2) + 100 * i for i in range(k)}

    def body(rank):
        even_out = md.zeros(k, 3)
        dist.all_to_all_single(even_out, md.tensor(_values(rank, (k, 3), np.float32)))
        out_split = [rows[i][rank] for i in range(k)]
        out = md.zeros(sum(out_split), 2, dtype=md.float64)
        dist.all_to_all_single(out, md.tensor(data[rank]), out_split, rows[rank], async_op=True).wait()
        return even_out.numpy(), out.numpy()
    for rank, (even, uneven) in enumerate(run_ranks(k, body)):
        np.testing.assert_array_equal(even, np.stack([_values(i, (k, 3), np.float32)[rank] for i in range(k)]))
        starts = {i: np.cumsum([0] + rows[i]) for i in range(k)}
        expected = np.concatenate([data[i][starts[i][rank]:starts[i][rank + 1]] for i in range(k)])
        np.testing.assert_array_equal(uneven, expected)


@pytest.mark.parametrize("k", KS)
def test_all_to_all_lists_of_different_sizes(k):
    def body(rank):
        inputs = [md.full((rank + j + 1,), 10.0 * rank + j) for j in range(k)]
        outputs = [md.zeros(i + rank + 1) for i in range(k)]
        assert dist.all_to_all(outputs, inputs) is None
        return [o.tolist() for o in outputs]
    for rank, got in enumerate(run_ranks(k, body)):
        assert got == [[10.0 * i + rank] * (i + rank + 1) for i in range(k)]


@pytest.mark.parametrize("k", KS)
def test_all_to_all_bad_input(k):
    def body(rank):
        x = md.zeros(2 * k)
        _raises(RuntimeError, "Number of tensor splits not equal to group size", dist.all_to_all_single, x, x,
                None, [2 * k] + [0] * k)
        _raises(RuntimeError, "Split sizes doesn't match total dim 0 size", dist.all_to_all_single, x, x,
                [1] * k, None)
        if k > 1:
            _raises(RuntimeError, "does not divide equally", dist.all_to_all_single, md.zeros(k), md.zeros(k + 1))
        _raises(ValueError, "different dtypes", dist.all_to_all_single, x, md.zeros(2 * k, dtype=md.float64))
        _raises(RuntimeError, f"output tensor list size {k + 1} does not match world size {k}", dist.all_to_all,
                [x] * (k + 1), [x] * k)
        _raises(TypeError, "List", dist.all_to_all, x, [x] * k)
        _raises(ValueError, "different dtypes", dist.all_to_all, [x] * k, [md.zeros(1, dtype=md.int64)] * k)
    run_ranks(k, body)


@pytest.mark.parametrize("k", [2, 3])
def test_all_to_all_counts_that_do_not_pair_up_raise_on_every_rank(k):
    def body(rank):
        # rank 0 sends 2 rows to rank 1; every rank expects 1 row from every rank
        splits = [0, 2] + [1] * (k - 2) if rank == 0 else None
        with pytest.raises(RuntimeError) as info:
            dist.all_to_all_single(md.zeros(k), md.zeros(k), None, splits)
        t = md.ones(1)
        dist.all_reduce(t)          # still in step
        return str(info.value), t.item()
    for rank, (message, total) in enumerate(run_ranks(k, body)):
        assert message == (f"rank {rank}: collective #0 (all_to_all_single) does not match across ranks: rank 0 sends "
                           "0 element(s) to rank 0, which expects 1 from rank 0")
        assert total == k
