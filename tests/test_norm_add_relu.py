"""F.batch_norm_add_relu and F.group_norm_add_relu: relu(norm(x) + residual) as one op, the end of
a ResNet block.

Forward against plain NumPy and gradchecks with both implementations (every input's gradient,
the residual's included); the CPU kernels against the NumPy references on the fused paths and
the fallbacks, float32 and float64; against the three ops in turn: the same output bit for bit
and running estimates, the same gradients (the kernels' sums may round differently); ReLU's mask
on the sum; the errors; and the zoo's ResNet blocks, which take it unless the norm has hooks."""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.kernels.cpu import batch_norm_relu as bn_kernel
from minidl.kernels.cpu import group_norm as gn_kernel
from minidl.ops.normalization import batch_norm as bn_ops
from minidl.ops.normalization import group_norm as gn_ops
from minidl.testing import OpSpec, check_forward, check_gradcheck, check_implementations, forward_cases, spec_id
from minidl.zoo import resnet8
from minidl.zoo.norms import norm_add_relu

RUN_MEAN = np.array([0.3, -0.2, 1.0, 0.1])
RUN_VAR = np.array([0.5, 2.0, 1.5, 0.8])


def _normalized(x, groups=None, mean=None, var=None, eps=1e-5):
    if groups is not None:                      # GroupNorm: per sample, over each group
        xg = x.reshape(x.shape[0], groups, -1)
        return ((xg - xg.mean(axis=2, keepdims=True)) / np.sqrt(xg.var(axis=2, keepdims=True) + eps)).reshape(x.shape)
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean = x.mean(axis=axes) if mean is None else mean
    var = x.var(axis=axes) if var is None else var
    return (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)


def naive(x, s, w, b, groups=None, mean=None, var=None):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return np.maximum(_normalized(x, groups, mean, var) * w.reshape(shape) + b.reshape(shape) + s, 0)


def _inputs(shape):
    return lambda rng: (rng.standard_normal(shape) * 2 + 0.5, rng.standard_normal(shape),
                        rng.standard_normal(shape[1]), rng.standard_normal(shape[1]))


# (2, 4, 16) takes BatchNorm's fused per-channel kernels; (4, 4) and (3, 4, 3) its fallback
BN_SHAPES = [(2, 4, 16), (2, 4, 4, 8), (4, 4), (3, 4, 3)]
GN_CASES = [((2, 6, 5), 3), ((3, 4, 3, 2), 2), ((4, 6), 2), ((2, 8, 16), 8)]
SPECS = ([OpSpec(name=f"batch_norm_add_relu_train{s}",
                 op=lambda x, s, w, b: F.batch_norm_add_relu(x, s, None, None, w, b, training=True),
                 reference=lambda x, s, w, b: naive(x, s, w, b), inputs=_inputs(s)) for s in BN_SHAPES]
         + [OpSpec(name="batch_norm_add_relu_eval",
                   op=lambda x, s, w, b: F.batch_norm_add_relu(x, s, md.tensor(RUN_MEAN, dtype=x.dtype),
                                                               md.tensor(RUN_VAR, dtype=x.dtype), w, b),
                   reference=lambda x, s, w, b: naive(x, s, w, b, None, RUN_MEAN, RUN_VAR), inputs=_inputs((2, 4, 16)))]
         + [OpSpec(name=f"group_norm_add_relu{s}G{g}", op=lambda x, s, w, b, g=g: F.group_norm_add_relu(x, s, g, w, b),
                   reference=lambda x, s, w, b, g=g: naive(x, s, w, b, g), inputs=_inputs(s)) for s, g in GN_CASES])


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck(spec, impl):
    assert check_gradcheck(spec)


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward(spec, dtype, device, impl):
    check_forward(spec, dtype, device)


def _backward_inputs(forward, shape):
    def make(rng):
        x, s, w, b = _inputs(shape)(rng)
        r, mean, rstd = forward(x, s, w, b)
        return rng.standard_normal(shape), r, x, mean, rstd, w
    return make


KERNEL_SPECS = []
for shape in BN_SHAPES:
    def fwd(x, s, w, b):
        return bn_ops.batch_norm_relu_forward_reference(x, w, b, residual=s)
    KERNEL_SPECS += [
        OpSpec(name=f"bn_fwd{shape}", op=None, inputs=_inputs(shape), reference=fwd,
               implementations={"numba": lambda x, s, w, b: bn_kernel.batch_norm_relu_forward(x, w, b, residual=s)}),
        OpSpec(name=f"bn_apply{shape}", op=None, inputs=_inputs(shape),
               reference=lambda x, s, w, b: bn_ops.batch_norm_relu_apply_reference(x, RUN_MEAN, 1 / np.sqrt(RUN_VAR),
                                                                                  w, b, residual=s),
               implementations={"numba": lambda x, s, w, b: bn_kernel.batch_norm_relu_apply(
                   x, RUN_MEAN, 1 / np.sqrt(RUN_VAR), w, b, residual=s)}),
        OpSpec(name=f"bn_bwd{shape}", op=None, inputs=_backward_inputs(fwd, shape),
               reference=lambda *a: bn_ops.batch_norm_relu_backward_reference(*a, need_dresidual=True),
               implementations={"numba": lambda *a: bn_kernel.batch_norm_relu_backward(*a, need_dresidual=True)}),
        OpSpec(name=f"bn_eval_bwd{shape}", op=None, inputs=_backward_inputs(fwd, shape),
               reference=lambda *a: bn_ops.batch_norm_relu_backward_reference(*a, training=False, need_dresidual=True),
               implementations={"numba": lambda *a: bn_kernel.batch_norm_relu_backward(*a, training=False,
                                                                                       need_dresidual=True)}),
    ]
for shape, groups in GN_CASES:
    def fwd(x, s, w, b, g=groups):
        return gn_ops.group_norm_relu_forward_reference(x, g, w, b, residual=s)
    KERNEL_SPECS += [
        OpSpec(name=f"gn_fwd{shape}G{groups}", op=None, inputs=_inputs(shape), reference=fwd,
               implementations={"numba": lambda x, s, w, b, g=groups: gn_kernel.group_norm_relu_forward(
                   x, g, w, b, residual=s)}),
        OpSpec(name=f"gn_bwd{shape}G{groups}", op=None, inputs=_backward_inputs(fwd, shape),
               reference=lambda *a, g=groups: gn_ops.group_norm_relu_backward_reference(*a, g, need_dresidual=True),
               implementations={"numba": lambda *a, g=groups: gn_kernel.group_norm_relu_backward(
                   *a, g, need_dresidual=True)}),
    ]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("spec", KERNEL_SPECS, ids=spec_id)
def test_kernels_match_the_references(spec, dtype):
    check_implementations(spec, dtype)


def test_the_fused_shapes_take_the_fused_kernels_and_the_kernels_refuse_another_shape():
    x = np.zeros((2, 4, 16))
    assert bn_kernel._residual_view(np.zeros((2, 4, 16)), x, bn_kernel._fusable(x)) is not None
    assert bn_kernel._residual_view(np.zeros((2, 4, 16), np.float32), x, bn_kernel._fusable(x)) is None  # the ops
    for wrong in (np.zeros((2, 4, 8, 2)), np.zeros((2, 4, 15))):     # read by x's rows: refused, never read
        with pytest.raises(ValueError, match="expected a residual of shape \\(2, 4, 16\\)"):
            bn_kernel.batch_norm_relu_forward(x, residual=wrong)
        with pytest.raises(ValueError, match="expected a residual of shape \\(2, 4, 16\\)"):
            gn_kernel.group_norm_forward(x, 2, relu=True, residual=wrong)


def _run(op, x0, s0, w0, b0, g, fused, training=True, groups=None):
    x, s, w, b = (md.tensor(a, requires_grad=True) for a in (x0, s0, w0, b0))
    C = x0.shape[1]
    rm, rv = md.tensor(np.resize(RUN_MEAN, C).astype(x0.dtype)), md.tensor(np.resize(RUN_VAR, C).astype(x0.dtype))
    if op == "batch":
        y = (F.batch_norm_add_relu(x, s, rm, rv, w, b, training, 0.1) if fused
             else F.relu(F.batch_norm(x, rm, rv, w, b, training, 0.1) + s))
    else:
        y = F.group_norm_add_relu(x, s, groups, w, b) if fused else F.relu(F.group_norm(x, groups, w, b) + s)
    y.backward(md.tensor(g))
    return [y.detach().numpy(), rm.detach().numpy(), rv.detach().numpy()], [a.grad.numpy() for a in (x, s, w, b)]


IN_TURN = ([("batch", shape, None, training) for shape in ((8, 8, 32), (16, 8, 8, 8), (5, 4))
            for training in (True, False)] + [("group", (8, 16, 8, 8), 8, True), ("group", (4, 6, 5), 3, True)])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op,shape,groups,training", IN_TURN)
def test_equals_the_norm_the_add_and_the_relu_in_turn(op, shape, groups, training, dtype):
    rng = np.random.default_rng(1)
    x0 = (rng.standard_normal(shape) * 2 + 0.5).astype(dtype)
    s0 = rng.standard_normal(shape).astype(dtype)
    w0, b0 = rng.standard_normal(shape[1]).astype(dtype), rng.standard_normal(shape[1]).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    (values, grads), (values2, grads2) = (_run(op, x0, s0, w0, b0, g, f, training, groups) for f in (True, False))
    for a, c in zip(values, values2):
        np.testing.assert_array_equal(a, c)              # the output and the running estimates
    np.testing.assert_array_equal(grads[1], grads2[1])  # the residual's: the masked dy itself
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for a, c in zip(grads, grads2):
        np.testing.assert_allclose(a, c, rtol=tol, atol=tol * np.abs(c).max())


def test_relus_mask_is_on_the_sum():
    # a negative norm output lifted by the residual passes; a positive one cancelled by it stops;
    # NaN in the residual passes
    x0 = np.array([[0.0, 2.0, -2.0, 1.0]] * 2).reshape(2, 1, 4).repeat(4, axis=1)
    s0 = np.zeros_like(x0)
    s0[:, :, 0] = 5.0                       # -> positive
    s0[:, :, 1] = -10.0                     # -> negative
    s0[:, :, 3] = np.nan
    g = np.ones_like(x0)
    for op in ("batch", "group"):
        with np.errstate(invalid="ignore"):
            values, grads = _run(op, x0, s0, np.ones(4), np.zeros(4), g, True, groups=2)
        y, ds = values[0], grads[1]
        assert (y[:, :, 0] > 0).all() and (ds[:, :, 0] == 1).all()
        assert (y[:, :, 1] == 0).all() and (ds[:, :, 1] == 0).all()
        assert np.isnan(y[:, :, 3]).all() and (ds[:, :, 3] == 1).all()


def test_only_the_inputs_that_need_a_gradient_get_one():
    rng = np.random.default_rng(2)
    x = md.tensor(rng.standard_normal((2, 4, 16)))
    s = md.tensor(rng.standard_normal((2, 4, 16)), requires_grad=True)
    F.batch_norm_add_relu(x, s, None, None, training=True).sum().backward()
    assert x.grad is None and s.grad is not None
    s.grad = None
    F.group_norm_add_relu(x, s, 2).sum().backward()
    assert s.grad is not None


@pytest.mark.parametrize("op", ["batch_norm_add_relu", "group_norm_add_relu"])
def test_errors_name_the_op(op):
    x = md.tensor(np.zeros((2, 4, 3)))
    call = ((lambda s: F.batch_norm_add_relu(x, s, None, None, training=True)) if op == "batch_norm_add_relu"
            else (lambda s: F.group_norm_add_relu(x, s, 2)))
    with pytest.raises(ValueError, match=f"{op}: expected a residual of the input's shape \\(2, 4, 3\\)"):
        call(md.tensor(np.zeros((2, 4, 1))))
    with pytest.raises(ValueError, match=f"{op}: expected a residual .* dtype minidl.float64 .* got .* dtype minidl.float32"):
        call(md.tensor(np.zeros((2, 4, 3), np.float32)))
    with pytest.raises(TypeError, match=f"{op}: expected a Tensor residual, got ndarray"):
        call(np.zeros((2, 4, 3)))


def test_a_batchnorm2d_module_fuses_with_its_mode_and_batch_count():
    rng = np.random.default_rng(4)
    x0, s0 = (rng.standard_normal((8, 8, 4, 4)).astype(np.float32) for _ in range(2))
    for momentum in (0.1, None):
        a, b = nn.BatchNorm2d(8, momentum=momentum), nn.BatchNorm2d(8, momentum=momentum)
        for _ in range(2):
            ya, yb = norm_add_relu(a, md.tensor(x0), md.tensor(s0)), F.relu(b(md.tensor(x0)) + md.tensor(s0))
            np.testing.assert_array_equal(ya.detach().numpy(), yb.detach().numpy())
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            np.testing.assert_array_equal(getattr(a, name).numpy(), getattr(b, name).numpy())
        a.eval(), b.eval()
        np.testing.assert_array_equal(norm_add_relu(a, md.tensor(x0), md.tensor(s0)).detach().numpy(),
                                      F.relu(b(md.tensor(x0)) + md.tensor(s0)).detach().numpy())


def _counted(monkeypatch, cls):
    """The calls of cls.apply with a residual (its second argument)."""
    calls = []
    original = cls.apply.__func__
    monkeypatch.setattr(cls, "apply", classmethod(lambda c, *a: (a[1] is not None and calls.append(1)) or original(c, *a)))
    return calls


def test_the_zoo_resnet_blocks_take_it_unless_the_norm_has_hooks(monkeypatch):
    bn_calls = _counted(monkeypatch, bn_ops.BatchNormReLUFunction)
    gn_calls = _counted(monkeypatch, gn_ops.GroupNormReLUFunction)
    x = md.tensor(np.random.default_rng(5).standard_normal((2, 3, 8, 8)).astype(np.float32))
    model = resnet8(in_channels=3, num_classes=10)
    model(x).sum().backward()
    assert len(bn_calls) == 3 and all(p.grad is not None for p in model.parameters())   # one per block
    seen = []
    model.layers[0].norm2.register_forward_hook(lambda m, i, o: seen.append(o.shape))
    bn_calls.clear()
    model(x)
    assert len(bn_calls) == 2 and seen == [(2, 16, 8, 8)]
    resnet8(in_channels=3, num_classes=10, norm="group")(x).sum().backward()
    assert len(gn_calls) == 3
    resnet8(in_channels=3, num_classes=10, norm="layer")(x)
    resnet8(in_channels=3, num_classes=10, norm="none", init="skipinit")(x)
    assert len(bn_calls) == 2 and len(gn_calls) == 3                      # any other norm: the ops
