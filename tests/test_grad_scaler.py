"""md.amp.GradScaler: the scale trajectory, skipped steps, unscaling, errors and state, on the CPU.

A scripted sequence of "backward passes" writes chosen gradients (finite, inf or NaN) straight
into ``.grad``; the same script runs against PyTorch's CPU GradScaler where torch is installed
and must give the same scales, growth trackers, unscaled gradients and parameters, bit for bit.
"""
import warnings

import numpy as np
import pytest

import minidl as md
from minidl.amp.grad_scaler import GradScaler
from minidl.kernels.cpu import grad_scaling

INF, NAN = float("inf"), float("nan")

# (gradient values of the step, unscale_ explicitly first?); growth_interval 3 below
SCRIPT = [
    ([1.0, -2.0, 3.0], False),
    ([INF, 0.5, 1.0], False),          # skipped, backs off
    ([0.25, 1e-3, -7.0], True),
    ([1.0, 2.0, 3.0], False),
    ([4.0, 5.0, 6.0], False),          # third clean step in a row: grows
    ([NAN, 1.0, 1.0], True),           # skipped
    ([-INF, 1.0, 1.0], False),         # skipped again
    ([3e4, -1e-7, 0.1], False),
    ([1.0, 1.0, 1.0], False),
    ([2.0, 2.0, 2.0], False),          # grows
    ([1.0, 1.0, 0.5], False),
]


def _run_script(lib, scaler, script=SCRIPT, dtype="float32"):
    """Each step: gradients set to the scripted values, optionally unscale_, step, update. Returns
    per step (scale after update, growth tracker, unscaled gradient, parameter after step)."""
    w = lib.nn.Parameter(lib.tensor(np.array([0.5, -0.5, 1.0], dtype=dtype)))
    opt = lib.optim.SGD([w], lr=0.1)
    scaler.scale(lib.tensor(1.0))      # the first scale() fixes S (lazily, as PyTorch)
    out = []
    for values, explicit in script:
        opt.zero_grad()
        w.grad = lib.tensor(np.array(values, dtype=dtype))
        if explicit:
            scaler.unscale_(opt)
        before = w.detach().numpy().copy()
        scaler.step(opt)
        grad = w.grad.numpy().copy()
        scaler.update()
        after = w.detach().numpy().copy()
        out.append((scaler.get_scale(), scaler._get_growth_tracker(), grad, after, not np.array_equal(before, after)))
    return out


def test_scale_trajectory_and_skips_follow_the_rule():
    got = _run_script(md, GradScaler("cpu", init_scale=1024.0, growth_interval=3))
    scales = [s for s, *_ in got]
    assert scales == [1024, 512, 512, 512, 1024, 512, 256, 256, 256, 512, 512]
    assert [t for _, t, *_ in got] == [1, 0, 1, 2, 0, 0, 0, 1, 2, 0, 1]
    w = np.array([0.5, -0.5, 1.0], np.float32)
    assert [o[4] for o in got] == [bool(np.isfinite(v).all()) for v, _ in SCRIPT]
    for (values, _), (s, _, grad, param, _), prev_scale in zip(SCRIPT, got, [1024.0] + scales[:-1]):
        unscaled = np.array(values, np.float32) * np.float32(1 / prev_scale)
        np.testing.assert_array_equal(grad, unscaled)   # unscaled in place, inf/NaN included
        if np.isfinite(values).all():
            w = w - np.float32(0.1) * unscaled
        np.testing.assert_allclose(param, w, rtol=1e-6)   # skipped steps leave the parameter alone


def test_trajectory_equals_pytorch_bit_for_bit():
    torch = pytest.importorskip("torch")
    for kw in ({"init_scale": 1024.0, "growth_interval": 3},
               {"init_scale": 3.7, "growth_factor": 1.7, "backoff_factor": 0.3, "growth_interval": 2},
               {"init_scale": 2.0 ** 127, "growth_interval": 1}):           # growth would reach inf: S stays
        for dtype in ("float32", "float64"):
            ours = _run_script(md, GradScaler("cpu", **kw), dtype=dtype)
            theirs = _run_script(torch, torch.amp.GradScaler("cpu", **kw), dtype=dtype)
            assert [o[4] for o in ours] == [o[4] for o in theirs]     # the same steps skipped
            for (s1, t1, g1, w1, _), (s2, t2, g2, w2, _) in zip(ours, theirs):
                assert s1 == s2 and t1 == t2
                np.testing.assert_array_equal(g1, g2)
                # SGD's own rounding (not the scaler's) differs by an ulp now and then
                np.testing.assert_allclose(w1, w2, rtol=1e-12 if dtype == "float64" else 1e-5)


def test_two_optimizers_skip_separately_and_back_off_once():
    def run(lib, scaler):
        a = lib.nn.Parameter(lib.tensor([1.0, 2.0]))
        b = lib.nn.Parameter(lib.tensor([3.0]))
        oa, ob = lib.optim.SGD([a], lr=1.0), lib.optim.SGD([b], lr=1.0)
        scaler.scale(lib.tensor(1.0))
        a.grad, b.grad = lib.tensor([2.0, 4.0]), lib.tensor([INF])
        scaler.step(oa)
        scaler.step(ob)
        scaler.update()
        return a.detach().numpy(), b.detach().numpy(), scaler.get_scale()
    a, b, s = run(md, GradScaler("cpu", init_scale=2.0))
    np.testing.assert_array_equal(a, [0.0, 0.0])   # stepped with grads / 2
    np.testing.assert_array_equal(b, [3.0])        # skipped
    assert s == 1.0
    torch = pytest.importorskip("torch")
    ta, tb, ts = run(torch, torch.amp.GradScaler("cpu", init_scale=2.0))
    np.testing.assert_array_equal(a, ta)
    np.testing.assert_array_equal(b, tb)
    assert s == ts


def test_scale_multiplies_tensors_and_nested_sequences():
    scaler = GradScaler("cpu", init_scale=8.0)
    x = md.tensor([1.0, 2.0], requires_grad=True)
    y = scaler.scale(x * 1)
    assert y.dtype == md.float32 and y.tolist() == [8.0, 16.0]
    nested = scaler.scale([x, (x * 2, [x])])
    assert isinstance(nested, list) and isinstance(nested[1], tuple) and isinstance(nested[1][1], list)
    assert nested[1][0].tolist() == [16.0, 32.0] and nested[1][1][0].tolist() == [8.0, 16.0]
    assert [t.tolist() for t in scaler.scale(iter([x]))] == [[8.0, 16.0]]
    with pytest.raises(ValueError, match="outputs must be a Tensor or an iterable of Tensors"):
        scaler.scale([x, 3.0])
    # a 0-d float16 loss times the float32 scale is float32 (PyTorch's promotion), so it cannot overflow
    half = md.tensor(np.float16(4.0))
    assert GradScaler("cpu").scale(half).dtype == md.float32
    assert GradScaler("cpu", init_scale=8.0).scale(md.ones(2, dtype=md.float16)).dtype == md.float16
    y.sum().backward()
    assert x.grad.tolist() == [8.0, 8.0]


def test_scaled_backward_then_step_equals_the_unscaled_step():
    md.manual_seed(0)
    lin = md.nn.Linear(4, 3)
    ref = md.nn.Linear(4, 3)
    ref.load_state_dict(lin.state_dict())
    x = md.randn(5, 4)
    opt, ref_opt = md.optim.SGD(lin.parameters(), lr=0.5), md.optim.SGD(ref.parameters(), lr=0.5)
    scaler = GradScaler("cpu", init_scale=2.0 ** 10)
    scaler.scale(lin(x).square().mean()).backward()
    scaler.unscale_(opt)
    norm = md.nn.utils.clip_grad_norm_(lin.parameters(), 1e9)    # clipping sees the true gradients
    ref(x).square().mean().backward()
    ref_norm = md.nn.utils.clip_grad_norm_(ref.parameters(), 1e9)
    np.testing.assert_allclose(float(norm), float(ref_norm), rtol=1e-6)
    scaler.step(opt)
    ref_opt.step()
    for p, q in zip(lin.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-6, atol=1e-7)


def test_step_returns_the_optimizers_result_or_none_when_skipped():
    class Counting(md.optim.SGD):
        def step(self, closure=None):
            super().step()
            return "stepped"
    w = md.nn.Parameter(md.ones(2))
    opt = Counting([w], lr=0.1)
    scaler = GradScaler("cpu")
    scaler.scale(md.tensor(1.0))
    w.grad = md.ones(2)
    assert scaler.step(opt) == "stepped"
    scaler.update()
    w.grad = md.tensor([1.0, NAN])
    assert scaler.step(opt) is None
    scaler.update()
    assert scaler.get_scale() == 2.0 ** 15


def test_parameters_without_gradients_are_left_alone():
    a, b = md.nn.Parameter(md.ones(2)), md.nn.Parameter(md.ones(2))
    opt = md.optim.SGD([a, b], lr=1.0)
    scaler = GradScaler("cpu", init_scale=4.0)
    scaler.scale(md.tensor(1.0))
    a.grad = md.tensor([4.0, 8.0])
    scaler.step(opt)
    assert a.tolist() == [0.0, -1.0] and b.tolist() == [1.0, 1.0] and b.grad is None


def test_the_usage_errors_are_pytorchs():
    w = md.nn.Parameter(md.ones(2))
    opt = md.optim.SGD([w], lr=0.1)
    scaler = GradScaler("cpu")
    fix = "did not use scaler.scale"
    for call in (lambda: scaler.step(opt), lambda: scaler.unscale_(opt), lambda: scaler.update()):
        with pytest.raises(AssertionError, match=fix):
            call()
    scaler.scale(md.tensor(1.0))
    with pytest.raises(AssertionError, match="No inf checks were recorded prior to update."):
        scaler.update()
    w.grad = md.ones(2)
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match=r"unscale_\(\) has already been called on this optimizer since the "
                                           r"last update\(\)\."):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match=r"unscale_\(\) is being called after step\(\)\."):
        scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match=r"step\(\) has already been called since the last update\(\)\."):
        scaler.step(opt)
    scaler.update()
    with pytest.raises(RuntimeError, match="Closure use is not currently supported if GradScaler is enabled."):
        scaler.step(opt, closure=lambda: None)
    with pytest.raises(AssertionError, match="The growth factor must be > 1.0."):
        GradScaler("cpu", growth_factor=1.0)
    with pytest.raises(AssertionError, match="The backoff factor must be < 1.0."):
        GradScaler("cpu", backoff_factor=1.0)
    for bad in ({"init_scale": 0.0}, {"init_scale": float("nan")}, {"growth_interval": 0},
                {"growth_interval": 2.5}):
        with pytest.raises(ValueError, match="GradScaler: expected"):
            GradScaler("cpu", **bad)


def test_float16_gradients_are_refused():
    w = md.nn.Parameter(md.ones(2, dtype=md.float16))
    opt = md.optim.SGD([w], lr=0.1)
    scaler = GradScaler("cpu")
    scaler.scale(md.tensor(1.0))
    w.grad = md.ones(2, dtype=md.float16)
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients."):
        scaler.step(opt)
    assert w.tolist() == [1.0, 1.0]


def test_bfloat16_gradients_unscale_through_float32():
    w = md.nn.Parameter(md.ones(3, dtype=md.bfloat16))
    opt = md.optim.SGD([w], lr=0.0)
    scaler = GradScaler("cpu", init_scale=3.0)
    scaler.scale(md.tensor(1.0))
    w.grad = md.tensor([3.0, 6.0, 1.0]).to(md.bfloat16)
    scaler.unscale_(opt)
    expected = (np.array([3.0, 6.0, 1.0], np.float32) * np.float32(1 / 3.0)).astype(w.grad.numpy().dtype)
    np.testing.assert_array_equal(w.grad.numpy(), expected)


def test_update_with_a_new_scale():
    w = md.nn.Parameter(md.ones(1))
    opt = md.optim.SGD([w], lr=0.1)
    scaler = GradScaler("cpu")
    scaler.scale(md.tensor(1.0))
    scaler.update(new_scale=3.0)
    assert scaler.get_scale() == 3.0
    scaler.update(md.tensor([5.0]))
    assert scaler.get_scale() == 5.0 and scaler._get_growth_tracker() == 0
    for bad in (md.tensor([1.0, 2.0]), md.tensor([1.0], requires_grad=True), "2"):
        with pytest.raises(AssertionError, match="new_scale should be a float or a 1-element"):
            scaler.update(bad)
    w.grad = md.ones(1)
    scaler.step(opt)
    scaler.update(7.0)       # a manual scale also ends the iteration
    w.grad = md.ones(1)
    scaler.step(opt)


def test_disabled_scaler_is_a_pass_through():
    w = md.nn.Parameter(md.ones(2))
    opt = md.optim.SGD([w], lr=1.0)
    scaler = GradScaler("cpu", enabled=False)
    loss = md.tensor(2.0)
    assert scaler.scale(loss) is loss and not scaler.is_enabled()
    w.grad = md.ones(2)
    scaler.unscale_(opt)
    scaler.step(opt)
    scaler.update()
    assert w.tolist() == [0.0, 0.0] and scaler.get_scale() == 1.0 and scaler.state_dict() == {}
    scaler.load_state_dict({})    # a no-op when disabled


def test_cuda_default_without_a_gpu_warns_and_disables(monkeypatch):
    from minidl import cuda
    monkeypatch.setattr(cuda, "is_available", lambda: False)
    with pytest.warns(UserWarning, match="GradScaler is enabled, but CUDA is not available.  Disabling."):
        scaler = GradScaler()
    assert not scaler.is_enabled()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not GradScaler(enabled=False).is_enabled()


def test_getters_and_setters():
    s = GradScaler("cpu", init_scale=16.0, growth_factor=3.0, backoff_factor=0.25, growth_interval=7)
    assert (s.get_scale(), s.get_growth_factor(), s.get_backoff_factor(), s.get_growth_interval()) == (16, 3, 0.25, 7)
    s.set_growth_factor(4.0)
    s.set_backoff_factor(0.125)
    s.set_growth_interval(9)
    assert (s.get_growth_factor(), s.get_backoff_factor(), s.get_growth_interval()) == (4.0, 0.125, 9)
    assert "scale=16" in repr(s)


# state ---------------------------------------------------------------------------------------
def test_state_dict_round_trip_resumes_exactly(tmp_path):
    full = _run_script(md, GradScaler("cpu", init_scale=1024.0, growth_interval=3))
    first = GradScaler("cpu", init_scale=1024.0, growth_interval=3)
    head = _run_script(md, first, SCRIPT[:4])
    md.save({"scaler": first.state_dict()}, str(tmp_path / "s.npz"))
    state = md.load(str(tmp_path / "s.npz"))["scaler"]
    assert state == first.state_dict()
    resumed = GradScaler("cpu", init_scale=1.0, growth_factor=9.0, growth_interval=50)   # all overwritten
    resumed.load_state_dict(state)
    tail = _run_script(md, resumed, SCRIPT[4:])
    assert [(s, t) for s, t, *_ in head + tail] == [(s, t) for s, t, *_ in full]
    # loading into a scaler already in use sets its live scale too
    live = GradScaler("cpu")
    live.scale(md.tensor(1.0))
    live.load_state_dict(state)
    assert live.get_scale() == state["scale"] and live._get_growth_tracker() == state["_growth_tracker"]


def test_load_state_dict_refuses_what_does_not_fit():
    s = GradScaler("cpu")
    with pytest.raises(RuntimeError, match="The source state dict is empty"):
        s.load_state_dict({})
    good = GradScaler("cpu").state_dict()
    with pytest.raises(KeyError, match="_growth_tracker"):
        s.load_state_dict({k: v for k, v in good.items() if k != "_growth_tracker"})
    for key, bad in (("scale", -1.0), ("growth_interval", 0), ("_growth_tracker", -2)):
        with pytest.raises(ValueError, match=key.lstrip("_")):
            s.load_state_dict({**good, key: bad})
    assert s.state_dict() == good


def test_state_dict_keys_and_values_equal_pytorchs():
    torch = pytest.importorskip("torch")
    kw = {"init_scale": 256.0, "growth_factor": 1.5, "backoff_factor": 0.25, "growth_interval": 2}
    ours, theirs = GradScaler("cpu", **kw), torch.amp.GradScaler("cpu", **kw)
    assert ours.state_dict() == theirs.state_dict()
    _run_script(md, ours, SCRIPT[:5])
    _run_script(torch, theirs, SCRIPT[:5])
    assert ours.state_dict() == theirs.state_dict()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert torch.amp.GradScaler("cpu", enabled=False).state_dict() == GradScaler("cpu", enabled=False).state_dict()


# the fused kernel ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_unscale_equals_numpy_and_checks_before_scaling(dtype):
    rng = np.random.default_rng(0)
    inv = np.float32(1 / 3.0)
    for bad in (None, np.inf, -np.inf, np.nan):
        g = rng.standard_normal(1001).astype(dtype)
        if bad is not None:
            g[517] = bad
        expected = g * g.dtype.type(inv)
        got = g.copy()
        assert grad_scaling.unscale_and_check(got, inv) == (bad is not None)
        np.testing.assert_array_equal(got, expected)
    big = np.full(4, np.finfo(dtype).max / 2, dtype)      # finite before, would overflow after x4
    assert not grad_scaling.unscale_and_check(big, np.float32(4.0)) and np.isinf(big).all()
    ones = np.ones((2, 3), dtype)
    assert not grad_scaling.unscale_and_check(ones, np.float32(1.0)) and (ones == 1).all()
    assert not grad_scaling.unscale_and_check(np.zeros((0, 3), dtype), inv)
    assert not grad_scaling.fusable(np.ones(4, dtype)[::2])


def test_non_contiguous_gradients_take_the_generic_path():
    w = md.nn.Parameter(md.ones(3, 2))
    opt = md.optim.SGD([w], lr=0.0)
    scaler = GradScaler("cpu", init_scale=2.0)
    scaler.scale(md.tensor(1.0))
    w.grad = md.tensor(np.array([[2.0, 4.0, 6.0], [8.0, INF, 1.0]], np.float32)).t()
    assert not grad_scaling.fusable(w.grad._data)
    assert scaler.step(opt) is None
    np.testing.assert_array_equal(w.grad.numpy(), [[1.0, 4.0], [2.0, INF], [3.0, 0.5]])
