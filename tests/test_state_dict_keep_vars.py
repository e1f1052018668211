"""Module.state_dict's keywords, as PyTorch's: ``keep_vars`` (the Parameters themselves, or
detached tensors over the same memory), ``prefix`` and ``destination``."""
from collections import OrderedDict

import numpy as np
import pytest

import minidl as md
from minidl import nn


def _net():
    md.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))


def test_by_default_the_values_are_detached_views_of_the_parameters():
    net = _net()
    sd = net.state_dict()
    w = sd["0.weight"]
    assert w is not net[0].weight and not w.requires_grad and w.grad_fn is None
    assert not isinstance(w, nn.Parameter)
    assert np.shares_memory(w.detach().numpy(), net[0].weight.detach().numpy())


def test_keep_vars_gives_the_parameters_and_buffers_themselves():
    net = _net()
    sd = net.state_dict(keep_vars=True)
    assert list(sd) == list(net.state_dict())
    assert sd["0.weight"] is net[0].weight and sd["0.weight"].requires_grad
    assert isinstance(sd["1.bias"], nn.Parameter)
    assert sd["1.running_mean"] is net[1].running_mean
    net(md.randn(5, 3)).sum().backward()
    assert sd["0.weight"].grad is not None               # the live parameter, grad and all


def test_prefix_and_destination():
    net = _net()
    dest = OrderedDict(extra=1)
    out = net.state_dict(destination=dest, prefix="model.")
    assert out is dest and list(out)[:3] == ["extra", "model.0.weight", "model.0.bias"]


def test_the_same_as_pytorch():
    torch = pytest.importorskip("torch")
    tnet = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    net = _net()
    for keep in (False, True):
        theirs, ours = tnet.state_dict(keep_vars=keep), net.state_dict(keep_vars=keep)
        assert list(theirs) == list(ours)
        assert [t.requires_grad for t in theirs.values()] == [t.requires_grad for t in ours.values()]
