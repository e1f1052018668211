"""The learning-rate schedules beyond StepLR/CosineAnnealingLR/LambdaLR: lr (and cycled
momentum) trajectories equal PyTorch's over 30 steps (optional oracle); closed forms,
state_dict round trips and bad arguments without PyTorch."""
import copy
import math

import numpy as np
import pytest

import minidl.optim as optim
from minidl.nn.parameter import Parameter
from minidl.optim import lr_scheduler

# name -> (optimizer name, optimizer kwargs, scheduler factory taking (lr_scheduler module, optimizer))
SCHEDULES = {
    "ExponentialLR": ("SGD", {}, lambda m, o: m.ExponentialLR(o, gamma=0.9)),
    "MultiStepLR": ("SGD", {}, lambda m, o: m.MultiStepLR(o, milestones=[3, 7, 7, 20], gamma=0.5)),
    "ConstantLR": ("SGD", {}, lambda m, o: m.ConstantLR(o, factor=0.25, total_iters=6)),
    "LinearLR": ("SGD", {}, lambda m, o: m.LinearLR(o, start_factor=0.2, end_factor=0.9, total_iters=12)),
    "PolynomialLR": ("SGD", {}, lambda m, o: m.PolynomialLR(o, total_iters=20, power=2.0)),
    "OneCycleLR": ("SGD", {"momentum": 0.9}, lambda m, o: m.OneCycleLR(o, max_lr=[0.5, 0.2], total_steps=31)),
    "OneCycleLR-3phase-linear-adam": ("Adam", {}, lambda m, o: m.OneCycleLR(
        o, max_lr=0.3, epochs=3, steps_per_epoch=11, anneal_strategy="linear", three_phase=True, pct_start=0.25)),
    "CyclicLR": ("SGD", {"momentum": 0.9}, lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4,
                                                                     step_size_down=3)),
    "CyclicLR-triangular2": ("SGD", {"momentum": 0.9}, lambda m, o: m.CyclicLR(
        o, base_lr=[0.01, 0.02], max_lr=0.1, step_size_up=3, mode="triangular2")),
    "CyclicLR-exp_range-adam": ("Adam", {}, lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=5,
                                                                     mode="exp_range", gamma=0.97)),
    "CyclicLR-no-momentum": ("SGD", {}, lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=2,
                                                                 cycle_momentum=False)),
    "CosineAnnealingWarmRestarts": ("SGD", {}, lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=5, eta_min=0.01)),
    "CosineAnnealingWarmRestarts-T_mult": ("SGD", {}, lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2)),
    "SequentialLR": ("SGD", {}, lambda m, o: m.SequentialLR(
        o, [m.LinearLR(o, start_factor=0.1, total_iters=4), m.ExponentialLR(o, gamma=0.8),
            m.StepLR(o, step_size=3, gamma=0.5)], milestones=[5, 12])),
    "MultiplicativeLR": ("SGD", {}, lambda m, o: m.MultiplicativeLR(o, lambda e: 0.9 if e % 3 else 1.1)),
    "MultiplicativeLR-per-group": ("SGD", {}, lambda m, o: m.MultiplicativeLR(
        o, [lambda e: 0.95, lambda e: 1.0 / (1 + 0.1 * e)])),
    "ChainedScheduler": ("SGD", {}, lambda m, o: m.ChainedScheduler(
        [m.ConstantLR(o, factor=0.5, total_iters=4), m.ExponentialLR(o, gamma=0.9),
         m.MultiStepLR(o, milestones=[10], gamma=0.3)])),
}


def trajectory(lib_optim, lib_sched, make_param, name, steps=30):
    opt_name, opt_kw, factory = SCHEDULES[name]
    opt = getattr(lib_optim, opt_name)([{"params": [make_param()]}, {"params": [make_param()], "lr": 0.05}],
                                       lr=0.1, **opt_kw)
    sched = factory(lib_sched, opt)
    rows = []
    for _ in range(steps):
        momenta = [g["betas"][0] if "betas" in g else g.get("momentum") for g in opt.param_groups]
        rows.append((list(sched.get_last_lr()), [g["lr"] for g in opt.param_groups], momenta))
        opt.step()
        sched.step()
    return rows, sched


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_trajectory_equals_pytorchs(name):
    torch = pytest.importorskip("torch")
    expected, _ = trajectory(torch.optim, torch.optim.lr_scheduler, lambda: torch.zeros(2, requires_grad=True), name)
    got, _ = trajectory(optim, lr_scheduler, lambda: Parameter(np.zeros(2)), name)
    for step, (e, g) in enumerate(zip(expected, got)):
        for e_values, g_values in zip(e, g):
            np.testing.assert_allclose(np.array(g_values, float), np.array(e_values, float), rtol=1e-12, atol=1e-15,
                                       err_msg=f"step {step}")


def test_reduce_lr_on_plateau_equals_pytorchs():
    torch = pytest.importorskip("torch")
    metrics = [1.0, 0.9, 0.95, 0.95, 0.94, 0.96, 0.97, 0.5, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6]

    def run(lib_optim, make_param, **kw):
        opt = lib_optim.SGD([{"params": [make_param()]}, {"params": [make_param()], "lr": 0.05}], lr=0.1)
        sched = lib_optim.lr_scheduler.ReduceLROnPlateau(opt, **kw)
        out = []
        for m in metrics:
            sched.step(m)
            out.append(sched.get_last_lr())
        return out
    for kw in (dict(patience=1), dict(mode="max", patience=0, factor=0.5, cooldown=2, min_lr=[0.02, 0.0]),
               dict(threshold_mode="abs", threshold=0.05, patience=1, eps=0.02)):
        assert run(optim, lambda: Parameter(np.zeros(2)), **kw) == \
            run(torch.optim, lambda: torch.zeros(2, requires_grad=True), **kw), kw


# without PyTorch ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["ExponentialLR", "MultiStepLR", "ConstantLR", "LinearLR", "PolynomialLR"])
def test_chainable_form_matches_closed_form(name):
    rows, sched = trajectory(optim, lr_scheduler, lambda: Parameter(np.zeros(2)), name, steps=25)
    for epoch, (lrs, _, _) in enumerate(rows):
        sched.last_epoch = epoch
        np.testing.assert_allclose(lrs, sched._get_closed_form_lr(), rtol=1e-12)


def test_closed_forms_by_hand():
    lrs = [r[0][0] for r in trajectory(optim, lr_scheduler, lambda: Parameter(np.zeros(2)), "MultiStepLR")[0]]
    assert lrs[:3] == [0.1] * 3 and lrs[3] == pytest.approx(0.05) and lrs[7] == pytest.approx(0.0125)
    lrs = [r[0][0] for r in trajectory(optim, lr_scheduler, lambda: Parameter(np.zeros(2)),
                                       "CosineAnnealingWarmRestarts")[0]]
    assert lrs[0] == lrs[5] == lrs[10] == 0.1                          # restarts every T_0 = 5 epochs
    assert lrs[2] == pytest.approx(0.01 + 0.09 * (1 + math.cos(math.pi * 2 / 5)) / 2)


def test_one_cycle_cycles_sgd_momentum_against_the_lr():
    rows, _ = trajectory(optim, lr_scheduler, lambda: Parameter(np.zeros(2)), "OneCycleLR")
    lrs, momenta = [r[0][0] for r in rows], [r[2][0] for r in rows]
    peak = int(np.argmax(lrs))
    assert lrs[0] == pytest.approx(0.5 / 25) and lrs[peak] == pytest.approx(0.5, rel=0.01)   # the peak: step 8.3
    assert momenta[0] == pytest.approx(0.95) and momenta[peak] == pytest.approx(0.85, rel=0.01)


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_state_dict_round_trip_continues_identically(name):
    def fresh():
        return trajectory(optim, lr_scheduler, lambda: Parameter(np.zeros(2)), name, steps=0)[1]
    sched = fresh()
    for _ in range(7):
        sched.optimizer.step()
        sched.step()
    opt_state, saved = copy.deepcopy(sched.optimizer.state_dict()), copy.deepcopy(sched.state_dict())
    resumed = fresh()
    resumed.optimizer.load_state_dict(opt_state)
    resumed.load_state_dict(saved)
    for _ in range(10):
        sched.step()
        resumed.step()
        assert resumed.get_last_lr() == sched.get_last_lr()


def test_plateau_state_dict_round_trip():
    opt = optim.SGD([Parameter(np.zeros(2))], lr=0.1)
    sched = lr_scheduler.ReduceLROnPlateau(opt, patience=1)
    for m in (1.0, 1.0, 1.0):
        sched.step(m)
    other = lr_scheduler.ReduceLROnPlateau(optim.SGD([Parameter(np.zeros(2))], lr=0.1), patience=1)
    other.load_state_dict(copy.deepcopy(sched.state_dict()))
    assert other.best == 1.0 and other.num_bad_epochs == sched.num_bad_epochs and other.last_epoch == 3


def test_composite_load_checks_every_inner_state_before_changing_any():
    _, sched = trajectory(optim, lr_scheduler, lambda: Parameter(np.zeros(2)), "SequentialLR", steps=3)
    bad = copy.deepcopy(sched.state_dict())
    bad["last_epoch"] = 99
    bad["_schedulers"][2]["step_size"] = 0
    with pytest.raises(ValueError, match="step_size must be a positive integer, got 0"):
        sched.load_state_dict(bad)
    assert sched.last_epoch == 3 and sched._schedulers[2].step_size == 3
    with pytest.raises(ValueError, match="holds 1 schedulers, this one has 3"):
        sched.load_state_dict({**bad, "_schedulers": bad["_schedulers"][:1]})


def test_bad_arguments():
    def opt():
        return optim.SGD([Parameter(np.zeros(2))], lr=0.1)
    with pytest.raises(ValueError, match="between 0 and 1"):
        lr_scheduler.ConstantLR(opt(), factor=2)
    with pytest.raises(ValueError, match="Starting multiplicative factor"):
        lr_scheduler.LinearLR(opt(), start_factor=0)
    with pytest.raises(ValueError, match="Expected an integer total_iters >= 0, but got -1"):
        lr_scheduler.PolynomialLR(opt(), total_iters=-1)
    with pytest.raises(ValueError, match="Expected positive integer T_0, but got 0"):
        lr_scheduler.CosineAnnealingWarmRestarts(opt(), T_0=0)
    with pytest.raises(ValueError, match="either total_steps OR"):
        lr_scheduler.OneCycleLR(opt(), max_lr=0.1)
    with pytest.raises(ValueError, match="max_lr must have the same length as optimizer.param_groups"):
        lr_scheduler.OneCycleLR(opt(), max_lr=[0.1, 0.2], total_steps=10)
    with pytest.raises(ValueError, match="must support momentum or beta1"):
        lr_scheduler.CyclicLR(optim.Adagrad([Parameter(np.zeros(2))]), base_lr=0.01, max_lr=0.1)
    with pytest.raises(ValueError, match="mode is invalid"):
        lr_scheduler.CyclicLR(opt(), base_lr=0.01, max_lr=0.1, mode="sawtooth")
    with pytest.raises(ValueError, match="Factor should be < 1.0"):
        lr_scheduler.ReduceLROnPlateau(opt(), factor=1.5)
    with pytest.raises(ValueError, match="mode middle is unknown"):
        lr_scheduler.ReduceLROnPlateau(opt(), mode="middle")
    o = opt()
    with pytest.raises(ValueError, match="does not support `ReduceLROnPlateau`"):
        lr_scheduler.ChainedScheduler([lr_scheduler.ReduceLROnPlateau(o)])
    with pytest.raises(ValueError, match="number of schedulers 2 and the number of milestones to be equal to 0"):
        lr_scheduler.SequentialLR(o, [lr_scheduler.ExponentialLR(o, 0.9), lr_scheduler.ExponentialLR(o, 0.9)], [])
    with pytest.raises(ValueError, match="same optimizer"):
        lr_scheduler.ChainedScheduler([lr_scheduler.ExponentialLR(o, 0.9), lr_scheduler.ExponentialLR(opt(), 0.9)])


def test_one_cycle_refuses_to_step_past_total_steps():
    opt = optim.SGD([Parameter(np.zeros(2))], lr=0.1, momentum=0.9)
    sched = lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=3)
    for _ in range(3):
        opt.step()
        sched.step()
    opt.step()
    with pytest.raises(ValueError, match="Tried to step 4 times. The specified number of total steps is 3"):
        sched.step()


def _sgd():
    return optim.SGD([Parameter(np.zeros(2, np.float32))], lr=0.1)


def _scheduler_warnings(order):
    import warnings
    opt = _sgd()
    sched = lr_scheduler.StepLR(opt, step_size=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for call in order:
            (opt.step if call == "opt" else sched.step)()
    return [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def test_scheduler_stepped_before_its_optimizer_warns_as_pytorch():
    torch = pytest.importorskip("torch")
    p = torch.nn.Parameter(torch.zeros(2))
    topt = torch.optim.SGD([p], lr=0.1)
    tsched = torch.optim.lr_scheduler.StepLR(topt, step_size=1)
    with pytest.warns(UserWarning, match=r"Detected call of `lr_scheduler.step\(\)` before `optimizer.step\(\)`"):
        tsched.step()
    ours = _scheduler_warnings(["sched", "sched", "opt", "sched"])
    assert len(ours) == 1 and ours[0].startswith("Detected call of `lr_scheduler.step()` before `optimizer.step()`")


def test_scheduler_warns_not_after_its_optimizer_stepped_or_when_built():
    assert _scheduler_warnings([]) == []                     # the constructor's own step
    assert _scheduler_warnings(["opt", "sched", "opt", "sched"]) == []
    opt = _sgd()
    copied = copy.deepcopy(opt)
    sched = lr_scheduler.StepLR(opt, step_size=1)
    twin = lr_scheduler.StepLR(copied, step_size=1)
    other = copy.deepcopy(opt)   # the counted step of a copy steps (and counts) the copy
    other.step()
    assert getattr(opt, "_step_calls", 0) == 0 and other._step_calls == 1
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step()
        sched.step()
        resumed = lr_scheduler.StepLR(copied, step_size=1)
        resumed.load_state_dict(sched.state_dict())   # a resumed schedule has stepped before
        resumed.step()
    assert "_steps_at_init" not in sched.state_dict()
    assert twin.optimizer is copied


def test_multiplicative_lr_by_hand_and_its_state_leaves_the_functions_out():
    opt = optim.SGD([Parameter(np.zeros(2))], lr=1.0)
    sched = lr_scheduler.MultiplicativeLR(opt, lambda e: 0.5)
    lrs = [opt.param_groups[0]["lr"]]
    for _ in range(3):
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    assert lrs == [1.0, 0.5, 0.25, 0.125]
    opt.param_groups[0]["lr"] = 2.0   # chainable: a manual change is scaled from, not overwritten
    opt.step()
    sched.step()
    assert sched.get_last_lr() == [1.0]
    assert sched.state_dict()["lr_lambdas"] == [None] and sched.state_dict()["last_epoch"] == 4   # a function: None
    with pytest.raises(ValueError, match="expected 1 lr_lambdas, but got 2"):
        lr_scheduler.MultiplicativeLR(opt, [lambda e: 1.0, lambda e: 1.0])
    with pytest.raises(TypeError, match="lr_lambda should be a function, but got float"):
        lr_scheduler.MultiplicativeLR(opt, 0.5)
