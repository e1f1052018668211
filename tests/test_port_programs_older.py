"""PyTorch-idiom programs over the long-standing surface, run under both frameworks from the same
NumPy data and weights: recurrent stacks and cells with packing, optimizer trajectories with a
state_dict round trip mid-run, learning-rate schedules, DataLoader batching and collation,
nn.init statistics, gradient clipping, Embedding (max_norm) and the full Transformer; plus
torch-free checks of the same behaviour against NumPy."""
import collections
import math
import warnings

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
import minidl.utils.data as mud
from minidl.nn.utils import rnn as mrnn

TOL = dict(rtol=1e-8, atol=1e-10)


def _np(t):
    return t.detach().cpu().numpy() if hasattr(t, "detach") else np.asarray(t)


def _load(module, torch_module):
    torch_module.double()
    module.double()
    module.load_state_dict({k: md.tensor(v.detach().numpy()) for k, v in torch_module.state_dict().items()})


def _close(ours, theirs, **tol):
    a, b = _np(ours), _np(theirs)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
    np.testing.assert_allclose(a, b, equal_nan=True, **(tol or TOL))


# ------------------------------------------------------------------------------ recurrent
@pytest.mark.parametrize("kind,kw", [("LSTM", dict(proj_size=3)), ("GRU", {}), ("RNN", dict(nonlinearity="tanh"))])
@pytest.mark.parametrize("batch_first", [False, True])
def test_two_layer_bidirectional_stack_with_initial_state_packed_unsorted(kind, kw, batch_first):
    torch = pytest.importorskip("torch")
    from torch.nn.utils import rnn as trnn
    torch.manual_seed(1)
    args = dict(num_layers=2, bidirectional=True, batch_first=batch_first, dropout=0.0, **kw)
    ref, ours = getattr(torch.nn, kind)(4, 5, **args), getattr(nn, kind)(4, 5, **args)
    _load(ours, ref)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 6, 4) if batch_first else (6, 3, 4))
    h0 = rng.standard_normal((4, 3, 3 if kind == "LSTM" else 5))
    c0 = rng.standard_normal((4, 3, 5))
    lengths = [2, 6, 4]
    outs = []
    for lib, pk in ((torch, trnn), (md, mrnn)):
        xs, hs, cs = (lib.tensor(a, requires_grad=True) for a in (x, h0, c0))
        net = ref if lib is torch else ours
        state = (hs, cs) if kind == "LSTM" else hs
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            full, full_state = net(xs, state)
            packed = pk.pack_padded_sequence(xs, lengths, batch_first=batch_first, enforce_sorted=False)
            p_out, p_state = net(packed, state)
        pad, lens = pk.pad_packed_sequence(p_out, batch_first=batch_first, padding_value=-1.0, total_length=7)
        states = [*(full_state if kind == "LSTM" else (full_state,)), *(p_state if kind == "LSTM" else (p_state,))]
        loss = full.sum() + (pad * pad).sum() + sum((s * (i + 1.5)).sum() for i, s in enumerate(states))
        loss.backward()
        outs.append([full, pad, lens, packed.data, packed.batch_sizes, packed.sorted_indices, *states,
                     xs.grad, hs.grad, cs.grad if kind == "LSTM" else hs.grad])
    for a, b in zip(outs[1], outs[0]):
        _close(a, b)
    theirs = dict(ref.named_parameters())
    for name, p in ours.named_parameters():
        _close(p.grad, theirs[name].grad)


@pytest.mark.parametrize("kind", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cells_batched_unbatched_and_without_state_match_torch(kind):
    torch = pytest.importorskip("torch")
    torch.manual_seed(2)
    ref, ours = getattr(torch.nn, kind)(4, 3), getattr(nn, kind)(4, 3)
    _load(ours, ref)
    rng = np.random.default_rng(1)
    x, h = rng.standard_normal((2, 4)), rng.standard_normal((2, 3))
    res = []
    for lib, net in ((torch, ref), (md, ours)):
        xs = lib.tensor(x, requires_grad=True)
        state = (lib.tensor(h), lib.tensor(h * 0.5)) if kind == "LSTMCell" else lib.tensor(h)
        out = net(xs, state)
        first = out[0] if kind == "LSTMCell" else out
        (first * 2 + (out[1] if kind == "LSTMCell" else 0)).sum().backward()
        single, none = net(lib.tensor(x[0])), net(lib.tensor(x))
        flat = lambda o: list(o) if isinstance(o, tuple) else [o]   # noqa: E731
        res.append(flat(out) + flat(single) + flat(none) + [xs.grad])
    for a, b in zip(res[1], res[0]):
        _close(a, b)


def test_pack_sequence_unsorted_round_trip_matches_torch():
    torch = pytest.importorskip("torch")
    from torch.nn.utils import rnn as trnn
    rng = np.random.default_rng(2)
    seqs = [rng.standard_normal((n, 2)) for n in (2, 5, 3)]
    tp = trnn.pack_sequence([torch.tensor(s) for s in seqs], enforce_sorted=False)
    mp = mrnn.pack_sequence([md.tensor(s) for s in seqs], enforce_sorted=False)
    for a, b in ((mp.data, tp.data), (mp.batch_sizes, tp.batch_sizes), (mp.sorted_indices, tp.sorted_indices),
                 (mp.unsorted_indices, tp.unsorted_indices)):
        _close(a, b)
    for a, b in zip(mrnn.unpack_sequence(mp), trnn.unpack_sequence(tp)):
        _close(a, b)
    _close(mrnn.pad_sequence([md.tensor(s) for s in seqs], batch_first=True, padding_value=3.0),
           trnn.pad_sequence([torch.tensor(s) for s in seqs], batch_first=True, padding_value=3.0))
    with pytest.raises(RuntimeError):
        trnn.pack_sequence([torch.tensor(s) for s in seqs], enforce_sorted=True)
    with pytest.raises(RuntimeError):
        mrnn.pack_sequence([md.tensor(s) for s in seqs], enforce_sorted=True)


def test_packed_unsorted_gru_state_is_each_sequence_last_step_torch_free():
    """h_n of a packed, unsorted batch is each sequence's own last step, in the input order."""
    md.manual_seed(0)
    gru = nn.GRU(2, 3, batch_first=True).double()
    x = md.tensor(np.random.default_rng(3).standard_normal((3, 5, 2)))
    lengths = [2, 5, 3]
    _, h = gru(mrnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))
    for b, n in enumerate(lengths):
        out, _ = gru(x[b:b + 1, :n])
        np.testing.assert_allclose(_np(h)[0, b], _np(out)[0, -1], **TOL)


# ------------------------------------------------------------------------------ optimizers
_W0 = np.random.default_rng(4).standard_normal((3, 4))
_B0 = np.random.default_rng(5).standard_normal(4)
_X = np.random.default_rng(6).standard_normal((5, 3))
_Y = np.random.default_rng(7).standard_normal((5, 4))


def _trajectory(lib, name, kw, steps=5, reload_at=None):
    """5 steps of a least-squares + L1 problem; at reload_at, a fresh optimizer takes the state_dict."""
    W, b = lib.tensor(_W0.copy(), requires_grad=True), lib.tensor(_B0.copy(), requires_grad=True)
    cls = getattr(lib.optim, name)

    def make():
        if name == "LBFGS":
            return cls([W, b], **kw)
        return cls([{"params": [W]}, {"params": [b], "lr": kw["lr"] * 0.5}], **kw)

    def loss():
        return ((lib.tensor(_X) @ W + b - lib.tensor(_Y)) ** 2).mean() + W.abs().sum() * 0.01

    opt, path = make(), []
    for i in range(steps):
        if i == reload_at:
            sd = opt.state_dict()
            opt = make()
            opt.load_state_dict(sd)

        def closure():
            opt.zero_grad()
            value = loss()
            value.backward()
            return value
        if name == "LBFGS":
            opt.step(closure)
        else:
            closure()
            opt.step()
        path.append(np.concatenate([_np(W).ravel(), _np(b).ravel()]))
    return np.array(path), opt


_OPTIMIZERS = [
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.01, maximize=True)),
    ("Adam", dict(lr=0.05, amsgrad=True, weight_decay=0.1)),
    ("AdamW", dict(lr=0.05, weight_decay=0.3, amsgrad=True)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.9, weight_decay=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.1, weight_decay=0.1, initial_accumulator_value=0.2)),
    ("Adadelta", dict(lr=1.0, rho=0.8, weight_decay=0.1)),
    ("Adamax", dict(lr=0.05, weight_decay=0.1)),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, momentum_decay=0.01)),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", dict(lr=0.05, weight_decay=0.1)),
    ("LBFGS", dict(lr=1, line_search_fn="strong_wolfe", history_size=3, max_iter=4)),
]


@pytest.mark.parametrize("name,kw", _OPTIMIZERS)
@pytest.mark.parametrize("reload_at", [None, 2])
def test_optimizer_trajectory_and_mid_run_state_dict_match_torch(name, kw, reload_at):
    torch = pytest.importorskip("torch")
    steps = 8 if name == "RAdam" else 5   # RAdam's rectified branch starts after step 5
    ours, _ = _trajectory(md, name, kw, steps, reload_at)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)   # torch keeps NAdam's mu products in the default dtype
    try:
        theirs, _ = _trajectory(torch, name, kw, steps, reload_at)
    finally:
        torch.set_default_dtype(default)
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-11)


def test_sgd_nesterov_weight_decay_follows_the_formula_torch_free():
    """b = mu b + (g + wd p); p -= lr (g + wd p + mu b), with the first buffer the gradient."""
    path, _ = _trajectory(md, "SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01), steps=3)
    W, b, buf = _W0.copy(), _B0.copy(), None
    for step in range(3):
        r = _X @ W + b - _Y
        gW = 2 * _X.T @ r / r.size + 0.01 * np.sign(W) + 0.01 * W
        gb = 2 * r.sum(0) / r.size + 0.01 * b
        g = [gW, gb]
        buf = g if buf is None else [0.9 * m + d for m, d in zip(buf, g)]
        W = W - 0.1 * (gW + 0.9 * buf[0])
        b = b - 0.05 * (gb + 0.9 * buf[1])
        np.testing.assert_allclose(path[step], np.concatenate([W.ravel(), b]), rtol=1e-12)


def test_optimizer_reloaded_mid_run_continues_identically_torch_free():
    for name, kw in _OPTIMIZERS:
        straight, _ = _trajectory(md, name, kw)
        reloaded, _ = _trajectory(md, name, kw, reload_at=2)
        np.testing.assert_array_equal(reloaded, straight, err_msg=name)


# ------------------------------------------------------------------------------ lr schedulers
_SCHEDULES = {
    "onecycle": lambda S, o: S.OneCycleLR(o, max_lr=[1.0, 0.5], total_steps=30),
    "onecycle_linear_three_phase": lambda S, o: S.OneCycleLR(
        o, max_lr=1.0, epochs=3, steps_per_epoch=10, anneal_strategy="linear", three_phase=True, div_factor=10,
        final_div_factor=100, pct_start=0.25),
    "warm_restarts": lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.01),
    "sequential": lambda S, o: S.SequentialLR(
        o, [S.LinearLR(o, start_factor=0.1, total_iters=4), S.ExponentialLR(o, gamma=0.9)], milestones=[5]),
    "sequential3": lambda S, o: S.SequentialLR(
        o, [S.ConstantLR(o, factor=0.5, total_iters=3), S.StepLR(o, 4, 0.5), S.CosineAnnealingLR(o, 6)],
        milestones=[3, 10]),
    "cyclic_triangular2": lambda S, o: S.CyclicLR(o, base_lr=[0.01, 0.02], max_lr=0.1, step_size_up=3,
                                                  step_size_down=5, mode="triangular2"),
    "cyclic_exp_range": lambda S, o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4, mode="exp_range",
                                                gamma=0.9),
    "cyclic_iterations": lambda S, o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4,
                                                 scale_fn=lambda x: 1 / (x + 1), scale_mode="iterations"),
    "plateau": lambda S, o: S.ReduceLROnPlateau(o, mode="max", factor=0.5, patience=1, cooldown=2),
    "plateau_abs": lambda S, o: S.ReduceLROnPlateau(o, threshold_mode="abs", threshold=0.01, patience=2,
                                                    min_lr=[0.02, 0.03]),
}
_METRIC = [1.0, 0.9, 0.95, 0.95, 0.95, 0.94, 0.96, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.49999, 0.5] * 2


def _lrs(lib, make, steps=30):
    p, q = lib.zeros(2, requires_grad=True), lib.zeros(2, requires_grad=True)
    opt = lib.optim.SGD([{"params": [p]}, {"params": [q], "lr": 0.05}], lr=0.1, momentum=0.9)
    sched = make(lib.optim.lr_scheduler, opt)
    plateau = isinstance(sched, lib.optim.lr_scheduler.ReduceLROnPlateau)
    rows = []
    for i in range(steps):
        opt.step()
        sched.step(_METRIC[i]) if plateau else sched.step()
        rows.append([g["lr"] for g in opt.param_groups] + [g["momentum"] for g in opt.param_groups])
    return np.array(rows)


@pytest.mark.parametrize("name", sorted(_SCHEDULES))
def test_lr_and_momentum_sequences_match_torch(name):
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = _lrs(torch, _SCHEDULES[name])
        ours = _lrs(md, _SCHEDULES[name])
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-15)


def test_warm_restarts_lr_is_the_closed_form_torch_free():
    rows = _lrs(md, _SCHEDULES["warm_restarts"], steps=12)
    t_cur, t_i, want = 0, 3, []
    for _ in range(12):
        t_cur += 1
        if t_cur >= t_i:
            t_cur, t_i = t_cur - t_i, t_i * 2
        want.append([eta_min + (base - eta_min) * (1 + math.cos(math.pi * t_cur / t_i)) / 2
                     for base, eta_min in ((0.1, 0.01), (0.05, 0.01))])
    np.testing.assert_allclose(rows[:, :2], want, rtol=1e-12)


def test_one_cycle_peaks_at_max_lr_and_ends_at_initial_over_final_div_torch_free():
    rows = _lrs(md, _SCHEDULES["onecycle"], steps=29)
    assert np.isclose(rows[:, 0].max(), 1.0) and np.isclose(rows[:, 1].max(), 0.5)
    np.testing.assert_allclose(rows[-1, :2], [1.0 / 25 / 1e4, 0.5 / 25 / 1e4], rtol=1e-9)
    np.testing.assert_allclose(rows[rows[:, 0].argmax(), 2], 0.85)   # momentum is lowest at the peak


# ------------------------------------------------------------------------------ DataLoader
_P = collections.namedtuple("_P", "a b")


def _describe(x):
    """A framework-free description: tensors as (dtype, shape, values), containers by type."""
    if hasattr(x, "dtype") and hasattr(x, "shape") and not isinstance(x, np.ndarray):
        return ("T", str(x.dtype).split(".")[-1], tuple(x.shape), _np(x).tolist())
    if isinstance(x, dict):
        return {k: _describe(v) for k, v in x.items()}
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return ("namedtuple", type(x).__name__, [_describe(v) for v in x])
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_describe(v) for v in x])
    return (type(x).__name__, x)


_BATCHES = [
    [np.float32(1.5), np.float32(2.5)], [1, 2], [1.5, 2.5], [True, False], ["a", "b"],
    [np.array([1, 2]), np.array([3, 4])], [np.array([1.0, 2.0], dtype=np.float16)] * 2,
    [{"x": 1, "y": np.array([1.0])}, {"x": 2, "y": np.array([2.0])}], [(1, 2.0), (3, 4.0)],
    [_P(1, np.zeros(2)), _P(2, np.ones(2))], [[1, 2], [3, 4]], [np.int8(3), np.int8(4)],
    [np.bool_(True), np.bool_(False)], [np.array(3.0), np.array(4.0)], [{"a": (1, [2, 3])}, {"a": (4, [5, 6])}],
]


@pytest.mark.parametrize("i", range(len(_BATCHES)))
def test_default_collate_types_dtypes_and_nesting_match_torch(i):
    torch = pytest.importorskip("torch")
    from torch.utils.data import default_collate
    assert _describe(mud.default_collate(_BATCHES[i])) == _describe(default_collate(_BATCHES[i]))


@pytest.mark.parametrize("kw", [dict(batch_size=3), dict(batch_size=3, drop_last=True), dict(batch_size=None),
                                dict(batch_sampler=[[0, 1], [5, 3, 2], [9]])])
def test_loader_batches_of_dict_samples_match_torch(kw):
    torch = pytest.importorskip("torch")
    data = [{"x": np.full(2, i, dtype=np.float32), "y": i} for i in range(10)]
    assert _describe(list(mud.DataLoader(data, **kw))) == _describe(list(torch.utils.data.DataLoader(data, **kw)))


@pytest.mark.parametrize("kw", [dict(batch_sampler=[[0]], batch_size=2), dict(batch_sampler=[[0]], shuffle=True),
                                dict(batch_sampler=[[0]], drop_last=True), dict(batch_size=None, drop_last=True),
                                dict(sampler=[0, 1], shuffle=True)])
def test_loader_conflicting_options_raise_value_error_as_torch(kw):
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError):
        torch.utils.data.DataLoader(list(range(4)), **kw)
    with pytest.raises(ValueError):
        mud.DataLoader(list(range(4)), **kw)


def test_loader_drop_last_and_namedtuple_collation_torch_free():
    data = [_P(i, np.full(2, float(i))) for i in range(7)]
    batches = list(mud.DataLoader(data, batch_size=3, drop_last=True))
    assert len(batches) == 2 == len(mud.DataLoader(data, batch_size=3, drop_last=True))
    assert type(batches[1]) is _P and batches[1].a.dtype == md.int64
    np.testing.assert_array_equal(_np(batches[1].b), [[3.0, 3.0], [4.0, 4.0], [5.0, 5.0]])
    assert len(mud.DataLoader(data, batch_size=3)) == 3
    assert [len(b) for b in mud.BatchSampler(mud.SequentialSampler(range(10)), 4, False)] == [4, 4, 2]


# ------------------------------------------------------------------------------ nn.init
@pytest.mark.parametrize("name,kw,std", [
    ("xavier_uniform_", dict(gain=2.0), lambda fi, fo: 2.0 * math.sqrt(2.0 / (fi + fo))),
    ("xavier_normal_", {}, lambda fi, fo: math.sqrt(2.0 / (fi + fo))),
    ("kaiming_uniform_", dict(a=0.1, mode="fan_out", nonlinearity="leaky_relu"),
     lambda fi, fo: math.sqrt(2.0 / (1 + 0.01)) / math.sqrt(fo)),
    ("kaiming_normal_", dict(nonlinearity="relu"), lambda fi, fo: math.sqrt(2.0) / math.sqrt(fi)),
])
def test_init_std_follows_the_fan_torch_free(name, kw, std):
    md.manual_seed(0)
    w = getattr(nn.init, name)(md.empty(64, 16, 3, 3), **kw)
    fan_in, fan_out = 16 * 9, 64 * 9
    assert nn.init._calculate_fan_in_and_fan_out(w) == (fan_in, fan_out)
    assert abs(_np(w).std() / std(fan_in, fan_out) - 1) < 0.05
    if "uniform" in name:
        assert np.abs(_np(w)).max() <= std(fan_in, fan_out) * math.sqrt(3) + 1e-6


def test_init_deterministic_fills_and_gains_match_torch():
    torch = pytest.importorskip("torch")
    for name, shape, kw in [("eye_", (3, 5), {}), ("dirac_", (4, 2, 3, 3), dict(groups=2)), ("constant_", (2, 3),
                                                                                              dict(val=2.5))]:
        ours, theirs = md.empty(*shape), torch.empty(*shape)
        getattr(nn.init, name)(ours, **kw)
        getattr(torch.nn.init, name)(theirs, **kw)
        _close(ours, theirs)
    for nl, p in [("tanh", None), ("leaky_relu", 0.3), ("selu", None), ("relu", None), ("conv2d", None)]:
        assert nn.init.calculate_gain(nl, p) == torch.nn.init.calculate_gain(nl, p)
    md.manual_seed(0)
    w = nn.init.orthogonal_(md.empty(6, 2, 5), gain=1.5)
    flat = _np(w).reshape(6, -1)
    np.testing.assert_allclose(flat @ flat.T, 2.25 * np.eye(6), atol=1e-5)
    s = nn.init.sparse_(md.empty(10, 4), sparsity=0.3)
    assert ((_np(s) == 0).sum(0) == 3).all()


# ------------------------------------------------------------------------------ clipping
@pytest.mark.parametrize("norm_type", [2.0, float("inf"), "inf", 1.0])
@pytest.mark.parametrize("foreach", [None, True, False])
def test_clip_grad_norm_matches_torch(norm_type, foreach):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    grads = [rng.standard_normal((3, 4)), rng.standard_normal(5) * 10]
    res = []
    for lib in (torch, md):
        ps = [lib.tensor(g * 0, requires_grad=True) for g in grads]
        for p, g in zip(ps, grads):
            p.grad = lib.tensor(g)
        total = lib.nn.utils.clip_grad_norm_(ps, 1.0, norm_type=norm_type, foreach=foreach)
        res.append([total] + [p.grad for p in ps])
    for a, b in zip(res[1], res[0]):
        _close(a, b)


def test_clip_grad_norm_inf_scales_by_the_largest_magnitude_torch_free():
    p = md.tensor(np.zeros(3), requires_grad=True)
    p.grad = md.tensor(np.array([1.0, -4.0, 2.0]))
    total = nn.utils.clip_grad_norm_([p], 2.0, norm_type=float("inf"))
    assert float(total) == 4.0
    np.testing.assert_allclose(_np(p.grad), np.array([1.0, -4.0, 2.0]) * 2.0 / (4.0 + 1e-6))


# ------------------------------------------------------------------------------ Embedding
_EMB_W = np.random.default_rng(9).standard_normal((6, 4)) * 2
_EMB_IDX = np.array([[0, 2, 2], [5, 0, 1]])


@pytest.mark.parametrize("kw", [dict(padding_idx=2), dict(padding_idx=-1), dict(max_norm=1.0),
                                dict(max_norm=1.5, norm_type=1.0, padding_idx=0),
                                dict(max_norm=0.5, norm_type=float("inf"), padding_idx=1)])
def test_embedding_padding_and_max_norm_match_torch(kw):
    torch = pytest.importorskip("torch")
    res = []
    for lib in (torch, md):
        emb = lib.nn.Embedding(6, 4, **kw).double()
        emb.weight.data = lib.tensor(_EMB_W.copy())
        out = emb(lib.tensor(_EMB_IDX))
        (out * lib.tensor(np.arange(24.0).reshape(2, 3, 4))).sum().backward()
        res.append([out, emb.weight, emb.weight.grad])
        assert emb.padding_idx == (kw["padding_idx"] % 6 if "padding_idx" in kw else None)
    for a, b in zip(res[1], res[0]):
        _close(a, b)


def test_embedding_max_norm_functional_and_from_pretrained_match_torch():
    torch = pytest.importorskip("torch")
    tw, mw = torch.tensor(_EMB_W.copy()), md.tensor(_EMB_W.copy())
    _close(F.embedding(md.tensor(_EMB_IDX), mw, max_norm=1.0, norm_type=3.0),
           torch.nn.functional.embedding(torch.tensor(_EMB_IDX), tw, max_norm=1.0, norm_type=3.0))
    _close(mw, tw)   # the selected rows were renormalised in place
    te = torch.nn.Embedding.from_pretrained(torch.tensor(_EMB_W), freeze=False, padding_idx=1, max_norm=1.0)
    me = nn.Embedding.from_pretrained(md.tensor(_EMB_W), freeze=False, padding_idx=1, max_norm=1.0)
    _close(me(md.tensor(_EMB_IDX)), te(torch.tensor(_EMB_IDX)))
    assert repr(me) == repr(te) and me.weight.requires_grad
    assert repr(nn.Embedding(3, 2, max_norm=2.0, norm_type=1.0)) == repr(torch.nn.Embedding(3, 2, max_norm=2.0,
                                                                                          norm_type=1.0))


def test_embedding_max_norm_renormalises_only_selected_rows_torch_free():
    w = np.array([[3.0, 4.0], [0.3, 0.4], [1.0, 1.0], [6.0, 8.0]])
    emb = nn.Embedding.from_pretrained(md.tensor(w.copy()), max_norm=1.0)
    out = emb(md.tensor(np.array([0, 1, 0])))
    scale = 1.0 / (5.0 + 1e-7)
    want = w.copy()
    want[0] *= scale
    np.testing.assert_allclose(_np(emb.weight), want, rtol=1e-12)   # rows 2 and 3 were not selected
    np.testing.assert_allclose(_np(out), want[[0, 1, 0]], rtol=1e-12)
    with pytest.raises(IndexError):
        emb(md.tensor(np.array([4])))
    np.testing.assert_allclose(_np(emb.weight), want, rtol=1e-12)   # a bad index renormalises nothing
    with pytest.raises(NotImplementedError):
        nn.Embedding(3, 2, scale_grad_by_freq=True)


# ------------------------------------------------------------------------------ Transformer
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_full_transformer_with_masks_matches_torch(norm_first, batch_first):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    kw = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=16, dropout=0.0,
              batch_first=batch_first, norm_first=norm_first, activation="gelu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # both warn that norm_first disables the nested-tensor path
        ref, ours = torch.nn.Transformer(**kw), nn.Transformer(**kw)
    _load(ours, ref)
    rng = np.random.default_rng(10)
    S, T, B = 5, 4, 3
    src = rng.standard_normal((B, S, 8) if batch_first else (S, B, 8))
    tgt = rng.standard_normal((B, T, 8) if batch_first else (T, B, 8))
    skpm = np.zeros((B, S), bool)
    skpm[0, 3:] = skpm[2, 4] = True
    tkpm = np.zeros((B, T), bool)
    tkpm[1, 3] = True
    src_mask = np.zeros((S, S))
    src_mask[0, 1], src_mask[2, :2] = -np.inf, -1.5
    res = []
    for lib, net in ((torch, ref), (md, ours)):
        xs, ys = lib.tensor(src, requires_grad=True), lib.tensor(tgt, requires_grad=True)
        causal = lib.nn.Transformer.generate_square_subsequent_mask(T, dtype=lib.float64)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = net(xs, ys, src_mask=lib.tensor(src_mask), tgt_mask=causal, src_key_padding_mask=lib.tensor(skpm),
                      tgt_key_padding_mask=lib.tensor(tkpm), memory_key_padding_mask=lib.tensor(skpm),
                      tgt_is_causal=True)
        (out * out).sum().backward()
        res.append([out, xs.grad, ys.grad, causal] + [p.grad for _, p in net.named_parameters()])
    for a, b in zip(res[1], res[0]):
        _close(a, b, rtol=1e-7, atol=1e-9)


def test_transformer_causal_mask_makes_outputs_independent_of_later_targets_torch_free():
    md.manual_seed(0)
    net = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=2, dim_feedforward=16,
                         dropout=0.0).double()
    rng = np.random.default_rng(11)
    src, tgt = rng.standard_normal((5, 2, 8)), rng.standard_normal((4, 2, 8))
    changed = tgt.copy()
    changed[3] += 1.0
    mask = nn.Transformer.generate_square_subsequent_mask(4, dtype=md.float64)
    np.testing.assert_array_equal(_np(mask), np.triu(np.full((4, 4), -np.inf), 1))
    a = _np(net(md.tensor(src), md.tensor(tgt), tgt_mask=mask))
    b = _np(net(md.tensor(src), md.tensor(changed), tgt_mask=mask))
    np.testing.assert_allclose(a[:3], b[:3], **TOL)
    assert not np.allclose(a[3], b[3])
