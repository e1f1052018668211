"""A training step of a tiny GPT and a tiny ResNet on the "cuda" device (CUDA simulator) gives
the CPU's loss, gradients and updated parameters."""
import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
import minidl.optim as optim
from minidl import backends
from minidl.zoo.gpt import GPT
from minidl.zoo.resnet import ResNet

try:
    backends.get("cuda")
except RuntimeError as exc:   # pragma: no cover
    pytest.skip(f"cuda device unavailable: {exc}", allow_module_level=True)


def _step(model, device, loss_fn, inputs, update=True):
    """One training step: the loss, the gradients, and the parameters after AdamW's update."""
    model.to(device)
    opt = optim.AdamW(model.parameters(), lr=1e-2)
    loss = loss_fn(model, *[md.tensor(a, device=device) for a in inputs])
    loss.backward()
    grads = {n: p.grad.cpu().numpy() for n, p in model.named_parameters() if p.grad is not None}
    if update:
        opt.step()
    return float(loss), grads, {n: p.detach().cpu().numpy() for n, p in model.named_parameters()}


def _compare(make, loss_fn, inputs, update=True):
    md.manual_seed(0)
    cpu = make()
    gpu = make()
    gpu.load_state_dict(cpu.state_dict())
    loss_c, grads_c, params_c = _step(cpu, "cpu", loss_fn, inputs, update)
    loss_g, grads_g, params_g = _step(gpu, "cuda", loss_fn, inputs, update)
    assert all(p.device == "cuda" for p in gpu.parameters())
    assert abs(loss_g - loss_c) < 1e-5, (loss_g, loss_c)
    assert grads_g.keys() == grads_c.keys()
    for n in grads_c:
        np.testing.assert_allclose(grads_g[n], grads_c[n], atol=1e-5, rtol=1e-4, err_msg=n)
        # AdamW's first step moves each weight by lr * g / |g|: compare where |g| is not round-off
        moved = np.abs(grads_c[n]) > 1e-4
        np.testing.assert_allclose(params_g[n][moved], params_c[n][moved], atol=1e-5, err_msg=n)


@pytest.mark.slow
def test_tiny_gpt_training_step_on_cuda():
    idx = np.random.default_rng(0).integers(0, 7, (1, 4))
    _compare(lambda: GPT(7, 4, n_layer=1, n_head=1, d_model=4),
             lambda m, i: m(i[:, :-1], i[:, 1:])[1], [idx])


@pytest.mark.slow
def test_tiny_resnet_training_step_on_cuda():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, 3, 3, 3)).astype(np.float32), np.array([1, 0])
    _compare(lambda: ResNet(depth=8, num_classes=2, norm="batch", width=2),
             lambda m, a, b: F.cross_entropy(m(a), b), [x, y], update=False)   # AdamW: checked on the GPT
