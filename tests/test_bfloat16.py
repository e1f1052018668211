"""bfloat16 as a dtype: created, cast (round to nearest even), printed, saved and loaded, promoted
as PyTorch promotes it, reduced in float32, trained through, and accepted by the ops that accept
float16 (swept over the op declarations of the test suite)."""
import importlib

import ml_dtypes
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F

BF16 = ml_dtypes.bfloat16


def test_created_cast_and_printed():
    for t in (md.zeros(2, 3, dtype=md.bfloat16), md.ones(4, dtype="bfloat16"),
              md.tensor([1.5, -2.0], dtype=md.bfloat16), md.randn(3, dtype=md.bfloat16),
              md.full((2,), 3.0, dtype=md.bfloat16), md.arange(4.0).bfloat16()):
        assert t.dtype is md.bfloat16 and t.element_size() == 2 and t.is_floating_point()
    x = md.tensor([1.0, 1.00390625, 1.01171875, 3e38, -0.0])     # ties go to even, as ml_dtypes and PyTorch
    y = x.to(md.bfloat16)
    np.testing.assert_array_equal(y.numpy().view(np.uint16), x.numpy().astype(BF16).view(np.uint16))
    assert y.float().tolist()[:3] == [1.0, 1.0, 1.015625]
    assert repr(md.tensor([0.5, 1.2]).bfloat16()) == "tensor([0.5000, 1.2031], dtype=minidl.bfloat16)"   # not its bits
    assert md.finfo(md.bfloat16).eps == 2.0 ** -7 and md.finfo(md.bfloat16).bits == 16
    assert md.tensor([2.5]).to(md.bfloat16).to(md.float16).dtype is md.float16


def test_saved_and_loaded_in_checkpoints(tmp_path):
    md.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4)).bfloat16()
    opt = md.optim.AdamW(model.parameters(), lr=1e-2)
    model(md.randn(5, 3).bfloat16()).float().sum().backward()
    opt.step()
    path = tmp_path / "ckpt.npz"
    md.save({"model": model.state_dict(), "opt": opt.state_dict(), "x": md.tensor([1.0, 3.0]).bfloat16()}, path)
    ck = md.load(path)
    assert ck["x"].dtype is md.bfloat16 and ck["x"].float().tolist() == [1.0, 3.0]
    other = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4)).bfloat16()
    other.load_state_dict(ck["model"])
    for a, b in zip(model.parameters(), other.parameters()):
        assert b.dtype is md.bfloat16
        np.testing.assert_array_equal(a.detach().numpy().view(np.uint16), b.detach().numpy().view(np.uint16))
    md.optim.AdamW(other.parameters(), lr=1e-2).load_state_dict(ck["opt"])
    into_float32 = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4))
    into_float32.load_state_dict(ck["model"])
    assert into_float32[0].weight.dtype is md.float32


def test_forged_bfloat16_entry_is_refused(tmp_path):
    path = tmp_path / "bad.npz"
    md.save({"x": md.tensor([1.0]).bfloat16()}, path)
    data = dict(np.load(path))
    data["a0"] = np.zeros(2, np.float32)                      # bfloat16 tag over float32 bits
    np.savez(path, **data)
    with pytest.raises(md.io.CheckpointError, match="bfloat16 entry"):
        md.load(path)


def test_promotion_as_pytorch():
    b, h, f = md.ones(2).bfloat16(), md.ones(2).half(), md.ones(2)
    assert (b + b).dtype is md.bfloat16 and (b * 2.0).dtype is md.bfloat16 and (2 - b).dtype is md.bfloat16
    assert (b + f).dtype is md.float32 and (b + h).dtype is md.float32     # bfloat16 and float16: float32
    assert md.cat([b, b]).dtype is md.bfloat16 and md.where(b > 0, b, b).dtype is md.bfloat16


def test_reductions_accumulate_in_float32():
    x = md.full((4096,), 1.0, dtype=md.bfloat16)     # a bfloat16 running sum would stop at 256
    assert x.sum().item() == 4096.0 and x.sum().dtype is md.bfloat16
    assert x.mean().item() == 1.0 and x.cumsum(0)[-1].item() == 4096.0
    y = md.tensor(np.linspace(-1, 1, 1000)).bfloat16()
    np.testing.assert_allclose(y.var().item(), y.float().var().item(), rtol=1e-2)
    assert y.var().dtype is md.bfloat16


def test_trains_with_bfloat16_parameters_and_gradients():
    md.manual_seed(1)
    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 3)).bfloat16()
    opt = md.optim.SGD(model.parameters(), lr=0.1)
    x, y = md.randn(16, 4).bfloat16(), md.randint(0, 3, (16,))
    losses = []
    for _ in range(20):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        assert all(p.grad.dtype is md.bfloat16 for p in model.parameters())
        opt.step()
        losses.append(loss.item())
    assert loss.dtype is md.bfloat16 and losses[-1] < 0.8 * losses[0]


def test_layers_with_numba_kernels_run_bfloat16_and_float16():
    """The kernels Numba cannot type for 2-byte floats hand them to the NumPy reference."""
    rng = np.random.default_rng(0)
    img = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    for low in (md.bfloat16, md.float16):
        x = md.tensor(img).to(low).requires_grad_()
        for f in (lambda t: F.gelu(t), lambda t: F.gelu(t, approximate="tanh"), lambda t: F.max_pool2d(t, 2),
                  lambda t: F.avg_pool2d(t, 2), lambda t: F.softmax(t, -1), lambda t: F.silu(t)):
            y = f(x)
            assert y.dtype is low
            ref = f(md.tensor(x.detach().float().numpy()))
            np.testing.assert_allclose(y.float().detach().numpy(), ref.detach().numpy(), rtol=2e-2, atol=2e-2)
            y.float().sum().backward()
            assert x.grad.dtype is low
            x.grad = None
        e = F.embedding(md.tensor([0, 2]), md.randn(3, 4).to(low).requires_grad_())
        assert e.dtype is low


# every op the test suite declares with float16 support takes bfloat16 too ------------------------
SPEC_MODULES = ("test_ops", "test_tensor_functions_spec", "test_nn_activations", "test_nn_layers",
                "test_nn_layers_extra", "test_nn_layers_misc", "test_nn_losses", "test_nn_losses_extra",
                "test_norm_layer", "test_norm_channel", "test_nn_conv_pool", "test_nn_conv_extra", "test_attention",
                "test_linear_gelu", "test_residual_norm")


def _specs():
    out = []
    for name in SPEC_MODULES:
        module = importlib.import_module(name)
        for attr in ("SPECS", "CE_SPECS", "OTHER_SPECS", "PROB_SPECS", "CONV_SPECS", "POOL_SPECS", "KERNEL_SPECS"):
            out += [s for s in getattr(module, attr, []) if not s.implementations]
    seen, unique = set(), []
    for s in out:
        if s.name not in seen:
            seen.add(s.name)
            unique.append(s)
    return unique


def _run(spec, dtype):
    from minidl.testing.op_spec import _is_float_array, _to_tensors, _tuple
    arrays = spec.make_inputs()
    outs = _tuple(spec.op(*_to_tensors(arrays, dtype, "cpu")))
    ref = _tuple(spec.reference(*[a.astype(dtype).astype(np.float64) if _is_float_array(a) else a for a in arrays]))
    return outs, ref


SWEPT = _specs()
_HALF = {}   # spec name -> its float16 outputs, or None where float16 is not accepted


def _float16_outputs(spec):
    if spec.name not in _HALF:
        try:
            _HALF[spec.name] = _run(spec, np.float16)[0]
        except Exception:   # noqa: BLE001  (float16 not accepted)
            _HALF[spec.name] = None
    return _HALF[spec.name]


def test_the_sweep_covers_more_than_100_ops_that_take_float16():
    taking = sum(_float16_outputs(spec) is not None for spec in SWEPT)
    assert taking > 100, taking


@pytest.mark.parametrize("spec", SWEPT, ids=lambda s: s.name)
def test_an_op_that_takes_float16_takes_bfloat16(spec):
    """Same output dtypes as float16 gives (bfloat16 where it gives float16), values near the
    float64 reference of the rounded inputs. One case per op, so the workers share the sweep."""
    half = _float16_outputs(spec)
    if half is None:
        pytest.skip("float16 not accepted: nothing to ask of bfloat16")
    outs, ref = _run(spec, BF16)
    for h, o, r in zip(half, outs, ref):
        want = md.bfloat16 if h.dtype is md.float16 else h.dtype
        assert o.dtype is want, f"dtype {o.dtype} (float16 gives {h.dtype})"
        got, r = o.numpy().astype(np.float64), np.asarray(r, np.float64)
        scale = max(1.0, float(np.abs(r).max(initial=0)))
        np.testing.assert_allclose(got, r, rtol=5e-2, atol=5e-2 * scale, equal_nan=True)


def test_gemm_ops_keep_their_low_precision_inputs_for_backward():
    x = md.randn(3, 4).bfloat16().requires_grad_()
    w = md.randn(5, 4).bfloat16().requires_grad_()
    y = F.linear(x, w)
    assert y.dtype is md.bfloat16
    saved = [t for t in y._node.saved_tensors if t is not None]
    assert saved and all(t.dtype == BF16 for t in saved)     # 2 bytes kept per element, not a float32 copy
    with md.no_grad():
        x.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.float().sum().backward()
