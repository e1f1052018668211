"""LayerNormLSTM (Ba et al. 2016, Section 3.1) and BatchNormLSTM (Cooijmans et al. 2016, statistics
per time step, gains starting at 0.1): forward against the papers' formulas written in NumPy,
gradients against finite differences, and the per-step running statistics."""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
from minidl.autograd.gradcheck import gradcheck


def sig(x):
    return 1 / (1 + np.exp(-x))


def np_norm(x, w, b, eps, over_batch):
    """LayerNorm over the features of each row, or BatchNorm over the rows of each feature."""
    axis = 0 if over_batch else -1
    mu = x.mean(axis=axis, keepdims=True)
    var = x.var(axis=axis, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + (0 if b is None else b)


def np_norm_lstm(m, x, over_batch):
    """The papers' equations, one layer, from zero state, with m's parameters."""
    P = {n: p.detach().numpy() for n, p in m.named_parameters()}
    T, B, _ = x.shape
    H = m.hidden_size
    h, c = np.zeros((B, H)), np.zeros((B, H))
    ys = []
    for t in range(T):
        g = (np_norm(h @ P["weight_hh_l0"].T, P["norm_hh_l0_weight"], None, m.eps, over_batch)
             + np_norm(x[t] @ P["weight_ih_l0"].T, P["norm_ih_l0_weight"], None, m.eps, over_batch) + P["bias_l0"])
        i, f, gg, o = sig(g[:, :H]), sig(g[:, H:2 * H]), np.tanh(g[:, 2 * H:3 * H]), sig(g[:, 3 * H:])
        c = f * c + i * gg
        h = o * np.tanh(np_norm(c, P["norm_c_l0_weight"], P["norm_c_l0_bias"], m.eps, over_batch))
        ys.append(h)
    return np.stack(ys), h, c


def _randomise(m, seed=0):
    g = np.random.default_rng(seed)
    for p in m.parameters():
        p._data[...] = g.standard_normal(p.shape) * 0.5 + (1 if p.ndim == 1 else 0)


@pytest.mark.parametrize("cls,over_batch", [(nn.LayerNormLSTM, False), (nn.BatchNormLSTM, True)])
def test_forward_is_the_papers_formula(cls, over_batch):
    md.manual_seed(0)
    m = cls(3, 4, dtype="float64")
    _randomise(m)
    x = np.random.default_rng(1).standard_normal((5, 6, 3))
    y, (h, c) = m(md.tensor(x))
    ry, rh, rc = np_norm_lstm(m, x, over_batch)
    np.testing.assert_allclose(y.detach().numpy(), ry, atol=1e-10)
    np.testing.assert_allclose(h.detach().numpy()[0], rh, atol=1e-10)
    np.testing.assert_allclose(c.detach().numpy()[0], rc, atol=1e-10)


@pytest.mark.parametrize("cls", [nn.LayerNormLSTM, nn.BatchNormLSTM])
def test_gradients_agree_with_finite_differences(cls):
    md.manual_seed(0)
    m = cls(2, 3, num_layers=2, dtype="float64")
    _randomise(m)
    x = md.tensor(np.random.default_rng(1).standard_normal((3, 4, 2)))
    assert gradcheck(lambda x: m(x)[0], [x.requires_grad_()])
    v = np.random.default_rng(2).standard_normal((3, 4, 3))

    def loss():
        return float((m(x.detach())[0].detach().numpy() * v).sum())
    m.zero_grad()
    (m(x.detach())[0] * md.tensor(v)).sum().backward()
    eps = 1e-6
    for name, p in m.named_parameters():       # every parameter, three entries each
        for idx in list(np.ndindex(p.shape))[::max(1, p.numel() // 3)][:3]:
            old = p._data[idx]
            p._data[idx] = old + eps
            up = loss()
            p._data[idx] = old - eps
            down = loss()
            p._data[idx] = old
            np.testing.assert_allclose(p.grad.numpy()[idx], (up - down) / (2 * eps), atol=1e-6, rtol=1e-4,
                                       err_msg=f"{name}{idx}")


def test_batch_norm_keeps_statistics_per_time_step_and_starts_its_gains_at_a_tenth():
    md.manual_seed(0)
    m = nn.BatchNormLSTM(3, 4, dtype="float64", max_steps=4)
    assert np.all(m.norm_ih_l0_weight.detach().numpy() == 0.1) and np.all(m.norm_c_l0_weight.detach().numpy() == 0.1)
    g = np.random.default_rng(0)
    x = g.standard_normal((3, 8, 3)) * np.array([1.0, 5.0, 20.0])[:, None, None]   # each step its own scale
    m(md.tensor(x))
    proj = x @ m.weight_ih_l0.detach().numpy().T                                            # (T, B, 4H)
    running = m.norm_ih_l0_running_mean.numpy()
    for t in range(3):
        np.testing.assert_allclose(running[t], 0.1 * proj[t].mean(axis=0), atol=1e-12)
    assert np.all(running[3] == 0)                                                 # step 3 never ran
    m.eval()
    y_eval = m(md.tensor(x))[0].detach().numpy()
    m.train()
    assert np.abs(m(md.tensor(x))[0].detach().numpy() - y_eval).max() > 1e-3                # eval: running statistics


def test_layer_norm_lstm_computes_the_same_in_training_and_evaluation():
    m = nn.LayerNormLSTM(3, 4, batch_first=True)
    x = md.randn(2, 5, 3)
    a = m(x)[0].detach().numpy()
    m.eval()
    np.testing.assert_array_equal(m(x)[0].detach().numpy(), a)


def test_bad_input_is_refused_with_what_was_expected():
    m = nn.LayerNormLSTM(3, 4)
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size. Expected 3, got 5"):
        m(md.randn(2, 2, 5))
    with pytest.raises(ValueError, match="Expected input to be 3D"):
        m(md.randn(2, 3))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(1, 2, 4\), got \[1, 3, 4\]"):
        m(md.randn(5, 2, 3), (md.randn(1, 3, 4), md.randn(1, 2, 4)))
    with pytest.raises(ValueError, match="norm must be one of layer, batch, got 'group'"):
        nn.NormLSTM(3, 4, norm="group")


@pytest.mark.parametrize("cls", [nn.LayerNormLSTM, nn.BatchNormLSTM])
def test_an_empty_sequence_passes_the_state_through(cls):
    """As nn.LSTM: no steps, an empty output, and (h_n, c_n) the initial state, gradient included."""
    m = cls(3, 4, num_layers=2, batch_first=True)
    h0 = md.randn(2, 5, 4, requires_grad=True)
    c0 = md.randn(2, 5, 4)
    out, (h, c) = m(md.randn(5, 0, 3), (h0, c0))
    assert out.shape == (5, 0, 4)
    np.testing.assert_array_equal(h.detach().numpy(), h0.detach().numpy())
    np.testing.assert_array_equal(c.numpy(), c0.numpy())
    g = np.random.default_rng(0).standard_normal((2, 5, 4)).astype(np.float32)
    (h * md.tensor(g)).sum().backward()
    np.testing.assert_array_equal(h0.grad.numpy(), g)
