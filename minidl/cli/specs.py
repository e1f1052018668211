"""A registry of small gradcheck cases, one or a few per op and per layer, for ``minidl
gradcheck``. Each is an ``OpSpec`` (minidl.testing) whose ``op`` takes float64 Tensors;
``reference`` is not needed for gradchecks and is None. Shapes are tiny (central differences
cost two forwards per input element) but odd and broadcasting where that matters.

Layers are checked through ``module_spec``: the module's parameters become extra inputs of
the checked function, so the gradients of the input *and* of every parameter are compared.
The exhaustive per-op tests (several shapes, dtypes, kernels) live in tests/.
"""
import numpy as np

from ..testing import OpSpec

_TABLE = []


def _randn(*shapes, low=None):
    def make(rng):
        out = []
        for s in shapes:
            a = rng.standard_normal(s)
            if low is not None:
                a = np.abs(a) + low
            out.append(a)
        return tuple(out)
    return make


def spec(name, group, op, inputs, **kw):
    s = OpSpec(name=name, op=op, reference=None, inputs=inputs, **kw)
    s.group = group
    _TABLE.append(s)
    return s


def module_spec(name, make_module, x_shape, call=None, x_kind="float", group="layer", **kw):
    """Gradcheck of module(x) w.r.t. x and every parameter of the module (float64)."""
    def inputs(rng):
        from ..random import manual_seed
        manual_seed(0)
        mod = make_module().double()
        params = [p.numpy(force=True).astype(np.float64) for _, p in mod.named_parameters()]
        x = rng.standard_normal(x_shape) if x_kind == "float" else rng.integers(0, x_kind, x_shape)
        return (x, *params)

    def op(x, *params):
        from ..random import manual_seed
        manual_seed(0)
        mod = make_module().double()
        for (n, _), p in zip(list(mod.named_parameters()), params):
            owner = mod
            *path, leaf = n.split(".")
            for part in path:
                owner = getattr(owner, part)
            owner._parameters[leaf] = p      # the registry itself: Module.__setattr__ wants a Parameter
        return call(mod, x) if call else mod(x)
    grad_inputs = kw.pop("grad_inputs", None)
    return spec(name, group, op, inputs, grad_inputs=grad_inputs, **kw)


def registry():
    """All the cases (built on first use, so importing the CLI stays cheap)."""
    if _TABLE:
        return list(_TABLE)
    import minidl as md
    import minidl.nn as nn
    import minidl.nn.functional as F
    from ..zoo.transformer import TransformerBlock

    # elementwise and broadcasting
    for n, f in [("add", lambda a, b: a + b), ("sub", lambda a, b: a - b), ("mul", lambda a, b: a * b)]:
        spec(n, "op", f, _randn((3, 4), (4,)))
    spec("div", "op", lambda a, b: a / b, _randn((3, 4), (3, 1), low=0.5))
    spec("pow", "op", lambda a, b: a ** b, _randn((2, 3), (2, 3), low=0.5))
    spec("neg", "op", lambda a: -a, _randn((3, 4)))
    for n in ("exp", "tanh", "sigmoid", "relu", "abs"):
        spec(n, "op", (lambda n: lambda a: getattr(a, n)())(n), _randn((3, 4)))
    spec("log", "op", lambda a: a.log(), _randn((3, 4), low=0.5))
    spec("sqrt", "op", lambda a: a.sqrt(), _randn((3, 4), low=0.5))
    # reductions
    spec("sum(dim)", "op", lambda a: a.sum(1), _randn((3, 4)))
    spec("mean(dims,keepdim)", "op", lambda a: a.mean((0, 2), keepdim=True), _randn((2, 3, 4)))
    spec("var", "op", lambda a: a.var(1), _randn((3, 5)))
    spec("max(dim)", "op", lambda a: a.max(1).values, _randn((3, 5)))
    spec("softmax", "op", lambda a: a.softmax(-1), _randn((3, 5)))
    spec("log_softmax", "op", lambda a: a.log_softmax(1), _randn((3, 5)))
    # linear algebra and shapes
    spec("matmul(batched)", "op", lambda a, b: a @ b, _randn((2, 3, 4), (4, 5)))
    spec("reshape/transpose/permute", "op", lambda a: a.reshape(4, 6).transpose(0, 1).reshape(2, 3, 4).permute(2, 0, 1),
         _randn((2, 3, 4)))
    spec("getitem(repeated index)", "op", lambda a: a[[2, 0, 2]], _randn((3, 4)))
    spec("cat", "op", lambda a, b: md.cat([a, b], dim=1), _randn((2, 3), (2, 2)))
    spec("stack", "op", lambda a, b: md.stack([a, b], dim=-1), _randn((2, 3), (2, 3)))
    spec("where", "op", lambda a, b: md.where(md.tensor(np.array([[True, False, True]])), a, b), _randn((2, 3), (2, 3)))
    # nn.functional
    spec("gelu", "functional", lambda a: F.gelu(a), _randn((3, 4)))
    spec("gelu(tanh)", "functional", lambda a: F.gelu(a, approximate="tanh"), _randn((3, 4)))
    spec("linear", "functional", lambda x, w, b: F.linear(x, w, b), _randn((3, 4), (5, 4), (5,)))
    spec("embedding", "functional", lambda w: F.embedding(md.tensor(np.array([[1, 3, 1]])), w), _randn((4, 3)))
    spec("conv2d(stride,pad)", "functional", lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1),
         _randn((2, 2, 5, 5), (3, 2, 3, 3), (3,)))
    spec("conv2d(dilation,groups)", "functional", lambda x, w: F.conv2d(x, w, dilation=2, groups=2),
         _randn((1, 4, 6, 6), (2, 2, 2, 2)))
    spec("max_pool2d", "functional", lambda x: F.max_pool2d(x, 2), _randn((2, 2, 4, 4)))
    spec("avg_pool2d(pad)", "functional", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1), _randn((1, 2, 5, 5)))
    spec("adaptive_avg_pool2d", "functional", lambda x: F.adaptive_avg_pool2d(x, (2, 3)), _randn((1, 2, 5, 7)))
    tgt = np.array([1, 0, 3, -100, 2])
    spec("cross_entropy(smoothing,ignore)", "functional",
         lambda x: F.cross_entropy(x, md.tensor(tgt), label_smoothing=0.1), _randn((5, 4)))
    spec("nll_loss", "functional", lambda x: F.nll_loss(x.log_softmax(1), md.tensor(np.array([1, 0, 3]))),
         _randn((3, 4)))
    spec("mse_loss", "functional", lambda a, b: F.mse_loss(a, b), _randn((3, 4), (3, 4)))
    causal = np.tril(np.ones((4, 4), bool))
    spec("scaled_dot_product_attention(causal)", "functional",
         lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), _randn(*[(1, 2, 4, 3)] * 3))
    spec("scaled_dot_product_attention(mask)", "functional",
         lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=md.tensor(causal)),
         _randn(*[(2, 1, 4, 3)] * 3))
    # normalization, functional
    spec("layer_norm", "norm", lambda x, w, b: F.layer_norm(x, (5,), w, b), _randn((3, 5), (5,), (5,)))
    spec("rms_norm", "norm", lambda x, w: F.rms_norm(x, (5,), w), _randn((3, 5), (5,)))
    spec("add_layer_norm", "norm", lambda x, r, w, b: F.add_layer_norm(x, r, (5,), w, b),
         _randn((3, 5), (3, 5), (5,), (5,)))
    spec("add_rms_norm", "norm", lambda x, r, w: F.add_rms_norm(x, r, (5,), w), _randn((3, 5), (3, 5), (5,)))
    spec("scale_norm", "norm", lambda x, g: F.scale_norm(x, g), _randn((3, 5), (1,), low=1.0))
    spec("batch_norm(training)", "norm",
         lambda x, w, b: F.batch_norm(x, md.zeros(3, dtype=md.float64), md.ones(3, dtype=md.float64), w, b,
                                      training=True), _randn((4, 3, 2), (3,), (3,)))
    spec("batch_norm(eval)", "norm",
         lambda x, w, b: F.batch_norm(x, md.tensor(np.array([0.1, -0.2, 0.3])), md.tensor(np.array([1.5, 0.5, 2.0])),
                                      w, b, training=False), _randn((4, 3), (3,), (3,)))
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]], bool)
    spec("masked_batch_norm", "norm",
         lambda x, w, b: F.masked_batch_norm(x, md.tensor(mask), md.zeros(2, dtype=md.float64),
                                             md.ones(2, dtype=md.float64), w, b, training=True),
         _randn((3, 2, 4), (2,), (2,)))
    spec("instance_norm", "norm", lambda x, w, b: F.instance_norm(x, weight=w, bias=b),
         _randn((2, 3, 2, 3), (3,), (3,)))
    spec("group_norm", "norm", lambda x, w, b: F.group_norm(x, 2, w, b), _randn((2, 4, 2, 3), (4,), (4,)))
    # r and d clipped (running variance far below the batch's, mean far off): constants, so the
    # closed-form backward is the forward's exact gradient; momentum 0 keeps them so
    spec("batch_renorm(clipped)", "norm",
         lambda x, w, b: F.batch_renorm(x, md.tensor(np.array([5.0, -5.0, 5.0])), md.tensor(np.full(3, 1e-3)), w, b,
                                        True, 0.0, 1e-5, 2.0, 1.0), _randn((4, 3, 2), (3,), (3,)))
    spec("weight_standardization", "norm", lambda w: F.weight_standardization(w), _randn((3, 2, 2, 2)))
    # layers (input and every parameter)
    module_spec("Linear", lambda: nn.Linear(4, 3), (2, 4))
    module_spec("Conv2d", lambda: nn.Conv2d(2, 3, 3, padding=1), (1, 2, 4, 4))
    module_spec("WSConv2d", lambda: nn.WSConv2d(2, 3, 3, padding=1), (1, 2, 4, 4))
    module_spec("Embedding", lambda: nn.Embedding(5, 3), (2, 4), x_kind=5, grad_inputs=[1])
    module_spec("BatchNorm1d", lambda: nn.BatchNorm1d(3), (4, 3, 2))
    module_spec("BatchNorm2d", lambda: nn.BatchNorm2d(2), (3, 2, 2, 2))
    module_spec("LayerNorm", lambda: nn.LayerNorm((2, 3)), (2, 2, 3))
    module_spec("GroupNorm", lambda: nn.GroupNorm(2, 4), (2, 4, 3))
    module_spec("InstanceNorm2d(affine)", lambda: nn.InstanceNorm2d(2, affine=True), (2, 2, 3, 3))
    module_spec("RMSNorm", lambda: nn.RMSNorm(5), (3, 5))
    module_spec("ScaleNorm", lambda: nn.ScaleNorm(5), (3, 5))
    module_spec("MultiheadAttention", lambda: nn.MultiheadAttention(4, 2), (2, 3, 4),
                call=lambda m, x: m(x, x, x, need_weights=False)[0])
    for pos in ("pre", "post", "deepnorm"):
        module_spec(f"TransformerBlock({pos})", (lambda pos: lambda: TransformerBlock(
            4, 2, d_ff=6, norm_position=pos, causal=True,
            deepnorm=(1.5, 0.5) if pos == "deepnorm" else None))(pos), (1, 3, 4), group="block")
    module_spec("TransformerBlock(rms)", lambda: TransformerBlock(4, 2, d_ff=6, norm="rms"), (1, 3, 4), group="block")
    module_spec("TransformerBlock(masked batch)", lambda: TransformerBlock(4, 2, d_ff=6, norm="batch"), (2, 3, 4),
                call=lambda m, x: m(x, np.array([[False, False, True], [False, False, False]])), group="block")
    return list(_TABLE)
