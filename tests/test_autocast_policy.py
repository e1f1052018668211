"""autocast's op policy on the CPU: the dtype of every op's output under autocast, for float32
and low-precision inputs, equals PyTorch's (skipped without torch), and the rules it follows
hold without torch too (minidl/amp/policy.py)."""
import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as MF

RNG = np.random.default_rng(0)
ARRAYS = {
    "x": RNG.standard_normal((4, 6)), "w": RNG.standard_normal((5, 6)), "b": RNG.standard_normal(5),
    "img": RNG.standard_normal((2, 3, 6, 6)), "cw": RNG.standard_normal((4, 3, 3, 3)),
    "q": RNG.standard_normal((2, 3, 4)), "k1": RNG.standard_normal((2, 3, 2)), "ct": RNG.standard_normal((3, 2, 3, 3)),
    "y": RNG.standard_normal((4, 6)), "p3": RNG.standard_normal(3), "g6": RNG.standard_normal(6),
    "bias33": RNG.standard_normal((2, 3, 3)), "m33": RNG.standard_normal((3, 3)),
    "u": RNG.uniform(0.05, 0.95, (4, 6)), "emb": RNG.standard_normal((4, 6)), "bw": RNG.standard_normal((2, 6, 6)),
}
ACTIVATIONS = {"x", "img", "q"}          # in the input dtype of the case; everything else float32

# name -> f(lib, F, t): the same call in minidl and in PyTorch (their APIs agree)
OPS = {
    "linear": lambda L, F, t: F.linear(t.x, t.w, t.b),
    "matmul": lambda L, F, t: t.x @ t.w.T,
    "mm": lambda L, F, t: L.mm(t.x, t.w.T),
    "bmm": lambda L, F, t: L.bmm(t.q, t.q.transpose(1, 2)),
    "baddbmm": lambda L, F, t: L.baddbmm(t.bias33, t.q, t.q.transpose(1, 2)),
    "addmm": lambda L, F, t: L.addmm(t.b, t.x, t.w.T),
    "addbmm": lambda L, F, t: L.addbmm(t.m33, t.q, t.q.transpose(1, 2)),
    "conv2d": lambda L, F, t: F.conv2d(t.img, t.cw, padding=1),
    "conv1d": lambda L, F, t: F.conv1d(t.q, t.k1),
    "conv_transpose2d": lambda L, F, t: F.conv_transpose2d(t.img, t.ct),
    "sdpa": lambda L, F, t: F.scaled_dot_product_attention(t.q, t.q, t.q),
    "prelu": lambda L, F, t: F.prelu(t.img, t.p3),
    "einsum": lambda L, F, t: L.einsum("ij,kj->ik", t.x, t.w),
    "softmax": lambda L, F, t: L.softmax(t.x, -1),
    "log_softmax": lambda L, F, t: L.log_softmax(t.x, -1),
    "cross_entropy": lambda L, F, t: F.cross_entropy(t.x, L.tensor([0, 1, 2, 3])),
    "nll_loss": lambda L, F, t: F.nll_loss(t.x, L.tensor([0, 1, 2, 3])),
    "mse_loss": lambda L, F, t: F.mse_loss(t.x, t.y),
    "l1_loss": lambda L, F, t: F.l1_loss(t.x, t.y),
    "smooth_l1_loss": lambda L, F, t: F.smooth_l1_loss(t.x, t.y),
    "huber_loss": lambda L, F, t: F.huber_loss(t.x, t.y),
    "kl_div": lambda L, F, t: F.kl_div(t.x, t.u, reduction="batchmean"),
    "binary_cross_entropy": lambda L, F, t: F.binary_cross_entropy(t.x.sigmoid(), t.u),
    "bce_with_logits": lambda L, F, t: F.binary_cross_entropy_with_logits(t.x, t.u),
    "exp": lambda L, F, t: t.x.exp(),
    "log": lambda L, F, t: t.x.abs().log(),
    "pow": lambda L, F, t: t.x.pow(2),
    "sum": lambda L, F, t: t.x.sum(),
    "mean": lambda L, F, t: t.x.mean(),
    "prod": lambda L, F, t: t.x.prod(),
    "cumsum": lambda L, F, t: t.x.cumsum(0),
    "logsumexp": lambda L, F, t: t.x.logsumexp(0),
    "layer_norm": lambda L, F, t: F.layer_norm(t.x, (6,), t.g6, t.g6),
    "group_norm": lambda L, F, t: F.group_norm(t.img, 3, t.p3, t.p3),
    "batch_norm": lambda L, F, t: F.batch_norm(t.img, t.p3 * 0, t.p3 * 0 + 1, t.p3, t.p3, training=True),
    "instance_norm": lambda L, F, t: F.instance_norm(t.img),
    "rms_norm": lambda L, F, t: F.rms_norm(t.x, (6,), t.g6),
    "gelu": lambda L, F, t: F.gelu(t.x),
    "relu": lambda L, F, t: F.relu(t.x),
    "tanh": lambda L, F, t: t.x.tanh(),
    "sigmoid": lambda L, F, t: t.x.sigmoid(),
    "silu": lambda L, F, t: F.silu(t.x),
    "softplus": lambda L, F, t: F.softplus(t.x),
    "add_float32": lambda L, F, t: t.x + t.y,
    "mul_scalar": lambda L, F, t: t.x * 2.0,
    "cat_float32": lambda L, F, t: L.cat([t.x, t.y]),
    "stack_float32": lambda L, F, t: L.stack([t.x, t.y]),
    "normalize": lambda L, F, t: F.normalize(t.x),
    "max_pool2d": lambda L, F, t: F.max_pool2d(t.img, 2),
    "avg_pool2d": lambda L, F, t: F.avg_pool2d(t.img, 2),
    "dropout": lambda L, F, t: F.dropout(t.x, 0.5),
    "embedding": lambda L, F, t: F.embedding(L.tensor([1, 2]), t.emb),
    "tan": lambda L, F, t: t.x.tan(),
    "log1p": lambda L, F, t: t.x.abs().log1p(),
    "expm1": lambda L, F, t: t.x.expm1(),
    "sqrt": lambda L, F, t: t.x.abs().sqrt(),
    "var": lambda L, F, t: t.x.var(),
    "std": lambda L, F, t: t.x.std(),
    "norm": lambda L, F, t: t.x.norm(),
    "cdist": lambda L, F, t: L.cdist(t.x, t.y),
    "cosine_similarity": lambda L, F, t: F.cosine_similarity(t.x, t.x),
    "bilinear": lambda L, F, t: F.bilinear(t.x, t.x, t.bw.to(t.x.dtype)),
    "interpolate": lambda L, F, t: F.interpolate(t.img, scale_factor=2, mode="bilinear"),
    "adaptive_avg_pool2d": lambda L, F, t: F.adaptive_avg_pool2d(t.img, 2),
    "linear_gelu_mlp": lambda L, F, t: F.gelu(F.linear(t.x, t.w, t.b)),
    "lstm": lambda L, F, t: _seeded(L, L.nn.LSTM, 4, 3)(t.q)[0],
    "gru": lambda L, F, t: _seeded(L, L.nn.GRU, 4, 3)(t.q)[0],
    "rnn": lambda L, F, t: _seeded(L, L.nn.RNN, 4, 3)(t.q)[0],
    "mha_output": lambda L, F, t: _mha(L, t)[0],
    "mha_weights": lambda L, F, t: _mha(L, t)[1],
}


# where PyTorch fails and minidl runs: its oneDNN LSTM cannot take a low-precision cast of a float32
# input ("could not create a primitive descriptor"; float16 everywhere, bfloat16 on CPUs without
# AVX-512 BF16, such as AMD Zen 3); minidl returns the low dtype, as it does for a low-precision input
KNOWN = {("lstm", "float16", "float32"), ("lstm", "bfloat16", "float32")}


def _seeded(L, cls, *args):
    L.manual_seed(0)
    return cls(*args, batch_first=True)


def _mha(L, t):
    L.manual_seed(0)
    return L.nn.MultiheadAttention(4, 2, batch_first=True)(t.q, t.q, t.q)


class _Inputs:
    def __init__(self, L, activation_dtype):
        for name, a in ARRAYS.items():
            v = L.tensor(a.astype(np.float32))
            setattr(self, name, v.to(activation_dtype) if name in ACTIVATIONS else v)


def _dtype_name(L, low, ins, op):
    """The dtype (its name) of op's output in library L under autocast("cpu", low) for
    activations of dtype ``ins`` ("float32" or "low"), or the exception type raised."""
    low_dtype = getattr(L, low)
    t = _Inputs(L, low_dtype if ins == "low" else L.float32)
    F = L.nn.functional
    with L.autocast("cpu", dtype=low_dtype):
        try:
            out = OPS[op](L, F, t)
        except Exception as e:   # noqa: BLE001  (the exception type is what is compared)
            return type(e).__name__
    return str(out.dtype).split(".")[-1]


@pytest.mark.filterwarnings("ignore:Mismatch dtype")
@pytest.mark.parametrize("ins", ["float32", "low"])
@pytest.mark.parametrize("low", ["bfloat16", "float16"])
def test_output_dtypes_match_pytorch(low, ins):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    ours = {op: _dtype_name(md, low, ins, op) for op in OPS}
    theirs = {op: _dtype_name(torch, low, ins, op) for op in OPS}
    differ = {op: (ours[op], theirs[op]) for op in OPS if ours[op] != theirs[op] and (op, low, ins) not in KNOWN}
    assert not differ, f"(minidl, PyTorch) output dtypes differ under autocast('cpu', {low}), {ins} inputs: {differ}"


# without torch: the rules themselves -----------------------------------------------------------
@pytest.mark.parametrize("low", ["bfloat16", "float16"])
def test_rules_on_float32_inputs(low):
    t = _Inputs(md, md.float32)
    with md.autocast("cpu", dtype=getattr(md, low)):
        assert MF.linear(t.x, t.w, t.b).dtype is getattr(md, low)           # lower
        assert (t.x @ t.w.T).dtype is getattr(md, low)
        assert MF.conv2d(t.img, t.cw).dtype is getattr(md, low)
        assert MF.cross_entropy(t.x, md.tensor([0, 1, 2, 3])).dtype is md.float32   # fp32
        assert md.softmax(t.x, -1).dtype is md.float32                         # no rule: as it comes
        h = MF.linear(t.x, t.w, t.b)
        assert md.softmax(h, -1).dtype is getattr(md, low)
        assert (h + MF.linear(t.x, t.w, t.b).float()).dtype is md.float32     # promotion
        assert md.cat([h, h.float()]).dtype is md.float32                      # promote rule


def test_float64_and_integer_tensors_are_not_cast():
    x64 = md.randn(3, 3, dtype=md.float64)
    with md.autocast("cpu"):
        assert (x64 @ x64).dtype is md.float64
        i = md.arange(6).reshape(2, 3)
        assert (i @ i.T).dtype is md.int64
        with pytest.raises(RuntimeError):
            x64 @ md.randn(3, 3)        # float64 stays, float32 becomes bfloat16: PyTorch refuses too


def test_fused_residual_norms_give_the_dtypes_of_the_unfused_pair():
    from minidl.nn.functional.normalization import add_layer_norm, add_rms_norm
    x, w, g = md.randn(4, 8), md.randn(8, 8), md.randn(8)
    with md.autocast("cpu"):
        h = x @ w                                    # bfloat16, the residual stream x float32
        pairs = [(lambda a, b: add_layer_norm(a, b, (8,), g), lambda s: MF.layer_norm(s, (8,), g)),
                 (lambda a, b: add_rms_norm(a, b, (8,), g), lambda s: MF.rms_norm(s, (8,), g))]
        for fused, unfused in pairs:
            for a, b in ((x, h), (h, h), (h, x)):
                s, y = fused(a, b)
                assert s.dtype is (a + b).dtype and y.dtype is unfused(a + b).dtype
