"""md.amp.custom_fwd / custom_bwd: what a user Function's forward and backward see under autocast
(the arrays' dtypes, the autocast state, the dtype of a minidl op called inside), against
PyTorch's torch.amp.custom_fwd / custom_bwd where torch is installed."""
import warnings

import numpy as np
import pytest

import minidl as md
from minidl.autograd import Function


def _probe(a, b):
    """The dtype a minidl matmul of float32 copies of a and b gets under the current state."""
    return md.tensor(np.asarray(a, np.float32)) @ md.tensor(np.asarray(b, np.float32))


def _make(cast_inputs, seen, device_type="cpu"):
    class MatMul(Function):
        @staticmethod
        @md.amp.custom_fwd(device_type=device_type, cast_inputs=cast_inputs)
        def forward(ctx, a, b, extra):
            y = a.float() @ b.float()
            seen["fwd"] = (str(a.dtype), str(b.dtype), [str(e.dtype) for e in extra],
                           md.is_autocast_enabled("cpu"), str(md.get_autocast_dtype("cpu")), str(y.dtype))
            ctx.save_for_backward(a, b)
            return y

        @staticmethod
        @md.amp.custom_bwd(device_type=device_type)
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            seen["bwd"] = (str(g.dtype), md.is_autocast_enabled("cpu"), str(md.get_autocast_dtype("cpu")),
                           str(_probe(g, b.T).dtype))
            g32 = g.float()
            return g32 @ b.float().T, a.float().T @ g32, None
    return MatMul


def _run(cast_inputs, enabled, seen, rng):
    x = md.tensor(rng.standard_normal((3, 4)).astype(np.float16), requires_grad=True)
    w = md.tensor(rng.standard_normal((4, 2)).astype(np.float32), requires_grad=True)
    extra = [md.randn(2), md.randn(2, dtype=md.float64), md.arange(3)]
    with md.autocast("cpu", dtype=md.bfloat16, enabled=enabled):
        y = _make(cast_inputs, seen).apply(x, w, extra)
    y.float().sum().backward()
    return x, w, y


def _name(dtype):
    return None if dtype is None else str(dtype).replace("torch.", "").replace("minidl.", "")


def _clean(seen):
    return {k: tuple(_name(v) if isinstance(v, str) else [_name(e) for e in v] if isinstance(v, list) else v
                     for v in vals) for k, vals in seen.items()}


CASES = [(None, True), (None, False), ("float32", True), ("float32", False), ("float16", True)]


@pytest.mark.parametrize("cast,enabled", CASES)
def test_what_forward_and_backward_see(cast, enabled):
    seen = {}
    x, w, y = _run(None if cast is None else getattr(md, cast), enabled, seen, np.random.default_rng(0))
    fwd, bwd = _clean(seen)["fwd"], _clean(seen)["bwd"]
    casting = cast is not None and enabled
    # the arrays: cast (floating, not float64) only inside an enabled region with cast_inputs
    assert fwd[:3] == ((cast, cast, [cast, "float64", "int64"]) if casting else
                       ("float16", "float32", ["float32", "float64", "int64"]))
    # the state: forward under the call's state, or with autocast off where it casts; backward as forward
    used = enabled and cast is None
    assert fwd[3] is used and bwd[1] is used
    assert fwd[5] == bwd[3] == ("bfloat16" if used else "float32")
    assert _name(y.dtype) == fwd[5]
    # gradients come back in each input's dtype
    assert x.grad.dtype is md.float16 and w.grad.dtype is md.float32


@pytest.mark.parametrize("cast,enabled", CASES)
def test_matches_torch(cast, enabled):
    torch = pytest.importorskip("torch")
    seen = {}
    x, w, y = _run(None if cast is None else getattr(md, cast), enabled, seen, np.random.default_rng(1))
    tseen = {}

    class TorchMatMul(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type="cpu", cast_inputs=None if cast is None else getattr(torch, cast))
        def forward(ctx, a, b, extra):
            y = a.float() @ b.float()
            tseen["fwd"] = (str(a.dtype), str(b.dtype), [str(e.dtype) for e in extra],
                            torch.is_autocast_enabled("cpu"), str(torch.get_autocast_dtype("cpu")), str(y.dtype))
            ctx.save_for_backward(a, b)
            return y

        @staticmethod
        @torch.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            tseen["bwd"] = (str(g.dtype), torch.is_autocast_enabled("cpu"), str(torch.get_autocast_dtype("cpu")),
                            str((g.float() @ b.float().T).dtype))
            g32 = g.float()
            return g32 @ b.float().T, a.float().T @ g32, None

    tx = torch.tensor(x.detach().float().numpy()).half().requires_grad_()
    tw = torch.tensor(w.detach().numpy()).requires_grad_()
    extra = [torch.randn(2), torch.randn(2, dtype=torch.float64), torch.arange(3)]
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
        ty = TorchMatMul.apply(tx, tw, extra)
    ty.float().sum().backward()
    assert _clean(seen) == _clean(tseen)
    assert _name(y.dtype) == _name(ty.dtype)
    assert _name(x.grad.dtype) == _name(tx.grad.dtype) and _name(w.grad.dtype) == _name(tw.grad.dtype)
    np.testing.assert_allclose(y.float().detach().numpy(), ty.float().detach().numpy(), rtol=1e-2, atol=1e-2)


def test_cast_inputs_gradient_is_the_float32_gradient_rounded_to_the_input_dtype():
    seen = {}
    rng = np.random.default_rng(2)
    x, w, _ = _run(md.float32, True, seen, rng)
    g = np.ones((3, 2), np.float32)
    np.testing.assert_array_equal(x.grad.numpy(), (g @ w.detach().numpy().T).astype(np.float16))
    np.testing.assert_array_equal(w.grad.numpy(), x.detach().float().numpy().T @ g)


def test_another_devices_region_casts_nothing():
    seen = {}
    MatMul = _make(md.float32, seen, device_type="cuda")
    x = md.tensor(np.ones((2, 2), np.float16), requires_grad=True)
    with md.autocast("cpu", dtype=md.bfloat16):      # a cpu region: custom_fwd(device_type="cuda") leaves it
        y = MatMul.apply(x, md.ones(2, 2), [])
    assert _clean(seen)["fwd"][:2] == ("float16", "float32") and seen["fwd"][3] is True
    y.float().sum().backward()
    assert seen["bwd"][1] is False        # forward's cuda state (off); the cpu region has ended
    assert x.grad.dtype is md.float16


def test_decorator_forms_and_errors():
    def fwd(ctx, a):
        return a * 2

    wrapped = md.amp.custom_fwd(fwd, device_type="cpu")
    assert wrapped.__name__ == "fwd" and md.amp.custom_fwd(device_type="cpu")(fwd).__name__ == "fwd"
    assert md.amp.custom_bwd(fwd, device_type="cpu").__name__ == "fwd"
    with pytest.raises(TypeError, match="device_type"):
        md.amp.custom_fwd(fwd)
    with pytest.raises(TypeError, match="device_type"):
        md.amp.custom_bwd(fwd)
    with pytest.raises(ValueError, match="Expected `device_type` of type `str`, got: `<class 'int'>`"):
        md.amp.custom_fwd(device_type=0)
    with pytest.raises(ValueError, match="Expected `device_type` of type `str`"):
        md.amp.custom_bwd(device_type=None)
    with pytest.raises(RuntimeError, match="unsupported autocast device_type 'tpu'"):
        md.amp.custom_fwd(device_type="tpu")
    with pytest.raises(TypeError, match="floating-point dtype"):
        md.amp.custom_fwd(device_type="cpu", cast_inputs=md.int32)

    class NoFwd(Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        @md.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            return g * 2

    with pytest.raises(AttributeError, match="not decorated with custom_fwd"):
        NoFwd.apply(md.randn(2, requires_grad=True)).sum().backward()


def test_deprecated_cuda_spellings():
    def fwd(ctx, a):
        return a

    with pytest.warns(FutureWarning, match=r"minidl.cuda.amp.custom_fwd\(args...\)` is deprecated"):
        f = md.cuda.amp.custom_fwd(cast_inputs=md.float32)(fwd)
    with pytest.warns(FutureWarning, match=r"minidl.cuda.amp.custom_bwd\(args...\)` is deprecated"):
        md.cuda.amp.custom_bwd(fwd)
    assert f.__name__ == "fwd"
    with pytest.raises(AttributeError):
        md.cpu.amp.custom_fwd                 # torch.cpu.amp has none either
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        md.amp.custom_fwd(device_type="cuda")(fwd)   # the md.amp spelling does not warn
