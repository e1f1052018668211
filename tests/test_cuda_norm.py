"""LayerNorm / RMSNorm cuda kernels (minidl/kernels/cuda/layer_norm.py) under the CUDA simulator:
against the NumPy reference directly, and through F.layer_norm / F.rms_norm against the CPU."""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl import backends

try:
    backends.get("cuda")
except RuntimeError as exc:   # pragma: no cover
    pytest.skip(f"cuda device unavailable: {exc}", allow_module_level=True)

from minidl.backends.cuda import CudaArray  # noqa: E402
from minidl.kernels.cuda import layer_norm as k  # noqa: E402
from minidl.ops.normalization.layer_norm import (layer_norm_backward_reference,  # noqa: E402
                                                 layer_norm_forward_reference)
from minidl.ops.normalization.rms_norm import rms_norm_backward_reference, rms_norm_forward_reference  # noqa: E402

from test_cuda_core import check, rnd  # noqa: E402

TOL = {np.float64: 1e-10, np.float32: 2e-5}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_layer_norm_kernels_match_reference(dtype):
    # n = 6 rows > the simulator's 4 partial blocks: a block handles several rows
    x = (rnd(6, 5) * 3 + 10).astype(dtype)   # a large mean: the two-pass variance matters
    w, b, dy = rnd(5, seed=2).astype(dtype), rnd(5, seed=3).astype(dtype), rnd(6, 5, seed=4).astype(dtype)
    d = CudaArray.from_host
    y, mean, rstd = k.layer_norm_forward(d(x), d(w), d(b), 1e-5)
    ry, rmean, rrstd = layer_norm_forward_reference(x, w, b, 1e-5)
    assert y.dtype == dtype and mean.dtype == (np.float64 if dtype == np.float64 else np.float32)
    tol = TOL[dtype]
    np.testing.assert_allclose(y.copy_to_host(), ry, atol=tol, rtol=tol)
    np.testing.assert_allclose(mean.copy_to_host(), rmean, rtol=tol)
    np.testing.assert_allclose(rstd.copy_to_host(), rrstd, rtol=tol * 10)
    dx, dw, db = k.layer_norm_backward(d(dy), d(x), mean, rstd, d(w))
    rdx, rdw, rdb = layer_norm_backward_reference(dy, x, rmean, rrstd, w)
    np.testing.assert_allclose(dx.copy_to_host(), rdx, atol=tol * 10, rtol=tol * 10)
    np.testing.assert_allclose(dw.copy_to_host(), rdw, atol=tol * 10, rtol=tol * 10)
    np.testing.assert_allclose(db.copy_to_host(), rdb, atol=tol * 10, rtol=tol * 10)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_rms_norm_kernels_match_reference(dtype):
    x, w, dy = rnd(6, 5).astype(dtype), rnd(5, seed=2).astype(dtype), rnd(6, 5, seed=4).astype(dtype)
    d = CudaArray.from_host
    y, rstd = k.rms_norm_forward(d(x), d(w), 1e-6)
    ry, rrstd = rms_norm_forward_reference(x, w, 1e-6)
    tol = TOL[dtype]
    np.testing.assert_allclose(y.copy_to_host(), ry, atol=tol, rtol=tol)
    dx, dw = k.rms_norm_backward(d(dy), d(x), rstd, d(w))
    rdx, rdw = rms_norm_backward_reference(dy, x, rrstd, w)
    np.testing.assert_allclose(dx.copy_to_host(), rdx, atol=tol * 10, rtol=tol * 10)
    np.testing.assert_allclose(dw.copy_to_host(), rdw, atol=tol * 10, rtol=tol * 10)


def test_layer_norm_function_on_cuda_matches_cpu():
    check(lambda x, w, b: F.layer_norm(x, (3, 2), w, b), rnd(2, 3, 3, 2), rnd(3, 2, seed=2), rnd(3, 2, seed=3),
          atol=1e-9)
    check(lambda x: F.layer_norm(x.transpose(0, 1), (4,)), rnd(3, 2, 4), atol=1e-9)   # non-contiguous, no affine


def test_rms_norm_function_on_cuda_matches_cpu():
    check(lambda x, w: F.rms_norm(x, (4,), w), rnd(3, 4), rnd(4, seed=2), atol=1e-9)
    check(lambda x: F.rms_norm(x, (4,)), rnd(2, 4), atol=1e-9)


def test_layer_norm_module_float32_on_cuda():
    md.manual_seed(0)
    m = nn.LayerNorm(4)
    x = rnd(3, 4).astype(np.float32)
    yc = m(md.tensor(x))
    m.to("cuda")
    yg = m(md.tensor(x, device="cuda"))
    np.testing.assert_allclose(yg.detach().cpu().numpy(), yc.detach().cpu().numpy(), atol=1e-5)
    yg.sum().backward()
    assert m.weight.grad.device == "cuda" and m.weight.grad.dtype == np.float32


def test_scale_norm_module_on_cuda_matches_cpu():
    md.manual_seed(0)
    cpu, gpu = nn.ScaleNorm(4), nn.ScaleNorm(4).to("cuda")
    x = rnd(3, 4).astype(np.float32)
    g = rnd(3, 4, seed=5).astype(np.float32)
    xc, xg = md.tensor(x, requires_grad=True), md.tensor(x, device="cuda").requires_grad_()
    cpu(xc).backward(g)
    yg = gpu(xg)
    yg.backward(md.tensor(g, device="cuda"))
    np.testing.assert_allclose(yg.detach().cpu().numpy(), cpu(xc).detach().cpu().numpy(), atol=1e-6)
    np.testing.assert_allclose(xg.grad.cpu().numpy(), xc.grad.cpu().numpy(), atol=1e-6)
    np.testing.assert_allclose(gpu.scale.grad.cpu().numpy(), cpu.scale.grad.cpu().numpy(), atol=1e-5)


def test_group_norm_on_cuda_matches_cpu():
    check(lambda x, w, b: F.group_norm(x, 2, w, b), rnd(2, 4, 3), rnd(4, seed=2), rnd(4, seed=3), atol=1e-9)
    check(lambda x, w, b: F.group_norm_relu(x, 2, w, b), rnd(2, 4, 3), rnd(4, seed=2), rnd(4, seed=3), atol=1e-9)
    check(lambda x, r, w, b: F.group_norm_add_relu(x, r, 2, w, b), rnd(2, 4, 3), rnd(2, 4, 3, seed=4), rnd(4, seed=2),
          rnd(4, seed=3), atol=1e-9)
    check(lambda x: F.group_norm(x, 1), rnd(2, 2, 2, 2), atol=1e-9)


@pytest.mark.parametrize("op", [F.batch_norm, F.batch_norm_relu,   # the last two: the references on device
                                lambda x, *a, **k: F.batch_norm_add_relu(x, x * 0.5, *a, **k)])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_on_cuda_matches_cpu_and_updates_running_stats(training, op):
    stats = {}

    def bn(x, w, b):
        rm, rv = md.tensor(np.full(3, 0.5), device=x.device), md.tensor(np.full(3, 2.0), device=x.device)
        y = op(x, rm, rv, w, b, training=training, momentum=0.3)
        stats[x.device] = (rm.cpu().numpy(), rv.cpu().numpy())
        return y
    check(bn, rnd(4, 3, 2), rnd(3, seed=2), rnd(3, seed=3), atol=1e-9)
    for a, b in zip(stats["cuda"], stats["cpu"]):
        np.testing.assert_allclose(a, b, atol=1e-12)


def test_batch_norm_module_float32_on_cuda():
    m = nn.BatchNorm2d(2)
    x = rnd(2, 2, 2, 2).astype(np.float32)
    yc = m(md.tensor(x))
    m.to("cuda")
    m.running_mean.zero_()
    with md.no_grad():
        m.running_var.fill_(1.0)
    yg = m(md.tensor(x, device="cuda"))
    np.testing.assert_allclose(yg.detach().cpu().numpy(), yc.detach().cpu().numpy(), atol=1e-5)
    assert m.running_mean.device == "cuda" and m.num_batches_tracked.device == "cuda"
    yg.sum().backward()
    assert m.weight.grad.device == "cuda"


def test_instance_norm_on_cuda_matches_cpu_with_running_stats():
    stats = {}

    def inorm(x, w, b):
        rm, rv = md.zeros(2, device=x.device, dtype=md.float64), md.ones(2, device=x.device, dtype=md.float64)
        y = F.instance_norm(x, rm, rv, w, b, use_input_stats=True, momentum=0.2)
        stats[x.device] = (rm.cpu().numpy(), rv.cpu().numpy())
        return y
    check(inorm, rnd(2, 2, 3), rnd(2, seed=2), rnd(2, seed=3), atol=1e-9)
    for a, b in zip(stats["cuda"], stats["cpu"]):
        np.testing.assert_allclose(a, b, atol=1e-12)


def test_scale_norm_on_cuda_matches_cpu():
    from minidl.ops.normalization.scale_norm import ScaleNormFunction
    check(lambda x, g: ScaleNormFunction.apply(x, g, 1e-5), rnd(3, 4), np.array([1.7]), atol=1e-9)
    tiny = rnd(2, 4) * 1e-7   # the norm is clamped to eps: no radial term
    check(lambda x: ScaleNormFunction.apply(x, 2.0, 1e-5), tiny, atol=1e-9)


def _refuse(*args, **kwargs):
    raise AssertionError("a cuda norm kernel ran although the reference was selected")


@pytest.mark.parametrize("norm", ["layer", "rms", "scale", "group", "instance", "batch", "masked_batch"])
def test_reference_setting_runs_the_reference_on_cuda(norm, monkeypatch):
    """minidl.implementation(norm="reference") holds on every device: the cuda kernels stay idle and
    the array-namespace references give the CPU's values and gradients."""
    from minidl.kernels.cuda import channel_norm, masked_batch_norm, scale_norm
    for module, names in ((k, ("norm_forward", "norm_backward")), (scale_norm, ("scale_norm_forward",
                          "scale_norm_backward")), (masked_batch_norm, ("forward", "apply", "backward")),
                          (channel_norm, ("norm_forward", "norm_backward", "batch_norm_statistics"))):
        for name in names:
            monkeypatch.setattr(module, name, _refuse)
    mask = np.array([[True, True, False], [True, True, True]])
    fns = {
        "layer": (lambda x, w, b: F.layer_norm(x, (4,), w, b), (rnd(2, 3, 4), rnd(4, seed=2), rnd(4, seed=3))),
        "rms": (lambda x, w: F.rms_norm(x, (4,), w), (rnd(3, 4), rnd(4, seed=2))),
        "scale": (lambda x: F.scale_norm(x, 1.5), (rnd(3, 4),)),
        "group": (lambda x, w, b: F.group_norm(x, 2, w, b), (rnd(2, 4, 3), rnd(4, seed=2), rnd(4, seed=3))),
        "instance": (lambda x, w, b: F.instance_norm(x, weight=w, bias=b), (rnd(2, 3, 4), rnd(3, seed=2),
                                                                              rnd(3, seed=3))),
        "batch": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), (rnd(4, 3, 2), rnd(3, seed=2),
                                                                                       rnd(3, seed=3))),
        "masked_batch": (lambda x, w, b: F.masked_batch_norm(x, md.tensor(mask, device=x.device), None, None, w, b,
                                                             training=True), (rnd(2, 3, 3), rnd(3, seed=2),
                                                                              rnd(3, seed=3))),
    }
    fn, arrays = fns[norm]
    with md.implementation(norm="reference"):
        check(fn, *arrays, atol=1e-9)
