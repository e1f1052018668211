"""Jacobian-vector products by reverse mode (minidl.func.jvp, linearize, autograd.functional.jvp),
the forward_ad module that says minidl has no forward mode, the engine flags of torch.autograd,
and the profiler (minidl.autograd.profiler, minidl.profiler): values against NumPy references
and finite differences, PyTorch's errors for bad input, and torch where it is installed."""
import json

import numpy as np
import pytest

import minidl as md
import minidl.autograd as autograd
import minidl.profiler as mdprofiler
from minidl.autograd import op_function as fn_module
from minidl.autograd import functional, profiler
from minidl.func import grad, jvp, linearize, vmap

RNG = np.random.default_rng(11)


def T(a, **kw):
    return md.tensor(np.asarray(a), **kw)


def npy(t):
    return t.detach().numpy()


def _f(a, b):
    return {"y": (a @ b).tanh(), "s": [(a * a).sum()]}


def _f_np(a, b):
    return {"y": np.tanh(a @ b), "s": [(a * a).sum()]}


# func.jvp ---------------------------------------------------------------------------------------

def test_jvp_matches_closed_form_and_central_differences():
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))
    ta, tb = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))
    out, tan = jvp(_f, (T(a), T(b)), (T(ta), T(tb)))
    y = np.tanh(a @ b)
    np.testing.assert_allclose(npy(out["y"]), y, rtol=1e-12)
    np.testing.assert_allclose(npy(tan["y"]), (1 - y ** 2) * (ta @ b + a @ tb), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(npy(tan["s"][0]), 2 * (a * ta).sum(), rtol=1e-12)
    assert tan["y"].dtype == md.float64 and tuple(tan["s"][0].shape) == () and not tan["y"].requires_grad
    eps = 1e-6     # (f(x + eps t) - f(x - eps t)) / (2 eps)
    hi, lo = _f_np(a + eps * ta, b + eps * tb), _f_np(a - eps * ta, b - eps * tb)
    np.testing.assert_allclose(npy(tan["y"]), (hi["y"] - lo["y"]) / (2 * eps), rtol=1e-6, atol=1e-8)


def test_jvp_of_a_layer_matches_finite_differences_in_float32_dtype():
    x, t = RNG.standard_normal((2, 5)), RNG.standard_normal((2, 5))

    def f(v):
        return md.softmax(v * 3, dim=-1)

    def f_np(v):
        e = np.exp(3 * v - (3 * v).max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    _, tan = jvp(f, (T(x, dtype=md.float32),), (T(t, dtype=md.float32),))
    assert tan.dtype == md.float32
    fd = (f_np(x + 1e-6 * t) - f_np(x - 1e-6 * t)) / 2e-6
    np.testing.assert_allclose(npy(tan), fd, rtol=1e-4, atol=1e-5)


def test_jvp_identity_detached_integer_outputs_and_aux():
    x, t = RNG.standard_normal(3), RNG.standard_normal(3)
    np.testing.assert_array_equal(npy(jvp(lambda a: a, (T(x),), (T(t),))[1]), t)
    out, tan = jvp(lambda a: (a.detach() * 2, a.argmax()), (T(x),), (T(t),))
    np.testing.assert_array_equal(npy(tan[0]), np.zeros(3))
    assert tan[1].dtype == md.int64 and tan[1].item() == 0
    out, tan, aux = jvp(lambda a: (a.exp(), {"k": a * 2}), (T(x),), (T(t),), has_aux=True)
    np.testing.assert_allclose(npy(tan), np.exp(x) * t, rtol=1e-12)
    np.testing.assert_allclose(npy(aux["k"]), 2 * x)
    # a zero tangent needs no pass and contributes nothing
    _, tan = jvp(lambda a, b: a * b, (T(x), T(t)), (T(np.zeros(3)), T(np.ones(3))))
    np.testing.assert_allclose(npy(tan), x)


def test_jvp_pytree_primals_and_vmap():
    x, t = RNG.standard_normal(3), RNG.standard_normal(3)
    _, tan = jvp(lambda d: (d["a"] * d["b"][0]).sum(), ({"a": T(x), "b": [T(x)]},),
                 ({"a": T(t), "b": [T(np.ones(3))]},))
    np.testing.assert_allclose(tan.item(), (t * x + x).sum(), rtol=1e-12)
    xs = RNG.standard_normal((4, 3))
    batched = vmap(lambda v: jvp(md.sin, (v,), (md.ones(3, dtype=md.float64),))[1])(T(xs))
    np.testing.assert_allclose(npy(batched), np.cos(xs), rtol=1e-12)


def test_jvp_bad_input_errors_match_pytorch():
    x, t = T(RNG.standard_normal(3)), T(RNG.standard_normal(3))
    with pytest.raises(RuntimeError, match=r"Expected primals to be a tuple\. E\.g\. it should be valid"):
        jvp(md.sin, x, t)
    with pytest.raises(RuntimeError, match="Expected primals and tangents to have the same python structure"):
        jvp(md.sin, (x,), t)
    with pytest.raises(RuntimeError, match="Expected primals and tangents to have the same python structure"):
        jvp(md.sin, (x,), (t, t))
    with pytest.raises(RuntimeError, match="Expected primals to contain at least one Tensor"):
        jvp(lambda: x, (), ())
    with pytest.raises(RuntimeError, match="Expected primals to only contain Tensors, got <class 'float'>"):
        jvp(md.sin, (3.0,), (t,))
    with pytest.raises(RuntimeError, match="Expected tangents to only contain Tensors, got <class 'float'>"):
        jvp(md.sin, (x,), (3.0,))
    with pytest.raises(ValueError, match="Expected primal to be floating point or complex, but got: minidl.int64"):
        jvp(lambda a: a, (md.arange(3),), (t,))
    with pytest.raises(ValueError, match="Expected tangent to be floating point or complex, but got: minidl.int64"):
        jvp(lambda a: a, (x,), (md.arange(3),))
    with pytest.raises(RuntimeError, match=r"different size .* Tensor is of size \[3\] while the given forward "
                                           r"gradient is of size \[2\]"):
        jvp(md.sin, (x,), (t[:2],))
    with pytest.raises(RuntimeError, match="expected f\\(\\*primals\\) to return only tensors, got unsupported"):
        jvp(lambda a: (a, 3), (x,), (t,))
    with pytest.raises(RuntimeError, match=r"output of function f should be a tuple: \(output, aux\)"):
        jvp(md.sin, (x,), (t,), has_aux=True)
    with pytest.raises(RuntimeError, match="The output of f is independent of the inputs"):
        jvp(lambda a: a.detach(), (x,), (t,), strict=True)
    np.testing.assert_allclose(npy(jvp(md.sin, (x,), (t,), strict=True)[1]), np.cos(npy(x)) * npy(t), rtol=1e-12)


def test_jvp_through_or_around_another_transform():
    x = md.randn(3, dtype=md.float64)
    ones = md.ones(3, dtype=md.float64)
    np.testing.assert_allclose(npy(grad(lambda a: jvp(md.sin, (a,), (ones,))[1].sum())(x)), -np.sin(npy(x)))
    np.testing.assert_allclose(npy(jvp(grad(lambda a: a.sin().sum()), (x,), (ones,))[1]), -np.sin(npy(x)))
    with pytest.raises(NotImplementedError, match="func.linearize inside a transform that differentiates through"):
        grad(lambda a: linearize(md.sin, a)[0].sum())(x)


# func.linearize ---------------------------------------------------------------------------------

def test_linearize_runs_f_once_and_gives_jvps():
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))
    calls = []

    def f(p, q):
        calls.append(1)
        return _f(p, q)

    out, jvp_fn = linearize(f, T(a), T(b))
    np.testing.assert_allclose(npy(out["y"]), np.tanh(a @ b))
    y = np.tanh(a @ b)
    for _ in range(2):
        ta, tb = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))
        tan = jvp_fn(T(ta), T(tb))
        np.testing.assert_allclose(npy(tan["y"]), (1 - y ** 2) * (ta @ b + a @ tb), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(npy(tan["s"][0]), 2 * (a * ta).sum(), rtol=1e-12)
    assert len(calls) == 1
    with pytest.raises(RuntimeError, match="Expected the tangents .* to have the same argspec as the primals"):
        jvp_fn(T(a))
    with pytest.raises(RuntimeError, match="tangent:0 with dtype minidl.float32 in flattened pytree doesn't match "
                                           "the dtype minidl.float64 of the corresponding primal"):
        jvp_fn(T(a, dtype=md.float32), T(b))
    with pytest.raises(RuntimeError, match="tangent:1 with shape .* doesn't match the shape"):
        jvp_fn(T(a), T(b[:2]))


# autograd.functional ----------------------------------------------------------------------------

def test_functional_jvp_values_v_and_strict():
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))
    ta, tb = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))
    out, tan = functional.jvp(lambda p, q: (p @ q).tanh(), (T(a), T(b)), (T(ta), T(tb)))
    y = np.tanh(a @ b)
    np.testing.assert_allclose(npy(out), y)
    np.testing.assert_allclose(npy(tan), (1 - y ** 2) * (ta @ b + a @ tb), rtol=1e-10, atol=1e-12)
    out, tan = functional.jvp(lambda p: (p * 3, p.exp()), T([0.5]))      # v omitted: a one-element input
    np.testing.assert_allclose(npy(tan[0]), [3.0])
    np.testing.assert_allclose(npy(tan[1]), [np.exp(0.5)])
    with pytest.raises(RuntimeError, match="The vector v can only be None if the input to the user-provided"):
        functional.jvp(lambda p: p, T(a))
    with pytest.raises(RuntimeError, match=r"Entry 1 in v has invalid size"):
        functional.jvp(lambda p, q: p.sum() + q.sum(), (T(a), T(b)), (T(ta), T(ta)))
    with pytest.raises(RuntimeError, match="v is a tuple of invalid length: should be 2 but got 1"):
        functional.jvp(lambda p, q: p.sum(), (T(a), T(b)), (T(ta),))
    with pytest.raises(RuntimeError, match="The output of the user-provided function is independent of input 1"):
        functional.jvp(lambda p, q: p.sum(), (T(a), T(b)), (T(ta), T(tb)), strict=True)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function does not require gradients"):
        functional.jvp(lambda p: p.detach(), T(a), T(ta), strict=True)
    out, tan = functional.jvp(lambda p: p * p, T(a), T(ta), create_graph=True)
    assert tan.requires_grad
    np.testing.assert_allclose(npy(tan.detach()), 2 * a * ta, rtol=1e-12)


@pytest.mark.parametrize("call", [lambda f, x: functional.hessian(f, x) @ x, lambda f, x: functional.hvp(f, x, x)[1],
                                  lambda f, x: functional.vhp(f, x, x)[1]], ids=["hessian", "hvp", "vhp"])
def test_second_order_functional_like_func_hessian(call):
    x = md.tensor([1.0, 2.0], dtype=md.float64)
    np.testing.assert_allclose(npy(call(lambda t: (t ** 3).sum(), x)), 6 * npy(x) ** 2)


# forward_ad and engine flags --------------------------------------------------------------------

def test_forward_ad_imports_and_says_why_it_cannot_run():
    import minidl.autograd.forward_ad as fwAD
    x = md.ones(2)
    for call in (lambda: fwAD.make_dual(x, x), fwAD.enter_dual_level, lambda: fwAD.dual_level().__enter__()):
        with pytest.raises(NotImplementedError, match="minidl has no forward-mode AD.*minidl.func.jvp"):
            call()
    with pytest.raises(NotImplementedError, match="forward_ad.dual_level is not supported"):
        with fwAD.dual_level():
            pass
    primal, tangent = fwAD.unpack_dual(x)
    assert primal is x and tangent is None and fwAD.unpack_dual(x).tangent is None


def test_engine_flags():
    assert autograd.is_multithreading_enabled() is True
    with autograd.set_multithreading_enabled(False):
        assert autograd.is_multithreading_enabled() is False
    assert autograd.is_multithreading_enabled() is True

    @autograd.set_multithreading_enabled(False)
    def inner():
        return autograd.is_multithreading_enabled()

    autograd.set_multithreading_enabled(True)
    assert inner() is False and autograd.is_multithreading_enabled() is True
    assert autograd.is_view_replay_enabled() is False
    assert autograd.is_tensor_like(md.ones(1)) and not autograd.is_tensor_like(np.ones(1))
    assert autograd.is_tensor_like(type("Like", (), {"__torch_function__": None})())


# profiler ---------------------------------------------------------------------------------------

def _plain():
    return fn_module.Function.__dict__["apply"].__func__ is fn_module._plain_apply


def test_profile_times_ops_and_regions_with_nesting_and_self_time():
    x = md.ones(4, 4)
    assert _plain()
    with profiler.profile(record_shapes=True) as prof:
        assert not _plain()
        with profiler.record_function("outer"):
            y = (x * 2).sum()
            with profiler.record_function("inner"):
                x + 1
                x + 1
        y.item()
    assert _plain()                             # the seam is gone: ops pay nothing again
    events = prof.events()
    names = [e.name for e in events]
    assert names == ["outer", "Mul", "Sum", "inner", "Add", "Add"]
    outer, inner = events[0], events[3]
    assert [c.name for c in outer.cpu_children] == ["Mul", "Sum", "inner"] and inner.cpu_parent is outer
    assert outer.self_cpu_time_total == pytest.approx(
        outer.cpu_time_total - sum(c.cpu_time_total for c in outer.cpu_children))
    assert all(e.self_cpu_time_total >= 0 for e in events)
    avg = {e.key: e for e in prof.key_averages()}
    assert avg["Add"].count == 2 and avg["Add"].cpu_time_total == pytest.approx(
        sum(e.cpu_time_total for e in events if e.name == "Add"))
    assert events[1].input_shapes == [[4, 4], []]
    assert prof.self_cpu_time_total == pytest.approx(sum(e.self_cpu_time_total for e in events))
    x * 3                                      # outside: not recorded
    assert len(prof.events()) == 6


def test_table_layout_sorting_and_row_limit():
    with profiler.profile() as prof:
        for _ in range(3):
            md.ones(8) * 2
        with profiler.record_function("region"):
            md.ones(8) + 1
    table = prof.key_averages().table(sort_by="count", row_limit=2)
    lines = table.splitlines()
    assert lines[1].split() == ["Name", "Self", "CPU", "%", "Self", "CPU", "CPU", "total", "%", "CPU", "total",
                                "CPU", "time", "avg", "#", "of", "Calls"]
    assert lines[0] == lines[2] == lines[-2] and set(lines[0]) == {"-", " "}
    rows = lines[3:-2]
    assert len(rows) == 2 and rows[0].split()[0] == "Mul" and rows[0].split()[-1] == "3"
    assert lines[-1].startswith("Self CPU time total: ")
    with pytest.raises(AttributeError):
        prof.key_averages().table(sort_by="bogus")
    assert "Input Shapes" not in table


def test_chrome_trace_is_valid_json(tmp_path):
    with profiler.profile(record_shapes=True) as prof:
        with profiler.record_function("step"):
            md.ones(3).exp()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert [e["name"] for e in spans] == ["step", "Exp"] and spans[0]["cat"] == "user_annotation"
    assert spans[0]["ts"] <= spans[1]["ts"] and spans[1]["ts"] + spans[1]["dur"] <= spans[0]["ts"] + spans[0]["dur"]
    assert spans[1]["args"]["Input Dims"] == [[3]]


def test_record_function_decorator_errors_nesting_and_finish():
    @profiler.record_function("work")
    def work(n):
        return md.ones(2) if n == 0 else work(n - 1)

    work(1)                                    # outside a profile: nothing recorded, nothing breaks
    with profiler.profile() as outer:
        with profiler.profile() as inner:
            work(1)
        with pytest.raises(ValueError):
            with profiler.record_function("failing"):
                raise ValueError
    assert [e.name for e in inner.events()] == ["work", "work"]
    assert [e.name for e in outer.events()] == ["work", "work", "failing"]
    assert _plain()
    with pytest.raises(RuntimeError, match="Profiler didn't finish running"):
        profiler.profile().key_averages()
    with pytest.raises(NotImplementedError, match="emit_nvtx is not supported: minidl's ops emit no NVTX"):
        with profiler.emit_nvtx():
            pass
    with profiler.emit_nvtx(enabled=False):
        pass


def test_profiler_seam_composes_with_autocast():
    with md.autocast("cpu", dtype=md.bfloat16):
        with profiler.profile() as prof:
            y = md.matmul(md.ones(2, 2), md.ones(2, 2))
        assert fn_module.Function.__dict__["apply"].__func__ is fn_module._apply_under_autocast
    assert _plain() and y.dtype == md.bfloat16
    top = prof.events()[0]                    # the op as called, with the casts autocast ran inside it
    assert top.name == "MatMul" and [c.name for c in top.cpu_children] == ["Cast", "Cast", "MatMul"]


def test_torch_profiler_schedule_steps_and_trace_handler(tmp_path):
    ready = []
    sched = mdprofiler.schedule(wait=1, warmup=1, active=2, repeat=1)
    acts = [sched(i) for i in range(6)]
    A = mdprofiler.ProfilerAction
    assert acts == [A.NONE, A.WARMUP, A.RECORD, A.RECORD_AND_SAVE, A.NONE, A.NONE]
    handler = mdprofiler.tensorboard_trace_handler(str(tmp_path), worker_name="w")
    with mdprofiler.profile(activities=[mdprofiler.ProfilerActivity.CPU], schedule=sched,
                            on_trace_ready=lambda p: (ready.append(p.step_num), handler(p))) as prof:
        for i in range(6):
            md.ones(2) * i
            prof.step()
    assert ready == [4]
    keys = [e.key for e in prof.key_averages()]
    assert keys == ["ProfilerStep*", "Mul"]
    steps = [e for e in prof.events() if e.name == "ProfilerStep*"]
    assert [e.trace_name for e in steps] == ["ProfilerStep#2", "ProfilerStep#3"]
    assert [a.count for a in prof.key_averages() if a.key == "ProfilerStep*"] == [2]
    files = list(tmp_path.glob("w.*.pt.trace.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["traceEvents"]
    with mdprofiler.profile() as whole:
        md.ones(2).exp()
    assert [e.key for e in whole.key_averages()] == ["Exp"]
    with pytest.raises(AssertionError, match="Invalid profiler schedule arguments"):
        mdprofiler.schedule(wait=0, warmup=0, active=0)
    assert md.profiler.record_function is profiler.record_function
    assert mdprofiler.supported_activities() == {mdprofiler.ProfilerActivity.CPU}


# against torch ----------------------------------------------------------------------------------

def test_jvp_linearize_and_functional_jvp_match_torch():
    torch = pytest.importorskip("torch")
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))
    ta, tb = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))

    def f(p, q, lib):
        h = lib.tanh(p @ q)
        return h * h.sum(), (p.exp() * 2).mean()

    tt = [torch.tensor(v) for v in (a, b, ta, tb)]
    ref_out, ref_tan = torch.func.jvp(lambda p, q: f(p, q, torch), tuple(tt[:2]), tuple(tt[2:]))
    out, tan = jvp(lambda p, q: f(p, q, md), (T(a), T(b)), (T(ta), T(tb)))
    for m, r in zip(tan + out, ref_tan + ref_out):
        np.testing.assert_allclose(npy(m), r.numpy(), rtol=1e-10, atol=1e-12)
    _, ref_fn = torch.func.linearize(lambda p, q: f(p, q, torch), *tt[:2])
    _, jvp_fn = linearize(lambda p, q: f(p, q, md), T(a), T(b))
    for m, r in zip(jvp_fn(T(ta), T(tb)), ref_fn(*tt[2:])):
        np.testing.assert_allclose(npy(m), r.numpy(), rtol=1e-10, atol=1e-12)
    _, ref = torch.autograd.functional.jvp(lambda p, q: f(p, q, torch), tuple(tt[:2]), tuple(tt[2:]))
    _, got = functional.jvp(lambda p, q: f(p, q, md), (T(a), T(b)), (T(ta), T(tb)))
    for m, r in zip(got, ref):
        np.testing.assert_allclose(npy(m), r.numpy(), rtol=1e-10, atol=1e-12)


def test_schedule_and_table_header_match_torch():
    torch = pytest.importorskip("torch")
    for kw in ({"wait": 1, "warmup": 1, "active": 2, "repeat": 2}, {"wait": 2, "warmup": 1, "active": 1,
                                                                    "skip_first": 3, "skip_first_wait": 1}):
        ours, theirs = mdprofiler.schedule(**kw), torch.profiler.schedule(**kw)
        assert [ours(i).name for i in range(14)] == [theirs(i).name for i in range(14)]
    with torch.autograd.profiler.profile() as tprof:
        torch.ones(2) * 2
    with profiler.profile() as prof:
        md.ones(2) * 2
    ref = tprof.key_averages().table().splitlines()
    got = prof.key_averages().table().splitlines()
    assert got[1].split() == ref[1].split()
    assert got[-1].split(":")[0] == ref[-1].split(":")[0]
