"""The zoo ResNet's residual initialisations: the default keeps its parameters and state_dict
names, SkipInit starts every block as its shortcut, Fixup starts with zero residual branches and
a zero classifier, and both still learn."""
import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl.zoo import ResNet
from minidl.zoo.resnet import BasicBlock


def test_default_state_dict_names_are_unchanged():
    keys = list(ResNet(depth=8, in_channels=1, norm="batch").state_dict())
    assert keys[:4] == ["conv1.weight", "norm1.weight", "norm1.bias", "norm1.running_mean"]
    assert "layers.1.shortcut.0.weight" in keys and "fc.weight" in keys
    assert not any(k.endswith(("alpha", "bias1a", "scale", "fc_bias_in")) for k in keys)
    # stem conv + BN (5 entries), 3 blocks of 2 x (conv + BN), 2 shortcuts of conv + BN, fc weight and bias
    assert len(keys) == 6 + 3 * 12 + 2 * 6 + 2


def test_skipinit_blocks_start_as_their_shortcut():
    md.manual_seed(0)
    block = BasicBlock(4, 4, norm="none", init="skipinit")
    x = md.randn(2, 4, 5, 5)
    np.testing.assert_array_equal(block(x).detach().numpy(), F.relu(x).detach().numpy())
    keys = list(block.state_dict())
    assert "alpha" in keys and "conv1.bias" in keys
    block(x).sum().backward()
    assert abs(block.alpha.grad.item()) > 0 and block.conv1.weight.grad is not None


def test_fixup_starts_with_zero_branches_and_a_zero_classifier():
    md.manual_seed(0)
    model = ResNet(depth=8, in_channels=3, norm="none", init="fixup", width=4)
    x = md.randn(3, 3, 8, 8)
    np.testing.assert_array_equal(model(x).detach().numpy(), np.zeros((3, 10), np.float32))
    for block in model.layers:
        assert not block.conv2.weight.detach().numpy().any() and block.conv1.bias is None
        assert {"bias1a", "bias1b", "bias2a", "bias2b", "scale"} <= {n for n, _ in block.named_parameters()}
    # the first convolution of a branch is He(fan_out) scaled by L^(-1/2), L = 3 branches here
    w = model.layers[0].conv1.weight.detach().numpy()
    assert abs(w.std() - np.sqrt(2 / (4 * 9)) / np.sqrt(3)) < 0.25 * np.sqrt(2 / 36) / np.sqrt(3)
    loss = F.cross_entropy(model(x), md.tensor(np.array([0, 1, 2])))
    loss.backward()
    assert np.abs(model.fc.weight.grad.numpy()).sum() > 0 and "init='fixup'" in repr(model)


@pytest.mark.parametrize("init", ["skipinit", "fixup"])
def test_unnormalized_resnets_with_either_init_learn(init):
    md.manual_seed(0)
    rng = np.random.default_rng(0)
    x = md.tensor(rng.standard_normal((16, 3, 8, 8)).astype(np.float32))
    y = md.tensor((np.arange(16) % 2).astype(np.int64))
    x.numpy()[y.numpy() == 1, 0] += 1.5
    model = ResNet(depth=8, in_channels=3, num_classes=2, norm="none", init=init, width=4)
    opt = md.optim.SGD(model.parameters(), lr=0.3, momentum=0.9)
    losses = []
    for _ in range(30):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert np.isfinite(losses).all() and losses[-1] < 0.3 * losses[0]


def test_unknown_init_is_an_error():
    with pytest.raises(ValueError, match="unknown residual init 'zero'; expected one of default, skipinit, fixup"):
        ResNet(depth=8, init="zero")
