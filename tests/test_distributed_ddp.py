"""DistributedDataParallel over k ranks run as threads (run_ranks): averaged gradients equal
the single-process gradients of the concatenated batch, parameters stay bit-identical, and
PyTorch's no_sync / find_unused_parameters / broadcast_buffers / state_dict behaviour."""
import numpy as np
import pytest

import minidl as md
import minidl.distributed as dist
import minidl.nn as nn
import minidl.optim as optim
from minidl.distributed.testing import run_ranks
from minidl.nn.parallel import DistributedDataParallel as DDP

RNG = np.random.default_rng(7)
X = RNG.standard_normal((12, 5))
Y = RNG.standard_normal((12, 3))


def mlp(seed):
    md.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 8), nn.Tanh(), nn.Linear(8, 3)).double()


def mse(model, x, y):
    return ((model(md.tensor(x)) - md.tensor(y)) ** 2).mean()


def shard(a, rank, k):
    n = len(a) // k
    return a[rank * n:(rank + 1) * n]


def reference_grads(seed=0):
    model = mlp(seed)
    mse(model, X, Y).backward()
    return model, [p.grad.numpy().copy() for p in model.parameters()]


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("bucket_cap_mb", [25, 0.0001])
def test_averaged_gradients_equal_the_gradients_of_the_concatenated_batch(k, bucket_cap_mb):
    _, expected = reference_grads()
    models = [mlp(0)] + [mlp(100 + r) for r in range(1, k)]     # other ranks start elsewhere

    def body(rank):
        ddp = DDP(models[rank], bucket_cap_mb=bucket_cap_mb)
        mse(ddp, shard(X, rank, k), shard(Y, rank, k)).backward()
        return [p.grad.numpy() for p in ddp.module.parameters()], ddp.last_reduction
    for grads, info in run_ranks(k, body):
        for g, e in zip(grads, expected):
            np.testing.assert_allclose(g, e, rtol=0, atol=1e-12)
        assert info["buckets"] == (1 if bucket_cap_mb == 25 else len(info["ready_at_launch"]))
        if bucket_cap_mb < 1:
            assert info["buckets"] > 2
            # the first bucket started while backward still had gradients to produce
            assert info["ready_at_launch"][0] < len(expected)


def test_construction_gives_every_rank_rank_0s_parameters_and_buffers():
    def body(rank):
        md.manual_seed(rank)
        model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)).double()
        with md.no_grad():
            model[1].running_mean.add_(float(rank + 1))
        DDP(model)
        return {k: v.numpy().copy() for k, v in model.state_dict().items()}
    states = run_ranks(3, body)
    for other in states[1:]:
        for key, value in states[0].items():
            assert value.tobytes() == other[key].tobytes(), key
    assert np.all(states[0]["1.running_mean"] == 1.0)


def test_parameters_stay_bit_identical_and_equal_a_single_process_run_at_k_times_the_batch():
    k, steps = 2, 4
    ref = mlp(0)
    opt = optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    batches = [(RNG.standard_normal((8, 5)), RNG.standard_normal((8, 3))) for _ in range(steps)]
    for x, y in batches:
        opt.zero_grad()
        mse(ref, x, y).backward()
        opt.step()
    models = [mlp(r) for r in range(k)]

    def body(rank):
        ddp = DDP(models[rank])
        o = optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
        for x, y in batches:
            o.zero_grad()
            mse(ddp, shard(x, rank, k), shard(y, rank, k)).backward()
            o.step()
        return [p.detach().numpy().copy() for p in ddp.parameters()]
    out = run_ranks(k, body)
    for a, b in zip(out[0], out[1]):
        assert a.tobytes() == b.tobytes()
    for a, r in zip(out[0], ref.parameters()):
        np.testing.assert_allclose(a, r.detach().numpy(), rtol=0, atol=1e-12)


def test_no_sync_accumulates_locally_and_the_next_synchronised_backward_averages_the_sum():
    k = 2
    xa, ya, xb, yb = X[:8], Y[:8], X[8:12].repeat(2, axis=0), Y[8:12].repeat(2, axis=0)
    expected = []
    for rank in range(k):
        m = mlp(0)
        mse(m, shard(xa, rank, k), shard(ya, rank, k)).backward()
        mse(m, shard(xb, rank, k), shard(yb, rank, k)).backward()
        expected.append([p.grad.numpy().copy() for p in m.parameters()])
    average = [(a + b) / 2 for a, b in zip(*expected)]
    models = [mlp(0), mlp(0)]      # built here: the ranks' threads share the global generator

    def body(rank):
        ddp = DDP(models[rank])
        with ddp.no_sync():
            mse(ddp, shard(xa, rank, k), shard(ya, rank, k)).backward()
        local = [p.grad.numpy().copy() for p in ddp.parameters()]
        mse(ddp, shard(xb, rank, k), shard(yb, rank, k)).backward()
        return local, [p.grad.numpy() for p in ddp.parameters()]
    out = run_ranks(k, body)
    assert not np.allclose(out[0][0][0], out[1][0][0])          # inside no_sync: each rank its own
    for _, synced in out:
        for g, e in zip(synced, average):
            np.testing.assert_allclose(g, e, rtol=0, atol=1e-12)


class Branches(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Linear(4, 4)
        self.extra = nn.Linear(4, 4)
        self.never = nn.Linear(4, 4)

    def forward(self, x, use_extra):
        h = self.trunk(x)
        return self.extra(h) if use_extra else h


def test_find_unused_parameters_averages_what_some_rank_used_and_leaves_what_none_used():
    x = md.tensor(RNG.standard_normal((2, 4)))
    models = []
    for _ in range(2):
        md.manual_seed(0)
        models.append(Branches().double())

    def body(rank):
        ddp = DDP(models[rank], find_unused_parameters=True)
        ddp(x, use_extra=rank == 0).sum().backward()
        m = ddp.module
        return m.extra.weight.grad.numpy(), m.trunk.weight.grad.numpy(), m.never.weight.grad
    md.manual_seed(0)
    ref = Branches().double()
    ref(x, True).sum().backward()
    extra_0 = ref.extra.weight.grad.numpy()
    trunk_0 = ref.trunk.weight.grad.numpy().copy()
    ref.zero_grad()
    ref(x, False).sum().backward()
    trunk_1 = ref.trunk.weight.grad.numpy()
    for extra, trunk, never in run_ranks(2, body):
        np.testing.assert_allclose(extra, extra_0 / 2, rtol=0, atol=1e-12)
        np.testing.assert_allclose(trunk, (trunk_0 + trunk_1) / 2, rtol=0, atol=1e-12)
        assert never is None


def test_an_unused_parameter_without_find_unused_parameters_raises_naming_it():
    def body(rank):
        ddp = DDP(Branches(), bucket_cap_mb=0.0001)
        with pytest.raises(RuntimeError, match=r"find_unused_parameters=True.*never\.weight"):
            ddp(md.ones(1, 4), use_extra=True).sum().backward()
    run_ranks(2, body)


def test_parameters_that_differ_in_shape_across_ranks_raise_on_every_rank():
    def body(rank):
        model = nn.Sequential(nn.Linear(3, 4 + rank), nn.Linear(4 + rank, 2))
        with pytest.raises(RuntimeError) as info:
            DDP(model)
        return str(info.value)
    for message in run_ranks(2, body):
        assert "parameter 0" in message and "differs across ranks" in message
        assert "shape (4, 3) and dtype float32 on rank 0" in message
        assert "shape (5, 3) and dtype float32 on rank 1" in message


def test_parameter_counts_or_dtypes_that_differ_across_ranks_raise():
    def body(rank):
        layers = [nn.Linear(3, 3)] + ([nn.Linear(3, 3)] if rank == 1 else [])
        with pytest.raises(RuntimeError, match="has 2 parameters on rank 0 but 4 on rank 1"):
            DDP(nn.Sequential(*layers))
        model = nn.Linear(3, 3)
        if rank == 1:
            model.double()
        with pytest.raises(RuntimeError, match="float32 on rank 0.*float64 on rank 1"):
            DDP(model)
    run_ranks(2, body)


class Counter(nn.Module):
    def __init__(self, rank):
        super().__init__()
        self.rank = rank
        self.w = nn.Parameter(md.ones(1))
        self.register_buffer("count", md.zeros(1))
        self.seen = []

    def forward(self, x):
        self.seen.append(self.count.item())
        with md.no_grad():
            self.count.add_(self.rank + 1.0)
        return x * self.w


@pytest.mark.parametrize("broadcast_buffers", [True, False])
def test_broadcast_buffers_gives_every_synchronised_forward_rank_0s_buffers(broadcast_buffers):
    def body(rank):
        ddp = DDP(Counter(rank), broadcast_buffers=broadcast_buffers)
        for _ in range(2):
            ddp(md.ones(1)).sum().backward()
        return ddp.module.seen
    seen = run_ranks(2, body)
    assert seen[0] == [0.0, 1.0]
    assert seen[1] == ([0.0, 1.0] if broadcast_buffers else [0.0, 2.0])


def test_module_and_state_dict_as_pytorch():
    def body(rank):
        model = mlp(0)
        ddp = DDP(model)
        assert ddp.module is model
        keys = list(ddp.state_dict())
        assert keys == ["module." + k for k in model.state_dict()]
        ddp.load_state_dict({k: v.numpy() * 0 for k, v in ddp.state_dict().items()})
        assert all(float(p.abs().sum()) == 0 for p in model.parameters())
        assert [id(p) for p in ddp.parameters()] == [id(p) for p in model.parameters()]
        assert repr(ddp).startswith("DistributedDataParallel(") and "(module): Sequential(" in repr(ddp)
    run_ranks(2, body)


def test_ddp_in_a_single_process_is_the_plain_module():
    dist.init_process_group("mpi")
    try:
        _, expected = reference_grads()
        ddp = DDP(mlp(0))
        mse(ddp, X, Y).backward()
        for p, e in zip(ddp.parameters(), expected):
            np.testing.assert_allclose(p.grad.numpy(), e, rtol=0, atol=1e-15)
    finally:
        dist.destroy_process_group()


def test_ddp_needs_a_group_and_a_trainable_parameter():
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        DDP(nn.Linear(2, 2))

    def body(rank):
        with pytest.raises(RuntimeError, match="doesn't have any parameter that requires a gradient"):
            DDP(nn.Linear(2, 2).requires_grad_(False))
        with pytest.raises(TypeError, match="expects an nn.Module"):
            DDP(lambda x: x)
    run_ranks(2, body)


def test_forward_without_grad_reduces_nothing():
    def body(rank):
        ddp = DDP(mlp(0))
        with md.no_grad():
            ddp(md.tensor(X))
        loss = mse(ddp.module, shard(X, rank, 2), shard(Y, rank, 2))   # the bare module: no reduction
        loss.backward()
        return next(ddp.parameters()).grad.numpy()
    a, b = run_ranks(2, body)
    assert not np.allclose(a, b)


def test_cuda_parameters_are_reduced_through_the_host():
    if not md.cuda.is_available():
        pytest.skip("no cuda device (nor the simulator)")
    x, y = X[:4, :2], Y[:4, :1]
    models = []
    for _ in range(2):
        md.manual_seed(0)
        models.append(nn.Linear(2, 1).double().cuda())

    def body(rank):
        model = models[rank]
        ddp = DDP(model)
        out = ddp(md.tensor(shard(x, rank, 2), device="cuda"))
        ((out - md.tensor(shard(y, rank, 2), device="cuda")) ** 2).mean().backward()
        return [p.grad.cpu().numpy() for p in model.parameters()]
    md.manual_seed(0)
    ref = nn.Linear(2, 1).double()
    ((ref(md.tensor(x)) - md.tensor(y)) ** 2).mean().backward()
    for grads in run_ranks(2, body):
        for g, p in zip(grads, ref.parameters()):
            np.testing.assert_allclose(g, p.grad.numpy(), rtol=0, atol=1e-12)


# -- bucket assignment -----------------------------------------------------------------------------

def _params(*specs):
    return [nn.Parameter(md.zeros(n, dtype=dtype)) for n, dtype in specs]


def test_buckets_fill_in_reverse_registration_order_with_a_small_first_bucket():
    from minidl.nn.parallel.buckets import FIRST_BUCKET_BYTES, assign
    mb = 1024 * 1024
    params = _params((100_000, md.float32), (300_000, md.float32), (10, md.float32), (7 * mb // 4, md.float32))
    assert assign(params, 25 * mb, FIRST_BUCKET_BYTES) == [[3], [2, 1, 0]]
    assert assign(params, 25 * mb, 25 * mb) == [[3, 2, 1, 0]]
    # one open bucket per dtype
    mixed = _params((10, md.float32), (10, md.float64), (10, md.float32))
    assert assign(mixed, 25 * mb, FIRST_BUCKET_BYTES) == [[2, 0], [1]]


def test_bucket_assignment_matches_pytorchs_rebuilt_buckets():
    torch = pytest.importorskip("torch")
    tdist = pytest.importorskip("torch.distributed")
    if not tdist.is_available():
        pytest.skip("this torch build has no torch.distributed")
    from minidl.nn.parallel.buckets import FIRST_BUCKET_BYTES, assign
    mb = 1024 * 1024
    sizes = [300_000, 20, 500_000, 4_000_000, 70, 2_000_000, 9_000_000, 10]
    ours = assign(_params(*[(n, md.float32) for n in sizes]), 25 * mb, FIRST_BUCKET_BYTES)
    # as PyTorch's Reducer calls it when it rebuilds: the tensors in gradient-ready order, with their indices
    ready = list(reversed(range(len(sizes))))
    theirs, _ = tdist._compute_bucket_assignment_by_size([torch.zeros(sizes[i]) for i in ready],
                                                         [FIRST_BUCKET_BYTES, 25 * mb], [False] * len(sizes), ready)
    assert ours == [list(b) for b in theirs]


def test_an_explicit_bucket_cap_has_no_small_first_bucket():
    def body(rank):
        def two():                           # 1.4 MB of float32 each
            return nn.Sequential(nn.Linear(600, 600), nn.Linear(600, 600))
        return len(DDP(two()).reducer.buckets), len(DDP(two(), bucket_cap_mb=25).reducer.buckets)
    assert run_ranks(1, body) == [(2, 1)]
