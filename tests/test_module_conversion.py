"""Module.to / float / double / half / cuda / cpu convert parameters and buffers in place:
the same objects, so tied weights stay tied and an optimizer built before still trains
the model."""
import numpy as np
import pytest

import minidl as md
from minidl import nn
from minidl.zoo.gpt import GPT


def tiny_gpt():
    md.manual_seed(0)
    return GPT(vocab_size=11, block_size=4, n_layer=1, n_head=2, d_model=8, tie_weights=True)


def test_double_keeps_every_parameter_object_and_the_tie():
    model = tiny_gpt()
    before = {name: p for name, p in model.named_parameters()}
    assert model.head.weight is model.tok_emb.weight
    model.double()
    assert model.head.weight is model.tok_emb.weight
    after = dict(model.named_parameters())
    assert after.keys() == before.keys() and all(after[k] is before[k] for k in before)
    assert all(p.dtype == md.float64 for p in model.parameters())


def test_an_optimizer_built_before_conversion_trains_the_model():
    model = tiny_gpt()
    opt = md.optim.SGD(model.parameters(), lr=0.1)
    model.double()
    idx = md.tensor([[1, 2, 3, 4]])
    _, loss = model(idx, idx)
    loss.backward()
    w = model.tok_emb.weight
    before = w.detach().numpy().copy()
    opt.step()
    assert w.dtype == md.float64 and not np.allclose(w.detach().numpy(), before)
    assert model.head.weight is w      # the step moved the tied weight once, for both uses


@pytest.mark.parametrize("dtype", [md.int64, md.bool, "int32"])
def test_to_a_non_floating_dtype_raises_and_leaves_the_model_unchanged(dtype):
    # as PyTorch: truncating the weights to integers would silently destroy the model
    lin = nn.Linear(2, 2)
    w, b = lin.weight.detach().numpy().copy(), lin.bias.detach().numpy().copy()
    with pytest.raises(TypeError, match=r"nn.Module.to only accepts floating point or complex dtypes, but got "
                                        r"desired dtype=minidl.(int64|bool|int32)"):
        lin.to(dtype)
    assert lin.weight.dtype == lin.bias.dtype == md.float32
    np.testing.assert_array_equal(lin.weight.detach().numpy(), w)
    np.testing.assert_array_equal(lin.bias.detach().numpy(), b)


def test_buffers_and_gradients_are_converted_in_place():
    bn = nn.BatchNorm1d(3)
    running = bn.running_mean
    bn(md.randn(4, 3)).sum().backward()
    bn.double()
    assert bn.running_mean is running and running.dtype == md.float64
    assert bn.weight.grad.dtype == md.float64
    assert bn.num_batches_tracked.dtype == md.int64   # integer buffers keep their dtype
    bn.half().float()
    assert bn.weight.dtype == md.float32 and bn.running_var.dtype == md.float32


def test_cuda_and_back_keep_the_objects():
    lin = nn.Linear(3, 2)
    w, b = lin.weight, lin.bias
    values = w.detach().numpy().copy()
    lin.cuda()
    assert lin.weight is w and w.device == "cuda" and b.device == "cuda"
    out = lin(md.ones(1, 3, device="cuda"))
    assert out.device == "cuda"
    lin.cpu()
    assert lin.weight is w and w.device == "cpu"
    np.testing.assert_allclose(w.detach().numpy(), values)


def test_cuda_keeps_a_gpt_tie_and_its_optimizer():
    model = tiny_gpt()
    opt = md.optim.Adam(model.parameters(), lr=1e-2)
    model.cuda()
    assert model.head.weight is model.tok_emb.weight and model.tok_emb.weight.device == "cuda"
    assert all(p.device == "cuda" for group in opt.param_groups for p in group["params"])
