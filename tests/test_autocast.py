"""md.autocast as a region: context manager and decorator, nesting, per-thread state, the weight
cache, float32 gradients for float32 parameters, the state functions, and what bad settings get
(PyTorch's warnings and errors)."""
import threading
import warnings

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F


def _linear(seed=0):
    md.manual_seed(seed)
    return nn.Linear(6, 4)


def test_context_manager_and_md_amp_spelling():
    m, x = _linear(), md.randn(3, 6)
    assert m(x).dtype is md.float32
    with md.autocast("cpu"):
        assert m(x).dtype is md.bfloat16                 # the CPU's default low dtype
        assert md.is_autocast_enabled("cpu") and md.get_autocast_dtype("cpu") is md.bfloat16
    with md.amp.autocast(device_type="cpu", dtype=md.float16):
        assert m(x).dtype is md.float16
    assert not md.is_autocast_enabled("cpu") and m(x).dtype is md.float32
    assert md.get_autocast_dtype("cuda") is md.float16 and not md.is_autocast_enabled()


def test_decorator_and_exceptions_restore_the_state():
    m, x = _linear(), md.randn(3, 6)

    @md.autocast("cpu", dtype=md.float16)
    def forward(inp):
        return m(inp)

    assert forward(x).dtype is md.float16
    assert forward.__name__ == "forward" and not md.is_autocast_enabled("cpu")
    with pytest.raises(ZeroDivisionError):
        with md.autocast("cpu"):
            1 / 0
    assert not md.is_autocast_enabled("cpu") and md.get_autocast_dtype("cpu") is md.bfloat16
    with pytest.raises(TypeError, match="requires a callable"):
        md.autocast("cpu")(3)


def test_nesting_disables_and_changes_dtype_inside_and_restores_outside():
    m, x = _linear(), md.randn(3, 6)
    with md.autocast("cpu"):
        with md.autocast("cpu", enabled=False):
            assert m(x).dtype is md.float32
            with md.autocast("cpu", dtype=md.float16):
                assert m(x).dtype is md.float16
            assert m(x).dtype is md.float32
        assert m(x).dtype is md.bfloat16
        with md.autocast("cpu", dtype=md.float16):
            assert m(x).dtype is md.float16
        assert m(x).dtype is md.bfloat16 and md.get_autocast_dtype("cpu") is md.bfloat16


def test_state_is_per_thread():
    m, x = _linear(), md.randn(3, 6)
    seen = {}

    def worker():
        seen["enabled"] = md.is_autocast_enabled("cpu")
        seen["dtype"] = m(x).dtype
        with md.autocast("cpu", dtype=md.float16):
            seen["inside"] = m(x).dtype

    with md.autocast("cpu"):
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        assert m(x).dtype is md.bfloat16          # the worker's own region changed nothing here
    assert seen == {"enabled": False, "dtype": md.float32, "inside": md.float16}


def test_gradients_reach_float32_parameters_in_float32():
    m, x = _linear(), md.randn(3, 6, requires_grad=True)
    with md.autocast("cpu"):
        h = m(x)
        loss = F.cross_entropy(h, md.tensor([0, 1, 3]))
    assert h.dtype is md.bfloat16 and loss.dtype is md.float32
    loss.backward()
    assert m.weight.dtype is md.float32 and m.weight.grad.dtype is md.float32
    assert m.bias.grad.dtype is md.float32 and x.grad.dtype is md.float32
    # the same gradients as float32 autograd of the same bfloat16 rounding, within bfloat16's precision
    w = m.weight.detach().clone().requires_grad_()
    b = m.bias.detach().clone().requires_grad_()
    ref = F.cross_entropy(F.linear(x.detach(), w, b), md.tensor([0, 1, 3]))
    ref.backward()
    np.testing.assert_allclose(m.weight.grad.numpy(), w.grad.numpy(), rtol=0.05, atol=0.02)
    np.testing.assert_allclose(loss.item(), ref.item(), rtol=0.02)


def test_weight_cast_is_cached_in_a_region_and_dropped_at_the_outermost_exit():
    m, x = _linear(), md.randn(3, 6)
    state = md.autograd.autocast_state.state
    with md.autocast("cpu"):
        m(x)
        assert len(state.cache) == 2                     # weight and bias, each rounded once
        casts = {k: v[2] for k, v in state.cache.items()}
        m(x)
        with md.autocast("cpu"):                         # an inner region shares the cache
            m(x)
        assert {k: v[2] for k, v in state.cache.items()} == casts
        assert len(state.cache) == 2
    assert state.cache == {}
    with md.autocast("cpu", cache_enabled=False):
        m(x)
        assert state.cache == {}
    assert md.is_autocast_cache_enabled()


def test_cache_is_renewed_after_an_in_place_update_and_per_grad_mode():
    m, x = _linear(), md.randn(3, 6)
    with md.autocast("cpu"):
        before = m(x)
        with md.no_grad():
            m.weight.mul_(2.0)
            frozen = m(x)
        assert not frozen.requires_grad
        after = m(x)          # grad mode again: a cast with history, of the updated weight
        assert after.requires_grad
        np.testing.assert_allclose(after.float().detach().numpy(), frozen.float().detach().numpy())
        assert not np.allclose(after.float().detach().numpy(), before.float().detach().numpy())
    after.float().sum().backward()
    assert m.weight.grad is not None


def test_inputs_that_are_not_cast():
    x64 = md.randn(3, 3, dtype=md.float64)
    with md.autocast("cpu"):
        assert (x64 @ x64).dtype is md.float64            # float64 is never cast, as in PyTorch
        i = md.arange(6).reshape(2, 3)
        assert (i @ i.T).dtype is md.int64
        with pytest.raises(RuntimeError, match="float64 and bfloat16"):
            x64 @ md.randn(3, 3)


def test_unsupported_dtype_warns_and_disables_like_pytorch():
    m, x = _linear(), md.randn(3, 6)
    for dtype in (md.float32, md.float64):
        with pytest.warns(UserWarning, match="In CPU autocast, but the target dtype is not supported. "
                                             "Disabling autocast."):
            region = md.autocast("cpu", dtype=dtype)
        with region:
            assert not md.is_autocast_enabled("cpu") and m(x).dtype is md.float32
    with pytest.raises(ValueError, match="Expected `device_type` of type `str`"):
        md.autocast(3)
    with pytest.raises(RuntimeError, match="unsupported autocast device_type 'tpu'"):
        md.autocast("tpu")
    with pytest.raises(TypeError):
        md.autocast("cpu", dtype="complex64")


def test_deprecated_device_spellings():
    m, x = _linear(), md.randn(3, 6)
    with pytest.warns(FutureWarning, match="minidl.cpu.amp.autocast"):
        region = md.cpu.amp.autocast()
    with region:
        assert m(x).dtype is md.bfloat16
    with pytest.warns(FutureWarning, match="minidl.cuda.amp.autocast"):
        md.cuda.amp.autocast(enabled=False)


def test_cuda_region_without_a_gpu_warns_and_disables(monkeypatch):
    monkeypatch.setattr(md.cuda, "is_available", lambda: False)
    with pytest.warns(UserWarning, match="CUDA is not available. Disabling autocast."):
        region = md.autocast("cuda")
    with region:
        assert not md.is_autocast_enabled("cuda")


def test_cuda_region_accepts_bfloat16(monkeypatch):
    monkeypatch.setattr(md.cuda, "is_available", lambda: True)
    with md.autocast("cuda", dtype=md.bfloat16):
        assert md.is_autocast_enabled("cuda") and md.get_autocast_dtype("cuda") is md.bfloat16


def test_cuda_region_refuses_a_non_floating_dtype_and_takes_float32(monkeypatch):
    monkeypatch.setattr(md.cuda, "is_available", lambda: True)
    with pytest.raises(RuntimeError, match="expected a floating-point dtype for device_type 'cuda'.*got .*int32"):
        md.autocast("cuda", dtype=md.int32)
    with md.autocast("cuda", dtype=md.float32):
        assert md.get_autocast_dtype("cuda") is md.float32


def test_a_cuda_region_leaves_cpu_ops_alone(monkeypatch):
    monkeypatch.setattr(md.cuda, "is_available", lambda: True)
    m, x = _linear(), md.randn(3, 6)
    with md.autocast("cuda"):
        assert md.is_autocast_enabled("cuda") and not md.is_autocast_enabled("cpu")
        assert m(x).dtype is md.float32


def test_state_functions():
    assert md.autocast_increment_nesting() == 1 and md.autocast_decrement_nesting() == 0
    md.set_autocast_dtype("cpu", md.float16)
    try:
        assert md.get_autocast_dtype("cpu") is md.float16
        with md.autocast("cpu"):                              # dtype=None: the thread's setting
            assert md.get_autocast_dtype("cpu") is md.float16
    finally:
        md.set_autocast_dtype("cpu", md.bfloat16)
    md.set_autocast_enabled("cpu", True)
    try:
        assert _linear()(md.randn(2, 6)).dtype is md.bfloat16
    finally:
        md.set_autocast_enabled("cpu", False)
    assert _linear()(md.randn(2, 6)).dtype is md.float32
    md.set_autocast_cache_enabled(False)
    md.set_autocast_cache_enabled(True)
    md.clear_autocast_cache()
    with pytest.raises(RuntimeError, match="unsupported autocast device_type"):
        md.is_autocast_enabled("tpu")


def test_binary_cross_entropy_rule_on_the_cpu_is_float32():
    p = md.rand(4, 3)
    with md.autocast("cpu"):
        assert F.binary_cross_entropy(p.to(md.bfloat16), md.rand(4, 3)).dtype is md.float32


def test_without_a_region_nothing_is_cast_and_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = _linear()
        y = m(md.randn(2, 6))
    assert y.dtype is md.float32 and not md.autograd.autocast_state.state.on


def test_ops_run_the_plain_apply_once_no_thread_has_autocast_on():
    from minidl.autograd import op_function
    assert op_function.Function.__dict__["apply"].__func__ is op_function._plain_apply
    with md.autocast("cpu"):
        assert op_function.Function.__dict__["apply"].__func__ is op_function._apply_under_autocast
        with md.autocast("cpu", enabled=False):
            assert _linear()(md.randn(2, 6)).dtype is md.float32
    assert op_function.Function.__dict__["apply"].__func__ is op_function._plain_apply


def test_linear_keeps_its_low_precision_input_for_backward_under_autocast():
    m, x = _linear(), md.randn(3, 6, requires_grad=True)
    with md.autocast("cpu"):
        y = m(x)
    saved = [t for t in y._node.saved_tensors if t is not None]
    assert saved and all(md.tensor(t).dtype is md.bfloat16 for t in saved)   # 2 bytes per element kept


def test_per_device_amp_namespaces():
    with pytest.warns(FutureWarning, match="minidl.cpu.amp.GradScaler"):
        scaler = md.cpu.amp.GradScaler()
    assert isinstance(scaler, md.amp.GradScaler)
    assert md.cuda.amp.autocast is not md.cpu.amp.autocast
    with pytest.raises(AttributeError):
        md.cpu.amp.no_such_name


def test_recurrent_layers_under_autocast_train_float32_weights():
    md.manual_seed(0)
    lin, lstm = nn.Linear(5, 4), nn.LSTM(4, 3, num_layers=2, batch_first=True, bidirectional=True)
    with md.autocast("cpu"):
        out, (h, c) = lstm(lin(md.randn(2, 6, 5)))
        loss = out.float().pow(2).mean()
    assert out.dtype is h.dtype is c.dtype is md.bfloat16
    loss.backward()
    grads = [p.grad for p in lstm.parameters()]
    assert all(g is not None and g.dtype is md.float32 and np.isfinite(g.numpy()).all() for g in grads)


def test_signature_and_warning_text_match_pytorch():
    torch = pytest.importorskip("torch")
    import inspect
    ours = inspect.signature(md.autocast.__init__).parameters
    theirs = inspect.signature(torch.autocast.__init__).parameters
    assert [(p.name, p.default) for p in ours.values()] == [(p.name, p.default) for p in theirs.values()]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.autocast("cpu", dtype=torch.float32)
        md.autocast("cpu", dtype=md.float32)
    texts = [str(w.message) for w in caught if "autocast" in str(w.message)]
    assert len(texts) == 2 and texts[1] == texts[0].replace("torch.", "minidl.")
