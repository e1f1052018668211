"""RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam, ASGD, Rprop and LBFGS: parameters after
several steps equal PyTorch's (float64, optional oracle); without PyTorch, each minimises a
quadratic, a state_dict round trip continues identically, and bad arguments or loaded state
are refused with PyTorch's messages."""
import copy

import numpy as np
import pytest

import minidl as md
import minidl.optim as optim
from minidl.nn.parameter import Parameter

RNG = np.random.default_rng(0)
W0 = [RNG.standard_normal((3, 2)), RNG.standard_normal(4)]

# (optimizer, hyper-parameters): every flag each optimizer has, in a few combinations
CASES = [
    ("RMSprop", {}),
    ("RMSprop", dict(momentum=0.9, centered=True, weight_decay=0.1)),
    ("RMSprop", dict(alpha=0.9, momentum=0.5, maximize=True)),
    ("Adagrad", {}),
    ("Adagrad", dict(lr_decay=0.1, weight_decay=0.05, initial_accumulator_value=0.2, maximize=True)),
    ("Adadelta", {}),
    ("Adadelta", dict(rho=0.5, weight_decay=0.1, maximize=True)),
    ("Adamax", {}),
    ("Adamax", dict(betas=(0.8, 0.9), weight_decay=0.1, maximize=True)),
    ("NAdam", {}),
    ("NAdam", dict(weight_decay=0.1, momentum_decay=0.1)),
    ("NAdam", dict(weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("RAdam", {}),
    ("RAdam", dict(weight_decay=0.1, betas=(0.9, 0.9))),            # rho_t > 5 from step 6: both branches
    ("RAdam", dict(weight_decay=0.1, decoupled_weight_decay=True, betas=(0.8, 0.8), maximize=True)),
    ("ASGD", {}),
    ("ASGD", dict(t0=3, lambd=0.1, alpha=0.5, weight_decay=0.1, maximize=True)),   # averaging starts at step 4
    ("Rprop", {}),
    ("Rprop", dict(etas=(0.3, 1.5), step_sizes=(1e-3, 0.08), maximize=True)),
]
NAMES = ["RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "ASGD", "Rprop"]


def loss_grad(w):
    """The gradient of a fixed non-quadratic loss, so that the steps differ in size and sign."""
    return np.sin(w) * 2 + 0.3 * w ** 3


def run_minidl(name, kw, steps=8, params=None, opt=None):
    params = params or [Parameter(w.copy()) for w in W0]
    opt = opt or getattr(optim, name)([{"params": params[:1]}, {"params": params[1:], "lr": 0.02}], lr=0.05, **kw)
    for _ in range(steps):
        for p in params:
            p.grad = md.from_numpy(loss_grad(p.detach().numpy()))
        opt.step()
    return params, opt


@pytest.mark.parametrize("name,kw", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_parameters_equal_pytorchs_after_eight_steps(name, kw):
    torch = pytest.importorskip("torch")
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)   # PyTorch keeps scalar state (mu_product, eta) in the default dtype
    try:
        tp = [torch.tensor(w.copy(), requires_grad=True) for w in W0]
        topt = getattr(torch.optim, name)([{"params": tp[:1]}, {"params": tp[1:], "lr": 0.02}], lr=0.05, **kw)
        for _ in range(8):
            for t in tp:
                t.grad = torch.from_numpy(loss_grad(t.detach().numpy()))
            topt.step()
    finally:
        torch.set_default_dtype(default)
    params, _ = run_minidl(name, kw)
    for t, p in zip(tp, params):
        np.testing.assert_allclose(p.detach().numpy(), t.detach().numpy(), rtol=1e-12, atol=1e-13)


def _lbfgs_problem(seed=1):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((5, 5)), rng.standard_normal(5), rng.standard_normal(5)


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_equals_pytorchs(line_search_fn):
    torch = pytest.importorskip("torch")
    A, b, x0 = _lbfgs_problem()
    tx = torch.tensor(x0.copy(), requires_grad=True)
    topt = torch.optim.LBFGS([tx], lr=0.5, max_iter=7, history_size=3, line_search_fn=line_search_fn)

    def tclosure():
        topt.zero_grad()
        loss = ((torch.from_numpy(A) @ tx - torch.from_numpy(b)) ** 2).sum() + (tx ** 4).sum()
        loss.backward()
        return loss
    x, opt, closure = _lbfgs_minidl(A, b, x0, lr=0.5, max_iter=7, history_size=3, line_search_fn=line_search_fn)
    for _ in range(3):
        expected, got = topt.step(tclosure), opt.step(closure)
        assert float(got.item()) == pytest.approx(float(expected.detach()), rel=1e-12)
    np.testing.assert_allclose(x.detach().numpy(), tx.detach().numpy(), rtol=1e-10, atol=1e-12)
    assert opt.state[x]["func_evals"] == topt.state[tx]["func_evals"]
    assert opt.state[x]["n_iter"] == topt.state[tx]["n_iter"]


def _lbfgs_minidl(A, b, x0, **kw):
    x = Parameter(x0.copy())
    opt = optim.LBFGS([x], **kw)

    def closure():
        opt.zero_grad()
        loss = ((md.from_numpy(A) @ x - md.from_numpy(b)) ** 2).sum() + (x ** 4).sum()
        loss.backward()
        return loss
    return x, opt, closure


# without PyTorch -----------------------------------------------------------------------------
QUADRATIC_LR = {"RMSprop": 0.01, "Adagrad": 0.5, "Adadelta": 5.0, "Adamax": 0.05, "NAdam": 0.05, "RAdam": 0.05,
                "ASGD": 0.05, "Rprop": 0.01}


@pytest.mark.parametrize("name", NAMES)
def test_each_minimises_a_quadratic(name):
    target = np.array([1.0, -2.0, 0.5])
    p = Parameter(np.zeros(3))
    opt = getattr(optim, name)([p], lr=QUADRATIC_LR[name])
    for _ in range(400):
        opt.zero_grad()
        loss = ((p - md.from_numpy(target)) ** 2).sum()
        loss.backward()
        opt.step()
    np.testing.assert_allclose(p.detach().numpy(), target, atol=0.05)


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_minimises_a_quadratic_in_one_call(line_search_fn):
    rng = np.random.default_rng(3)
    M = rng.standard_normal((4, 4))
    A, b = M @ M.T + np.eye(4), rng.standard_normal(4)
    x = Parameter(np.zeros(4))
    opt = optim.LBFGS([x], max_iter=100, tolerance_change=1e-15, line_search_fn=line_search_fn)

    def closure():
        opt.zero_grad()
        xv = x.reshape(4, 1)
        loss = 0.5 * (xv.transpose(0, 1) @ md.from_numpy(A) @ xv).sum() - (x * md.from_numpy(b)).sum()
        loss.backward()
        return loss
    first = opt.step(closure)
    assert isinstance(first, md.Tensor)
    np.testing.assert_allclose(x.detach().numpy(), np.linalg.solve(A, b), atol=1e-6)


@pytest.mark.parametrize("name,kw", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_state_dict_round_trip_continues_identically(name, kw):
    params, opt = run_minidl(name, kw, steps=3)
    saved = copy.deepcopy(opt.state_dict())
    copies = [Parameter(p.detach().numpy().copy()) for p in params]
    resumed = getattr(optim, name)([{"params": copies[:1]}, {"params": copies[1:]}], lr=1.0, **kw)
    resumed.load_state_dict(saved)
    assert [g["lr"] for g in resumed.param_groups] == [0.05, 0.02]
    run_minidl(name, kw, steps=4, params=params, opt=opt)
    run_minidl(name, kw, steps=4, params=copies, opt=resumed)
    for a, b in zip(params, copies):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def test_lbfgs_state_dict_round_trip_continues_identically():
    A, b, x0 = _lbfgs_problem()
    x, opt, closure = _lbfgs_minidl(A, b, x0, max_iter=4, history_size=2)
    opt.step(closure)
    y, resumed, closure_y = _lbfgs_minidl(A, b, x.detach().numpy(), max_iter=4, history_size=2)
    resumed.load_state_dict(copy.deepcopy(opt.state_dict()))
    for _ in range(2):
        opt.step(closure)
        resumed.step(closure_y)
    np.testing.assert_array_equal(x.detach().numpy(), y.detach().numpy())


# bad input -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES + ["LBFGS"])
def test_negative_learning_rate_is_refused(name):
    with pytest.raises(ValueError, match="^Invalid learning rate: -1$"):
        getattr(optim, name)([Parameter(np.zeros(2))], lr=-1)


@pytest.mark.parametrize("name,kw,message", [
    ("RMSprop", dict(alpha=-0.1), "Invalid alpha value: -0.1"),
    ("RMSprop", dict(momentum=-1), "Invalid momentum value: -1"),
    ("Adagrad", dict(lr_decay=-1), "Invalid lr_decay value: -1"),
    ("Adagrad", dict(eps=-1), "Invalid epsilon value: -1"),
    ("Adadelta", dict(rho=1.5), "Invalid rho value: 1.5"),
    ("Adamax", dict(betas=(0.9, 1.0)), "Invalid beta parameter at index 1: 1.0"),
    ("NAdam", dict(momentum_decay=-1), "Invalid momentum_decay value: -1"),
    ("RAdam", dict(weight_decay=-1), "Invalid weight_decay value: -1"),
    ("Rprop", dict(etas=(1.5, 1.2)), "Invalid eta values: 1.5, 1.2"),
    ("LBFGS", dict(line_search_fn="armijo"), "line_search_fn must be None or 'strong_wolfe', got 'armijo'"),
    ("LBFGS", dict(max_iter=0), "max_iter must be a positive integer, got 0"),
])
def test_out_of_range_hyperparameters_are_refused(name, kw, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        getattr(optim, name)([Parameter(np.zeros(2))], **kw)


def test_non_numeric_hyperparameter_is_a_type_error():
    with pytest.raises(TypeError, match=r"lr must be a real number, got '0.1' \(str\)"):
        optim.RMSprop([Parameter(np.zeros(2))], lr="0.1")


def test_lbfgs_refuses_param_groups_and_a_missing_closure():
    with pytest.raises(ValueError, match="doesn't support per-parameter options"):
        optim.LBFGS([{"params": [Parameter(np.zeros(2))]}, {"params": [Parameter(np.zeros(2))]}])
    with pytest.raises(TypeError, match="requires a closure"):
        optim.LBFGS([Parameter(np.zeros(2))]).step(None)


def test_loaded_state_is_checked_before_anything_changes():
    params, opt = run_minidl("NAdam", {}, steps=2)
    good = copy.deepcopy(opt.state_dict())
    bad = copy.deepcopy(good)
    bad["state"][0]["mu_product"] = "one"
    with pytest.raises(ValueError, match="'mu_product': expected a finite number"):
        opt.load_state_dict(bad)
    bad = copy.deepcopy(good)
    bad["state"][1]["exp_avg"] = np.zeros(5)
    with pytest.raises(ValueError, match=r"'exp_avg': expected shape \(4,\)"):
        opt.load_state_dict(bad)
    bad = copy.deepcopy(good)
    bad["param_groups"][1]["betas"] = (0.9, 1.5)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1: 1.5"):
        opt.load_state_dict(bad)
    np.testing.assert_array_equal(opt.state[params[1]]["exp_avg"], good["state"][1]["exp_avg"])


def test_lbfgs_loaded_history_must_fit_the_parameters():
    A, b, x0 = _lbfgs_problem()
    x, opt, closure = _lbfgs_minidl(A, b, x0, max_iter=3)
    opt.step(closure)
    bad = copy.deepcopy(opt.state_dict())
    bad["state"][0]["old_dirs"][0] = np.zeros(4)
    with pytest.raises(ValueError, match="'old_dirs': expected a list of vectors of length 5"):
        opt.load_state_dict(bad)
