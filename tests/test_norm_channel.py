"""Channel norms: BatchNorm1d/2d (and masked BatchNorm1d), InstanceNorm1d/2d, GroupNorm.

Gradchecks of both implementations (NumPy reference and Numba kernels), kernels against the
reference in float32/float64, the identities between the norms, running statistics against
a hand computation, numerical care (large means, float16) and, when installed, PyTorch.
"""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.kernels.cpu import batch_norm as bn_kernel
from minidl.kernels.cpu import group_norm as gn_kernel
from minidl.ops.normalization import (batch_norm_backward_reference, batch_norm_forward_reference,
                                      group_norm_backward_reference, group_norm_forward_reference, implementation,
                                      instance_norm_backward_reference, instance_norm_forward_reference)
from minidl.testing import OpSpec, check_forward, check_gradcheck, check_implementations, forward_cases, spec_id


# independent plain-NumPy formulas (not the module's reference) for the forward checks ------------
def naive_bn(x, w=None, b=None, eps=1e-5, mean=None, var=None):
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean = x.mean(axis=axes) if mean is None else mean
    var = x.var(axis=axes) if var is None else var
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    return y * (1 if w is None else w.reshape(shape)) + (0 if b is None else b.reshape(shape))


def naive_gn(x, groups, w=None, b=None, eps=1e-5):
    xg = x.reshape(x.shape[0], groups, -1)
    y = ((xg - xg.mean(axis=2, keepdims=True)) / np.sqrt(xg.var(axis=2, keepdims=True) + eps)).reshape(x.shape)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return y * (1 if w is None else w.reshape(shape)) + (0 if b is None else b.reshape(shape))


def _affine_inputs(shape):
    return lambda rng: (rng.standard_normal(shape) * 2 + 0.5, rng.standard_normal(shape[1]),
                        rng.standard_normal(shape[1]))


def _x_input(shape):
    return lambda rng: (rng.standard_normal(shape) * 2 + 0.5,)


MASK = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]], dtype=bool)


def _masked_ref(x, w, b):
    """Masked BatchNorm computed on the real tokens only, scattered back into zeros."""
    tokens = x.transpose(0, 2, 1)[MASK]                     # (T, C)
    y = np.zeros_like(x)
    yt = naive_bn(tokens, w, b)
    out = y.transpose(0, 2, 1)
    out[MASK] = yt
    return y


RUN_MEAN = np.array([0.3, -0.2, 1.0])
RUN_VAR = np.array([0.5, 2.0, 1.5])

SPECS = []
for shape in [(4, 3), (3, 3, 5), (2, 3, 3, 2), (5, 3, 1, 1), (2, 3, 16)]:     # (2, 3, 16): fused kernels
    SPECS.append(OpSpec(name=f"batch_norm_train{shape}",
                        op=lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                        reference=lambda x, w, b: naive_bn(x, w, b), inputs=_affine_inputs(shape)))
SPECS += [
    OpSpec(name="batch_norm_train_noaffine", op=lambda x: F.batch_norm(x, None, None, training=True),
           reference=lambda x: naive_bn(x), inputs=_x_input((3, 2, 4))),
    OpSpec(name="batch_norm_train_C1", op=lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
           reference=lambda x, w, b: naive_bn(x, w, b), inputs=_affine_inputs((7, 1, 3))),
    OpSpec(name="batch_norm_eval",
           op=lambda x, w, b: F.batch_norm(x, md.tensor(RUN_MEAN, dtype=x.dtype), md.tensor(RUN_VAR, dtype=x.dtype),
                                           w, b, training=False),
           reference=lambda x, w, b: naive_bn(x, w, b, mean=RUN_MEAN, var=RUN_VAR), inputs=_affine_inputs((2, 3, 4))),
    OpSpec(name="masked_batch_norm",
           op=lambda x, w, b: F.masked_batch_norm(x, MASK, None, None, w, b, training=True),
           reference=_masked_ref, inputs=_affine_inputs((3, 3, 5))),
    OpSpec(name="instance_norm1d", op=lambda x, w, b: F.instance_norm(x, weight=w, bias=b),
           reference=lambda x, w, b: naive_gn(x, x.shape[1], w, b), inputs=_affine_inputs((2, 3, 5))),
    OpSpec(name="instance_norm2d_noaffine", op=lambda x: F.instance_norm(x),
           reference=lambda x: naive_gn(x, x.shape[1]), inputs=_x_input((2, 3, 3, 2))),
    OpSpec(name="group_norm_G3", op=lambda x, w, b: F.group_norm(x, 3, w, b),
           reference=lambda x, w, b: naive_gn(x, 3, w, b), inputs=_affine_inputs((2, 6, 3))),
    OpSpec(name="group_norm_G2_2d", op=lambda x, w, b: F.group_norm(x, 2, w, b),
           reference=lambda x, w, b: naive_gn(x, 2, w, b), inputs=_affine_inputs((3, 4, 3, 2))),
    OpSpec(name="group_norm_G1_noaffine", op=lambda x: F.group_norm(x, 1),
           reference=lambda x: naive_gn(x, 1), inputs=_x_input((2, 5, 3))),
    OpSpec(name="group_norm_NC", op=lambda x, w, b: F.group_norm(x, 2, w, b),
           reference=lambda x, w, b: naive_gn(x, 2, w, b), inputs=_affine_inputs((3, 4))),
]



@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck(spec, impl):
    assert check_gradcheck(spec)


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward(spec, dtype, device, impl):
    check_forward(spec, dtype, device)


# kernels against the reference, forward and backward ------------------------------------------------
def _bn_backward_inputs(shape, mask=None):
    def make(rng):
        x = rng.standard_normal(shape) * 3 + 1
        w = rng.standard_normal(shape[1])
        _, mean, rstd = batch_norm_forward_reference(x, w, None, 1e-5, mask)
        return rng.standard_normal(shape), x, mean, rstd, w
    return make


def _rows_backward_inputs(shape, fwd):
    def make(rng):
        x = rng.standard_normal(shape) * 3 + 1
        w = rng.standard_normal(shape[1])
        _, mean, rstd = fwd(x, w)
        return rng.standard_normal(shape), x, mean, rstd, w
    return make


KERNEL_SPECS = []
# (3, 4, 16) and (2, 3, 4, 8) take the fused per-channel BatchNorm kernels, the others the chunked ones
for shape in [(6, 5), (4, 3, 7), (3, 4, 5, 3), (2, 3, 1), (3, 4, 16), (2, 3, 4, 8)]:
    KERNEL_SPECS += [
        OpSpec(name=f"bn_fwd{shape}", op=None, inputs=_affine_inputs(shape),
               reference=lambda x, w, b: batch_norm_forward_reference(x, w, b),
               implementations={"numba": lambda x, w, b: bn_kernel.batch_norm_forward(x, w, b)}),
        OpSpec(name=f"bn_bwd{shape}", op=None, inputs=_bn_backward_inputs(shape),
               reference=lambda dy, x, m, r, w: batch_norm_backward_reference(dy, x, m, r, w),
               implementations={"numba": lambda dy, x, m, r, w: bn_kernel.batch_norm_backward(dy, x, m, r, w)}),
        OpSpec(name=f"bn_eval_bwd{shape}", op=None, inputs=_bn_backward_inputs(shape),
               reference=lambda dy, x, m, r, w: batch_norm_backward_reference(dy, x, m, r, w, training=False),
               implementations={"numba": lambda dy, x, m, r, w: bn_kernel.batch_norm_backward(dy, x, m, r, w,
                                                                                              training=False)}),
    ]
MASK16 = np.arange(16)[None, :] < np.array([16, 9, 3])[:, None]
KERNEL_SPECS += [
    OpSpec(name="bn_masked_fwd_fused", op=None, inputs=_affine_inputs((3, 4, 16)),
           reference=lambda x, w, b: batch_norm_forward_reference(x, w, b, mask=MASK16),
           implementations={"numba": lambda x, w, b: bn_kernel.batch_norm_forward(x, w, b, mask=MASK16)}),
    OpSpec(name="bn_masked_bwd_fused", op=None, inputs=_bn_backward_inputs((3, 4, 16), MASK16),
           reference=lambda dy, x, m, r, w: batch_norm_backward_reference(dy, x, m, r, w, mask=MASK16),
           implementations={"numba": lambda dy, x, m, r, w: bn_kernel.batch_norm_backward(dy, x, m, r, w,
                                                                                          mask=MASK16)}),
    OpSpec(name="bn_masked_fwd", op=None, inputs=_affine_inputs((3, 4, 5)),
           reference=lambda x, w, b: batch_norm_forward_reference(x, w, b, mask=MASK),
           implementations={"numba": lambda x, w, b: bn_kernel.batch_norm_forward(x, w, b, mask=MASK)}),
    OpSpec(name="bn_masked_bwd", op=None, inputs=_bn_backward_inputs((3, 4, 5), MASK),
           reference=lambda dy, x, m, r, w: batch_norm_backward_reference(dy, x, m, r, w, mask=MASK),
           implementations={"numba": lambda dy, x, m, r, w: bn_kernel.batch_norm_backward(dy, x, m, r, w,
                                                                                          mask=MASK)}),
]
for shape, groups in [((2, 6, 5), 3), ((3, 4, 3, 2), 4), ((2, 4, 7), 1), ((4, 6), 2)]:
    KERNEL_SPECS += [
        OpSpec(name=f"gn_fwd{shape}G{groups}", op=None, inputs=_affine_inputs(shape),
               reference=lambda x, w, b, g=groups: group_norm_forward_reference(x, g, w, b),
               implementations={"numba": lambda x, w, b, g=groups: gn_kernel.group_norm_forward(x, g, w, b)}),
        OpSpec(name=f"gn_bwd{shape}G{groups}", op=None,
               inputs=_rows_backward_inputs(shape, lambda x, w, g=groups: group_norm_forward_reference(x, g, w)),
               reference=lambda dy, x, m, r, w, g=groups: group_norm_backward_reference(dy, x, m, r, w, g),
               implementations={"numba": lambda dy, x, m, r, w, g=groups: gn_kernel.group_norm_backward(dy, x, m, r,
                                                                                                        w, g)}),
    ]
for shape in [(2, 3, 5), (3, 2, 3, 4)]:
    KERNEL_SPECS += [
        OpSpec(name=f"in_fwd{shape}", op=None, inputs=_affine_inputs(shape),
               reference=lambda x, w, b: instance_norm_forward_reference(x, w, b),
               implementations={"numba": lambda x, w, b: gn_kernel.instance_norm_forward(x, w, b)}),
        OpSpec(name=f"in_bwd{shape}", op=None, inputs=_rows_backward_inputs(shape, instance_norm_forward_reference),
               reference=lambda dy, x, m, r, w: instance_norm_backward_reference(dy, x, m, r, w),
               implementations={"numba": lambda dy, x, m, r, w: gn_kernel.instance_norm_backward(dy, x, m, r, w)}),
    ]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("spec", KERNEL_SPECS, ids=spec_id)
def test_kernel_matches_reference(spec, dtype):
    check_implementations(spec, dtype)


# identities ---------------------------------------------------------------------------------------
def _leaf(a):
    return md.tensor(a, requires_grad=True)


def _values_and_grads(fn, arrays, g):
    leaves = [_leaf(a) for a in arrays]
    y = fn(*leaves)
    y.backward(md.tensor(g))
    return y.detach().numpy(), [t.grad.numpy() for t in leaves]


def test_group_norm_one_group_is_layer_norm_over_chw():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4, 5, 2))
    g = rng.standard_normal(x.shape)
    y1, (gx1,) = _values_and_grads(lambda t: F.group_norm(t, 1), [x], g)
    if hasattr(F, "layer_norm"):
        y2, (gx2,) = _values_and_grads(lambda t: F.layer_norm(t, (4, 5, 2)), [x], g)
        np.testing.assert_allclose(gx1, gx2, atol=1e-10)
    else:
        flat = x.reshape(3, -1)
        y2 = ((flat - flat.mean(1, keepdims=True)) / np.sqrt(flat.var(1, keepdims=True) + 1e-5)).reshape(x.shape)
    np.testing.assert_allclose(y1, y2, atol=1e-10)


def test_group_norm_C_groups_is_instance_norm():
    rng = np.random.default_rng(2)
    x, w, b = rng.standard_normal((2, 3, 4, 5)), rng.standard_normal(3), rng.standard_normal(3)
    g = rng.standard_normal(x.shape)
    y1, grads1 = _values_and_grads(lambda *t: F.group_norm(t[0], 3, t[1], t[2]), [x, w, b], g)
    y2, grads2 = _values_and_grads(lambda *t: F.instance_norm(t[0], weight=t[1], bias=t[2]), [x, w, b], g)
    np.testing.assert_allclose(y1, y2, atol=1e-12)
    for a, e in zip(grads1, grads2):
        np.testing.assert_allclose(a, e, atol=1e-10)


@pytest.mark.parametrize("module", [lambda: nn.BatchNorm2d(3), lambda: nn.BatchNorm1d(3)])
def test_batch_norm_couples_samples_in_training_only(module, impl):
    m = module()
    shape = (4, 3, 5, 5) if isinstance(m, nn.BatchNorm2d) else (4, 3)
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(np.float32)
    x2 = x.copy()
    x2[1:] = rng.standard_normal(x2[1:].shape) * 3 + 2       # change every sample but the first
    m.train()
    ya, yb = m(md.tensor(x)).detach().numpy(), m(md.tensor(x2)).detach().numpy()
    assert np.abs(ya[0] - yb[0]).max() > 1e-2
    m.eval()
    ya, yb = m(md.tensor(x)).detach().numpy(), m(md.tensor(x2)).detach().numpy()
    np.testing.assert_array_equal(ya[0], yb[0])
    # and the gradient of sample 0's input sees the other samples' gradients in training
    m.train()
    t = _leaf(x)
    g = np.zeros(shape, np.float32)
    g[1:] = 1.0 + rng.standard_normal(g[1:].shape)
    m(t).backward(md.tensor(g))
    assert np.abs(t.grad.numpy()[0]).max() > 1e-4


def test_masked_batch_norm_equals_batch_norm_on_real_tokens(impl):
    rng = np.random.default_rng(4)
    n, c, length = MASK.shape[0], 4, MASK.shape[1]
    x = rng.standard_normal((n, c, length)) * 2 + 1
    x[~np.broadcast_to(MASK[:, None, :], x.shape)] = 1e3          # padding with a value that would show
    w, b = rng.standard_normal(c), rng.standard_normal(c)
    g = rng.standard_normal(x.shape)
    masked = nn.BatchNorm1d(c).double()
    plain = nn.BatchNorm1d(c).double()
    for mod in (masked, plain):
        mod.weight.data[...] = w
        mod.bias.data[...] = b
    xt = _leaf(x)
    y = masked(xt, mask=md.tensor(MASK))
    y.backward(md.tensor(g))
    tokens = x.transpose(0, 2, 1)[MASK]                          # (T, C): the real tokens only
    tt = _leaf(tokens)
    yt = plain(tt)
    yt.backward(md.tensor(g.transpose(0, 2, 1)[MASK]))
    np.testing.assert_allclose(y.detach().numpy().transpose(0, 2, 1)[MASK], yt.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(xt.grad.numpy().transpose(0, 2, 1)[MASK], tt.grad.numpy(), atol=1e-12)
    pad = ~np.broadcast_to(MASK[:, None, :], x.shape)
    assert np.all(y.detach().numpy()[pad] == 0) and np.all(xt.grad.numpy()[pad] == 0)
    np.testing.assert_allclose(masked.weight.grad.numpy(), plain.weight.grad.numpy(), atol=1e-12)
    np.testing.assert_allclose(masked.bias.grad.numpy(), plain.bias.grad.numpy(), atol=1e-12)
    np.testing.assert_allclose(masked.running_mean.numpy(), plain.running_mean.numpy(), atol=1e-12)
    np.testing.assert_allclose(masked.running_var.numpy(), plain.running_var.numpy(), atol=1e-12)
    masked.eval()
    plain.eval()
    np.testing.assert_allclose(masked(md.tensor(x), mask=MASK).detach().numpy().transpose(0, 2, 1)[MASK],
                               plain(md.tensor(tokens)).detach().numpy(), atol=1e-12)


# running statistics ------------------------------------------------------------------------------
@pytest.mark.parametrize("momentum", [0.1, 0.3, None])
def test_running_stats_match_hand_computation(momentum, impl):
    rng = np.random.default_rng(5)
    m = nn.BatchNorm2d(3, momentum=momentum).double()
    mean, var = np.zeros(3), np.ones(3)
    batches = [rng.standard_normal((4, 3, 2, 3)) * s + s for s in (1.0, 2.0, 0.5)]
    for k, x in enumerate(batches, start=1):
        m(md.tensor(x))
        factor = 1.0 / k if momentum is None else momentum
        bm = x.mean(axis=(0, 2, 3))
        bv = x.var(axis=(0, 2, 3), ddof=1)                        # unbiased
        mean = (1 - factor) * mean + factor * bm
        var = (1 - factor) * var + factor * bv
        assert int(m.num_batches_tracked.item()) == k
        assert m.num_batches_tracked.dtype == np.int64
    np.testing.assert_allclose(m.running_mean.numpy(), mean, atol=1e-12)
    np.testing.assert_allclose(m.running_var.numpy(), var, atol=1e-12)
    m.eval()
    x = batches[0]
    np.testing.assert_allclose(m(md.tensor(x)).detach().numpy(), naive_bn(x, mean=mean, var=var), atol=1e-10)
    assert int(m.num_batches_tracked.item()) == 3                # eval does not count


def test_functional_batch_norm_updates_running_tensors_in_place():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((5, 2, 3)) + 2
    rm, rv = md.zeros(2, dtype=md.float64), md.ones(2, dtype=md.float64)
    F.batch_norm(md.tensor(x), rm, rv, training=True, momentum=0.5)
    np.testing.assert_allclose(rm.numpy(), 0.5 * x.mean(axis=(0, 2)), atol=1e-12)
    np.testing.assert_allclose(rv.numpy(), 0.5 + 0.5 * x.var(axis=(0, 2), ddof=1), atol=1e-12)


def test_track_running_stats_false_uses_batch_stats_in_eval():
    m = nn.BatchNorm1d(3, track_running_stats=False).double().eval()
    assert m.running_mean is None and m.num_batches_tracked is None
    assert "running_mean" not in m.state_dict()
    x = np.random.default_rng(7).standard_normal((6, 3)) * 3 + 1
    np.testing.assert_allclose(m(md.tensor(x)).detach().numpy(), naive_bn(x), atol=1e-10)


def test_instance_norm_running_stats_and_eval():
    rng = np.random.default_rng(8)
    m = nn.InstanceNorm1d(2, track_running_stats=True, momentum=0.2).double()
    x = rng.standard_normal((3, 2, 6)) * 2 + 1
    m(md.tensor(x))
    np.testing.assert_allclose(m.running_mean.numpy(), 0.2 * x.mean(axis=2).mean(axis=0), atol=1e-12)
    np.testing.assert_allclose(m.running_var.numpy(), 0.8 + 0.2 * x.var(axis=2, ddof=1).mean(axis=0), atol=1e-12)
    m.eval()
    np.testing.assert_allclose(m(md.tensor(x)).numpy(),
                               naive_bn(x, mean=m.running_mean.numpy(), var=m.running_var.numpy()), atol=1e-10)
    # unbatched input
    assert nn.InstanceNorm2d(2)(md.tensor(rng.standard_normal((2, 3, 3)))).shape == (2, 3, 3)


# modules: parameters, repr, errors -----------------------------------------------------------------------
def test_module_state_and_repr():
    bn = nn.BatchNorm2d(4)
    assert list(bn.state_dict()) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    assert np.all(bn.weight.detach().numpy() == 1) and np.all(bn.bias.detach().numpy() == 0)
    assert repr(bn) == "BatchNorm2d(4, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)"
    inorm = nn.InstanceNorm2d(3)
    assert inorm.weight is None and inorm.running_mean is None and list(inorm.state_dict()) == []
    assert repr(inorm) == ("InstanceNorm2d(3, eps=1e-05, momentum=0.1, affine=False, bias=False, "
                           "track_running_stats=False)")
    gn = nn.GroupNorm(2, 6)
    assert list(gn.state_dict()) == ["weight", "bias"]
    assert repr(gn) == "GroupNorm(2, 6, eps=1e-05, affine=True, bias=True)"
    assert list(nn.BatchNorm1d(3, affine=False).state_dict()) == ["running_mean", "running_var", "num_batches_tracked"]


def test_errors_name_expected_and_actual():
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training, got input size"):
        nn.BatchNorm1d(3)(md.randn(1, 3))
    nn.BatchNorm1d(3).eval()(md.randn(1, 3))                     # fine in eval
    with pytest.raises(ValueError, match=r"3 channels.*\(2, 4, 5\)"):
        nn.BatchNorm1d(3)(md.randn(2, 4, 5))
    with pytest.raises(ValueError, match="expected 4D input"):
        nn.BatchNorm2d(3)(md.randn(2, 3, 5))
    with pytest.raises(ValueError, match=r"\(N, L\) = \(2, 5\).*\(2, 4\)"):
        nn.BatchNorm1d(3)(md.randn(2, 3, 5), mask=np.ones((2, 4), bool))
    with pytest.raises(ValueError, match="divisible"):
        nn.GroupNorm(4, 6)
    with pytest.raises(ValueError, match=r"\(N, 6, \*\).*\(2, 4, 3\)"):
        nn.GroupNorm(3, 6)(md.randn(2, 4, 3))
    with pytest.raises(ValueError, match=r"weight of shape \(3,\).*\(4,\)"):
        F.batch_norm(md.randn(2, 3), None, None, md.ones(4), training=True)
    with pytest.raises(ValueError, match="spatial element"):
        F.instance_norm(md.randn(2, 3, 1))
    with pytest.raises(ValueError, match=r"4 channels.*\(2, 3, 5\)"):
        nn.InstanceNorm1d(4, affine=True)(md.randn(2, 3, 5))


# numerics ---------------------------------------------------------------------------------------------
CASES_LARGE_MEAN = [
    ("batch_norm", lambda t: F.batch_norm(t, None, None, training=True), lambda x: naive_bn(x)),
    # the same statistics through an (N*H*W, C) matrix: the (N, C) kernels of BatchNorm1d
    ("batch_norm_nc", lambda t: F.batch_norm(t.permute(0, 2, 3, 1).reshape(-1, t.shape[1]), None, None,
                                             training=True).reshape(t.shape[0], t.shape[2], t.shape[3], t.shape[1])
     .permute(0, 3, 1, 2), lambda x: naive_bn(x)),
    ("instance_norm", lambda t: F.instance_norm(t), lambda x: naive_gn(x, x.shape[1])),
    ("group_norm", lambda t: F.group_norm(t, 2), lambda x: naive_gn(x, 2)),
]


@pytest.mark.parametrize("name,op,ref", CASES_LARGE_MEAN, ids=[c[0] for c in CASES_LARGE_MEAN])
def test_large_mean_float32_is_accurate(name, op, ref, impl):
    rng = np.random.default_rng(9)
    x32 = (1e3 + 1e-2 * rng.standard_normal((8, 4, 16, 16))).astype(np.float32)
    y = op(md.tensor(x32)).numpy()
    expected = ref(x32.astype(np.float64))                      # the same rounded inputs, exact arithmetic
    assert np.abs(y - expected).max() < 1e-4, np.abs(y - expected).max()
    t = _leaf(x32)
    g = rng.standard_normal(x32.shape).astype(np.float32)
    op(t).backward(md.tensor(g))
    leaf64 = _leaf(x32.astype(np.float64))
    with implementation("reference"):
        op(leaf64).backward(md.tensor(g.astype(np.float64)))
    scale = np.abs(leaf64.grad.numpy()).max()
    assert np.abs(t.grad.numpy() - leaf64.grad.numpy()).max() < 1e-4 * scale


@pytest.mark.parametrize("norm", ["batch_norm", "group_norm", "instance_norm"])
def test_streamed_outputs_equal_stored_ones(norm, monkeypatch):
    """Outputs of _stream.STREAM_MIN_BYTES or more are written through an L1 scratch row with
    streaming stores: the same values as plain stores, forward and backward."""
    from minidl.kernels.cpu import _stream
    rng = np.random.default_rng(13)
    x = rng.standard_normal((4, 6, 8, 40)).astype(np.float32)      # rows of 320 values: long enough to stream
    g = rng.standard_normal(x.shape).astype(np.float32)
    w = rng.standard_normal(6).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)

    def run():
        if norm == "batch_norm":
            y, mean, rstd = bn_kernel.batch_norm_forward(x, w, b)
            return (y,) + tuple(bn_kernel.batch_norm_backward(g, x, mean, rstd, w))
        groups = 3 if norm == "group_norm" else 6
        y, mean, rstd = gn_kernel.group_norm_forward(x, groups, w, b)
        return (y,) + tuple(gn_kernel.group_norm_backward(g, x, mean, rstd, w, groups))

    monkeypatch.setattr(_stream, "STREAM_MIN_BYTES", 1 << 40)
    assert not _stream.should_stream(x.reshape(24, 320))
    stored = run()
    monkeypatch.setattr(_stream, "STREAM_MIN_BYTES", 0)
    assert _stream.should_stream(x.reshape(24, 320))
    streamed = run()
    for a, e in zip(streamed, stored):
        np.testing.assert_array_equal(a, e)


def test_batch_norm_channel_statistics_when_the_first_values_lie_far_off():
    """The fused (N, C, S) kernels shift a channel's one-pass sums by the mean of its first
    values; when those lie far from the rest (a first sample of padding zeros before values
    near 1e4), the channel is summed again around its mean."""
    rng = np.random.default_rng(14)
    x = (1e4 + rng.standard_normal((512, 4, 8, 8))).astype(np.float32)
    x[0] = 0
    y, mean, rstd = bn_kernel.batch_norm_forward(x)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(mean, x64.mean(axis=(0, 2, 3)), rtol=1e-7)
    np.testing.assert_allclose(1 / rstd ** 2 - 1e-5, x64.var(axis=(0, 2, 3)), rtol=1e-6)   # 5e-6 in one pass


def test_batch_norm_nc_statistics_when_the_first_rows_lie_far_off():
    """The (N, C) kernels shift their one-pass sums by the mean of a chunk's first rows; when
    those lie far from the rest (here rows of padding zeros before values near 1e4), the chunk
    is summed again around its mean, so the variance keeps float32 accuracy."""
    rng = np.random.default_rng(12)
    x = (1e4 + rng.standard_normal((8192, 16))).astype(np.float32)
    x[:16] = 0
    x[4096:4112] = 0
    mean, var, count = bn_kernel.batch_norm_stats(x)
    x64 = x.astype(np.float64)
    assert count == 8192
    np.testing.assert_allclose(mean, x64.mean(axis=0), rtol=1e-7)
    np.testing.assert_allclose(var, x64.var(axis=0), rtol=1e-6)     # 7e-6 without the second pass


@pytest.mark.parametrize("name,op,ref", CASES_LARGE_MEAN, ids=[c[0] for c in CASES_LARGE_MEAN])
def test_float16_in_float16_out(name, op, ref, impl):
    rng = np.random.default_rng(10)
    x16 = (rng.standard_normal((4, 4, 6, 6)) * 3 + 5).astype(np.float16)
    t = _leaf(x16)
    y = op(t)
    assert y.dtype == np.float16
    np.testing.assert_allclose(y.detach().numpy().astype(np.float64), ref(x16.astype(np.float64)), atol=1e-2)
    y.backward(md.ones(*y.shape, dtype=md.float16) + md.tensor(rng.standard_normal(y.shape), dtype=md.float16))
    assert t.grad.dtype == np.float16 and np.isfinite(t.grad.numpy()).all()


# PyTorch as an oracle, when installed --------------------------------------------------------------------
def _torch_pair(module_md, module_torch, x, steps=2, train=True):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    module_md.train(train)
    module_torch.train(train)
    for _ in range(steps):
        xs = x + rng.standard_normal(x.shape)
        g = rng.standard_normal(x.shape)
        a = _leaf(xs)
        ya = module_md(a)
        ya.backward(md.tensor(g))
        b = torch.tensor(xs, requires_grad=True)
        yb = module_torch(b)
        yb.backward(torch.tensor(g))
        np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), atol=1e-8)
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=1e-8)
    for name, p in module_torch.named_parameters():
        np.testing.assert_allclose(getattr(module_md, name).grad.numpy(), p.grad.numpy(), atol=1e-8)
    for name, buf in module_torch.named_buffers():
        np.testing.assert_allclose(getattr(module_md, name).numpy(), buf.numpy(), atol=1e-10)
    module_md.eval()
    module_torch.eval()
    with torch.no_grad():
        np.testing.assert_allclose(module_md(md.tensor(x)).detach().numpy(),
                                   module_torch(torch.tensor(x)).detach().numpy(), atol=1e-8)


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("momentum", [0.1, None])
def test_torch_batch_norm2d(train, momentum):
    torch = pytest.importorskip("torch")
    m = nn.BatchNorm2d(3, momentum=momentum).double()
    t = torch.nn.BatchNorm2d(3, momentum=momentum).double()
    with torch.no_grad():
        t.running_mean.copy_(torch.tensor([0.1, -0.2, 0.3]))
        t.running_var.copy_(torch.tensor([0.5, 1.5, 2.0]))
    m.running_mean.data[...] = [0.1, -0.2, 0.3]
    m.running_var.data[...] = [0.5, 1.5, 2.0]
    _torch_pair(m, t, np.random.default_rng(12).standard_normal((4, 3, 5, 3)) * 2 + 1, train=train)


def test_torch_batch_norm1d_and_group_and_instance():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(13)
    _torch_pair(nn.BatchNorm1d(4).double(), torch.nn.BatchNorm1d(4).double(), rng.standard_normal((6, 4, 3)))
    _torch_pair(nn.GroupNorm(2, 6).double(), torch.nn.GroupNorm(2, 6).double(), rng.standard_normal((3, 6, 4, 2)))
    _torch_pair(nn.InstanceNorm2d(3, affine=True, track_running_stats=True).double(),
                torch.nn.InstanceNorm2d(3, affine=True, track_running_stats=True).double(),
                rng.standard_normal((2, 3, 4, 5)))
