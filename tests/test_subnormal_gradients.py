"""Saturated softmax rows give exact probabilities and exactly zero gradients, never subnormal
numbers: once a model fits its batch, a tail of 1e-38 probabilities would turn every later gradient
into subnormal floats, on which the CPU's arithmetic runs 15-140 times slower in the convolutions
measured (docs/performance.md, "Subnormal gradients"). PyTorch's gradients reach exactly 0 there
too."""
import numpy as np

import minidl as md
import minidl.nn.functional as F
from minidl import nn
from minidl.kernels.cpu.softmax import softmax_backward_, softmax_rows_
from minidl.ops import attention as A

TINY = np.finfo(np.float32).tiny


def _subnormal(a):
    a = np.asarray(a)
    return int(((a != 0) & (np.abs(a) < TINY)).sum())


def test_cross_entropy_of_a_saturated_row_has_a_zero_gradient():
    x = md.tensor(np.array([[100.0, -100.0, 0.0], [0.0, 1.0, 2.0]], np.float32), requires_grad=True)
    F.cross_entropy(x, md.tensor(np.array([0, 2]))).backward()
    g = x.grad.numpy()
    assert (g[0] == 0).all()                                 # p = (1, 0, 0) exactly: e^-100, e^-200 underflow
    np.testing.assert_allclose(g[1], (np.exp([0, 1, 2]) / np.exp([0, 1, 2]).sum() - [0, 0, 1]) / 2, rtol=1e-6)


def test_softmax_kernels_of_saturated_rows_are_exactly_one_hot():
    s = np.array([[0.0, -100.0, -200.0, -1000.0], [-90.0, 0.0, -95.0, -np.inf]], np.float32)
    p = softmax_rows_(s.copy())
    np.testing.assert_array_equal(p, [[1, 0, 0, 0], [0, 1, 0, 0]])
    dp = np.random.default_rng(0).standard_normal(p.shape).astype(np.float32)
    np.testing.assert_array_equal(softmax_backward_(dp, p), 0)


def test_attention_with_saturated_scores_passes_no_subnormal_gradient():
    """Each query sees one key at score 0 and the others 150 or more below it."""
    E = 4
    q = md.tensor(np.tile(np.eye(E, dtype=np.float32) * 300, (2, 1, 1, 1)), requires_grad=True)
    k = md.tensor(np.tile(np.eye(E, dtype=np.float32), (2, 1, 1, 1)) - 0.5, requires_grad=True)
    v = md.tensor(np.random.default_rng(1).standard_normal((2, 1, E, 3)).astype(np.float32), requires_grad=True)
    with A.implementation("fused-softmax"):
        out = F.scaled_dot_product_attention(q, k, v, scale=1.0)
    np.testing.assert_array_equal(out.detach().numpy(), v.detach().numpy())    # P = I exactly
    out.backward(md.tensor(np.random.default_rng(2).standard_normal(out.shape).astype(np.float32)))
    np.testing.assert_array_equal(q.grad.numpy(), 0)
    np.testing.assert_array_equal(k.grad.numpy(), 0)


def test_a_model_whose_logits_saturate_gets_zero_gradients_not_subnormal_ones():
    """A classifier sure of its class (logit gap 150): the loss is 0 and so is every gradient.
    With a clamped exp the wrong classes would keep p = 1.2e-38 and the weights' gradients
    would be subnormal numbers."""
    md.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 4))
    with md.no_grad():
        model[2].bias.copy_(md.tensor(np.array([0.0, 0.0, 150.0, 0.0], np.float32)))
    x = md.tensor(np.random.default_rng(1).standard_normal((8, 6)).astype(np.float32))
    loss = F.cross_entropy(model(x), md.tensor(np.full(8, 2)))
    loss.backward()
    assert loss.item() == 0
    for p in model.parameters():
        assert _subnormal(p.grad.numpy()) == 0
        np.testing.assert_array_equal(p.grad.numpy(), 0)
