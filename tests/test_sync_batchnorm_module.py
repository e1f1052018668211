"""nn.SyncBatchNorm over minidl.distributed's fake ranks (run_ranks): the module equals
BatchNorm over the concatenated batch (also for masked sequences and under
DistributedDataParallel), convert_sync_batchnorm, eval mode without communication, the
one-time fallback to BatchNorm without a process group, bad input, and one real mpiexec run."""
import warnings

import numpy as np
import pytest

import minidl as md
import minidl.distributed as dist
import minidl.nn as nn
from minidl.distributed.testing import run_ranks
from minidl.nn.modules import syncbatchnorm

TOL = 1e-12


def _t(a, grad=False):
    return md.tensor(np.asarray(a, np.float64), requires_grad=grad)


@pytest.fixture
def fresh_warning(monkeypatch):
    monkeypatch.setattr(syncbatchnorm, "_FALLBACK_WARNED", [False])


def _layer(cls, c, state):
    layer = cls(c, momentum=0.3).double()
    layer.load_state_dict(state)
    return layer


def _state(c, seed=0):
    rng = np.random.default_rng(seed)
    return {"weight": _t(rng.standard_normal(c)), "bias": _t(rng.standard_normal(c)),
            "running_mean": _t(rng.standard_normal(c)), "running_var": _t(rng.uniform(0.5, 2, c)),
            "num_batches_tracked": md.tensor(np.array(3, np.int64))}


@pytest.mark.parametrize("sizes,rest", [((2, 3, 0), (3, 2, 2)), ((1, 1), (2,)), ((4, 1, 2, 3), (2, 5))])
def test_module_over_ranks_equals_batchnorm_of_the_whole_batch(sizes, rest):
    rng = np.random.default_rng(len(sizes))
    c = rest[0]
    parts = [rng.standard_normal((n,) + rest) * 3 - 1 for n in sizes]
    dys = [rng.standard_normal(p.shape) for p in parts]
    state = _state(c)

    def rank(r):
        layer = _layer(nn.SyncBatchNorm, c, state)
        x = _t(parts[r], True)
        y = layer(x)
        (y * _t(dys[r])).sum().backward()
        return (y.detach().numpy(), x.grad.numpy(), layer.weight.grad.numpy(), layer.bias.grad.numpy(),
                layer.running_mean.numpy(), layer.running_var.numpy(), int(layer.num_batches_tracked.item()))

    got = run_ranks(len(sizes), rank)
    bn = _layer({2: nn.BatchNorm1d, 3: nn.BatchNorm1d, 4: nn.BatchNorm2d}[len(rest) + 1], c, state)
    x = _t(np.concatenate(parts), True)
    y = bn(x)
    (y * _t(np.concatenate(dys))).sum().backward()
    np.testing.assert_allclose(np.concatenate([g[0] for g in got]), y.detach().numpy(), atol=TOL * 10)
    np.testing.assert_allclose(np.concatenate([g[1] for g in got]), x.grad.numpy(), atol=TOL * 10)
    # each rank's parameter gradient is its own share; their sum is BatchNorm's
    np.testing.assert_allclose(sum(g[2] for g in got), bn.weight.grad.numpy(), atol=TOL * 10)
    np.testing.assert_allclose(sum(g[3] for g in got), bn.bias.grad.numpy(), atol=TOL * 10)
    for g in got:
        np.testing.assert_allclose(g[4], bn.running_mean.numpy(), atol=TOL)
        np.testing.assert_allclose(g[5], bn.running_var.numpy(), atol=TOL)
        assert g[6] == 4


def test_masked_sequences_through_the_module():
    rng = np.random.default_rng(2)
    L, c = 4, 3
    parts = [rng.standard_normal((n, c, L)) for n in (2, 1)]
    masks = [rng.random((n, L)) < 0.7 for n in (2, 1)]
    masks[0][0] = True

    def rank(r):
        layer = nn.SyncBatchNorm(c).double()
        return layer(_t(parts[r]), mask=md.tensor(masks[r])).detach().numpy(), layer.running_var.detach().numpy()

    got = run_ranks(2, rank)
    bn = nn.BatchNorm1d(c).double()
    want = bn(_t(np.concatenate(parts)), mask=np.concatenate(masks)).detach().numpy()
    np.testing.assert_allclose(np.concatenate([g[0] for g in got]), want, atol=1e-12)
    np.testing.assert_allclose(got[1][1], bn.running_var.numpy(), atol=1e-12)


def test_eval_mode_communicates_nothing():
    x = np.random.default_rng(3).standard_normal((3, 2, 4))

    def rank(r):
        layer = nn.SyncBatchNorm(2).double()
        layer.running_mean._data[...] = 0.5
        layer.eval()
        if r == 0:   # rank 1 takes part in no collective: any communication would fail the run
            return layer(_t(x)).detach().numpy()
        return None

    y = run_ranks(2, rank, timeout=5.0)[0]
    np.testing.assert_allclose(y, (x - 0.5) / np.sqrt(1 + 1e-5))


def test_convert_sync_batchnorm_keeps_parameters_buffers_and_mode():
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.Sequential(nn.Flatten(), nn.BatchNorm1d(4 * 4, affine=False, track_running_stats=False)))
    model[1].eval()
    before = dict(model.state_dict())
    w, rm = model[1].weight, model[1].running_mean
    out = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    assert out is model
    assert type(model[1]) is nn.SyncBatchNorm and type(model[3][1]) is nn.SyncBatchNorm
    assert model[1].weight is w and model[1].running_mean is rm     # the same Tensors, as PyTorch's
    assert model[1].training is False and model[3][1].training is True
    assert model[3][1].weight is None and model[3][1].running_mean is None
    assert list(model.state_dict()) == list(before)
    assert type(model[0]) is nn.Conv2d
    single = nn.SyncBatchNorm.convert_sync_batchnorm(nn.BatchNorm1d(3), process_group=dist.group.WORLD)
    assert type(single) is nn.SyncBatchNorm and single.process_group is dist.group.WORLD
    assert "SyncBatchNorm(3" in repr(nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(nn.BatchNorm3d(3))))


def test_without_a_group_it_is_batchnorm_and_warns_once(fresh_warning):
    assert not dist.is_initialized()
    x = _t(np.random.default_rng(4).standard_normal((4, 3, 2)))
    layer = nn.SyncBatchNorm(3).double()
    with pytest.warns(UserWarning, match="no process group is initialised"):
        y = layer(x)
    np.testing.assert_allclose(y.detach().numpy(), nn.BatchNorm1d(3).double()(x).detach().numpy(), atol=1e-14)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        layer(x)
        nn.SyncBatchNorm(3).double()(x)     # once per process, not per layer
        layer.eval()
        layer(x)
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        nn.SyncBatchNorm(3).train()(md.ones(1, 3))    # as BatchNorm on a batch of one value


def test_a_group_of_one_rank_falls_back_too(fresh_warning):
    def rank(r):
        with pytest.warns(UserWarning, match="single rank"):
            return nn.SyncBatchNorm(2)(md.randn(3, 2)).shape
    assert run_ranks(1, rank) == [(3, 2)]


def test_bad_input():
    layer = nn.SyncBatchNorm(3)
    with pytest.raises(ValueError, match=r"expected at least 2D input \(got 1D input\)"):
        layer(md.ones(3))
    with pytest.raises(ValueError, match="expected input with 3 channels"):
        layer(md.ones(2, 4))
    with pytest.raises(ValueError, match="a mask needs an input of shape"):
        layer(md.ones(2, 3), mask=np.ones((2, 1), bool))
    with pytest.raises(TypeError, match="expected a Tensor"):
        layer(np.ones((2, 3)))


def test_ddp_with_syncbatchnorm_steps_like_one_process_on_the_whole_batch():
    nnp = pytest.importorskip("minidl.nn.parallel")
    rng = np.random.default_rng(5)
    parts = [rng.standard_normal((n, 2, 3, 3)) for n in (3, 1)]
    labels = [rng.integers(0, 3, n) for n in (3, 1)]

    def build(sync):
        md.manual_seed(0)
        m = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                          nn.Linear(36, 3)).double()
        return nn.SyncBatchNorm.convert_sync_batchnorm(m) if sync else m

    models = [build(True) for _ in parts]    # built outside the ranks: the generator is shared

    def rank(r):
        model = nnp.DistributedDataParallel(models[r])
        opt = md.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(2):
            out = model(_t(parts[r]))
            # each rank's loss is its share of the global mean, so the average of the ranks'
            # gradients is the gradient of the mean over the whole batch times the world size
            loss = md.nn.functional.cross_entropy(out, md.tensor(labels[r]), reduction="sum") * (2 / 4)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return {k: v.numpy() for k, v in model.module.state_dict().items()}

    got = run_ranks(2, rank)
    ref = build(False)
    opt = md.optim.SGD(ref.parameters(), lr=0.1)
    x, y = _t(np.concatenate(parts)), md.tensor(np.concatenate(labels))
    for _ in range(2):
        loss = md.nn.functional.cross_entropy(ref(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    for k, v in ref.state_dict().items():
        np.testing.assert_array_equal(got[0][k], got[1][k], err_msg=k)       # identical on every rank
        np.testing.assert_allclose(got[0][k], v.numpy(), atol=1e-12, err_msg=k)


MPI_SCRIPT = '''
import numpy as np
import minidl as md
import minidl.distributed as dist
import minidl.nn as nn

dist.init_process_group("mpi")
rank = dist.get_rank()
rng = np.random.default_rng(0)
x_all = rng.standard_normal((4, 3, 5)) * 2 + 1
dy_all = rng.standard_normal(x_all.shape)
part = slice(0, 3) if rank == 0 else slice(3, 4)         # unequal batches: 3 and 1 samples

def run(layer, x, dy):
    x = md.tensor(x, requires_grad=True)
    y = layer(x)
    (y * md.tensor(dy)).sum().backward()
    return y.detach().numpy(), x.grad.numpy(), layer.weight.grad.numpy()

sync = run(nn.SyncBatchNorm(3).double(), x_all[part], dy_all[part])
bn = nn.BatchNorm1d(3).double()
ref = run(bn, x_all, dy_all)
dw = md.tensor(sync[2].copy())
dist.all_reduce(dw)
assert np.abs(sync[0] - ref[0][part]).max() < 1e-12
assert np.abs(sync[1] - ref[1][part]).max() < 1e-12
assert np.abs(dw.numpy() - ref[2]).max() < 1e-12
print(f"rank {rank} ok", flush=True)
'''


def test_under_mpiexec_two_ranks_of_unequal_batches_equal_batchnorm(tmp_path):
    from minidl.distributed.testing import mpiexec_path, run_mpiexec
    if mpiexec_path() is None:
        pytest.skip("needs mpi4py and an mpiexec (the [distributed] extra)")
    script = tmp_path / "sync_bn.py"
    script.write_text(MPI_SCRIPT)
    proc = run_mpiexec(script, n=2, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rank 0 ok" in proc.stdout and "rank 1 ok" in proc.stdout
