"""Gradients of gradients through the norms (BatchNorm in training and eval, LayerNorm, GroupNorm,
RMSNorm, InstanceNorm, ScaleNorm, the fused norm + ReLU and residual + norm ops), the activations,
dropout, embedding, the running reductions, attention and the pointwise losses: gradgradcheck
in float64 with random cotangents, Hessian-vector products against NumPy finite differences
and against PyTorch, and a gradient penalty through a Pre-LN Transformer block."""
import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl import autograd
from minidl.autograd import gradgradcheck
from minidl.ops import attention
from minidl.ops.heads import split_heads
from minidl.ops.linear_gelu import linear_gelu
from minidl.ops.mlp import linear_gelu_linear

RNG = np.random.default_rng(7)


def T(a, grad=True):
    return md.tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


def A(*shape):
    return RNG.standard_normal(shape)


def away(*shape, lo=0.3):
    """Values with |x| >= lo: every kink (relu, clamp bounds, shrink thresholds) far from a finite difference."""
    return RNG.uniform(lo, 1.5, shape) * RNG.choice([-1.0, 1.0], shape)


def U(lo, hi, *shape):
    return RNG.uniform(lo, hi, shape)


def seeded(fn):
    """fn with minidl's generator reset first: the same dropout mask at every evaluation."""
    def run(*args):
        md.manual_seed(3)
        return fn(*args)
    return run


def zeros(c):
    return md.zeros(c, dtype=md.float64)


def ones(c, value=1.0):
    return md.full((c,), value, dtype=md.float64)


SEQ_MASK = md.tensor(np.array([[True, True, False, True], [True, False, True, True]]))
IDX = md.tensor(np.array([[0, 2, 2], [3, 0, 1]]))
KEYS = md.tensor(np.array([[True, False, True], [False, False, False]]))   # the second query sees no key

# name -> (function of tensors, input arrays)
NORMS = {
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (2, 3), w, b), [A(2, 2, 3), A(2, 3), A(2, 3)]),
    "layer_norm_plain": (lambda x: F.layer_norm(x, (3,)), [A(2, 3)]),
    "rms_norm": (lambda x, w: F.rms_norm(x, (3,), w, eps=1e-5), [A(2, 3), A(3)]),
    "batch_norm_train": (lambda x, w, b: F.batch_norm(x, zeros(3), ones(3), w, b, training=True),
                         [A(3, 3, 2), A(3), A(3)]),
    "batch_norm_eval": (lambda x, w, b: F.batch_norm(x, md.tensor([0.1, -0.2, 0.3], dtype=md.float64),
                                                     ones(3, 1.5), w, b, training=False), [A(3, 3, 2), A(3), A(3)]),
    "batch_norm_masked": (lambda x, w, b: F.masked_batch_norm(x, SEQ_MASK, zeros(2), ones(2), w, b, training=True),
                          [A(2, 2, 4), A(2), A(2)]),
    "instance_norm": (lambda x, w, b: F.instance_norm(x, weight=w, bias=b), [A(2, 2, 3), A(2), A(2)]),
    "group_norm": (lambda x, w, b: F.group_norm(x, 2, w, b), [A(2, 4, 2), A(4), A(4)]),
    "batch_norm_relu": (lambda x, w, b: F.batch_norm_relu(x, zeros(3), ones(3), w, b, training=True),
                        [A(4, 3), A(3), A(3)]),
    "batch_norm_add_relu": (lambda x, s, w, b: F.batch_norm_add_relu(x, s, zeros(3), ones(3), w, b, training=True),
                            [A(4, 3), A(4, 3), A(3), A(3)]),
    "batch_norm_relu_eval": (lambda x, w, b: F.batch_norm_relu(x, zeros(3), ones(3, 0.5), w, b, training=False),
                             [A(4, 3), A(3), A(3)]),
    "group_norm_relu": (lambda x, w, b: F.group_norm_relu(x, 2, w, b), [A(2, 4, 3), A(4), A(4)]),
    "group_norm_add_relu": (lambda x, s, w, b: F.group_norm_add_relu(x, s, 2, w, b),
                            [A(2, 4, 3), A(2, 4, 3), A(4), A(4)]),
    "add_layer_norm": (lambda x, r, w, b: F.add_layer_norm(x, r, (3,), w, b), [A(2, 3), A(2, 3), A(3), A(3)]),
    "add_layer_norm_no_sum": (lambda x, r, w, b: F.add_layer_norm(x, r, (3,), w, b, return_sum=False),
                              [A(2, 3), A(2, 3), A(3), A(3)]),
    "add_rms_norm": (lambda x, r, w: F.add_rms_norm(x, r, (3,), w, eps=1e-5), [A(2, 3), A(2, 3), A(3)]),
    "scale_norm": (lambda x, g: F.scale_norm(x, g), [A(2, 3), A(1)]),
    # both clips active: r and d do not move with the batch, so the op is exactly differentiable
    "batch_renorm": (lambda x, w, b: F.batch_renorm(x, zeros(3) + 10, ones(3, 100.0), w, b, training=True,
                                                    r_max=2.0, d_max=0.5), [A(4, 3), A(3), A(3)]),
}

ACTIVATIONS = {
    "silu": (F.silu, [A(6)]),
    "elu": (lambda x: F.elu(x, 0.7), [away(6)]),
    "selu": (F.selu, [away(6)]),
    "celu": (lambda x: F.celu(x, 0.5), [away(6)]),
    "softplus": (lambda x: F.softplus(x, 2.0, 1.0), [away(6)]),
    "mish": (F.mish, [A(6)]),
    "hardtanh": (lambda x: F.hardtanh(x, -0.8, 0.9) * x, [away(6)]),
    "relu6": (lambda x: F.relu6(x * 4) * x, [away(6)]),
    "hardswish": (lambda x: F.hardswish(x * 3), [away(8)]),
    "hardsigmoid": (lambda x: F.hardsigmoid(x * 3) * x, [away(6)]),
    "logsigmoid": (F.logsigmoid, [A(6)]),
    "softsign": (F.softsign, [away(6)]),
    "tanhshrink": (F.tanhshrink, [A(6)]),
    "threshold": (lambda x: F.threshold(x, 0.1, -2.0) * x, [away(6)]),
    "prelu": (lambda x, w: F.prelu(x, w) * x, [away(2, 3, 2), A(3)]),
    "glu": (lambda x: F.glu(x, 1), [A(2, 4)]),
    "softshrink": (lambda x: F.softshrink(x, 0.2) * x, [away(6, lo=0.4)]),
    "hardshrink": (lambda x: F.hardshrink(x, 0.2) * x, [away(6, lo=0.4)]),
    "rrelu_train": (seeded(lambda x: F.rrelu(x, training=True) * x), [away(6)]),
    "dropout": (seeded(lambda x: F.dropout(x, 0.4) * x), [A(3, 4)]),
    "dropout2d": (seeded(lambda x: F.dropout2d(x, 0.4) * x), [A(2, 3, 2, 2)]),
    "alpha_dropout": (seeded(lambda x: F.alpha_dropout(x, 0.4, True) * x), [A(3, 4)]),
    "log1p": (lambda x: x.log1p(), [U(0, 2, 5)]),
    "expm1": (lambda x: x.expm1(), [A(5)]),
    "log2": (md.log2, [U(0.5, 2, 5)]),
    "erfc": (md.special.erfc, [A(5)]),
    "erfinv": (md.special.erfinv, [U(-0.8, 0.8, 5)]),
    "lgamma": (md.lgamma, [U(0.5, 3, 5)]),
    "digamma": (md.digamma, [U(0.5, 3, 5)]),
    "i0": (md.special.i0, [A(5)]),
    "logit": (md.logit, [U(0.1, 0.9, 5)]),
    "logit_eps": (lambda x: md.logit(x, 0.2) * x, [np.array([0.05, 0.3, 0.5, 0.7, 0.95])]),
    "exp2": (md.exp2, [A(5)]),
    "sign_floor": (lambda x: x.sign() * x * x + x.floor() * x, [away(5)]),
    "nan_to_num": (lambda x: md.nan_to_num(x * x), [A(5)]),
}

OTHERS = {
    "embedding": (lambda w: F.embedding(IDX, w) ** 2, [A(4, 3)]),
    "embedding_padding": (lambda w: F.embedding(IDX, w, padding_idx=2) ** 2, [A(4, 3)]),
    "cumsum": (lambda x: x.cumsum(1) ** 2, [A(2, 4)]),
    "cumprod": (lambda x: x.cumprod(1), [away(2, 4)]),
    "cumprod_with_zeros": (lambda x: x.cumprod(1), [np.array([[0.5, 0.0, 1.2, -0.7], [1.1, 0.4, 0.0, 0.0]])]),
    "prod": (lambda x: x.prod(1) + x.prod(), [away(2, 3)]),
    "logsumexp": (lambda x: x.logsumexp(1), [A(2, 4)]),
    "logcumsumexp": (lambda x: md.logcumsumexp(x, 0), [A(4, 2)]),
    "sdpa": (F.scaled_dot_product_attention, [A(2, 3, 4), A(2, 5, 4), A(2, 5, 3)]),
    "sdpa_causal_float_mask": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=True),
                               [A(2, 3, 2), A(2, 3, 2), A(2, 3, 2), A(3, 3)]),
    "sdpa_bool_mask": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=KEYS),
                       [A(1, 2, 2), A(1, 3, 2), A(1, 3, 2)]),
    "sdpa_dropout": (seeded(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dropout_p=0.3)),
                     [A(2, 3, 2), A(2, 3, 2), A(2, 3, 2)]),
    "sdpa_broadcast": (F.scaled_dot_product_attention, [A(2, 3, 2), A(1, 3, 2), A(3, 2)]),
    "linear_gelu": (linear_gelu, [A(2, 2, 3), A(4, 3), A(4)]),
    "linear_gelu_tanh": (lambda x, w, b: linear_gelu(x, w, b, "tanh"), [A(2, 3), A(4, 3), A(4)]),
    "linear_gelu_linear": (linear_gelu_linear, [A(2, 2, 3), A(4, 3), A(4), A(2, 4), A(2)]),
    "linear_gelu_linear_tanh": (lambda x, w1, b1, w2: linear_gelu_linear(x, w1, b1, w2, None, "tanh"),
                                [A(2, 3), A(4, 3), A(4), A(3, 4)]),
    "split_heads": (lambda x: tuple(t * t for t in split_heads(x, 3, 2)), [A(1, 2, 12)]),
    "l1_loss": (lambda x, y: F.l1_loss(x * x, y), [A(2, 3), A(2, 3)]),
    "smooth_l1_loss": (lambda x, y: F.smooth_l1_loss(x * x, y, beta=0.5, reduction="sum"), [A(2, 3), A(2, 3)]),
    "huber_loss": (lambda x, y: F.huber_loss(x, y, delta=0.7, reduction="none"), [A(2, 3), A(2, 3)]),
    "bce": (F.binary_cross_entropy, [U(0.1, 0.9, 2, 3), U(0, 1, 2, 3)]),
    "bce_with_logits": (lambda x, y: F.binary_cross_entropy_with_logits(
        x, y, pos_weight=md.tensor([0.5, 2.0, 1.0], dtype=md.float64)), [A(2, 3), U(0, 1, 2, 3)]),
    "kl_div": (lambda x, y: F.kl_div(x, y, reduction="batchmean"), [A(2, 3), U(0.1, 1, 2, 3)]),
    "kl_div_log_target": (lambda x, y: F.kl_div(x, y, reduction="sum", log_target=True), [A(2, 3), A(2, 3)]),
    "poisson_nll_full": (lambda x, y: F.poisson_nll_loss(x, y, full=True), [A(2, 3), U(0.5, 3, 2, 3)]),
    "poisson_nll_rate": (lambda x, y: F.poisson_nll_loss(x, y, log_input=False), [U(0.5, 2, 2, 3), U(0.5, 3, 2, 3)]),
    "gaussian_nll": (F.gaussian_nll_loss, [A(2, 3), A(2, 3), U(0.5, 2, 2, 3)]),
}

CASES = {**NORMS, **ACTIVATIONS, **OTHERS}


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradgradcheck(name):
    fn, arrays = CASES[name]
    assert gradgradcheck(fn, tuple(T(a) for a in arrays), atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("impl", ["reference", "numba"])
def test_attention_second_derivatives_on_every_implementation(impl):
    """(the fused-softmax path runs in test_gradgradcheck: it is what small float64 inputs select)"""
    with attention.implementation(impl):
        for name in ("sdpa", "sdpa_causal_float_mask", "sdpa_bool_mask", "sdpa_dropout"):
            fn, arrays = OTHERS[name]
            assert gradgradcheck(fn, tuple(T(a) for a in arrays), atol=1e-6, rtol=1e-4), name


def _layer_norm_np(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * w + b


def _batch_norm_np(x, w, b, eps=1e-5):
    mu = x.mean(0, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(0, keepdims=True) + eps) * w + b


@pytest.mark.parametrize("norm_np,norm_md", [
    (_layer_norm_np, lambda x, w, b: F.layer_norm(x, (4,), w, b)),
    (_batch_norm_np, lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True)),
], ids=["layer_norm", "batch_norm_train"])
def test_hessian_vector_product_matches_numpy_finite_differences(norm_np, norm_md):
    """H v of L(x) = sum c * tanh(norm(x)), against central differences of a NumPy gradient
    (itself central differences of the NumPy forward): the second derivative through the
    statistics, which a backward treating mean and rstd as constants would miss."""
    x0, w, b, c, v = A(3, 4), A(4), A(4), A(3, 4), A(3, 4)

    def loss_np(x):
        return (c * np.tanh(norm_np(x, w, b))).sum()

    def grad_np(x, h=1e-5):
        g = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            e = np.zeros_like(x)
            e[i] = h
            g[i] = (loss_np(x + e) - loss_np(x - e)) / (2 * h)
        return g

    h = 1e-4
    hv_np = (grad_np(x0 + h * v) - grad_np(x0 - h * v)) / (2 * h)
    x = T(x0)
    loss = (T(c, False) * norm_md(x, T(w, False), T(b, False)).tanh()).sum()
    (g,) = autograd.grad(loss, x, create_graph=True)
    (hv,) = autograd.grad((g * T(v, False)).sum(), x)
    np.testing.assert_allclose(hv.numpy(), hv_np, rtol=1e-4, atol=1e-5)


def test_fully_masked_attention_row_gets_zero_second_derivative():
    """A query that sees no key has P = 0: its output and every derivative through it are 0, not NaN."""
    q, k, v = T(A(1, 2, 2)), T(A(1, 3, 2)), T(A(1, 3, 2))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=KEYS)
    gq, gk, gv = autograd.grad((out * out).sum(), (q, k, v), create_graph=True)
    (hq,) = autograd.grad((gq * gq).sum() + (gk * gv).sum(), q)
    assert np.isfinite(hq.numpy()).all()
    np.testing.assert_array_equal(gq.detach().numpy()[0, 1], 0.0)
    np.testing.assert_array_equal(hq.numpy()[0, 1], 0.0)


def test_running_statistics_are_not_differentiated_and_stay_updated_once():
    """A training BatchNorm under create_graph: the running estimates take the batch's statistics
    in forward only (the differentiable backward recomputes them without writing anything)."""
    x = T(A(4, 3))
    rm, rv = zeros(3), ones(3)
    y = F.batch_norm(x, rm, rv, training=True, momentum=0.5)
    (g,) = autograd.grad((y ** 3).sum(), x, create_graph=True)
    (g * g).sum().backward()
    xs = x.detach().numpy()
    np.testing.assert_allclose(rm.numpy(), 0.5 * xs.mean(0))
    np.testing.assert_allclose(rv.numpy(), 0.5 + 0.5 * xs.var(0, ddof=1))
    assert not rm.requires_grad and rm.grad_fn is None


def test_an_op_still_without_one_raises_naming_it():
    """SyncBatchNorm's statistics cross ranks (a collective), so it has no differentiable backward:
    the pass names it instead of silently dropping its second derivative."""
    from minidl.autograd import higher_order
    names = higher_order.supported_ops()
    for op in ("BatchNormFunction", "LayerNormFunction", "GroupNormFunction", "ScaledDotProductAttention",
               "Embedding", "Dropout", "ELU", "CELU", "LinearGelu", "LinearGeluLinear", "SplitHeads",
               "AddLayerNormFunction"):
        assert op in names
    assert "SyncBatchNormFunction" not in names


# PyTorch --------------------------------------------------------------------------------------

TORCH_HVP = {   # name -> (minidl fn, torch fn, input arrays): Hessian-vector products of sum(c * fn)
    "batch_norm_train": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                         lambda tF, x, w, b: tF.batch_norm(x, None, None, w, b, training=True),
                         [A(3, 2, 2), A(2), A(2)]),
    "group_norm": (lambda x, w, b: F.group_norm(x, 2, w, b), lambda tF, x, w, b: tF.group_norm(x, 2, w, b),
                   [A(2, 4, 3), A(4), A(4)]),
    "instance_norm": (lambda x, w, b: F.instance_norm(x, weight=w, bias=b),
                      lambda tF, x, w, b: tF.instance_norm(x, weight=w, bias=b), [A(2, 2, 3), A(2), A(2)]),
    "rms_norm": (lambda x, w: F.rms_norm(x, (3,), w, eps=1e-6), lambda tF, x, w: tF.rms_norm(x, (3,), w, eps=1e-6),
                 [A(2, 3), A(3)]),
    "elu": (lambda x: F.elu(x, 0.7), lambda tF, x: tF.elu(x, 0.7), [away(6)]),
    "mish": (F.mish, lambda tF, x: tF.mish(x), [A(6)]),
    "softplus": (lambda x: F.softplus(x, 2.0, 1.0), lambda tF, x: tF.softplus(x, 2.0, 1.0), [away(6)]),
    "glu": (lambda x: F.glu(x, 0), lambda tF, x: tF.glu(x, 0), [A(4, 3)]),
    "logcumsumexp": (lambda x: md.logcumsumexp(x, 1), lambda tF, x: x.logcumsumexp(1), [A(2, 4)]),
    "cumprod": (lambda x: x.cumprod(0), lambda tF, x: x.cumprod(0), [away(4, 2)]),
    "bce_with_logits": (F.binary_cross_entropy_with_logits, lambda tF, x, y: tF.binary_cross_entropy_with_logits(x, y),
                        [A(2, 3), U(0, 1, 2, 3)]),
    "kl_div": (lambda x, y: F.kl_div(x, y, reduction="sum"), lambda tF, x, y: tF.kl_div(x, y, reduction="sum"),
               [A(2, 3), U(0.1, 1, 2, 3)]),
    "gaussian_nll": (F.gaussian_nll_loss, lambda tF, x, y, v: tF.gaussian_nll_loss(x, y, v),
                     [A(2, 3), A(2, 3), U(0.5, 2, 2, 3)]),
}


@pytest.mark.parametrize("name", sorted(TORCH_HVP))
def test_hessian_vector_products_match_torch(name):
    torch = pytest.importorskip("torch")
    fn, tfn, arrays = TORCH_HVP[name]
    out_shape = np.shape(fn(*(T(a, False) for a in arrays)).numpy())
    c = A(*out_shape)
    vs = [A(*np.shape(a)) for a in arrays]
    xs = [T(a) for a in arrays]
    grads = autograd.grad((fn(*xs) * T(c, False)).sum(), xs, create_graph=True)
    hvs = autograd.grad(sum((g * T(v, False)).sum() for g, v in zip(grads, vs)), xs, allow_unused=True)
    txs = [torch.tensor(a, requires_grad=True) for a in arrays]
    tgrads = torch.autograd.grad((tfn(torch.nn.functional, *txs) * torch.tensor(c)).sum(), txs, create_graph=True)
    thvs = torch.autograd.grad(sum((g * torch.tensor(v)).sum() for g, v in zip(tgrads, vs)), txs,
                               allow_unused=True)
    for g, tg in zip(grads, tgrads):
        np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), rtol=1e-7, atol=1e-9)
    for h, th, a in zip(hvs, thvs, arrays):     # None: a zero second derivative (a bias's, say)
        np.testing.assert_allclose(np.zeros(np.shape(a)) if h is None else h.numpy(),
                                   np.zeros(np.shape(a)) if th is None else th.numpy(), rtol=1e-7, atol=1e-9)


def test_gradient_penalty_through_a_pre_ln_transformer_block_matches_torch():
    """A WGAN-GP-style penalty ||d loss / d x||^2 through the zoo's Pre-LN block (LayerNorm, fused
    residual + LayerNorm, packed qkv split into heads, causal attention, Linear + GELU), then the
    final norm: the penalty and every parameter's gradient of it, against the same block in PyTorch."""
    torch = pytest.importorskip("torch")
    from minidl.zoo.transformer import SeqNorm, TransformerBlock, run_blocks
    md.manual_seed(0)
    d, heads, B, L = 8, 2, 2, 3
    block, final = TransformerBlock(d, heads, causal=True).double(), SeqNorm("layer", d).double()
    params = dict(block.named_parameters())
    params.update({"final." + n: p for n, p in final.named_parameters()})
    for p in params.values():   # non-trivial norm gains and biases
        p._data[...] += RNG.uniform(-0.3, 0.3, p.shape)
    x0, c = A(B, L, d), A(B, L, d)

    x = T(x0)
    y = run_blocks([block], x, final_norm=final)
    (gx,) = autograd.grad((y * T(c, False)).sum(), x, create_graph=True)
    penalty = (gx * gx).sum()
    penalty.backward()

    tp = {n: torch.tensor(p.detach().numpy(), requires_grad=True) for n, p in params.items()}
    tF = torch.nn.functional

    def t_block(h):
        n = tF.layer_norm(h, (d,), tp["norm1.norm.weight"], tp["norm1.norm.bias"])
        qkv = tF.linear(n, tp["attn.qkv.weight"], tp["attn.qkv.bias"]).reshape(B, L, 3, heads, d // heads)
        q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
        s = q @ k.transpose(-2, -1) / np.sqrt(d // heads)
        s = s.masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), float("-inf"))
        a = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, L, d)
        h = h + tF.linear(a, tp["attn.proj.weight"], tp["attn.proj.bias"])
        n = tF.layer_norm(h, (d,), tp["norm2.norm.weight"], tp["norm2.norm.bias"])
        m = tF.linear(tF.gelu(tF.linear(n, tp["mlp.fc1.weight"], tp["mlp.fc1.bias"])), tp["mlp.fc2.weight"],
                      tp["mlp.fc2.bias"])
        return tF.layer_norm(h + m, (d,), tp["final.norm.weight"], tp["final.norm.bias"])

    tx = torch.tensor(x0, requires_grad=True)
    ty = t_block(tx)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-9, atol=1e-10)
    (tgx,) = torch.autograd.grad((ty * torch.tensor(c)).sum(), tx, create_graph=True)
    t_penalty = (tgx * tgx).sum()
    t_penalty.backward()
    np.testing.assert_allclose(penalty.item(), t_penalty.item(), rtol=1e-9)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-7, atol=1e-9)
    unused = [name for name, p in params.items() if p.grad is None]   # biases that d loss / d x does not see
    assert unused == [name for name, p in tp.items() if p.grad is None]
    assert len(unused) < len(params) // 2
    for name, p in params.items():
        if name not in unused:
            np.testing.assert_allclose(p.grad.numpy(), tp[name].grad.numpy(), rtol=1e-7, atol=1e-9, err_msg=name)
