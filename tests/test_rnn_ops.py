"""The recurrent layer Functions (minidl.ops.rnn) and their fused gate kernels.

Every cell (LSTM, LSTM with projection, GRU, tanh and relu RNN) is declared once as an OpSpec
against an independent NumPy unrolling (textbook formulas, not the package's code): forward in
float32/float64, gradcheck in float64 for one step (the cell) and for three unrolled steps, both
on the NumPy reference steps and on the Numba kernels; the kernels are checked against the
reference steps directly, forward and backward; and the cuda kernels under the simulator."""
import numpy as np
import pytest

import minidl as md
from minidl.kernels.cpu import rnn_gates as kcpu
from minidl.ops import rnn as R
from minidl.testing import OpSpec, check_forward, check_gradcheck, forward_cases, spec_id


def sig(x):
    return 1 / (1 + np.exp(-x))


# independent NumPy unrollings: x (T, B, I) -> outputs (T*B, P) and final states ------------------
def np_lstm(x, h, c, w_ih, w_hh, b_ih, b_hh, w_hr=None):
    ys = []
    for xt in x:
        a = xt @ w_ih.T + b_ih + h @ w_hh.T + b_hh
        i, f, g, o = np.split(a, 4, axis=1)
        c = sig(f) * c + sig(i) * np.tanh(g)
        h = sig(o) * np.tanh(c)
        if w_hr is not None:
            h = h @ w_hr.T
        ys.append(h)
    return np.concatenate(ys), h, c


def np_gru(x, h, w_ih, w_hh, b_ih, b_hh):
    ys = []
    for xt in x:
        ar, az, an = np.split(xt @ w_ih.T + b_ih, 3, axis=1)
        br, bz, bn = np.split(h @ w_hh.T + b_hh, 3, axis=1)
        r, z = sig(ar + br), sig(az + bz)
        n = np.tanh(an + r * bn)
        h = (1 - z) * n + z * h
        ys.append(h)
    return np.concatenate(ys), h


def np_rnn(x, h, w_ih, w_hh, b_ih, b_hh, relu):
    ys = []
    for xt in x:
        a = xt @ w_ih.T + b_ih + h @ w_hh.T + b_hh
        h = np.maximum(a, 0) if relu else np.tanh(a)
        ys.append(h)
    return np.concatenate(ys), h


def _impl(name, fn):
    def run(*args):
        with R.implementation(name):
            return fn(*args)
    return run


def _specs(impl):
    specs = []
    B, I, H, P = 2, 3, 4, 2
    for T in (1, 3):
        tag = "cell" if T == 1 else f"{T}-steps"
        bs = [B] * T

        def lstm_inputs(g, T=T):
            return (g.standard_normal((T, B, I)), g.standard_normal((B, H)), g.standard_normal((B, H)),
                    g.standard_normal((4 * H, I)), g.standard_normal((4 * H, H)), g.standard_normal(4 * H),
                    g.standard_normal(4 * H))
        specs.append(OpSpec(
            f"lstm-{impl}-{tag}",
            _impl(impl, lambda x, h, c, wi, wh, bi, bh, bs=bs: R.LSTMLayer.apply(
                x.reshape(-1, I), wi, wh, bi, bh, None, h, c, bs, False)),
            np_lstm, lstm_inputs))

        def proj_inputs(g, T=T):
            return (g.standard_normal((T, B, I)), g.standard_normal((B, P)), g.standard_normal((B, H)),
                    g.standard_normal((4 * H, I)), g.standard_normal((4 * H, P)), g.standard_normal(4 * H),
                    g.standard_normal(4 * H), g.standard_normal((P, H)))
        specs.append(OpSpec(
            f"lstm-proj-{impl}-{tag}",
            _impl(impl, lambda x, h, c, wi, wh, bi, bh, wr, bs=bs: R.LSTMLayer.apply(
                x.reshape(-1, I), wi, wh, bi, bh, wr, h, c, bs, False)),
            np_lstm, proj_inputs))

        def gru_inputs(g, T=T):
            return (g.standard_normal((T, B, I)), g.standard_normal((B, H)), g.standard_normal((3 * H, I)),
                    g.standard_normal((3 * H, H)), g.standard_normal(3 * H), g.standard_normal(3 * H))
        specs.append(OpSpec(
            f"gru-{impl}-{tag}",
            _impl(impl, lambda x, h, wi, wh, bi, bh, bs=bs: R.GRULayer.apply(x.reshape(-1, I), wi, wh, bi, bh, h,
                                                                           bs, False)),
            np_gru, gru_inputs))
        for relu in (False, True):
            def rnn_inputs(g, T=T):
                return (g.standard_normal((T, B, I)), g.standard_normal((B, H)), g.standard_normal((H, I)),
                        g.standard_normal((H, H)), g.standard_normal(H), g.standard_normal(H))
            specs.append(OpSpec(
                f"rnn-{'relu' if relu else 'tanh'}-{impl}-{tag}",
                _impl(impl, lambda x, h, wi, wh, bi, bh, bs=bs, relu=relu: R.RNNLayer.apply(
                    x.reshape(-1, I), wi, wh, bi, bh, h, bs, False, relu)),
                lambda x, h, wi, wh, bi, bh, relu=relu: np_rnn(x, h, wi, wh, bi, bh, relu), rnn_inputs))
    return specs


SPECS = _specs("reference") + _specs("numba")


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck_of_each_cell_and_of_three_unrolled_steps(spec):
    assert check_gradcheck(spec)


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward_matches_the_textbook_unrolling(spec, dtype, device):
    check_forward(spec, dtype, device)


# the fused kernels against the reference steps --------------------------------------------------
TOL = {np.float32: dict(rtol=1e-5, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}


def _arrays(dtype, *shapes, seed=0):
    g = np.random.default_rng(seed)
    return [(2 * g.standard_normal(s)).astype(dtype) for s in shapes]


def _run(fn, arrays, outputs):
    """fn on copies of arrays (in place), plus fresh outputs of the given shapes; returns all."""
    ins = [a.copy() for a in arrays]
    outs = [np.zeros(s, arrays[0].dtype) for s in outputs]
    fn(*ins, *outs)
    return ins + outs


def _close(got, want, dtype):
    for k, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_allclose(a, b, err_msg=f"array {k}", **TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [5, 0])
def test_lstm_kernels_equal_the_reference_steps(dtype, n):
    H = 7
    gates, hg, c = _arrays(dtype, (n, 4 * H), (n, 4 * H), (n, H))
    want = _run(R.lstm_step_forward_reference, [gates, hg, c], [(n, H)] * 3)
    _close(_run(kcpu.lstm_step_forward, [gates, hg, c], [(n, H)] * 3), want, dtype)
    acts, cs, cprev = want[0], want[4], want[3]
    dy, dh, dc = _arrays(dtype, (n, H), (n, H), (n, H), seed=1)
    want = _run(R.lstm_step_backward_reference, [acts, cs, cprev, dy, dh, dc], [(n, 4 * H)])
    _close(_run(kcpu.lstm_step_backward, [acts, cs, cprev, dy, dh, dc], [(n, 4 * H)]), want, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gru_kernels_equal_the_reference_steps(dtype):
    n, H = 5, 6
    gates, hg, bhh, h = _arrays(dtype, (n, 3 * H), (n, 3 * H), (3 * H,), (n, H))
    want = _run(R.gru_step_forward_reference, [gates, hg, bhh, h], [(n, H)] * 2)
    _close(_run(kcpu.gru_step_forward, [gates, hg, bhh, h], [(n, H)] * 2), want, dtype)
    acts, ghn = want[0], want[4]
    dy, dh = _arrays(dtype, (n, H), (n, H), seed=1)
    want = _run(R.gru_step_backward_reference, [acts, ghn, h, dy, dh], [(n, 3 * H)] * 2)
    _close(_run(kcpu.gru_step_backward, [acts, ghn, h, dy, dh], [(n, 3 * H)] * 2), want, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("relu", [False, True])
def test_rnn_kernels_equal_the_reference_steps(dtype, relu):
    n, H = 5, 6
    gates, hg = _arrays(dtype, (n, H), (n, H))
    want = _run(lambda g, x, out: R.rnn_step_forward_reference(g, x, out, relu), [gates, hg], [(n, H)])
    _close(_run(lambda g, x, out: kcpu.rnn_step_forward(g, x, out, relu), [gates, hg], [(n, H)]), want, dtype)
    h = want[2]
    dy, dh = _arrays(dtype, (n, H), (n, H), seed=1)
    want = _run(lambda *a: R.rnn_step_backward_reference(*a, relu), [h, dy, dh], [(n, H)])
    _close(_run(lambda *a: kcpu.rnn_step_backward(*a, relu), [h, dy, dh], [(n, H)]), want, dtype)


def test_a_kernel_refuses_arrays_of_the_wrong_shape_before_indexing_them():
    gates, hg, c = _arrays(np.float32, (3, 8), (3, 8), (3, 2))
    with pytest.raises(ValueError, match=r"expected C-contiguous \(3, 2\) float32 arrays, got shape \(2, 2\)"):
        kcpu.lstm_step_forward(gates, hg, c, np.zeros((3, 2), np.float32), np.zeros((3, 2), np.float32),
                               np.zeros((2, 2), np.float32))


def test_the_layers_leave_no_trace_of_padded_steps_in_a_packed_batch():
    # batch_sizes [3, 2, 1]: sequence 2 runs one step, so its final state is its first step's
    g = np.random.default_rng(0)
    x = md.tensor(g.standard_normal((6, 2)))
    w_ih, w_hh = md.tensor(g.standard_normal((4 * 3, 2))), md.tensor(g.standard_normal((4 * 3, 3)))
    h0 = c0 = np.zeros((3, 3))
    y, h, c = R.LSTMLayer.apply(x, w_ih, w_hh, None, None, None, h0, c0, [3, 2, 1], False)
    np.testing.assert_allclose(h.numpy()[2], y.numpy()[2])
    np.testing.assert_allclose(h.numpy()[1], y.numpy()[4])
    np.testing.assert_allclose(h.numpy()[0], y.numpy()[5])


# cuda kernels under the simulator ---------------------------------------------------------------
def _cuda():
    from minidl import backends
    try:
        backends.get("cuda")
    except RuntimeError as exc:
        pytest.skip(f"cuda device unavailable: {exc}")
    from minidl.backends.cuda import CudaArray
    from minidl.kernels.cuda import rnn_gates as kcuda
    return CudaArray, kcuda


def _run_cuda(fn, arrays, outputs):
    CudaArray, _ = _cuda()
    dev = [CudaArray.from_host(a) for a in arrays] + [CudaArray.from_host(np.zeros(s, arrays[0].dtype))
                                                      for s in outputs]
    fn(*dev)
    return [d.copy_to_host() for d in dev]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cuda_lstm_kernels_equal_the_reference_steps(dtype):
    _, k = _cuda()
    n, H = 2, 3
    gates, hg, c = _arrays(dtype, (n, 4 * H), (n, 4 * H), (n, H))
    want = _run(R.lstm_step_forward_reference, [gates, hg, c], [(n, H)] * 3)
    _close(_run_cuda(k.lstm_step_forward, [gates, hg, c], [(n, H)] * 3), want, dtype)
    acts, cs, cprev = want[0], want[4], want[3]
    dy, dh, dc = _arrays(dtype, (n, H), (n, H), (n, H), seed=1)
    want = _run(R.lstm_step_backward_reference, [acts, cs, cprev, dy, dh, dc], [(n, 4 * H)])
    _close(_run_cuda(k.lstm_step_backward, [acts, cs, cprev, dy, dh, dc], [(n, 4 * H)]), want, dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cuda_gru_kernels_equal_the_reference_steps(dtype):
    _, k = _cuda()
    n, H = 2, 3
    gates, hg, bhh, h = _arrays(dtype, (n, 3 * H), (n, 3 * H), (3 * H,), (n, H))
    want = _run(R.gru_step_forward_reference, [gates, hg, bhh, h], [(n, H)] * 2)
    _close(_run_cuda(k.gru_step_forward, [gates, hg, bhh, h], [(n, H)] * 2), want, dtype)
    acts, ghn = want[0], want[4]
    dy, dh = _arrays(dtype, (n, H), (n, H), seed=1)
    want = _run(R.gru_step_backward_reference, [acts, ghn, h, dy, dh], [(n, 3 * H)] * 2)
    _close(_run_cuda(k.gru_step_backward, [acts, ghn, h, dy, dh], [(n, 3 * H)] * 2), want, dtype)


@pytest.mark.parametrize("relu", [False, True])
def test_cuda_rnn_kernels_equal_the_reference_steps(relu):
    _, k = _cuda()
    n, H, dtype = 2, 3, np.float64
    gates, hg = _arrays(dtype, (n, H), (n, H))
    want = _run(lambda g, x, out: R.rnn_step_forward_reference(g, x, out, relu), [gates, hg], [(n, H)])
    _close(_run_cuda(lambda g, x, out: k.rnn_step_forward(g, x, out, relu), [gates, hg], [(n, H)]), want, dtype)
    h = want[2]
    dy, dh = _arrays(dtype, (n, H), (n, H), seed=1)
    want = _run(lambda *a: R.rnn_step_backward_reference(*a, relu), [h, dy, dh], [(n, H)])
    _close(_run_cuda(lambda *a: k.rnn_step_backward(*a, relu), [h, dy, dh], [(n, H)]), want, dtype)


# one implementation per node ----------------------------------------------------------------------
def _refuse(*args, **kwargs):
    raise AssertionError("the kernel ran although the reference was selected")


@pytest.mark.parametrize("layer, cell", [(md.nn.LSTM, "lstm"), (md.nn.GRU, "gru"), (md.nn.RNN, "rnn")])
def test_backward_runs_the_gate_implementation_its_forward_chose(monkeypatch, layer, cell):
    """Selected once per node (the registry's rule): a forward under "reference" gets the
    reference's backward even when the setting is back to the kernels by then, and vice versa."""
    md.manual_seed(0)
    m = layer(3, 4)
    x = md.randn(5, 2, 3, requires_grad=True)
    with md.implementation(rnn="reference"):
        y, _ = m(x)
    monkeypatch.setattr(kcpu, f"{cell}_step_backward", _refuse)
    y.sum().backward()
    monkeypatch.undo()

    seen = []
    kernel = getattr(kcpu, f"{cell}_step_backward")
    monkeypatch.setattr(kcpu, f"{cell}_step_backward", lambda *a: seen.append(1) or kernel(*a))
    y, _ = m(x)
    with md.implementation(rnn="reference"):
        y.sum().backward()
    assert len(seen) == 5   # the kernel's backward, once per step


def test_the_reference_setting_runs_no_gate_kernel(monkeypatch):
    for name in ("lstm_step_forward", "lstm_step_backward"):
        monkeypatch.setattr(kcpu, name, _refuse)
    m = md.nn.LSTM(3, 4, num_layers=2)
    x = md.randn(4, 2, 3, requires_grad=True)
    with md.implementation(rnn="reference"):
        y, (h, c) = m(x)
        (y.sum() + c.sum()).backward()
    assert x.grad.shape == x.shape
