"""F.batch_norm_relu and F.group_norm_relu: relu(norm(x)) as one op, with the same values and
gradients.

Forward against plain NumPy and gradchecks with both implementations; the CPU kernels against
the NumPy references in float32/float64 on the fused paths and the fallbacks; bit for bit the
two separate ops, in training (running estimates included) and eval; ReLU's mask (NaN passes, 0
and -0.0 do not); the module path the zoo's ResNets take, and the hooks that keep a module
unfused; the same errors as the norms."""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.kernels.cpu import batch_norm_relu as k
from minidl.kernels.cpu import group_norm as gn_kernel
from minidl.ops.normalization import batch_norm as bn_ops
from minidl.ops.normalization import group_norm as gn_ops
from minidl.testing import OpSpec, check_forward, check_gradcheck, check_implementations, forward_cases, spec_id
from minidl.zoo import resnet8
from minidl.zoo.norms import norm_relu

RUN_MEAN = np.array([0.3, -0.2, 1.0, 0.1])
RUN_VAR = np.array([0.5, 2.0, 1.5, 0.8])


def naive(x, w, b, mean=None, var=None, eps=1e-5):
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean = x.mean(axis=axes) if mean is None else mean
    var = x.var(axis=axes) if var is None else var
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * w.reshape(shape) + b.reshape(shape)
    return np.maximum(y, 0)


def _inputs(shape):
    return lambda rng: (rng.standard_normal(shape) * 2 + 0.5, rng.standard_normal(shape[1]),
                        rng.standard_normal(shape[1]))


# (2, 4, 16) takes the fused per-channel kernels; (4, 4) and (3, 4, 3) the fallback
SHAPES = [(2, 4, 16), (2, 4, 4, 8), (4, 4), (3, 4, 3)]
SPECS = [OpSpec(name=f"batch_norm_relu_train{s}",
                op=lambda x, w, b: F.batch_norm_relu(x, None, None, w, b, training=True),
                reference=lambda x, w, b: naive(x, w, b), inputs=_inputs(s)) for s in SHAPES]
SPECS.append(OpSpec(name="batch_norm_relu_eval",
                    op=lambda x, w, b: F.batch_norm_relu(x, md.tensor(RUN_MEAN, dtype=x.dtype),
                                                         md.tensor(RUN_VAR, dtype=x.dtype), w, b),
                    reference=lambda x, w, b: naive(x, w, b, RUN_MEAN, RUN_VAR), inputs=_inputs((2, 4, 16))))



@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck(spec, impl):
    assert check_gradcheck(spec)


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward(spec, dtype, device, impl):
    check_forward(spec, dtype, device)


def _backward_inputs(shape, training=True):
    def make(rng):
        x, w, b = _inputs(shape)(rng)
        r, mean, rstd = bn_ops.batch_norm_relu_forward_reference(x, w, b)
        return rng.standard_normal(shape), r, x, mean, rstd, w
    return make


KERNEL_SPECS = []
for shape in SHAPES:
    KERNEL_SPECS += [
        OpSpec(name=f"fwd{shape}", op=None, inputs=_inputs(shape),
               reference=lambda x, w, b: bn_ops.batch_norm_relu_forward_reference(x, w, b),
               implementations={"numba": lambda x, w, b: k.batch_norm_relu_forward(x, w, b)}),
        OpSpec(name=f"apply{shape}", op=None, inputs=_inputs(shape),
               reference=lambda x, w, b: bn_ops.batch_norm_relu_apply_reference(x, RUN_MEAN, 1 / np.sqrt(RUN_VAR), w, b),
               implementations={"numba": lambda x, w, b: k.batch_norm_relu_apply(x, RUN_MEAN, 1 / np.sqrt(RUN_VAR),
                                                                                  w, b)}),
        OpSpec(name=f"bwd{shape}", op=None, inputs=_backward_inputs(shape),
               reference=lambda dy, r, x, m, s, w: bn_ops.batch_norm_relu_backward_reference(dy, r, x, m, s, w),
               implementations={"numba": lambda dy, r, x, m, s, w: k.batch_norm_relu_backward(dy, r, x, m, s, w)}),
        OpSpec(name=f"eval_bwd{shape}", op=None, inputs=_backward_inputs(shape),
               reference=lambda dy, r, x, m, s, w: bn_ops.batch_norm_relu_backward_reference(dy, r, x, m, s, w,
                                                                                            training=False),
               implementations={"numba": lambda dy, r, x, m, s, w: k.batch_norm_relu_backward(dy, r, x, m, s, w,
                                                                                              training=False)}),
    ]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("spec", KERNEL_SPECS, ids=spec_id)
def test_kernels_match_the_references(spec, dtype):
    check_implementations(spec, dtype)


def test_the_small_shapes_take_the_fused_kernels_and_the_others_the_fallback():
    assert k._fusable(np.zeros((2, 4, 16))) is not None
    assert k._fusable(np.zeros((2, 4, 4, 8), np.float32)) is not None
    for x in (np.zeros((4, 4)), np.zeros((3, 4, 3)), np.zeros((2, 4, 16), np.float16), np.zeros((0, 4, 16))):
        assert k._fusable(x) is None


def _pair(x0, w0, b0, g, fused, training=True, momentum=0.1):
    x, w, b = (md.tensor(a, requires_grad=True) for a in (x0, w0, b0))
    C = x0.shape[1]
    rm, rv = md.tensor(np.resize(RUN_MEAN, C).astype(x0.dtype)), md.tensor(np.resize(RUN_VAR, C).astype(x0.dtype))
    if fused:
        y = F.batch_norm_relu(x, rm, rv, w, b, training, momentum)
    else:
        y = F.relu(F.batch_norm(x, rm, rv, w, b, training, momentum))
    y.backward(md.tensor(g))
    return [a.detach().numpy() for a in (y, x.grad, w.grad, b.grad, rm, rv)]


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(8, 8, 32), (16, 8, 8, 8)])
def test_fused_equals_batch_norm_then_relu_bit_for_bit(shape, dtype, training):
    rng = np.random.default_rng(1)
    x0 = (rng.standard_normal(shape) * 2 + 0.5).astype(dtype)
    w0, b0 = rng.standard_normal(shape[1]).astype(dtype), rng.standard_normal(shape[1]).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    assert k._fusable(x0) is not None
    for a, c in zip(_pair(x0, w0, b0, g, True, training), _pair(x0, w0, b0, g, False, training)):
        np.testing.assert_array_equal(a, c)


def test_relus_mask_passes_nan_and_stops_at_zero():
    """Where BN(x) is NaN the output and the gradient pass NaN; where it is 0 (beta = 0 on a
    constant channel) no gradient passes, as relu's backward."""
    x0 = np.random.default_rng(2).standard_normal((2, 4, 16))
    x0[:, 1] = 3.0                       # constant channel: BN gives exactly 0 with beta = 0
    x0[0, 2, 5] = np.nan                 # NaN channel: every output NaN
    w0, b0 = np.ones(4), np.zeros(4)
    g = np.random.default_rng(3).standard_normal(x0.shape)
    with np.errstate(invalid="ignore"):
        fused, plain = _pair(x0, w0, b0, g, True), _pair(x0, w0, b0, g, False)
    for a, c in zip(fused, plain):
        np.testing.assert_array_equal(a, c)      # NaN where NaN
    assert (fused[0][:, 1] == 0).all() and np.isnan(fused[0][:, 2]).all()


def test_a_batchnorm2d_module_fuses_with_its_mode_and_batch_count():
    rng = np.random.default_rng(4)
    x0 = rng.standard_normal((8, 8, 4, 4)).astype(np.float32)
    for momentum in (0.1, None):
        a, b = nn.BatchNorm2d(8, momentum=momentum), nn.BatchNorm2d(8, momentum=momentum)
        for _ in range(2):
            ya, yb = norm_relu(a, md.tensor(x0)), F.relu(b(md.tensor(x0)))
            np.testing.assert_array_equal(ya.detach().numpy(), yb.detach().numpy())
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            np.testing.assert_array_equal(getattr(a, name).numpy(), getattr(b, name).numpy())
        a.eval(), b.eval()
        np.testing.assert_array_equal(norm_relu(a, md.tensor(x0)).detach().numpy(),
                                      F.relu(b(md.tensor(x0))).detach().numpy())


def test_the_zoo_resnet_fuses_unless_a_hook_is_set(monkeypatch):
    calls, gn_calls = [], []                       # the calls without a residual (the second argument)
    original = bn_ops.BatchNormReLUFunction.apply
    monkeypatch.setattr(bn_ops.BatchNormReLUFunction, "apply",
                        lambda *a: (a[1] is None and calls.append(1)) or original(*a))
    gn_original = gn_ops.GroupNormReLUFunction.apply
    monkeypatch.setattr(gn_ops.GroupNormReLUFunction, "apply",
                        lambda *a: (a[1] is None and gn_calls.append(1)) or gn_original(*a))
    model = resnet8(in_channels=3, num_classes=10)
    x = md.tensor(np.random.default_rng(5).standard_normal((2, 3, 8, 8)).astype(np.float32))
    model(x).sum().backward()
    assert len(calls) == 4                          # the stem and each block's first norm
    seen = []
    model.norm1.register_forward_hook(lambda m, i, o: seen.append(o.shape))
    calls.clear()
    model(x)
    assert len(calls) == 3 and seen == [(2, 16, 8, 8)]
    group = resnet8(in_channels=3, num_classes=10, norm="group")
    group(x).sum().backward()
    assert len(calls) == 3 and len(gn_calls) == 4  # GroupNorm's own pair
    layer = resnet8(in_channels=3, num_classes=10, norm="layer")
    layer(x)
    assert len(calls) == 3 and len(gn_calls) == 4  # any other norm: the two layers


def test_errors_name_the_op():
    x = md.tensor(np.zeros((2, 4, 3)))
    with pytest.raises(Exception, match="batch_norm_relu"):
        F.batch_norm_relu(x, md.tensor(np.zeros(3)), md.tensor(np.ones(4)), training=False)
    with pytest.raises(ValueError, match="batch_norm_relu: training=False normalizes with the running statistics"):
        F.batch_norm_relu(x, None, None)
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        F.batch_norm_relu(md.tensor(np.zeros((1, 4))), None, None, training=True)


# GroupNorm + ReLU -------------------------------------------------------------------------------
def naive_gn_relu(x, groups, w, b, eps=1e-5):
    xg = x.reshape(x.shape[0], groups, -1)
    y = ((xg - xg.mean(axis=2, keepdims=True)) / np.sqrt(xg.var(axis=2, keepdims=True) + eps)).reshape(x.shape)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return np.maximum(y * w.reshape(shape) + b.reshape(shape), 0)


GN_CASES = [((2, 6, 5), 3), ((3, 4, 3, 2), 2), ((4, 6), 2), ((2, 8, 16), 8)]
GN_SPECS = [OpSpec(name=f"group_norm_relu{s}G{g}", op=lambda x, w, b, g=g: F.group_norm_relu(x, g, w, b),
                   reference=lambda x, w, b, g=g: naive_gn_relu(x, g, w, b), inputs=_inputs(s)) for s, g in GN_CASES]


@pytest.mark.parametrize("spec", GN_SPECS, ids=spec_id)
def test_group_norm_relu_gradcheck(spec, impl):
    assert check_gradcheck(spec)


@pytest.mark.parametrize("spec,dtype,device", forward_cases(GN_SPECS))
def test_group_norm_relu_forward(spec, dtype, device, impl):
    check_forward(spec, dtype, device)


def _gn_backward_inputs(shape, groups):
    def make(rng):
        x, w, b = _inputs(shape)(rng)
        r, mean, rstd = gn_ops.group_norm_relu_forward_reference(x, groups, w, b)
        return rng.standard_normal(shape), r, x, mean, rstd, w
    return make


GN_KERNEL_SPECS = []
for shape, groups in GN_CASES:
    GN_KERNEL_SPECS += [
        OpSpec(name=f"gn_relu_fwd{shape}G{groups}", op=None, inputs=_inputs(shape),
               reference=lambda x, w, b, g=groups: gn_ops.group_norm_relu_forward_reference(x, g, w, b),
               implementations={"numba": lambda x, w, b, g=groups: gn_kernel.group_norm_relu_forward(x, g, w, b)}),
        OpSpec(name=f"gn_relu_bwd{shape}G{groups}", op=None, inputs=_gn_backward_inputs(shape, groups),
               reference=lambda dy, r, x, m, s, w, g=groups: gn_ops.group_norm_relu_backward_reference(dy, r, x, m, s,
                                                                                                      w, g),
               implementations={"numba": lambda dy, r, x, m, s, w, g=groups: gn_kernel.group_norm_relu_backward(
                   dy, r, x, m, s, w, g)}),
    ]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("spec", GN_KERNEL_SPECS, ids=spec_id)
def test_group_norm_relu_kernels_match_the_references(spec, dtype):
    check_implementations(spec, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("shape,groups", [((8, 16, 8, 8), 8), ((4, 6, 5), 3)])
def test_group_norm_relu_equals_group_norm_then_relu_bit_for_bit(shape, groups, dtype):
    rng = np.random.default_rng(6)
    x0 = (rng.standard_normal(shape) * 2 + 0.5).astype(dtype)
    x0.reshape(-1)[:5] = 0.5                      # some exact values
    w0, b0 = rng.standard_normal(shape[1]).astype(dtype), rng.standard_normal(shape[1]).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    results = []
    for fused in (True, False):
        x, w, b = (md.tensor(a, requires_grad=True) for a in (x0, w0, b0))
        y = F.group_norm_relu(x, groups, w, b) if fused else F.relu(F.group_norm(x, groups, w, b))
        y.backward(md.tensor(g))
        results.append([a.detach().numpy() for a in (y, x.grad, w.grad, b.grad)])
    for a, c in zip(*results):
        np.testing.assert_array_equal(a, c)


def test_group_norm_relu_errors_name_the_op():
    with pytest.raises(ValueError, match="group_norm_relu: expected num_channels \\(6"):
        F.group_norm_relu(md.tensor(np.zeros((2, 6, 3))), 4)
