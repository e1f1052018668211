"""The fused CPU optimizer kernels (kernels/cpu/optim.py) against the generic path of array
operations in optim/adam.py and sgd.py, in float64 and float32."""
import numba
import numpy as np
import pytest

import minidl as md
import minidl.optim as optim
from minidl.nn.parameter import Parameter
from minidl.optim import implementation

W0 = np.array([1.0, -2.0, 0.5])
G0 = np.array([0.5, -1.0, 2.0])


FUSED_CONFIGS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.2, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, maximize=True)),
    ("Adam", dict(lr=0.1, weight_decay=0.1, amsgrad=True)),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.95), eps=1e-3)),
    ("AdamW", dict(lr=0.1, weight_decay=0.1, maximize=True)),
]


@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-14), (np.float32, 2e-6)])
@pytest.mark.parametrize("name,kw", FUSED_CONFIGS)
def test_fused_cpu_kernel_matches_generic_path(name, kw, dtype, rtol):
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal((7, 5)).astype(dtype)
    grads = [rng.standard_normal((7, 5)).astype(dtype) for _ in range(4)]
    result = {}
    for impl in implementation.IMPLEMENTATIONS:
        p = Parameter(w0.copy())
        opt = getattr(optim, name)([p], **kw)
        with implementation.implementation(impl):
            for g in grads:
                p.grad = md.from_numpy(g.copy())
                opt.step()
        assert p.dtype == dtype
        state = {k: v for k, v in opt.state.get(p, {}).items() if isinstance(v, np.ndarray)}
        result[impl] = (p.detach().numpy(), state)
    np.testing.assert_allclose(result["numba"][0], result["reference"][0], rtol=rtol, atol=rtol)
    assert result["numba"][1].keys() == result["reference"][1].keys()
    for key, state in result["numba"][1].items():
        np.testing.assert_allclose(state, result["reference"][1][key], rtol=rtol, atol=rtol, err_msg=key)


def test_fused_cpu_kernel_runs_by_default_and_falls_back_for_strided_arrays(monkeypatch):
    from minidl.kernels.cpu import optim as cpu_optim
    calls = []
    original = cpu_optim._adam_batch
    monkeypatch.setattr(cpu_optim, "_adam_batch",
                        lambda *a: calls.append([w.size for w in a[0][:a[6]]]) or original(*a))
    p = Parameter(W0.copy())
    opt = optim.AdamW([p], lr=0.1)
    p.grad = md.from_numpy(G0.copy())
    opt.step()
    assert calls == [[3]]
    # a gradient that is a strided view is left to the generic path, with the same result
    q = Parameter(W0.copy())
    opt_q = optim.AdamW([q], lr=0.1)
    q.grad = md.from_numpy(np.stack([G0, G0], axis=1)[:, 0])
    opt_q.step()
    assert calls == [[3]]
    np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=1e-14)


def _many_parameters(rng):
    """More parameters than one kernel call takes, float32 and float64 mixed, of sizes from one
    element to a batch above the threads' threshold (_threads.SERIAL_BELOW)."""
    shapes = [(3,), (200, 300), (1,), (7, 5), (64,), (4, 4, 4), (300, 200), (2,), (9,), (128, 129), (5, 1), (11,)]
    return [Parameter(rng.standard_normal(shape).astype(np.float32 if i % 3 else np.float64))
            for i, shape in enumerate(shapes * 2)]


@pytest.mark.parametrize("kw", [dict(lr=0.05, weight_decay=0.1), dict(lr=0.05, weight_decay=0.1, amsgrad=True),
                                dict(lr=0.05, maximize=True, decoupled_weight_decay=False, weight_decay=0.2)])
def test_batched_calls_match_the_generic_path_per_parameter(monkeypatch, kw):
    """Adam's CPU updates run cpu_optim.BATCH parameters to a call, each with its own step count:
    the parameters that miss a gradient in some steps count fewer steps, one strided gradient
    takes the generic path, and every parameter ends as the generic path leaves it."""
    from minidl.kernels.cpu import optim as cpu_optim
    calls = []
    original = cpu_optim._adam_batch
    monkeypatch.setattr(cpu_optim, "_adam_batch", lambda *a: calls.append((a[6], a[7])) or original(*a))
    rng = np.random.default_rng(5)
    start = _many_parameters(rng)
    grads = [[rng.standard_normal(p.shape).astype(p.dtype) for p in start] for _ in range(3)]
    result = {}
    for impl in implementation.IMPLEMENTATIONS:
        params = [Parameter(p.detach().numpy().copy()) for p in start]
        opt = optim.Adam(params, **kw) if "decoupled_weight_decay" in kw else optim.AdamW(params, **kw)
        with implementation.implementation(impl):
            for step, gs in enumerate(grads):
                for i, (p, g) in enumerate(zip(params, gs)):
                    if i % 5 == 1 and step == 1:
                        p.grad = None                                          # no update this step
                    elif i == 4:
                        p.grad = md.from_numpy(np.stack([g, g], axis=1)[:, 0])  # strided
                    else:
                        p.grad = md.from_numpy(g.copy())
                opt.step()
        result[impl] = ([p.detach().numpy() for p in params],
                        [int(opt.state[p]["step"].item()) for p in params])
    assert result["numba"][1] == result["reference"][1]
    assert sorted(set(result["numba"][1])) == [2, 3]
    for i, (a, b) in enumerate(zip(result["numba"][0], result["reference"][0])):
        tol = 1e-14 if a.dtype == np.float64 else 2e-6
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=f"parameter {i}")
    # 16 float32 and 8 float64 parameters, one strided: calls of at most BATCH, some split between threads
    assert all(0 < n <= cpu_optim.BATCH for n, _ in calls)
    assert sum(n for n, _ in calls) == 3 * 23 - 5
    assert any(chunks > 1 for _, chunks in calls) == (numba.get_num_threads() > 1)
