"""F.relu_max_pool2d: max_pool2d(relu(x)) as one op, and the zoo stacks that use it.

Forward against explicit loops and gradchecks with both implementations; the CPU kernel against
the NumPy reference (with and without the ReLU, the 2x2 fast path and the general one); the
same values and gradients as ReLU then max_pool2d, including a window with no positive value,
NaN and -inf; the errors of max_pool2d under the op's name; and the zoo's LeNet and VGG, which
fuse ReLU + max-pool (and norm + ReLU) unless a layer has hooks."""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.kernels.cpu import pooling as k_pool
from minidl.ops import pooling as pool_ops
from minidl.ops.normalization import batch_norm as bn_ops
from minidl.testing import OpSpec, check_forward, check_gradcheck, check_implementations, forward_cases, spec_id
from minidl.zoo import LeNet, fused
from minidl.zoo.vgg import VGG

# name, shape, kernel, stride, padding, dilation, ceil_mode
CASES = [
    ("k2s2", (2, 3, 6, 6), 2, 2, 0, 1, False),          # the 2x2 fast path
    ("k2s2_odd", (2, 2, 7, 5), 2, 2, 0, 1, False),      # the fast path, last row/column dropped
    ("k2s2_ceil", (1, 2, 7, 5), 2, 2, 0, 1, True),      # ceil_mode overhangs: the general loop
    ("k3s2p1", (2, 2, 7, 6), 3, 2, 1, 1, False),
    ("rect_dilated", (1, 2, 9, 7), (3, 2), (2, 1), (1, 1), (2, 1), True),
    ("overlap_s1", (1, 2, 5, 5), 3, 1, 1, 1, False),
]


def loops(x, k, s, p, d, ceil):
    """max_pool2d(relu(x)) by explicit loops over the windows (PyTorch's geometry)."""
    pair = lambda v: (v, v) if isinstance(v, int) else tuple(v)  # noqa: E731
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = pair(k), pair(s), pair(p), pair(d)
    N, C, H, W = x.shape
    OH = pool_ops.pool_output_size(H, kh, sh, ph, dh, ceil)
    OW = pool_ops.pool_output_size(W, kw, sw, pw, dw, ceil)
    out = np.full((N, C, OH, OW), -np.inf)
    r = np.maximum(x, 0)
    for oh in range(OH):
        for ow in range(OW):
            for i in range(kh):
                for j in range(kw):
                    h, w = oh * sh - ph + i * dh, ow * sw - pw + j * dw
                    if 0 <= h < H and 0 <= w < W:
                        out[:, :, oh, ow] = np.maximum(out[:, :, oh, ow], r[:, :, h, w])
    return out


def _geom(x, k, s, p, d, ceil):
    return pool_ops._geometry(md.tensor(x), k, s, p, d, ceil, "t")


SPECS = [OpSpec(name=f"relu_max_pool2d_{name}",
                op=lambda x, k=k, s=s, p=p, d=d, c=c: F.relu_max_pool2d(x, k, s, p, d, c),
                reference=lambda x, k=k, s=s, p=p, d=d, c=c: loops(x, k, s, p, d, c),
                inputs=lambda rng, shape=shape: (rng.standard_normal(shape),))
         for name, shape, k, s, p, d, c in CASES]



@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck(spec, impl):
    assert check_gradcheck(spec)


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward(spec, dtype, device, impl):
    check_forward(spec, dtype, device)


KERNEL_SPECS = [OpSpec(name=f"kernel_{name}_relu{relu}", op=None,
                       inputs=lambda rng, shape=shape: (rng.standard_normal(shape),),
                       reference=lambda x, g=(k, s, p, d, c), relu=relu: pool_ops.max_pool2d_forward_reference(
                           x, *_geom(x, *g), relu=relu),
                       implementations={"numba": lambda x, g=(k, s, p, d, c), relu=relu: k_pool.max_pool2d_forward(
                           x, *_geom(x, *g), relu=relu)})
                for name, shape, k, s, p, d, c in CASES for relu in (False, True)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("spec", KERNEL_SPECS, ids=spec_id)
def test_the_kernel_matches_the_reference_values_and_indices(spec, dtype):
    check_implementations(spec, dtype)


def _special():
    """Windows whose max is negative, zero, NaN (twice: the last one wins, as PyTorch), -inf."""
    x = np.array([[-1.0, -2.0, 0.0, -3.0, np.nan, 1.0, -np.inf, -np.inf],
                  [-0.5, -4.0, -1.0, -0.0, 2.0, np.nan, -np.inf, -np.inf],
                  [3.0, 1.0, 5.0, 5.0, -0.0, 0.0, 7.0, -1.0],
                  [2.0, 3.0, 4.0, 5.0, -0.0, -1.0, 6.0, 7.0]])
    return np.stack([x, -x])[None]          # (1, 2, 4, 8)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_and_gradients_equal_relu_then_max_pool(impl, dtype):
    rng = np.random.default_rng(3)
    for x0 in (_special().astype(dtype), rng.standard_normal((4, 3, 10, 12)).astype(dtype)):
        g = rng.standard_normal((x0.shape[0], x0.shape[1], x0.shape[2] // 2, x0.shape[3] // 2)).astype(dtype)
        results = []
        for fused_op in (True, False):
            x = md.tensor(x0, requires_grad=True)
            y = F.relu_max_pool2d(x, 2) if fused_op else F.max_pool2d(F.relu(x), 2)
            y.backward(md.tensor(g))
            results.append((y.detach().numpy(), x.grad.numpy()))
        (y1, dx1), (y2, dx2) = results
        np.testing.assert_array_equal(y1, y2)      # equal as numbers: a zero may differ in sign
        np.testing.assert_array_equal(dx1, dx2)
        assert not np.signbit(y1[y1 == 0]).any()  # relu(max) of a non-positive window is +0


def test_a_non_positive_window_sends_no_gradient_and_a_nan_window_does():
    x0 = _special()
    out, idx = k_pool.max_pool2d_forward(x0, 2, 2, 2, 2, 0, 0, 1, 1, 2, 4, relu=True)
    np.testing.assert_array_equal(out[0, 0], [[0.0, 0.0, np.nan, 0.0], [3.0, 5.0, 0.0, 7.0]])
    np.testing.assert_array_equal(idx[0, 0], [[-1, -1, 13, -1], [16, 18, -1, 22]])
    ref_out, ref_idx = pool_ops.max_pool2d_forward_reference(x0, 2, 2, 2, 2, 0, 0, 1, 1, 2, 4, relu=True)
    np.testing.assert_array_equal(out, ref_out)
    np.testing.assert_array_equal(idx[~np.isnan(out)], ref_idx[~np.isnan(out)])   # NaN: first vs last NaN


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_2x2_path_equals_the_general_window_loop_bit_for_bit(dtype, relu):
    # values drawn from a few, so windows tie, mix -0.0 and 0.0, hold infinities and one NaN or
    # several (a NaN's payload and the last NaN's index must come through too)
    rng = np.random.default_rng(7)
    nan2 = np.frombuffer(np.array(0x7FC00001 if dtype == np.float32 else 0x7FF8000000000001,
                                  np.int32 if dtype == np.float32 else np.int64).tobytes(), dtype)[0]
    values = np.array([np.nan, nan2, -np.inf, np.inf, 0.0, -0.0, 1.0, -1.0, 2.0], dtype)
    x = values[rng.integers(0, len(values), (6, 3, 8, 10))]
    x = np.concatenate([x, rng.standard_normal((6, 3, 8, 10)).astype(dtype)])
    planes = x.reshape(-1, 8, 10)
    results = []
    for two_by_two in (True, False):
        out, idx = np.empty((planes.shape[0], 4, 5), dtype), np.empty((planes.shape[0], 4, 5), np.int64)
        k_pool._max_fwd(planes, out, idx, 0, planes.shape[0], 1, 2, 2, 2, 2, 0, 0, 1, 1, relu, two_by_two)
        results.append((out, idx))
    (o1, i1), (o2, i2) = results
    bits = np.int32 if dtype == np.float32 else np.int64
    np.testing.assert_array_equal(o1.view(bits), o2.view(bits))
    np.testing.assert_array_equal(i1, i2)
    assert np.isnan(o1).any() and (o1 == 0).any()


def test_a_window_with_no_input_element_stays_minus_inf(impl):
    # a dilated window that steps over the whole input sees only padding: -inf, as max_pool2d
    x = md.tensor(np.full((1, 1, 1, 1), 2.0))
    out = F.relu_max_pool2d(x, 2, stride=1, padding=1, dilation=2).numpy()
    np.testing.assert_array_equal(out, F.max_pool2d(F.relu(x), 2, stride=1, padding=1, dilation=2).numpy())
    assert np.isneginf(out).any()


def test_unbatched_and_empty_inputs():
    x = md.tensor(np.random.default_rng(0).standard_normal((3, 6, 6)))
    np.testing.assert_array_equal(F.relu_max_pool2d(x, 2).numpy(), F.max_pool2d(F.relu(x), 2).numpy())
    assert F.relu_max_pool2d(md.zeros(0, 3, 4, 4), 2).shape == (0, 3, 2, 2)


def test_errors_name_the_op():
    with pytest.raises(ValueError, match="relu_max_pool2d: padding should be at most half"):
        F.relu_max_pool2d(md.zeros(1, 1, 4, 4), 2, padding=2)
    with pytest.raises(ValueError, match="relu_max_pool2d: expected a 3-D"):
        F.relu_max_pool2d(md.zeros(4, 4), 2)
    with pytest.raises(RuntimeError, match="relu_max_pool2d: expected an input with non-zero"):
        F.relu_max_pool2d(md.zeros(1, 0, 4, 4), 2)


# the zoo ------------------------------------------------------------------------------------------

def _count(monkeypatch, cls, name):
    calls = []
    original = getattr(cls, name).__func__
    monkeypatch.setattr(cls, name, classmethod(lambda c, *a: calls.append(a[-1] if a else None)
                                               or original(c, *a)))
    return calls


def _grads(model, x):
    model.zero_grad()
    out = model(x)
    out.backward(md.tensor(np.random.default_rng(9).standard_normal(out.shape).astype(np.float32)))
    return [out.detach().numpy()] + [p.grad.numpy() for p in model.parameters()]


# model, input shape, ReLU + max-pool pairs fused, norm + ReLU pairs fused (the pair a norm takes first)
ZOO = [(lambda: LeNet(1, 10, 28), (2, 1, 28, 28), 2, 0),
       (lambda: LeNet(1, 10, 8, norm="batch"), (3, 1, 8, 8), 0, 2),
       (lambda: VGG(in_channels=1, norm="batch"), (2, 1, 8, 8), 0, 5),
       (lambda: VGG(in_channels=1, norm="none"), (2, 1, 8, 8), 2, 0)]


@pytest.mark.parametrize("make,shape,relu_pools,norm_relus", ZOO)
def test_zoo_stacks_fuse_and_match_the_layers_run_one_by_one(monkeypatch, make, shape, relu_pools, norm_relus):
    md.manual_seed(0)
    model = make()
    x = md.tensor(np.random.default_rng(4).standard_normal(shape).astype(np.float32))
    pools = _count(monkeypatch, pool_ops.MaxPool2d, "apply")
    norms = _count(monkeypatch, bn_ops.BatchNormReLUFunction, "apply")
    fused_out = _grads(model, x)
    assert pools.count(True) == relu_pools and len(norms) == norm_relus
    monkeypatch.setattr(fused, "run", lambda stack, x: stack(x))         # the layers one by one
    pools.clear()
    for a, b in zip(fused_out, _grads(model, x)):
        np.testing.assert_array_equal(a, b)
    assert True not in pools


def test_a_hook_keeps_the_layers_apart(monkeypatch):
    md.manual_seed(0)
    model = LeNet(1, 10, 28)
    x = md.tensor(np.random.default_rng(4).standard_normal((2, 1, 28, 28)).astype(np.float32))
    pools = _count(monkeypatch, pool_ops.MaxPool2d, "apply")
    model(x)
    assert pools == [True, True]
    seen = []
    relu = model.features[2]
    assert type(relu) is nn.ReLU
    relu.register_forward_hook(lambda m, i, o: seen.append(o.shape))
    pools.clear()
    model(x)
    assert pools == [False, True] and seen == [(2, 6, 28, 28)]
    model.features.register_forward_hook(lambda m, i, o: None)                      # the stack itself
    pools.clear()
    model(x)
    assert pools == [False, False]


def test_a_pool_that_returns_indices_or_a_subclass_is_not_fused(monkeypatch):
    class MyReLU(nn.ReLU):
        pass
    x = md.tensor(np.random.default_rng(1).standard_normal((1, 2, 4, 4)))
    pools = _count(monkeypatch, pool_ops.MaxPool2d, "apply")
    out = fused.run(nn.Sequential(nn.ReLU(), nn.MaxPool2d(2, return_indices=True)), x)
    assert isinstance(out, tuple) and True not in pools
    fused.run(nn.Sequential(MyReLU(), nn.MaxPool2d(2)), x)
    assert True not in pools
    fused.run(nn.Sequential(nn.ReLU(), nn.MaxPool2d(2)), x)
    assert pools[-1] is True


def test_norm_relu_pairs_fuse_in_a_stack(monkeypatch):
    calls = _count(monkeypatch, bn_ops.BatchNormReLUFunction, "apply")
    stack = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2))
    x = md.tensor(np.random.default_rng(2).standard_normal((2, 1, 6, 6)).astype(np.float32))
    np.testing.assert_array_equal(fused.run(stack, x).detach().numpy(), stack(x).detach().numpy())
    assert len(calls) == 1
