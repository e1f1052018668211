"""The fused CPU optimizer kernels (kernels/cpu/optim.py) against the generic path of array
operations in optim/adam.py and sgd.py, in float64 and float32."""
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
    original = cpu_optim._adam
    monkeypatch.setattr(cpu_optim, "_adam", lambda *a: calls.append(a[0].size) or original(*a))
    p = Parameter(W0.copy())
    opt = optim.AdamW([p], lr=0.1)
    p.grad = md.from_numpy(G0.copy())
    opt.step()
    assert calls == [3]
    # a gradient that is a strided view is left to the generic path, with the same result
    q = Parameter(W0.copy())
    opt_q = optim.AdamW([q], lr=0.1)
    q.grad = md.from_numpy(np.stack([G0, G0], axis=1)[:, 0])
    opt_q.step()
    assert calls == [3]
    np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=1e-14)
