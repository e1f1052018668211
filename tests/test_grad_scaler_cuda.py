"""md.amp.GradScaler on "cuda" tensors (the CUDA simulator in CI): the same scales, skips and
unscaled gradients as on the CPU, tiny shapes; and the per-device spellings md.cuda.amp / md.cpu.amp."""
import numpy as np
import pytest

import minidl as md
from minidl import backends

try:
    backends.get("cuda")
except RuntimeError as exc:   # pragma: no cover
    pytest.skip(f"cuda device unavailable: {exc}", allow_module_level=True)

STEPS = [[1.0, 2.0, -3.0, 0.5], [np.inf, 1.0, 1.0, 1.0], [0.25, 4.0, 8.0, -1.0], [1.0, np.nan, 0.0, 2.0],
         [3.0, 3.0, 3.0, 3.0]]


def _run(device):
    w = md.nn.Parameter(md.tensor(np.array([1.0, -1.0, 0.5, 2.0], np.float32), device=device))
    opt = md.optim.SGD([w], lr=0.5)
    scaler = md.amp.GradScaler(device, init_scale=8.0, growth_interval=2)
    out = []
    for values in STEPS:
        opt.zero_grad()
        (scaler.scale((w * w).sum()) * 0).backward()         # the graph reaches w on the device
        w.grad = md.tensor(np.array(values, np.float32), device=device)
        scale = scaler.get_scale()
        scaler.step(opt)
        assert w.grad.device.type == device
        scaler.update()
        out.append((scale, w.grad.cpu().numpy().copy(), w.detach().cpu().numpy().copy(), scaler.get_scale()))
    return out


def test_cuda_scaler_matches_the_cpu():
    cpu, cuda = _run("cpu"), _run("cuda")
    for (s1, g1, w1, n1), (s2, g2, w2, n2) in zip(cpu, cuda):
        assert s1 == s2 and n1 == n2
        np.testing.assert_array_equal(g1, g2)
        np.testing.assert_allclose(w1, w2, rtol=1e-6)
    assert [n for *_, n in cuda] == [8.0, 4.0, 4.0, 2.0, 2.0]
    np.testing.assert_array_equal(cuda[1][2], cuda[0][2])    # the inf step left w alone


def test_scaled_loss_lives_on_the_device_and_float16_grads_are_refused():
    scaler = md.amp.GradScaler("cuda")
    loss = md.tensor(3.0, device="cuda")
    scaled = scaler.scale(loss)
    assert scaled.device.type == "cuda" and scaled.dtype == md.float32 and scaled.item() == 3.0 * 2 ** 16
    w = md.nn.Parameter(md.ones(2, dtype=md.float16, device="cuda"))
    w.grad = md.ones(2, dtype=md.float16, device="cuda")
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients."):
        scaler.unscale_(md.optim.SGD([w], lr=1.0))
    with pytest.raises(AssertionError, match="new_scale should be a float"):
        scaler.update(md.tensor([2.0]))    # a cpu tensor for a cuda scaler


def test_per_device_spellings_are_the_deprecated_classes():
    with pytest.warns(FutureWarning, match=r"minidl.cuda.amp.GradScaler\(args...\)` is deprecated"):
        s = md.cuda.amp.GradScaler(init_scale=4.0)
    assert isinstance(s, md.amp.GradScaler) and s._device == "cuda" and s.get_scale() == 4.0
    with pytest.warns(FutureWarning, match="minidl.amp.GradScaler\\('cpu', args...\\)"):
        c = md.cpu.amp.GradScaler(8.0, growth_interval=3)
    assert c._device == "cpu" and c.get_growth_interval() == 3
