"""autocast on the cuda device (the CUDA simulator in CI, tiny shapes): float16 GEMMs rounded as
a tensor core rounds them, PyTorch's cuda policy (layer_norm, softmax, sum in float32; float16
norm kernels), float32 gradients for float32 parameters, and the banned op."""
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


def _round16(a):
    return np.asarray(a, np.float32).astype(np.float16).astype(np.float32)


def test_linear_under_cuda_autocast_matches_rounded_float32_products():
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((3, 5)), rng.standard_normal((4, 5)), rng.standard_normal(4)
    xc = md.tensor(x.astype(np.float32), device="cuda", requires_grad=True)
    wc = md.tensor(w.astype(np.float32), device="cuda", requires_grad=True)
    bc = md.tensor(b.astype(np.float32), device="cuda", requires_grad=True)
    with md.autocast("cuda"):
        y = F.linear(xc, wc, bc)
        loss = F.cross_entropy(y, md.tensor([0, 3, 1], device="cuda"))
    assert y.dtype is md.float16 and y.device == "cuda" and loss.dtype is md.float32
    exact = _round16(x).astype(np.float64) @ _round16(w).astype(np.float64).T + _round16(b)
    got = y.cpu().float().detach().numpy()
    spacing = np.abs(np.spacing(exact.astype(np.float16))).astype(np.float64)
    assert np.all(np.abs(got - exact) <= spacing)           # float32 accumulation, one rounding
    loss.backward()
    assert wc.grad.dtype is md.float32 and bc.grad.dtype is md.float32 and xc.grad.device == "cuda"
    # the same step on the CPU gives the same gradients (up to float32 summation order)
    xs, ws, bs = (md.tensor(v.astype(np.float32), requires_grad=True) for v in (x, w, b))
    with md.autocast("cpu", dtype=md.float16):
        F.cross_entropy(F.linear(xs, ws, bs), md.tensor([0, 3, 1])).backward()
    np.testing.assert_allclose(wc.grad.cpu().numpy(), ws.grad.numpy(), rtol=2e-3, atol=2e-3)


def test_cuda_policy_runs_norms_softmax_and_sums_in_float32():
    x = md.randn(4, 8, device="cuda")
    w = md.randn(8, 8, device="cuda")
    with md.autocast("cuda"):
        h = x @ w
        assert h.dtype is md.float16
        assert F.layer_norm(h, (8,)).dtype is md.float32
        assert F.softmax(h, -1).dtype is md.float32 and h.exp().dtype is md.float32
        assert h.sum().dtype is md.float32 and h.mean().dtype is md.float16
        assert F.gelu(h.float()).dtype is md.float32 and F.relu(h).dtype is md.float16
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(h.float().sigmoid(), md.rand(4, 8, device="cuda"))


def test_float16_layer_norm_on_cuda_is_within_one_ulp():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((3, 16)) * 2 + 1).astype(np.float16)
    y = F.layer_norm(md.tensor(x, device="cuda"), (16,))
    assert y.dtype is md.float16
    xf = x.astype(np.float64)
    ref = (xf - xf.mean(-1, keepdims=True)) / np.sqrt(xf.var(-1, keepdims=True) + 1e-5)
    spacing = np.abs(np.spacing(ref.astype(np.float16))).astype(np.float64)
    assert np.all(np.abs(y.cpu().float().numpy() - ref) <= spacing)


def test_a_cuda_model_step_under_autocast():
    md.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 3)).to("cuda")
    x, t = md.randn(4, 6, device="cuda"), md.tensor([0, 1, 2, 1], device="cuda")
    with md.autocast("cuda"):
        loss = F.cross_entropy(model(x), t)
    loss.backward()
    assert all(p.grad is not None and p.grad.dtype is md.float32 for p in model.parameters())
    assert np.isfinite(loss.item())
