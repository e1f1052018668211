"""The CNN zoo: shapes, every norm choice, and a few optimizer steps on a fixed batch lower
the loss for each model (tiny inputs, so this stays fast even without Numba's JIT)."""
import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl import optim
from minidl.zoo import NORMS, LeNet, ResNet, get_model, make_norm


def batch(n=16, c=1, size=8, seed=0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 4
    # learnable: each class lights up its own quadrant, plus noise
    x = rng.standard_normal((n, c, size, size)).astype(np.float32) * 0.3
    h = size // 2
    for i, cls in enumerate(y):
        r, q = divmod(int(cls), 2)
        x[i, :, r * h:(r + 1) * h, q * h:(q + 1) * h] += 1.0
    return md.from_numpy(x), md.from_numpy(y.astype(np.int64))


def train_steps(model, x, y, steps=8, lr=3e-3):
    opt = optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.item()))
    return losses


CASES = [("lenet", dict(input_size=8), 1e-2), ("vgg_small", dict(norm="batch"), 3e-3)] + \
        [("resnet8", dict(norm=n), 3e-3) for n in NORMS]


@pytest.mark.parametrize("name,kw,lr", CASES, ids=[f"{n}-{kw.get('norm', 'none')}" for n, kw, _ in CASES])
def test_short_training_lowers_loss(name, kw, lr):
    md.manual_seed(0)
    model = get_model(name, in_channels=1, num_classes=4, **kw)
    x, y = batch(n=8)
    assert model(x).shape == (8, 4)
    losses = train_steps(model, x, y, steps=8, lr=lr)
    assert all(np.isfinite(losses))
    assert max(losses[-2:]) < 0.7 * losses[0], losses


def test_resnet20_structure_and_step():
    md.manual_seed(0)
    model = get_model("resnet20", in_channels=3, num_classes=10, norm="group")
    convs = [n for n, p in model.named_parameters() if p.ndim == 4]
    assert len(convs) == 19 + 2                    # 19 3x3 convs + 2 projection shortcuts
    x, y = batch(n=4, c=3, size=8)
    losses = train_steps(model, x, y, steps=3, lr=3e-3)
    assert losses[-1] < losses[0]


def test_lenet_28x28_shape():
    md.manual_seed(0)
    out = LeNet(in_channels=1, num_classes=10, input_size=28)(md.randn(2, 1, 28, 28))
    assert out.shape == (2, 10)


def test_norm_choice_changes_layers():
    from minidl import nn
    assert isinstance(make_norm("batch", 16), nn.BatchNorm2d)
    gn = make_norm("group", 16)
    assert isinstance(gn, nn.GroupNorm)
    assert isinstance(make_norm("instance", 16), nn.InstanceNorm2d)
    assert not any(True for _ in make_norm("none", 16).parameters())
    r = ResNet(depth=8, in_channels=1, norm="none")
    assert any(n.endswith("conv1.bias") for n, _ in r.named_parameters())       # convs keep bias without a norm
    r = ResNet(depth=8, in_channels=1, norm="batch")
    assert not any(n.endswith("conv1.bias") for n, _ in r.named_parameters())
    assert any(n.endswith("running_mean") for n in r.state_dict())
    with pytest.raises(ValueError, match="unknown norm"):
        make_norm("weird", 8)
    with pytest.raises(ValueError, match="unknown model"):
        get_model("resnet9000")
    with pytest.raises(ValueError, match="6n"):
        ResNet(depth=10)


def test_layer_norm_is_per_pixel_over_channels():
    md.manual_seed(0)
    ln = make_norm("layer", 6)
    x = md.randn(2, 6, 3, 3) * 4 + 2
    y = ln(x).detach().numpy()
    np.testing.assert_allclose(y.mean(axis=1), 0, atol=1e-5)
    np.testing.assert_allclose(y.var(axis=1), 1, atol=1e-3)


def test_checkpoint_of_batchnorm_resnet_reproduces_eval_outputs(tmp_path):
    md.manual_seed(0)
    model = get_model("resnet8", in_channels=1, num_classes=4, norm="batch")
    x, y = batch()
    train_steps(model, x, y, steps=2)
    model.eval()
    want = model(x).detach().numpy()
    md.save(model.state_dict(), tmp_path / "r8.ckpt")
    md.manual_seed(1)
    other = get_model("resnet8", in_channels=1, num_classes=4, norm="batch")
    other.load_state_dict(md.load(tmp_path / "r8.ckpt"))
    other.eval()
    np.testing.assert_array_equal(other(x).detach().numpy(), want)
