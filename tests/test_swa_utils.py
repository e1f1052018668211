"""optim.swa_utils: AveragedModel (SWA and EMA averages of a trained model's weights, buffers
averaged or copied), update_bn and SWALR equal PyTorch's on the same weights and data (optional
oracle), and equal the formulas written out here without it."""
import copy
import math

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.optim as optim
from minidl.optim.swa_utils import (SWALR, AveragedModel, get_ema_avg_fn, get_ema_multi_avg_fn,
                                    get_swa_avg_fn, get_swa_multi_avg_fn, update_bn)


def _model():
    md.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 2))


def _torch_twin(torch, model):
    twin = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.BatchNorm1d(6), torch.nn.ReLU(),
                               torch.nn.Linear(6, 2))
    twin.load_state_dict({k: torch.from_numpy(np.array(v.numpy())) for k, v in model.state_dict().items()})
    return twin


def _batches(n=5, size=8):
    rng = np.random.default_rng(1)
    return [(rng.standard_normal((size, 4)).astype(np.float32), rng.standard_normal((size, 2)).astype(np.float32))
            for _ in range(n)]


def _train(model, averaged, batches, lib=md, optim_mod=optim):
    """SGD on ``batches``, folding the model into ``averaged`` after each step; returns the
    model's parameters and buffers after each step (the snapshots the average is made of)."""
    opt = optim_mod.SGD(model.parameters(), lr=0.1, momentum=0.9)
    snapshots = []
    for x, y in batches:
        opt.zero_grad()
        loss = ((model(lib.tensor(x)) - lib.tensor(y)) ** 2).mean()
        loss.backward()
        opt.step()
        averaged.update_parameters(model)
        snapshots.append({k: np.array(v.detach().numpy()) for k, v in model.state_dict().items()})
    return snapshots


def _avg_state(averaged):
    return {k: np.array(v.detach().numpy()) for k, v in averaged.state_dict().items()}


PARAM_KEYS = ["0.weight", "0.bias", "1.weight", "1.bias", "3.weight", "3.bias"]
BUFFER_KEYS = ["1.running_mean", "1.running_var", "1.num_batches_tracked"]


def _ema(snapshots, key, decay):
    avg = snapshots[0][key].astype(np.float64)
    for snap in snapshots[1:]:
        avg = decay * avg + (1 - decay) * snap[key]
    return avg


AVERAGES = {
    "swa-default": lambda s: {},
    "swa-avg_fn": lambda s: {"avg_fn": s.get_swa_avg_fn()},
    "swa-multi_avg_fn": lambda s: {"multi_avg_fn": s.get_swa_multi_avg_fn()},
    "ema-multi_avg_fn": lambda s: {"multi_avg_fn": s.get_ema_multi_avg_fn(0.8)},
    "ema-avg_fn": lambda s: {"avg_fn": s.get_ema_avg_fn(0.8)},
}


@pytest.mark.parametrize("use_buffers", [False, True])
@pytest.mark.parametrize("kind", sorted(AVERAGES))
def test_averaged_model_follows_its_formula(kind, use_buffers):
    from minidl.optim import swa_utils
    model = _model()
    averaged = AveragedModel(model, use_buffers=use_buffers, **AVERAGES[kind](swa_utils))
    snapshots = _train(model, averaged, _batches())
    got = _avg_state(averaged)
    assert int(got["n_averaged"]) == 5
    averaged_keys = PARAM_KEYS + (BUFFER_KEYS[:2] if use_buffers else [])
    for key in averaged_keys:
        if kind.startswith("swa"):
            want = np.mean([s[key].astype(np.float64) for s in snapshots], axis=0)
        else:
            want = _ema(snapshots, key, 0.8)
        np.testing.assert_allclose(got["module." + key], want, rtol=1e-5, atol=1e-6, err_msg=key)
    if not use_buffers:   # copied from the model, not averaged
        for key in BUFFER_KEYS:
            np.testing.assert_array_equal(got["module." + key], snapshots[-1][key])


@pytest.mark.parametrize("use_buffers", [False, True])
@pytest.mark.parametrize("kind", sorted(AVERAGES))
def test_averaged_model_matches_torch(kind, use_buffers):
    torch = pytest.importorskip("torch")
    from torch.optim import swa_utils as torch_swa

    from minidl.optim import swa_utils
    model = _model()
    twin = _torch_twin(torch, model)
    averaged = AveragedModel(model, use_buffers=use_buffers, **AVERAGES[kind](swa_utils))
    torch_kind = kind
    if kind == "swa-multi_avg_fn" and use_buffers:
        # torch's raises on the integer num_batches_tracked; minidl averages it as the per-tensor form
        torch_kind = "swa-avg_fn"
    torch_averaged = torch_swa.AveragedModel(twin, use_buffers=use_buffers, **AVERAGES[torch_kind](torch_swa))
    batches = _batches()
    _train(model, averaged, batches)
    _train(twin, torch_averaged, batches, torch, torch.optim)
    got, want = _avg_state(averaged), _avg_state(torch_averaged)
    assert list(got) == list(want)
    for key in want:
        # integer buffers (num_batches_tracked) are truncated the same way
        np.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-6, err_msg=key)
        assert got[key].dtype == want[key].dtype, key


def test_averaged_copy_is_independent_of_the_model():
    model = _model()
    averaged = AveragedModel(model)
    averaged.update_parameters(model)
    for (name, p), q in zip(model.named_parameters(), averaged.module.parameters()):
        assert not np.shares_memory(p._data, q._data), name
    before = [np.array(q.detach().numpy()) for q in averaged.parameters()]
    model(md.randn(8, 4)).sum().backward()
    with md.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    for q, old in zip(averaged.parameters(), before):
        assert q.grad is None
        np.testing.assert_array_equal(q.detach().numpy(), old)
    # forward runs the averaged copy
    x = md.randn(3, 4)
    averaged.eval()
    np.testing.assert_allclose(averaged(x).detach().numpy(), averaged.module(x).detach().numpy())


def test_state_dict_keys_and_round_trip():
    model = _model()
    averaged = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.5))
    _train(model, averaged, _batches(3))
    state = averaged.state_dict()
    assert list(state) == ["n_averaged"] + ["module." + k for k in PARAM_KEYS[:4] + BUFFER_KEYS + PARAM_KEYS[4:]]
    assert state["n_averaged"].dtype == md.int64 and tuple(state["n_averaged"].shape) == ()
    fresh = AveragedModel(_model(), multi_avg_fn=get_ema_multi_avg_fn(0.5))
    fresh.load_state_dict(state)
    assert int(fresh.n_averaged) == 3
    for key, value in _avg_state(averaged).items():
        np.testing.assert_array_equal(_avg_state(fresh)[key], value)


def test_state_dict_loads_from_torch():
    torch = pytest.importorskip("torch")
    from torch.optim import swa_utils as torch_swa
    twin = _torch_twin(torch, _model())
    torch_averaged = torch_swa.AveragedModel(twin)
    torch_averaged.update_parameters(twin)
    averaged = AveragedModel(_model())
    averaged.load_state_dict({k: md.tensor(v.numpy()) for k, v in torch_averaged.state_dict().items()})
    assert int(averaged.n_averaged) == 1
    np.testing.assert_array_equal(averaged.module[0].weight.detach().numpy(), twin[0].weight.detach().numpy())


def test_avg_functions_by_hand():
    a, p = md.tensor([1.0, 2.0, 4.0]), md.tensor([3.0, 2.0, 0.0])
    np.testing.assert_allclose(get_swa_avg_fn()(a, p, md.tensor(3)).numpy(), [1.5, 2.0, 3.0])
    np.testing.assert_allclose(get_ema_avg_fn(0.75)(a, p, 0).numpy(), [1.5, 2.0, 3.0])
    avgs, cur = [a.clone(), md.tensor([8.0])], [p, md.tensor([0.0])]
    get_ema_multi_avg_fn(0.75)(avgs, cur, 0)   # in place
    np.testing.assert_allclose(avgs[0].numpy(), [1.5, 2.0, 3.0])
    np.testing.assert_allclose(avgs[1].numpy(), [6.0])
    avgs = [a.clone()]
    get_swa_multi_avg_fn()(avgs, [p], md.tensor(1))
    np.testing.assert_allclose(avgs[0].numpy(), [2.0, 2.0, 2.0])


def test_bad_arguments():
    model = _model()
    with pytest.raises(AssertionError, match="Only one of avg_fn and multi_avg_fn"):
        AveragedModel(model, avg_fn=get_swa_avg_fn(), multi_avg_fn=get_swa_multi_avg_fn())
    with pytest.raises(TypeError, match="expected an nn.Module, got list"):
        AveragedModel([model])
    with pytest.raises(TypeError, match="avg_fn must be a function, got float"):
        AveragedModel(model, avg_fn=0.9)
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match=r"Invalid decay value .* \[0,1\] range"):
            get_ema_avg_fn(bad)
        with pytest.raises(ValueError, match=r"Invalid decay value"):
            get_ema_multi_avg_fn(bad)
    averaged = AveragedModel(model)
    with pytest.raises(ValueError, match="averaged model has 6 parameters, the model given has 2"):
        averaged.update_parameters(nn.Linear(4, 6))
    with pytest.raises(ValueError, match=r"#0 has shape \(6, 4\) in the averaged model, \(6, 3\)"):
        averaged.update_parameters(nn.Sequential(nn.Linear(3, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 2)))
    with pytest.raises(TypeError, match="update_bn: expected an iterable loader"):
        update_bn(3, model)


def _bn_loader():
    rng = np.random.default_rng(2)
    xs = [(rng.standard_normal((6, 4)) * 3 + 1).astype(np.float32) for _ in range(4)]
    return xs, [x @ np.ones((4, 6), np.float32) for x in xs]


@pytest.mark.parametrize("as_tuples", [False, True])
def test_update_bn_is_a_cumulative_average(as_tuples):
    model = _model()
    model.eval()
    model[1].momentum = 0.3
    model[1].running_mean._data[...] = 100.0   # reset, not folded in
    xs, _ = _bn_loader()
    loader = [(md.tensor(x), md.tensor(np.zeros(6, np.float32))) if as_tuples else md.tensor(x) for x in xs]
    update_bn(loader, model)
    assert model[1].momentum == 0.3 and not model.training and not model[1].training
    with md.no_grad():
        hidden = [model[0](md.tensor(x)).numpy().astype(np.float64) for x in xs]
    np.testing.assert_allclose(model[1].running_mean.numpy(), np.mean([h.mean(0) for h in hidden], 0), rtol=1e-5)
    np.testing.assert_allclose(model[1].running_var.numpy(), np.mean([h.var(0, ddof=1) for h in hidden], 0),
                               rtol=1e-5)
    assert int(model[1].num_batches_tracked) == 4


def test_update_bn_matches_torch_and_averaged_model():
    torch = pytest.importorskip("torch")
    from torch.optim import swa_utils as torch_swa
    model = _model()
    twin = _torch_twin(torch, model)
    averaged = AveragedModel(model)
    torch_averaged = torch_swa.AveragedModel(twin)
    averaged.update_parameters(model)
    torch_averaged.update_parameters(twin)
    xs, ys = _bn_loader()
    update_bn([[md.tensor(x), md.tensor(y)] for x, y in zip(xs, ys)], averaged)
    torch_swa.update_bn([[torch.from_numpy(x), torch.from_numpy(y)] for x, y in zip(xs, ys)], torch_averaged)
    got, want = _avg_state(averaged), _avg_state(torch_averaged)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-6, err_msg=key)
    assert averaged.training and averaged.module[1].momentum == 0.1


def test_update_bn_without_batchnorm_leaves_the_model_alone():
    model = nn.Linear(4, 2)
    model.eval()
    update_bn([md.randn(2, 4)], model)
    assert not model.training


def _swalr_lrs(sched_cls, opt_cls, params, steps, **kwargs):
    opt = opt_cls(params, lr=0.5)
    sched = sched_cls(opt, **kwargs)
    lrs = [sched.get_last_lr()]
    for _ in range(steps):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr())
    return lrs


SWALR_CASES = [
    {"swa_lr": 0.05},
    {"swa_lr": 0.05, "anneal_epochs": 4, "anneal_strategy": "linear"},
    {"swa_lr": [0.05, 0.2], "anneal_epochs": 3},
    {"swa_lr": 0.05, "anneal_epochs": 0},
    {"swa_lr": 0.05, "anneal_epochs": 1, "anneal_strategy": "linear"},
]


@pytest.mark.parametrize("kwargs", SWALR_CASES)
def test_swalr_matches_torch(kwargs):
    torch = pytest.importorskip("torch")
    from torch.optim import swa_utils as torch_swa

    def groups(lib, cls):
        return [{"params": [cls(lib.zeros(2))]}, {"params": [cls(lib.zeros(1))], "lr": 0.1}]
    got = _swalr_lrs(SWALR, optim.SGD, groups(md, nn.Parameter), 14, **kwargs)
    want = _swalr_lrs(torch_swa.SWALR, torch.optim.SGD, groups(torch, torch.nn.Parameter), 14, **kwargs)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_swalr_by_hand_and_after_another_schedule():
    p = nn.Parameter(md.zeros(1))
    lrs = _swalr_lrs(SWALR, optim.SGD, [p], 5, swa_lr=0.1, anneal_epochs=3, anneal_strategy="linear")
    np.testing.assert_allclose([lr[0] for lr in lrs], [0.5, 0.5 - 0.4 / 3, 0.5 - 0.8 / 3, 0.1, 0.1, 0.1])
    lrs = _swalr_lrs(SWALR, optim.SGD, [p], 3, swa_lr=0.1, anneal_epochs=2)
    np.testing.assert_allclose([lr[0] for lr in lrs], [0.5, 0.1 * 0.5 + 0.5 * 0.5, 0.1, 0.1])
    # starts from the lr another schedule left, as in an SWA script
    opt = optim.SGD([p], lr=1.0)
    decay = optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
    opt.step()
    decay.step()
    swa = SWALR(opt, swa_lr=0.05, anneal_epochs=2)
    opt.step()
    swa.step()
    c = (1 - math.cos(math.pi / 2)) / 2
    assert swa.get_last_lr()[0] == pytest.approx(0.05 * c + 0.5 * (1 - c))
    assert opt.param_groups[0]["swa_lr"] == 0.05


def test_swalr_state_dict_round_trip():
    def make():
        opt = optim.SGD([nn.Parameter(md.zeros(1))], lr=0.5)
        return opt, SWALR(opt, swa_lr=0.1, anneal_epochs=5, anneal_strategy="linear")
    opt, sched = make()
    for _ in range(2):
        opt.step()
        sched.step()
    state = sched.state_dict()
    assert "anneal_func" not in state and "optimizer" not in state
    assert state["_anneal_strategy"] == "linear" and state["_step_count"] == 3 and state["last_epoch"] == 2
    rest = []
    for _ in range(4):
        opt.step()
        sched.step()
        rest.append(sched.get_last_lr()[0])
    opt2 = optim.SGD([nn.Parameter(md.zeros(1))], lr=0.5)
    sched2 = SWALR(opt2, swa_lr=0.1, anneal_epochs=5, anneal_strategy="cos")
    opt2.load_state_dict(copy.deepcopy(opt.state_dict()))
    sched2.load_state_dict(state)
    opt2.param_groups[0]["lr"] = state["_last_lr"][0]
    assert sched2.anneal_func(0.5) == 0.5   # the linear anneal, restored from its name
    again = []
    for _ in range(4):
        opt2.step()
        sched2.step()
        again.append(sched2.get_last_lr()[0])
    np.testing.assert_allclose(again, rest)
    with pytest.raises(ValueError, match="anneal_strategy must be one of 'cos' or 'linear', instead got exp"):
        sched2.load_state_dict({**state, "_anneal_strategy": "exp"})


def test_swalr_bad_arguments():
    opt = optim.SGD([nn.Parameter(md.zeros(1))], lr=0.5)
    with pytest.raises(ValueError, match="anneal_strategy must be one of 'cos' or 'linear', instead got step"):
        SWALR(opt, swa_lr=0.1, anneal_strategy="step")
    for bad in (-1, 2.5):
        with pytest.raises(ValueError, match=f"anneal_epochs must be equal or greater than 0, got {bad}"):
            SWALR(opt, swa_lr=0.1, anneal_epochs=bad)
    with pytest.raises(ValueError, match="swa_lr must have the same length as optimizer.param_groups"):
        SWALR(opt, swa_lr=[0.1, 0.2])
    with pytest.raises(TypeError, match="list is not an Optimizer"):
        SWALR([], swa_lr=0.1)
