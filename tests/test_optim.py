"""Optimizers and lr schedules: updates against steps computed by hand from the formulas,
schedules against their closed forms, state_dict round trips; PyTorch as an optional oracle.
Every test runs twice: with the fused CPU update kernels (the default) and with the generic
path of array operations (the reference)."""
import math

import numpy as np
import pytest

import minidl as md
import minidl.optim as optim
from minidl.nn.parameter import Parameter
from minidl.optim import implementation, lr_scheduler

GRADS = [np.array([0.5, -1.0, 2.0]), np.array([0.1, 0.3, -0.7]), np.array([-0.4, 0.2, 0.9])]
W0 = np.array([1.0, -2.0, 0.5])


@pytest.fixture(autouse=True, params=implementation.IMPLEMENTATIONS)
def update_impl(request):
    with implementation.implementation(request.param):
        yield request.param


def run(opt_cls, steps=3, **kw):
    """Apply the fixed GRADS to a float64 parameter; returns the parameter after each step."""
    p = Parameter(W0.copy())
    opt = opt_cls([p], **kw)
    out = []
    for g in GRADS[:steps]:
        p.grad = md.from_numpy(g.copy())
        opt.step()
        out.append(p.detach().numpy().copy())
    return out


# SGD -------------------------------------------------------------------------------------
def test_sgd_plain():
    got = run(optim.SGD, lr=0.1)
    w = W0.copy()
    for g, p in zip(GRADS, got):
        w = w - 0.1 * g
        np.testing.assert_allclose(p, w, rtol=0, atol=1e-15)


@pytest.mark.parametrize("nesterov,dampening", [(False, 0.0), (False, 0.3), (True, 0.0)])
def test_sgd_momentum_dampening_nesterov_weight_decay(nesterov, dampening):
    lr, mu, wd = 0.1, 0.9, 0.01
    got = run(optim.SGD, lr=lr, momentum=mu, dampening=dampening, weight_decay=wd, nesterov=nesterov)
    w, buf = W0.copy(), None
    for i, g in enumerate(GRADS):
        d = g + wd * w
        buf = d.copy() if buf is None else mu * buf + (1 - dampening) * d   # first step: buf = grad, undamped
        step = d + mu * buf if nesterov else buf
        w = w - lr * step
        np.testing.assert_allclose(got[i], w, rtol=1e-14, atol=1e-15)


def test_sgd_first_momentum_step_equals_plain_step():
    a = run(optim.SGD, steps=1, lr=0.1, momentum=0.9, dampening=0.5)
    b = run(optim.SGD, steps=1, lr=0.1)
    np.testing.assert_array_equal(a[0], b[0])


def test_sgd_leaves_grad_untouched_and_skips_params_without_grad():
    p, q = Parameter(W0.copy()), Parameter(W0.copy())
    opt = optim.SGD([p, q], lr=0.1, momentum=0.9, weight_decay=0.1)
    g = GRADS[0].copy()
    p.grad = md.from_numpy(g)
    opt.step()
    np.testing.assert_array_equal(p.grad.numpy(), GRADS[0])
    np.testing.assert_array_equal(q.detach().numpy(), W0)
    assert q not in opt.state


def test_sgd_rejects_bad_hyperparameters():
    p = Parameter(W0.copy())
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="learning rate"):
        optim.SGD([p], lr=-1.0)
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="single Tensor"):
        optim.SGD(p, lr=0.1)


# Adam / AdamW ----------------------------------------------------------------------------
def adam_reference(lr, b1, b2, eps, wd, decoupled, amsgrad=False):
    w, m, v, vmax, out = W0.copy(), np.zeros(3), np.zeros(3), np.zeros(3), []
    for t, g in enumerate(GRADS, start=1):
        if decoupled:
            w = w * (1 - lr * wd)
        else:
            g = g + wd * w
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        vmax = np.maximum(vmax, v)
        vv = vmax if amsgrad else v
        m_hat = m / (1 - b1 ** t)
        # PyTorch: eps is added to sqrt(v)/sqrt(1-b2^t), i.e. to sqrt(v_hat)
        w = w - lr * m_hat / (np.sqrt(vv) / math.sqrt(1 - b2 ** t) + eps)
        out.append(w)
    return out


@pytest.mark.parametrize("wd", [0.0, 0.1])
@pytest.mark.parametrize("amsgrad", [False, True])
def test_adam_matches_formula(wd, amsgrad):
    got = run(optim.Adam, lr=0.01, betas=(0.8, 0.95), eps=1e-3, weight_decay=wd, amsgrad=amsgrad)
    want = adam_reference(0.01, 0.8, 0.95, 1e-3, wd, decoupled=False, amsgrad=amsgrad)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-13)


def test_adamw_matches_formula_and_differs_from_adam():
    got = run(optim.AdamW, lr=0.01, betas=(0.8, 0.95), eps=1e-3, weight_decay=0.5)
    want = adam_reference(0.01, 0.8, 0.95, 1e-3, 0.5, decoupled=True)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-13)
    l2 = run(optim.Adam, lr=0.01, betas=(0.8, 0.95), eps=1e-3, weight_decay=0.5)
    assert not np.allclose(got[-1], l2[-1])
    assert optim.AdamW([Parameter(W0.copy())]).defaults["weight_decay"] == 1e-2


def test_adam_first_step_is_lr_times_sign():
    # with bias correction the first step is lr * g / (|g| + eps): about lr in every coordinate
    got = run(optim.Adam, steps=1, lr=0.01, eps=1e-12)
    np.testing.assert_allclose(W0 - got[0], 0.01 * np.sign(GRADS[0]), rtol=1e-9)


def test_adam_float32_stays_float32_in_place():
    p = Parameter(W0.astype(np.float32))
    data = p._data
    opt = optim.Adam([p], lr=0.1)
    p.grad = md.from_numpy(GRADS[0].astype(np.float32))
    opt.step()
    assert p._data is data and p.dtype == np.float32
    assert opt.state[p]["exp_avg"].dtype == np.float32


# groups, zero_grad, state_dict -----------------------------------------------------------
def test_param_groups_have_their_own_lr():
    p, q = Parameter(W0.copy()), Parameter(W0.copy())
    opt = optim.SGD([{"params": [p]}, {"params": [q], "lr": 1.0}], lr=0.1)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 1.0]
    p.grad, q.grad = md.from_numpy(GRADS[0].copy()), md.from_numpy(GRADS[0].copy())
    opt.step()
    np.testing.assert_allclose(p.detach().numpy(), W0 - 0.1 * GRADS[0])
    np.testing.assert_allclose(q.detach().numpy(), W0 - 1.0 * GRADS[0])
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [p]})
    r = Parameter(W0.copy())
    opt.add_param_group({"params": [r], "momentum": 0.5})
    assert opt.param_groups[2]["lr"] == 0.1 and opt.param_groups[2]["momentum"] == 0.5


def test_zero_grad():
    p = Parameter(W0.copy())
    opt = optim.SGD([p], lr=0.1)
    p.grad = md.from_numpy(GRADS[0].copy())
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(p.grad.numpy(), 0)
    opt.zero_grad()
    assert p.grad is None


def test_non_leaf_is_rejected():
    x = md.randn(3, requires_grad=True)
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([x * 2], lr=0.1)


def _quadratic_step(params, opt, target):
    opt.zero_grad()
    loss = sum(((p - md.from_numpy(target)) ** 2).sum() for p in params)
    loss.backward()
    opt.step()
    return float(loss.item())


@pytest.mark.parametrize("make", [
    lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True),
    lambda ps: optim.Adam(ps, lr=0.05, weight_decay=0.01, amsgrad=True),
    lambda ps: optim.AdamW(ps, lr=0.05),
])
def test_state_dict_round_trip_continues_identically(make):
    rng = np.random.default_rng(0)
    init = [rng.standard_normal(4).astype(np.float32) for _ in range(2)]
    target = rng.standard_normal(4).astype(np.float32)

    ps = [Parameter(a.copy()) for a in init]
    opt = make(ps)
    straight = [_quadratic_step(ps, opt, target) for _ in range(6)]

    ps1 = [Parameter(a.copy()) for a in init]
    opt1 = make(ps1)
    first = [_quadratic_step(ps1, opt1, target) for _ in range(3)]
    sd = opt1.state_dict()
    assert sorted(sd["state"]) == [0, 1] and sd["param_groups"][0]["params"] == [0, 1]
    ps2 = [Parameter(p.detach().numpy().copy()) for p in ps1]
    opt2 = make(ps2)
    opt2.load_state_dict(sd)
    for k, v in opt2.state[ps2[0]].items():   # copied, not shared
        if isinstance(v, np.ndarray):
            assert not np.shares_memory(v, sd["state"][0][k])
    rest = [_quadratic_step(ps2, opt2, target) for _ in range(3)]
    assert first + rest == straight


def test_state_reads_as_a_dict_per_parameter_and_iterates_over_parameters():
    """PyTorch's ``defaultdict(dict)``: custom optimizers write ``st = self.state[p]`` and resume
    code walks ``opt.state.items()``."""
    p, q = Parameter(W0.copy()), Parameter(W0.copy())
    opt = optim.Adam([p, q], lr=0.1)
    assert opt.state[p] == {} and len(opt.state) == 1 and p in opt.state and q not in opt.state
    opt.state[p]["seen"] = 1
    assert opt.state[p] == {"seen": 1}
    for t in (p, q):
        t.grad = md.ones_like(t)
    opt.state.pop(p)
    opt.step()
    assert [t for t in opt.state] == [p, q] or [t for t in opt.state] == [q, p]
    for t, st in opt.state.items():
        assert t is p or t is q
        assert st["exp_avg"].shape == t.shape and st["step"] == 1


def test_a_custom_optimizer_written_as_in_pytorch():
    class Momentum(optim.Optimizer):
        def __init__(self, params, lr=0.1, beta=0.5):
            super().__init__(params, dict(lr=lr, beta=beta))

        def step(self):
            for group in self.param_groups:
                for p in group["params"]:
                    st = self.state[p]
                    if "buf" not in st:
                        st["buf"] = md.zeros_like(p)
                    st["buf"].mul_(group["beta"]).add_(p.grad)
                    p.data.add_(st["buf"], alpha=-group["lr"])

    p = Parameter(np.array([1.0, -2.0], np.float32))
    opt = Momentum([p])
    for _ in range(2):
        p.grad = md.tensor(np.array([1.0, 1.0], np.float32))
        opt.step()
    np.testing.assert_allclose(p.detach().numpy(), [1.0 - 0.1 - 0.15, -2.0 - 0.1 - 0.15], rtol=1e-6)


def test_load_state_dict_checks_layout():
    p, q = Parameter(W0.copy()), Parameter(W0.copy())
    sd = optim.SGD([p, q], lr=0.1).state_dict()
    with pytest.raises(ValueError, match="group sizes"):
        optim.SGD([Parameter(W0.copy())], lr=0.1).load_state_dict(sd)
    with pytest.raises(ValueError, match="parameter groups"):
        optim.SGD([{"params": [p]}, {"params": [q]}], lr=0.1).load_state_dict(sd)


def test_load_state_dict_restores_hyperparameters():
    p = Parameter(W0.copy())
    a = optim.Adam([p], lr=0.5, betas=(0.5, 0.6))
    b = optim.Adam([Parameter(W0.copy())], lr=0.1)
    b.load_state_dict(a.state_dict())
    assert b.param_groups[0]["lr"] == 0.5 and b.param_groups[0]["betas"] == (0.5, 0.6)


# schedules -------------------------------------------------------------------------------
def _lrs(sched_factory, n, lr=0.1):
    opt = optim.SGD([Parameter(W0.copy())], lr=lr)
    sched = sched_factory(opt)
    out = []
    for _ in range(n):
        out.append(opt.param_groups[0]["lr"])
        assert sched.get_last_lr() == [out[-1]]
        opt.step()
        sched.step()
    return out


def test_lambda_lr():
    got = _lrs(lambda o: lr_scheduler.LambdaLR(o, lambda e: 0.5 ** e), 5)
    np.testing.assert_allclose(got, [0.1 * 0.5 ** e for e in range(5)], rtol=1e-15)


def test_step_lr():
    got = _lrs(lambda o: lr_scheduler.StepLR(o, step_size=3, gamma=0.5), 10)
    np.testing.assert_allclose(got, [0.1 * 0.5 ** (e // 3) for e in range(10)], rtol=1e-14)


def test_cosine_annealing_lr():
    got = _lrs(lambda o: lr_scheduler.CosineAnnealingLR(o, T_max=8, eta_min=0.01), 9)
    want = [0.01 + 0.09 * (1 + math.cos(math.pi * e / 8)) / 2 for e in range(9)]
    np.testing.assert_allclose(got, want, rtol=1e-14)
    assert got[-1] == pytest.approx(0.01)


def test_linear_warmup_cosine():
    got = _lrs(lambda o: lr_scheduler.linear_warmup_cosine(o, warmup_steps=4, total_steps=12, min_lr_ratio=0.1), 14)
    np.testing.assert_allclose(got[:4], [0.025, 0.05, 0.075, 0.1])
    assert got[4] == pytest.approx(0.1)
    assert all(a >= b for a, b in zip(got[4:], got[5:]))           # non-increasing after warm-up
    assert got[12] == pytest.approx(0.01) and got[13] == pytest.approx(0.01)
    mid = 0.1 * (0.1 + 0.9 * (1 + math.cos(math.pi * 4 / 8)) / 2)
    assert got[8] == pytest.approx(mid)


def test_scheduler_state_dict_resumes():
    opt = optim.SGD([Parameter(W0.copy())], lr=0.1)
    s = lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    for _ in range(3):
        opt.step()
        s.step()
    sd = s.state_dict()
    assert sd["last_epoch"] == 3 and "optimizer" not in sd
    opt2 = optim.SGD([Parameter(W0.copy())], lr=0.1)
    s2 = lr_scheduler.StepLR(opt2, step_size=2, gamma=0.5)
    s2.load_state_dict(sd)
    opt2.param_groups[0]["lr"] = s.get_last_lr()[0]
    s.step()
    s2.step()
    assert s.get_last_lr() == s2.get_last_lr() == [0.025]


# PyTorch as an oracle (optional) -----------------------------------------------------------
CONFIGS = [
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("Adam", dict(lr=0.01, betas=(0.85, 0.99), eps=1e-6, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, amsgrad=True)),
    ("AdamW", dict(lr=0.01, weight_decay=0.3)),
]


@pytest.mark.parametrize("name,kw", CONFIGS)
def test_against_torch(name, kw):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal((3, 4))
    grads = [rng.standard_normal((3, 4)) for _ in range(5)]
    p = Parameter(w0.copy())
    tp = torch.tensor(w0.copy(), requires_grad=True)
    opt = getattr(optim, name)([p], **kw)
    topt = getattr(torch.optim, name)([tp], **kw)
    for g in grads:
        p.grad = md.from_numpy(g.copy())
        tp.grad = torch.tensor(g.copy())
        opt.step()
        topt.step()
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-12, atol=1e-14)


def test_schedules_against_torch():
    torch = pytest.importorskip("torch")
    for make, tmake in [
        (lambda o: lr_scheduler.StepLR(o, 2, gamma=0.3), lambda o: torch.optim.lr_scheduler.StepLR(o, 2, gamma=0.3)),
        (lambda o: lr_scheduler.CosineAnnealingLR(o, 7, eta_min=0.001),
         lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, 7, eta_min=0.001)),
        (lambda o: lr_scheduler.LambdaLR(o, lambda e: 1 / (e + 1)),
         lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda e: 1 / (e + 1))),
    ]:
        opt = optim.SGD([Parameter(W0.copy())], lr=0.1)
        topt = torch.optim.SGD([torch.zeros(3, requires_grad=True)], lr=0.1)
        s, ts = make(opt), tmake(topt)
        for _ in range(7):
            assert s.get_last_lr()[0] == pytest.approx(ts.get_last_lr()[0], rel=1e-12)
            opt.step()
            topt.step()
            s.step()
            ts.step()


@pytest.mark.parametrize("name,kw", CONFIGS[::2])
def test_against_torch_float32(name, kw):
    # float32 throughout; equal to rounding (torch fuses a + alpha * b with FMA, NumPy rounds twice)
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    w0 = rng.standard_normal((8, 5)).astype(np.float32)
    p, tp = Parameter(w0.copy()), torch.tensor(w0.copy(), requires_grad=True)
    opt, topt = getattr(optim, name)([p], **kw), getattr(torch.optim, name)([tp], **kw)
    for _ in range(10):
        g = rng.standard_normal((8, 5)).astype(np.float32)
        p.grad, tp.grad = md.from_numpy(g.copy()), torch.tensor(g.copy())
        opt.step()
        topt.step()
    assert p.dtype == np.float32
    np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-5, atol=1e-6)

