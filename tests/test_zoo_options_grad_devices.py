"""The zoo's normalization-free and norm-variant options, checked like every layer: finite-difference
gradients (input and parameters, random cotangents, float64) and the cuda device (Numba's simulator)
equal to the CPU. Covers ResNet's SkipInit and Fixup blocks, the attention's qk-norm (LayerNorm and
RMSNorm on queries and keys) and WSConv2d."""
import numpy as np
import pytest

import minidl as md
from minidl import backends, nn
from minidl.autograd import gradcheck
from minidl.zoo import GPT, ResNet
from minidl.zoo.resnet import BasicBlock
from minidl.zoo.transformer import SelfAttention


def _needs_cuda():
    try:
        backends.get("cuda")
    except RuntimeError as exc:   # pragma: no cover
        pytest.skip(f"cuda device unavailable: {exc}")


def _perturb(module, seed):
    """Move every parameter off its initial value (Fixup's zero branches and SkipInit's zero gates
    would make most gradients trivially zero)."""
    rng = np.random.default_rng(seed)
    with md.no_grad():
        for p in module.parameters():
            p.copy_(md.tensor(p.detach().numpy() + 0.3 * rng.standard_normal(p.shape), dtype=p.dtype))


def _check_param_grads(module, forward, seed, entries=3, eps=1e-6):
    """d<forward(), g>/dp from backward equals the central difference, on a few entries of every parameter."""
    rng = np.random.default_rng(seed)
    out = forward()
    g = md.tensor(rng.standard_normal(out.shape))
    module.zero_grad()
    (out * g).sum().backward()
    for name, p in module.named_parameters():
        grad = p.grad.numpy()
        for flat in rng.choice(p.numel(), size=min(entries, p.numel()), replace=False):
            idx = np.unravel_index(flat, p.shape)
            base = p.detach().numpy()[idx]
            vals = []
            for step in (eps, -eps):
                with md.no_grad():
                    a = p.detach().numpy().copy()
                    a[idx] = base + step
                    p.copy_(md.tensor(a))
                    vals.append(float((forward() * g).sum().item()))
            with md.no_grad():
                a = p.detach().numpy().copy()
                a[idx] = base
                p.copy_(md.tensor(a))
            numeric = (vals[0] - vals[1]) / (2 * eps)
            assert abs(numeric - grad[idx]) <= 1e-5 + 1e-4 * abs(numeric), (name, idx, numeric, grad[idx])


@pytest.mark.parametrize("init", ["skipinit", "fixup"])
def test_resnet_block_inits_pass_gradcheck(init):
    md.manual_seed(0)
    block = BasicBlock(3, 3, norm="none", init=init).double()
    _perturb(block, 1)
    x = md.tensor(np.random.default_rng(2).standard_normal((2, 3, 4, 4)), requires_grad=True)
    assert gradcheck(lambda t: block(t), (x,))
    _check_param_grads(block, lambda: block(x), seed=3)


@pytest.mark.parametrize("qk_norm", ["layer", "rms"])
def test_qk_norm_attention_passes_gradcheck(qk_norm):
    md.manual_seed(0)
    attn = SelfAttention(8, 2, causal=True, qk_norm=qk_norm).double()
    _perturb(attn, 4)
    x = md.tensor(np.random.default_rng(5).standard_normal((2, 3, 8)), requires_grad=True)
    assert gradcheck(lambda t: attn(t), (x,))
    _check_param_grads(attn, lambda: attn(x), seed=6)


def _cpu_and_cuda(make, inputs, loss):
    """(loss, gradients of every parameter and input) of the same model on both devices."""
    out = {}
    for device in ("cpu", "cuda"):
        md.manual_seed(0)
        model = make().double().to(device)
        xs = [md.tensor(a, device=device, requires_grad=a.dtype.kind == "f") for a in inputs]
        value = loss(model, *xs)
        value.backward()
        out[device] = [value.to("cpu").detach().numpy()] + [p.grad.to("cpu").numpy() for p in model.parameters()] + \
                      [x.grad.to("cpu").numpy() for x in xs if x.requires_grad]
    return out


def _assert_same(out):
    assert len(out["cpu"]) == len(out["cuda"])
    for a, c in zip(out["cuda"], out["cpu"]):
        np.testing.assert_allclose(a, c, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("init", ["skipinit", "fixup"])
def test_resnet_inits_on_cuda_match_the_cpu(init):
    _needs_cuda()

    def make():
        model = ResNet(depth=8, in_channels=2, num_classes=3, norm="none", init=init, width=2)
        _perturb(model, 7)
        return model
    x = np.random.default_rng(8).standard_normal((2, 2, 6, 6))
    y = np.array([0, 2])
    _assert_same(_cpu_and_cuda(make, [x, y], lambda m, xt, yt: nn.functional.cross_entropy(m(xt), yt)))


@pytest.mark.parametrize("qk_norm", ["layer", "rms"])
def test_qk_norm_gpt_on_cuda_matches_the_cpu(qk_norm):
    _needs_cuda()

    def make():
        model = GPT(vocab_size=5, block_size=4, n_layer=1, n_head=2, d_model=4, qk_norm=qk_norm)
        _perturb(model, 9)
        return model
    idx = np.random.default_rng(10).integers(0, 5, (2, 4))

    _assert_same(_cpu_and_cuda(make, [idx], lambda m, t: m(t, t)[1]))


def test_ws_conv2d_on_cuda_matches_the_cpu():
    _needs_cuda()

    def make():
        return nn.Sequential(nn.WSConv2d(2, 3, 3, padding=1), nn.GroupNorm(1, 3))
    x = np.random.default_rng(11).standard_normal((2, 2, 4, 4))
    g = np.random.default_rng(12).standard_normal((2, 3, 4, 4))
    _assert_same(_cpu_and_cuda(make, [x], lambda m, xt: (m(xt) * md.tensor(g, device=xt.device)).sum()))
