"""Optimizer and scheduler state in PyTorch's form, and exact resume through md.save / md.load.

The per-parameter state holds Tensors as PyTorch's does (``step`` a 0-d float32 count, the
buffers Tensors beside the parameter); scheduler state dicts have PyTorch's keys; a run saved
at step k and continued in fresh objects matches the uninterrupted run bit for bit.
"""
import copy
import types

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
import minidl.optim as optim
from minidl.nn import Parameter
from minidl.optim import lr_scheduler
from minidl.utils.data import DataLoader, TensorDataset

OPTIMIZERS = [
    ("SGD", dict(lr=0.1, momentum=0.9)), ("Adam", dict(lr=0.01, amsgrad=True)), ("AdamW", dict(lr=0.01)),
    ("NAdam", dict(lr=0.01)), ("RAdam", dict(lr=0.01)), ("Adamax", dict(lr=0.01)), ("ASGD", dict(lr=0.01, t0=2)),
    ("Adagrad", dict(lr=0.1)), ("Adadelta", {}), ("RMSprop", dict(momentum=0.5, centered=True)), ("Rprop", {}),
    ("Adafactor", {}),
]
SCALARS = {"step", "mu_product", "eta", "mu"}   # 0-d float32 Tensors in PyTorch's state


def _run(lib, optim_module, name, kw, steps=3):
    w = lib.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3), requires_grad=True)
    opt = getattr(optim_module, name)([w], **kw)
    for _ in range(steps):
        opt.zero_grad()
        ((w * w).sum() + w.sin().sum()).backward()
        opt.step()
    return w, opt


@pytest.mark.parametrize("name,kw", OPTIMIZERS, ids=[n for n, _ in OPTIMIZERS])
def test_state_holds_tensors_and_a_float32_step(name, kw):
    w, opt = _run(md, optim, name, kw)
    state = opt.state[w]
    assert state, "the optimizer kept no state"
    for key, value in state.items():
        assert isinstance(value, md.Tensor), (key, type(value))
        if key in SCALARS:
            assert value.shape == () and value.dtype == md.float32, (key, value.shape, value.dtype)
        else:
            assert value.dtype == w.dtype and value.device == w.device, key
    if "step" in state:
        assert state["step"].item() == 3.0
    assert opt.state_dict()["state"][0] is state   # shared, not copied, as PyTorch's


@pytest.mark.parametrize("name,kw", OPTIMIZERS, ids=[n for n, _ in OPTIMIZERS])
def test_state_and_group_keys_and_types_match_pytorch(name, kw):
    torch = pytest.importorskip("torch")
    _, mine = _run(md, optim, name, kw)
    _, theirs = _run(torch, torch.optim, name, kw)
    ours, ref = mine.state_dict(), theirs.state_dict()
    assert list(ours["state"][0]) == list(ref["state"][0])
    for key, value in ref["state"][0].items():
        got = ours["state"][0][key]
        assert isinstance(got, md.Tensor) and tuple(got.shape) == tuple(value.shape), key
        assert str(got.dtype).split(".")[-1] == str(value.dtype).split(".")[-1], key
        np.testing.assert_allclose(got.numpy(), value.numpy(), rtol=1e-5, atol=1e-6, err_msg=key)
    assert ours["param_groups"] == ref["param_groups"]


def test_step_is_counted_in_place():
    # as in PyTorch, a reference to the step tensor sees the later updates
    w, opt = _run(md, optim, "Adam", {}, steps=1)
    step = opt.state[w]["step"]
    opt.step()
    opt.step()
    assert step.item() == 3.0 and opt.state[w]["step"] is step


def test_scalar_state_follows_the_default_dtype_as_pytorchs():
    previous = md.get_default_dtype()
    md.set_default_dtype(md.float64)
    try:
        w, opt = _run(md, optim, "NAdam", {}, steps=1)
    finally:
        md.set_default_dtype(previous)
    assert opt.state[w]["step"].dtype == md.float64 and opt.state[w]["mu_product"].dtype == md.float64


def test_nadam_mu_product_is_rounded_to_float32_at_each_step():
    beta1, decay = 0.9, 4e-3
    w, opt = _run(md, optim, "NAdam", {}, steps=5)
    product = np.float32(1.0)
    for t in range(1, 6):
        product = np.float32(product * np.float32(beta1 * (1.0 - 0.5 * 0.96 ** (t * decay))))
    assert opt.state[w]["mu_product"].numpy() == product


def test_asgd_eta_and_mu_are_float32_tensors_with_pytorchs_values():
    lr, lambd, alpha, t0 = 0.01, 1e-4, 0.75, 2
    w, opt = _run(md, optim, "ASGD", dict(lr=lr, t0=t0), steps=4)
    state = opt.state[w]
    assert state["eta"].numpy() == np.float32(lr / (1 + lambd * lr * 4) ** alpha)
    assert state["mu"].numpy() == np.float32(1 / max(1, 4 - t0))


@pytest.mark.parametrize("name,kw", OPTIMIZERS, ids=[n for n, _ in OPTIMIZERS])
def test_older_state_with_int_counts_and_arrays_loads_and_continues_identically(name, kw):
    w, opt = _run(md, optim, name, kw)
    older = copy.deepcopy(opt.state_dict())   # as minidl wrote it before: ints, floats and arrays
    for entries in older["state"].values():
        for key, value in list(entries.items()):
            if key == "step":
                entries[key] = int(value.item())
            elif key in SCALARS:
                entries[key] = float(value.item())
            else:
                entries[key] = value.numpy()
    w2 = md.tensor(w.detach().numpy(), requires_grad=True)
    fresh = getattr(optim, name)([w2], **kw)
    fresh.load_state_dict(older)
    for key, value in fresh.state[w2].items():
        assert isinstance(value, md.Tensor), key
    for o, p in ((opt, w), (fresh, w2)):
        for _ in range(2):
            o.zero_grad()
            ((p * p).sum() + p.sin().sum()).backward()
            o.step()
    np.testing.assert_array_equal(w.detach().numpy(), w2.detach().numpy())
    assert fresh.state[w2].get("step", md.tensor(0.0)).item() == opt.state[w].get("step", md.tensor(0.0)).item()


def test_state_pytorch_saves_loads_into_tensors():
    torch = pytest.importorskip("torch")
    _, theirs = _run(torch, torch.optim, "NAdam", {})
    sd = theirs.state_dict()
    sd = {"state": {0: {k: v.numpy() for k, v in sd["state"][0].items()}}, "param_groups": sd["param_groups"]}
    w = md.tensor(np.zeros((2, 3), np.float32), requires_grad=True)
    opt = optim.NAdam([w])
    opt.load_state_dict(sd)
    state = opt.state[w]
    assert state["step"].dtype == md.float32 and state["step"].item() == 3.0
    assert state["mu_product"].numpy() == sd["state"][0]["mu_product"]


def test_lbfgs_state_vectors_are_tensors():
    w = md.tensor(np.array([1.5, -2.0, 0.5]), requires_grad=True)
    opt = optim.LBFGS([w], history_size=3, max_iter=4)

    def closure():
        opt.zero_grad()
        loss = ((w - 1) ** 4).sum() + (w * w).sum()
        loss.backward()
        return loss
    opt.step(closure)
    state = opt.state[w]
    assert isinstance(state["d"], md.Tensor) and isinstance(state["prev_flat_grad"], md.Tensor)
    assert state["old_dirs"] and all(isinstance(v, md.Tensor) for v in state["old_dirs"] + state["old_stps"])


# schedulers ----------------------------------------------------------------------------------------
def _schedulers(S, o):
    return {
        "StepLR": lambda: S.StepLR(o, 3, gamma=0.5),
        "MultiStepLR": lambda: S.MultiStepLR(o, [2, 4], 0.1),
        "ExponentialLR": lambda: S.ExponentialLR(o, 0.9),
        "CosineAnnealingLR": lambda: S.CosineAnnealingLR(o, 10, 0.001),
        "LambdaLR": lambda: S.LambdaLR(o, lambda e: 0.9 ** e),
        "MultiplicativeLR": lambda: S.MultiplicativeLR(o, lambda e: 0.9),
        "OneCycleLR": lambda: S.OneCycleLR(o, 1.0, total_steps=20),
        "CyclicLR": lambda: S.CyclicLR(o, 0.01, 0.1, step_size_up=3),
        "CosineAnnealingWarmRestarts": lambda: S.CosineAnnealingWarmRestarts(o, 3, 2),
        "ReduceLROnPlateau": lambda: S.ReduceLROnPlateau(o, patience=1),
        "LinearLR": lambda: S.LinearLR(o, 0.5, total_iters=4),
        "ConstantLR": lambda: S.ConstantLR(o, 0.5, total_iters=4),
        "PolynomialLR": lambda: S.PolynomialLR(o, 5, 2.0),
        "SequentialLR": lambda: S.SequentialLR(o, [S.ConstantLR(o, 0.5, total_iters=2), S.ExponentialLR(o, 0.9)],
                                               [3]),
        "ChainedScheduler": lambda: S.ChainedScheduler([S.ConstantLR(o, 0.5, total_iters=2),
                                                        S.ExponentialLR(o, 0.9)]),
    }


SCHEDULERS = [n for n in _schedulers(types.SimpleNamespace(), None) if n != "ReduceLROnPlateau"]


def _stepped_state(lib, optim_module, name, steps=5):
    w = lib.tensor(np.ones(3, np.float32), requires_grad=True)
    o = optim_module.SGD([w], lr=0.1, momentum=0.9)
    sched = _schedulers(optim_module.lr_scheduler, o)[name]()
    for _ in range(steps):
        o.step()
        sched.step(1.0) if name == "ReduceLROnPlateau" else sched.step()
    return sched.state_dict()


def _plain(value):
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value


@pytest.mark.parametrize("name", SCHEDULERS)
def test_scheduler_state_dict_equals_pytorchs(name):
    torch = pytest.importorskip("torch")
    ours = _stepped_state(md, optim, name)
    theirs = _stepped_state(torch, torch.optim, name)
    assert _plain(ours) == _plain(theirs)
    assert {k: type(v) for k, v in ours.items()} == {k: type(v) for k, v in theirs.items()}


def test_scheduler_counts_its_steps_and_saves_the_flags():
    state = _stepped_state(md, optim, "StepLR", steps=4)
    assert state["_step_count"] == 5   # the constructor's step included
    assert state["_is_initial"] is False and state["_get_lr_called_within_step"] is False
    assert _stepped_state(md, optim, "CosineAnnealingWarmRestarts")["_step_count"] == 0   # its own step()


def test_lambda_lr_saves_and_restores_a_callable_objects_attributes():
    class Warmup:
        def __init__(self, length):
            self.length = length

        def __call__(self, epoch):
            return min(1.0, (epoch + 1) / self.length)

    opt = optim.SGD([Parameter(np.zeros(2))], lr=1.0)
    sched = lr_scheduler.LambdaLR(opt, [Warmup(4)])
    state = sched.state_dict()
    assert state["lr_lambdas"] == [{"length": 4}]
    state["lr_lambdas"] = [{"length": 10}]
    other = lr_scheduler.LambdaLR(optim.SGD([Parameter(np.zeros(2))], lr=1.0), [Warmup(4)])
    other.load_state_dict(state)
    assert other.lr_lambdas[0].length == 10
    assert lr_scheduler.LambdaLR(opt, lambda e: 1.0).state_dict()["lr_lambdas"] == [None]
    with pytest.raises(ValueError, match="lr_lambdas"):
        other.load_state_dict({**state, "lr_lambdas": [1, 2]})


def test_one_cycle_loads_an_older_state_naming_anneal_strategy():
    def make():
        return lr_scheduler.OneCycleLR(optim.SGD([Parameter(np.zeros(2))], lr=0.1, momentum=0.9), 1.0,
                                       total_steps=10)
    state = make().state_dict()
    older = {("anneal_strategy" if k == "_anneal_func_type" else k): v for k, v in state.items()}
    older["anneal_strategy"] = "linear"
    sched = make()
    sched.load_state_dict(older)
    assert sched.state_dict()["_anneal_func_type"] == "linear" and "anneal_strategy" not in sched.state_dict()
    with pytest.raises(ValueError, match="_anneal_func_type"):
        make().load_state_dict({**state, "_anneal_func_type": "cubic"})


# exact resume --------------------------------------------------------------------------------------
def _build(kind, name):
    md.manual_seed(0)
    if kind == "mlp":
        model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3))
        X = md.randn(40, 6)
    else:
        model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Dropout(0.2),
                              nn.Flatten(), nn.Linear(4 * 5 * 5, 3))
        X = md.randn(40, 1, 5, 5)
    Y = md.randint(0, 3, (40,))
    opt = getattr(optim, name)(model.parameters())
    sched = lr_scheduler.StepLR(opt, 3, 0.5)
    g = md.Generator()
    g.manual_seed(123)
    loader = DataLoader(TensorDataset(X, Y), batch_size=8, shuffle=True, generator=g)
    return model, opt, sched, loader, g


def _train(kind, name, stop, save_at=None, path=None, resume=None):
    """Train to step ``stop``; at ``save_at`` write everything a resume needs; or start from ``resume``."""
    model, opt, sched, loader, g = _build(kind, name)
    step = consumed = 0
    if resume is not None:
        md.manual_seed(999)   # a fresh process's RNG: what the checkpoint restores
        saved = md.load(resume)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["optimizer"])
        sched.load_state_dict(saved["scheduler"])
        g.set_state(saved["epoch_generator"])
        step, consumed = saved["step"], saved["consumed"]
    while step < stop:
        epoch_generator = g.get_state()   # the epoch's order is drawn when it starts
        batches = iter(loader)
        for _ in range(consumed):
            next(batches)
        if resume is not None and step == saved["step"]:
            md.set_rng_state(saved["rng"])
        for x, y in batches:
            if step == save_at:
                md.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                         "scheduler": sched.state_dict(), "rng": md.get_rng_state(),
                         "epoch_generator": epoch_generator, "step": step, "consumed": consumed}, path)
            if step >= stop:
                break

            def closure():
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                return loss
            opt.step(closure)
            sched.step()
            step += 1
            consumed += 1
        consumed = 0
    return model, opt


@pytest.mark.parametrize("kind,name", [("mlp", "Adam"), ("mlp", "NAdam"), ("mlp", "ASGD"), ("cnn", "RMSprop"),
                                       ("cnn", "AdamW")])
def test_resume_mid_epoch_matches_the_uninterrupted_run_bit_for_bit(kind, name, tmp_path):
    path = tmp_path / "ckpt.pt"
    whole, _ = _train(kind, name, 9, save_at=7, path=path)
    resumed, opt = _train(kind, name, 9, resume=path)
    for (key, a), b in zip(whole.state_dict().items(), resumed.state_dict().values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=key)
    steps = {s["step"].item() for s in opt.state.values()}
    assert steps == {9.0} and all(isinstance(s["step"], md.Tensor) for s in opt.state.values())
