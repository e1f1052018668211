"""Containers (ParameterList, ParameterDict, ModuleDict) and the Module API (registration,
traversal, get_submodule, apply, requires_grad_, repr, half), against PyTorch where it is
the oracle; and nn.utils' parameters <-> vector conversion and clip_grad_value_."""
from collections import OrderedDict

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn


def _build(self, nn):
    """The same model in either framework: a shared submodule, a buffer, a container."""
    self.body = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 1)})
    self.again = self.body[0]                    # reachable along two paths
    self.register_buffer("steps", _zeros(nn, 1))


class Net(nn.Module):
    def __init__(self, nn):
        super().__init__()
        _build(self, nn)


def _zeros(nn_mod, n):
    return md.zeros(n) if nn_mod is nn else __import__("torch").zeros(n)


def _pair():
    torch = pytest.importorskip("torch")

    class TorchNet(torch.nn.Module):
        def __init__(self, nn):
            super().__init__()
            _build(self, nn)

    return Net(nn), TorchNet(torch.nn)


def test_traversal_names_match_torch():
    ours, theirs = _pair()
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert [n for n, _ in ours.named_modules(remove_duplicate=False)] == \
           [n for n, _ in theirs.named_modules(remove_duplicate=False)]
    assert [n for n, _ in ours.named_modules(prefix="m")] == [n for n, _ in theirs.named_modules(prefix="m")]
    assert [n for n, _ in ours.named_children()] == [n for n, _ in theirs.named_children()]
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert [n for n, _ in ours.named_buffers(prefix="x", recurse=False)] == \
           [n for n, _ in theirs.named_buffers(prefix="x", recurse=False)]


def test_repr_matches_torch():
    ours, theirs = _pair()
    assert repr(ours).replace("TorchNet", "Net") == repr(theirs).replace("TorchNet", "Net")
    torch = pytest.importorskip("torch")
    assert repr(nn.ModuleList([nn.Linear(2, 2) for _ in range(3)] + [nn.ReLU(), nn.ReLU(inplace=True)])) == \
        repr(torch.nn.ModuleList([torch.nn.Linear(2, 2) for _ in range(3)] + [torch.nn.ReLU(),
                                                                              torch.nn.ReLU(inplace=True)]))
    assert repr(nn.ModuleList()) == repr(torch.nn.ModuleList())


def test_repr_puts_extra_repr_lines_before_children():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(1, 2)

        def extra_repr(self):
            return "width=2"

    assert repr(Block()) == "Block(\n  width=2\n  (fc): Linear(in_features=1, out_features=2, bias=True)\n)"


def test_get_submodule_parameter_and_buffer():
    m = Net(nn)
    assert m.get_submodule("heads.a") is m.heads["a"]
    assert m.get_submodule("") is m
    assert m.get_parameter("body.0.weight") is m.body[0].weight
    assert m.get_buffer("steps") is m.steps
    with pytest.raises(AttributeError, match="Linear has no attribute `foo`"):
        m.get_submodule("body.0.foo")
    with pytest.raises(AttributeError, match="`weight` is not an nn.Module"):
        m.get_submodule("body.0.weight")
    with pytest.raises(AttributeError, match="`steps` is not an nn.Parameter"):
        m.get_parameter("steps")


@pytest.mark.parametrize("call,exc,match", [
    (lambda m: m.register_parameter("a.b", None), KeyError, 'parameter name can.*t contain ".", got: a.b'),
    (lambda m: m.register_parameter("w", md.zeros(2)), TypeError, "cannot assign 'Tensor' object to parameter 'w'"),
    (lambda m: m.add_module("a.b", nn.ReLU()), KeyError, "module name can.*t contain"),
    (lambda m: m.add_module("", nn.ReLU()), KeyError, "can.*t be empty string"),
    (lambda m: m.add_module("c", 3), TypeError, "int is not a Module subclass"),
    (lambda m: m.add_module("forward", nn.ReLU()), KeyError, "attribute 'forward' already exists"),
    (lambda m: m.register_parameter(1, None), TypeError, "name should be a string. Got int"),
    (lambda m: m.register_buffer("a.b", md.zeros(1)), KeyError, 'buffer name can.*t contain ".", got: a.b'),
    (lambda m: m.register_buffer("", md.zeros(1)), KeyError, 'buffer name can.*t be empty string'),
    (lambda m: m.register_buffer(1, md.zeros(1)), TypeError, "buffer name should be a string. Got int"),
    (lambda m: m.register_buffer("forward", md.zeros(1)), KeyError, "attribute 'forward' already exists"),
])
def test_registration_rejects_what_torch_rejects(call, exc, match):
    with pytest.raises(exc, match=match):
        call(nn.Linear(2, 2))


@pytest.mark.parametrize("name,value,match", [
    ("weight", md.zeros(2, 2), r"cannot assign 'minidl.FloatTensor' as parameter 'weight' \(nn.Parameter or None "
                               r"expected\)"),
    ("weight", 3, "cannot assign 'int' as parameter 'weight'"),
    ("fc", md.zeros(2), r"cannot assign 'minidl.FloatTensor' as child module 'fc' \(nn.Module or None expected\)"),
    ("steps", 3, r"cannot assign 'int' as buffer 'steps' \(Tensor or None expected\)"),
])
def test_assigning_the_wrong_kind_over_a_registered_name_raises_and_keeps_it(name, value, match):
    m = nn.Linear(2, 2)
    m.fc = nn.Linear(2, 2)
    m.register_buffer("steps", md.zeros(1))
    keys = list(m.state_dict())
    with pytest.raises(TypeError, match=match):
        setattr(m, name, value)
    assert list(m.state_dict()) == keys


def test_assigning_none_or_the_registered_kind_over_a_name_keeps_it_registered():
    m = nn.Linear(2, 2)
    m.register_buffer("steps", md.zeros(1))
    m.steps = md.ones(1)                       # a buffer takes any Tensor
    m.bias = nn.Parameter(md.ones(2))
    m.weight = None                            # declared, absent: out of parameters() and the state_dict
    assert list(m._parameters) == ["weight", "bias"] and m.weight is None
    assert [n for n, _ in m.named_parameters()] == ["bias"] and list(m.state_dict()) == ["bias", "steps"]
    m.weight = nn.Parameter(md.zeros(2, 2))
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]


def test_add_module_register_module_and_delattr():
    m = nn.Module()
    m.add_module("fc", nn.Linear(2, 3))
    m.register_module("act", nn.ReLU())
    m.add_module("missing", None)
    assert [n for n, _ in m.named_children()] == ["fc", "act"]
    assert "missing" in m._modules and m.missing is None
    m.register_parameter("scale", nn.Parameter(md.ones(1)))
    del m.fc
    assert [n for n, _ in m.named_parameters()] == ["scale"]
    assert not hasattr(m, "fc")


def test_apply_visits_children_first_then_self_and_requires_grad_():
    m = Net(nn)
    order = []
    m.apply(lambda mod: order.append(type(mod).__name__))
    assert order[-1] == "Net" and order.index("Linear") < order.index("Sequential")
    assert m.requires_grad_(False) is m
    assert not any(p.requires_grad for p in m.parameters())


def test_half_converts_floating_parameters_and_buffers():
    m = Net(nn).half()
    assert {p.dtype for p in m.parameters()} == {np.dtype(np.float16)}
    assert m.steps.dtype == np.float16


def test_parameter_list_registers_and_indexes():
    pl = nn.ParameterList([nn.Parameter(md.zeros(2, 3)), md.ones(3)])
    pl.append(nn.Parameter(md.zeros(1)))
    pl += [md.zeros(4)]
    assert len(pl) == 4 and [n for n, _ in pl.named_parameters()] == ["0", "1", "2", "3"]
    assert pl[1].requires_grad and isinstance(pl[1], nn.Parameter)   # a plain tensor becomes a Parameter
    assert pl[-1].shape == (4,) and len(pl[1:3]) == 2
    pl[0] = nn.Parameter(md.ones(5))
    assert pl[0].shape == (5,)
    with pytest.raises(IndexError, match="index 4 is out of range for ParameterList of length 4"):
        pl[4]
    with pytest.raises(TypeError, match="Parameters or Tensors, got int"):
        pl.append(3)


def test_parameter_list_in_a_module_is_trained_and_saved():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.ws = nn.ParameterList([nn.Parameter(md.ones(2)) for _ in range(2)])

    m = M()
    assert list(m.state_dict()) == ["ws.0", "ws.1"]
    (m.ws[0] * m.ws[1]).sum().backward()
    np.testing.assert_allclose(m.ws[0].grad.numpy(), [1.0, 1.0])


def test_parameter_dict_matches_torch_order_and_names():
    torch = pytest.importorskip("torch")
    ours = nn.ParameterDict({"b": nn.Parameter(md.zeros(2)), "a": nn.Parameter(md.zeros(1))})
    theirs = torch.nn.ParameterDict({"b": torch.nn.Parameter(torch.zeros(2)), "a": torch.nn.Parameter(torch.zeros(1))})
    assert list(ours.keys()) == list(theirs.keys())
    ours.update(OrderedDict([("z", md.zeros(3)), ("c", md.zeros(3))]))
    theirs.update(OrderedDict([("z", torch.zeros(3)), ("c", torch.zeros(3))]))
    assert list(ours) == list(theirs) and "z" in ours and len(ours) == 4
    assert ours.pop("z").shape == (3,) and "z" not in ours
    assert ours.get("missing") is None
    with pytest.raises(KeyError):
        ours["missing"]
    ours.clear()
    assert len(ours) == 0 and list(ours.parameters()) == []


# nn.utils ------------------------------------------------------------------------------------

def test_parameters_to_vector_and_back_match_torch():
    torch = pytest.importorskip("torch")
    ours, theirs = nn.Linear(3, 2), torch.nn.Linear(3, 2)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    v = nn.utils.parameters_to_vector(ours.parameters())
    np.testing.assert_allclose(v.detach().numpy(),
                               torch.nn.utils.parameters_to_vector(theirs.parameters()).detach().numpy())
    (v * md.arange(8).float()).sum().backward()                 # the vector is in the graph
    np.testing.assert_allclose(ours.weight.grad.numpy(), np.arange(6).reshape(2, 3))
    new = md.arange(8).float()
    nn.utils.vector_to_parameters(new, ours.parameters())
    np.testing.assert_allclose(ours.bias.detach().numpy(), [6.0, 7.0])
    np.testing.assert_allclose(ours.weight.detach().numpy(), np.arange(6).reshape(2, 3))


@pytest.mark.parametrize("call,exc,match", [
    (lambda p: nn.utils.vector_to_parameters([1.0], p), TypeError, "expected Tensor, but got: list"),
    (lambda p: nn.utils.vector_to_parameters(md.zeros(7), p), RuntimeError, "at least 8 elements.*got shape \\[7\\]"),
    (lambda p: nn.utils.parameters_to_vector(next(iter(p))), TypeError, "got a single Tensor"),
    (lambda p: nn.utils.parameters_to_vector([]), RuntimeError, "non-empty"),
])
def test_vector_conversion_rejects_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call(list(nn.Linear(3, 2).parameters()))


def test_clip_grad_value_matches_torch():
    torch = pytest.importorskip("torch")
    g = np.array([-3.0, -0.5, 0.2, 4.0])
    p, tp = nn.Parameter(md.zeros(4, dtype=md.float64)), torch.nn.Parameter(torch.zeros(4, dtype=torch.float64))
    p.grad, tp.grad = md.tensor(g), torch.tensor(g)
    nn.utils.clip_grad_value_([p], 1.0)
    torch.nn.utils.clip_grad_value_([tp], 1.0)
    np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy())
