"""nn.RNN / nn.LSTM / nn.GRU and their cells against PyTorch: the same state_dict gives the same
outputs, final states and gradients (input, initial states, every parameter) for every argument
combination; state_dicts travel both ways; bad input gets PyTorch's exception and message.
Without PyTorch only the checks that need no oracle run."""
import warnings

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn

I, H, P, T, B = 3, 4, 2, 5, 3


def _torch():
    return pytest.importorskip("torch")


def make_pair(cls, dtype="float64", **kw):
    """A PyTorch module and the minidl one with its weights."""
    torch = _torch()
    torch.manual_seed(0)
    tm = getattr(torch.nn, cls)(I, H, dtype=getattr(torch, dtype), **kw)
    m = getattr(nn, cls)(I, H, dtype=dtype, **kw)
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    return tm, m


def _both(a, requires_grad=True):
    torch = _torch()
    return torch.tensor(a, requires_grad=requires_grad), md.tensor(a, requires_grad=requires_grad)


def _states(out):
    """(output, [final states]) of either framework's (output, h_n) / (output, (h_n, c_n))."""
    y, s = out
    return y, list(s) if isinstance(s, tuple) else [s]


def assert_same_run(tm, m, x, hx=None, atol=1e-10):
    """Outputs, final states and every gradient agree, for a random weighting of all outputs."""
    tx, mx = _both(x)
    targs, margs = (tx,), (mx,)
    if hx is not None:
        pairs = [_both(h) for h in hx]
        th = tuple(p[0] for p in pairs)
        mh = tuple(p[1] for p in pairs)
        targs += (th if len(th) > 1 else th[0],)
        margs += (mh if len(mh) > 1 else mh[0],)
    ty, ts = _states(tm(*targs))
    my, ms = _states(m(*margs))
    np.testing.assert_allclose(my.detach().numpy(), ty.detach().numpy(), atol=atol, rtol=atol)
    for a, b in zip(ms, ts):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=atol, rtol=atol)
    g = np.random.default_rng(1)
    weights = [g.standard_normal(tuple(t.shape)) for t in [ty] + ts]
    (sum((t * _torch().tensor(w, dtype=t.dtype)).sum() for t, w in zip([ty] + ts, weights))).backward()
    (sum((t * md.tensor(w.astype(t.dtype))).sum() for t, w in zip([my] + ms, weights))).backward()
    np.testing.assert_allclose(mx.grad.numpy(), tx.grad.numpy(), atol=atol, rtol=atol, err_msg="d input")
    if hx is not None:
        for k, (a, b) in enumerate(zip(mh, th)):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=atol, rtol=atol, err_msg=f"d hx[{k}]")
    ours = dict(m.named_parameters())
    for name, p in tm.named_parameters():
        np.testing.assert_allclose(ours[name].grad.numpy(), p.grad.numpy(), atol=atol, rtol=atol, err_msg=name)


COMBOS = [dict(num_layers=nl, bias=bias, batch_first=bf, bidirectional=bd)
          for nl in (1, 2) for bias in (True, False) for bf in (False, True) for bd in (False, True)]
MODES = [("LSTM", {}), ("LSTM", {"proj_size": P}), ("GRU", {}), ("RNN", {}), ("RNN", {"nonlinearity": "relu"})]


def _mode_id(m):
    cls, kw = m
    return cls + "".join(f"-{k}={v}" for k, v in kw.items())


def _hx(cls, kw, layers, batch_dims):
    g = np.random.default_rng(2)
    h = g.standard_normal((layers,) + batch_dims + (kw.get("proj_size") or H,))
    return (h, g.standard_normal((layers,) + batch_dims + (H,))) if cls == "LSTM" else (h,)


@pytest.mark.parametrize("combo", COMBOS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
@pytest.mark.parametrize("mode", MODES, ids=_mode_id)
@pytest.mark.parametrize("with_hx", [False, True], ids=["zero-state", "given-state"])
def test_every_argument_combination_matches_pytorch(mode, combo, with_hx):
    cls, kw = mode
    tm, m = make_pair(cls, **kw, **combo)
    shape = (B, T, I) if combo["batch_first"] else (T, B, I)
    x = np.random.default_rng(0).standard_normal(shape)
    layers = combo["num_layers"] * (2 if combo["bidirectional"] else 1)
    assert_same_run(tm, m, x, _hx(cls, kw, layers, (B,)) if with_hx else None)


@pytest.mark.parametrize("mode", MODES, ids=_mode_id)
def test_unbatched_input_matches_pytorch(mode):
    cls, kw = mode
    tm, m = make_pair(cls, num_layers=2, **kw)
    x = np.random.default_rng(0).standard_normal((T, I))
    assert_same_run(tm, m, x, _hx(cls, kw, 2, ()))


@pytest.mark.parametrize("mode", MODES, ids=_mode_id)
def test_float32_runs_the_fast_kernels_within_float32_rounding(mode):
    cls, kw = mode
    tm, m = make_pair(cls, dtype="float32", num_layers=2, bidirectional=True, **kw)
    x = np.random.default_rng(0).standard_normal((T, B, I)).astype(np.float32)
    assert_same_run(tm, m, x, atol=2e-5)


@pytest.mark.parametrize("cls", ["LSTMCell", "GRUCell", "RNNCell"])
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_cells_match_pytorch(cls, batched, bias):
    torch = _torch()
    torch.manual_seed(0)
    tm = getattr(torch.nn, cls)(I, H, bias=bias, dtype=torch.float64)
    m = getattr(nn, cls)(I, H, bias=bias, dtype="float64")
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    g = np.random.default_rng(0)
    lead = (B,) if batched else ()
    x = g.standard_normal(lead + (I,))
    hx = [g.standard_normal(lead + (H,)) for _ in range(2 if cls == "LSTMCell" else 1)]
    tx, mx = _both(x)
    th, mh = zip(*[_both(h) for h in hx])
    tout = tm(tx, th if cls == "LSTMCell" else th[0])
    mout = m(mx, mh if cls == "LSTMCell" else mh[0])
    touts = list(tout) if isinstance(tout, tuple) else [tout]
    mouts = list(mout) if isinstance(mout, tuple) else [mout]
    for a, b in zip(mouts, touts):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=1e-12)
    sum(t.pow(2).sum() for t in touts).backward()
    sum(t.pow(2).sum() for t in mouts).backward()
    np.testing.assert_allclose(mx.grad.numpy(), tx.grad.numpy(), atol=1e-12)
    for a, b in zip(mh, th):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=1e-12)
    ours = dict(m.named_parameters())
    for name, p in tm.named_parameters():
        np.testing.assert_allclose(ours[name].grad.numpy(), p.grad.numpy(), atol=1e-12, err_msg=name)
    # without a state both start from zeros
    a, b = m(mx), tm(tx)
    a, b = (a[0], b[0]) if cls == "LSTMCell" else (a, b)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=1e-12)


# parameters, initialisation, state dicts ---------------------------------------------------------
@pytest.mark.parametrize("mode", MODES, ids=_mode_id)
def test_parameter_names_and_shapes_are_pytorchs(mode):
    torch = _torch()
    cls, kw = mode
    tm = getattr(torch.nn, cls)(I, H, num_layers=2, bidirectional=True, **kw)
    m = getattr(nn, cls)(I, H, num_layers=2, bidirectional=True, **kw)
    assert [(n, tuple(p.shape)) for n, p in m.named_parameters()] == \
           [(n, tuple(p.shape)) for n, p in tm.named_parameters()]


def test_initialisation_is_uniform_within_one_over_sqrt_hidden():
    md.manual_seed(0)
    m = nn.LSTM(8, 64, num_layers=2)
    values = np.concatenate([p.detach().numpy().ravel() for p in m.parameters()])
    bound = 1 / np.sqrt(64)
    assert np.abs(values).max() <= bound and np.abs(values).max() > 0.95 * bound
    assert abs(values.mean()) < 0.01 * bound * 10 and abs(values.std() - bound / np.sqrt(3)) < 0.05 * bound


@pytest.mark.parametrize("mode", MODES, ids=_mode_id)
def test_state_dicts_travel_both_ways(mode):
    torch = _torch()
    cls, kw = mode
    m = getattr(nn, cls)(I, H, num_layers=2, bidirectional=True, dtype="float64", **kw)
    tm = getattr(torch.nn, cls)(I, H, num_layers=2, bidirectional=True, dtype=torch.float64, **kw)
    tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in m.state_dict().items()})   # minidl -> PyTorch
    x = np.random.default_rng(0).standard_normal((T, B, I))
    assert_same_run(tm, m, x)
    m2 = getattr(nn, cls)(I, H, num_layers=2, bidirectional=True, dtype="float64", **kw)
    m2.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})  # and back
    for (n, a), (_, b) in zip(m.named_parameters(), m2.named_parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy(), err_msg=n)


# dropout between layers --------------------------------------------------------------------------
def test_dropout_applies_between_layers_in_training_only():
    md.manual_seed(0)
    m = nn.LSTM(I, H, num_layers=2, dropout=0.5, dtype="float64")
    x = md.tensor(np.random.default_rng(0).standard_normal((T, B, I)))
    m.eval()
    a, b = m(x)[0].detach().numpy(), m(x)[0].detach().numpy()
    np.testing.assert_array_equal(a, b)
    m.train()
    c = m(x)[0].detach().numpy()
    assert np.abs(c - a).max() > 1e-3
    single = nn.LSTM(I, H, num_layers=1, dtype="float64")
    single.train()
    np.testing.assert_array_equal(single(x)[0].detach().numpy(), single(x)[0].detach().numpy())


def test_dropout_on_a_single_layer_warns_as_pytorch():
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nn.GRU(I, H, dropout=0.2)


# bad input ---------------------------------------------------------------------------------------
def _raises(exc, msg, fn):
    with pytest.raises(exc) as info:
        fn()
    assert str(info.value) == msg


def test_bad_input_gets_pytorchs_exceptions_and_messages():
    lstm, gru = nn.LSTM(3, 4, 2), nn.GRU(3, 4)
    _raises(ValueError, "LSTM: Expected input to be 2D or 3D, got 4D instead", lambda: lstm(md.randn(2, 3, 4, 3)))
    _raises(RuntimeError, "input.size(-1) must be equal to input_size. Expected 3, got 7",
            lambda: lstm(md.randn(5, 2, 7)))
    _raises(RuntimeError, "Expected hidden[0] size (2, 2, 4), got [2, 3, 4]",
            lambda: lstm(md.randn(5, 2, 3), (md.randn(2, 3, 4), md.randn(2, 2, 4))))
    _raises(RuntimeError, "Expected hidden[1] size (2, 2, 4), got [1, 2, 4]",
            lambda: lstm(md.randn(5, 2, 3), (md.randn(2, 2, 4), md.randn(1, 2, 4))))
    _raises(RuntimeError, "For batched 3-D input, hx and cx should also be 3-D but got (2-D, 2-D) tensors",
            lambda: lstm(md.randn(5, 2, 3), (md.randn(2, 4), md.randn(2, 4))))
    _raises(RuntimeError, "For unbatched 2-D input, hx and cx should also be 2-D but got (3-D, 3-D) tensors",
            lambda: lstm(md.randn(5, 3), (md.randn(2, 1, 4), md.randn(2, 1, 4))))
    _raises(RuntimeError, "Expected hidden size (1, 2, 4), got [1, 3, 4]",
            lambda: gru(md.randn(5, 2, 3), md.randn(1, 3, 4)))
    _raises(ValueError, "LSTMCell: Expected input to be 1D or 2D, got 3D instead",
            lambda: nn.LSTMCell(3, 4)(md.randn(2, 2, 3)))
    _raises(RuntimeError, "input has inconsistent input_size: got 5 expected 3",
            lambda: nn.LSTMCell(3, 4)(md.randn(2, 5)))
    _raises(RuntimeError, "Input batch size 2 doesn't match hidden0 batch size 3",
            lambda: nn.LSTMCell(3, 4)(md.randn(2, 3), (md.randn(3, 4), md.randn(2, 4))))
    _raises(RuntimeError, "hidden0 has inconsistent hidden_size: got 5, expected 4",
            lambda: nn.GRUCell(3, 4)(md.randn(2, 3), md.randn(2, 5)))
    _raises(RuntimeError, "Input batch size 2 doesn't match hidden0 batch size 3",
            lambda: nn.RNNCell(3, 4)(md.randn(2, 3), md.randn(3, 4)))


def test_bad_arguments_get_pytorchs_exceptions_and_messages():
    _raises(ValueError, "Unknown nonlinearity 'sig'. Select from 'tanh' or 'relu'.",
            lambda: nn.RNN(3, 4, nonlinearity="sig"))
    _raises(ValueError, "proj_size has to be smaller than hidden_size", lambda: nn.LSTM(3, 4, proj_size=4))
    _raises(ValueError, "proj_size should be a positive integer or zero to disable projections",
            lambda: nn.LSTM(3, 4, proj_size=-1))
    _raises(ValueError, "dropout should be a number in range [0, 1] representing the probability of an element "
                        "being zeroed", lambda: nn.LSTM(3, 4, dropout=1.5))
    _raises(ValueError, "hidden_size must be greater than zero", lambda: nn.LSTM(3, 0))
    _raises(ValueError, "num_layers must be greater than zero", lambda: nn.LSTM(3, 4, num_layers=0))


def test_a_state_of_another_dtype_is_refused():
    with pytest.raises(RuntimeError, match=r"input must have the type (minidl\.)?float32 of hx, got "
                                           r"(minidl\.)?float64"):
        nn.GRU(3, 4, dtype="float64")(md.randn(5, 2, 3, dtype="float64"), md.randn(1, 2, 4))


def test_messages_equal_pytorchs_own():
    torch = _torch()
    cases = [
        (lambda M: M.LSTM(3, 4, 2), lambda T: T.randn(5, 2, 7)),
        (lambda M: M.GRU(3, 4), lambda T: T.randn(2, 3, 4, 3)),
    ]
    for make, data in cases:
        with pytest.raises(Exception) as theirs:
            make(torch.nn)(data(torch))
        with pytest.raises(Exception) as ours:
            make(nn)(data(md))
        assert type(ours.value) is type(theirs.value) and str(ours.value) == str(theirs.value)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nn.LSTM(3, 4, 2, dropout=0.1)   # no warning with more than one layer
