"""nn.Module API details that PyTorch code relies on: registration rules, traversal, train/eval,
state_dict / load_state_dict (hooks, assign, extra state), module hooks, containers and init."""
import copy
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.modules.module as module_mod
from minidl.nn import init
from minidl.nn.parameter import Buffer


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 3)
        self.register_buffer("steps", md.zeros(()))

    def forward(self, x, scale=1.0):
        return self.fc(x) * scale


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(2, 2)
        self.b = self.a


# registration and attribute rules --------------------------------------------------------

def test_editing_a_registry_directly_is_seen_through_the_attribute():
    m = nn.Linear(2, 2)
    p = nn.Parameter(md.zeros(2, 2))
    m._parameters["weight"] = p          # as reparametrizations and pruning do
    assert m.weight is p
    np.testing.assert_allclose(m(md.ones(1, 2)).detach().numpy(), m.bias.detach().numpy()[None])
    m._buffers["extra"] = md.ones(1)
    assert "extra" in m.state_dict() and m.extra is m._buffers["extra"]


def test_plain_attributes_may_be_set_before_module_init_but_parameters_not():
    class Early(nn.Module):
        def __init__(self):
            self.width = 3
            super().__init__()

    class EarlyParam(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(md.zeros(1))

    assert Early().width == 3
    with pytest.raises(AttributeError, match="before Module.__init__"):
        EarlyParam()


def test_a_module_cannot_replace_a_parameter_but_a_parameter_can_replace_a_module():
    m = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="as parameter 'weight'"):
        m.weight = nn.ReLU()
    t = Tied()
    t.a = nn.Parameter(md.zeros(2))
    assert [n for n, _ in t.named_parameters()] == ["a", "b.weight", "b.bias"]
    assert [n for n, _ in t.named_children()] == ["b"]


def test_a_module_assigned_over_a_buffer_replaces_it():
    n = Net()
    n.steps = nn.ReLU()
    assert "steps" not in n.state_dict() and [k for k, _ in n.named_children()] == ["fc", "steps"]


def test_registering_a_buffer_again_sets_its_persistence_anew():
    m = nn.Module()
    m.register_buffer("b", md.ones(1), persistent=False)
    assert list(m.state_dict()) == []
    m.register_buffer("b", md.ones(1))
    assert list(m.state_dict()) == ["b"]
    m.register_buffer("c", md.ones(1), persistent=False)
    m.c = nn.Parameter(md.ones(1))     # a parameter over it forgets that it was non-persistent
    del m.c
    m.register_buffer("c", md.ones(1))
    assert list(m.state_dict()) == ["b", "c"]


def test_a_tensor_assigned_over_a_non_persistent_buffer_stays_non_persistent():
    m = nn.Module()
    m.register_buffer("b", md.ones(1), persistent=False)
    m.b = md.zeros(2)
    assert list(m.state_dict()) == [] and [n for n, _ in m.named_buffers()] == ["b"]


def test_buffer_assignment_registers_a_buffer_with_its_persistence():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.kept = Buffer(md.zeros(2))
            self.scratch = Buffer(md.ones(1), persistent=False)

    m = M()
    assert list(m.state_dict()) == ["kept"]
    assert [n for n, _ in m.named_buffers()] == ["kept", "scratch"]
    assert type(m.kept) is md.Tensor


def test_set_submodule_replaces_adds_and_checks():
    n = Net()
    n.set_submodule("fc", nn.ReLU())
    assert isinstance(n.fc, nn.ReLU)
    s = nn.Sequential(Net())
    s.set_submodule("0.extra", nn.Tanh())
    assert isinstance(s[0].extra, nn.Tanh)
    with pytest.raises(AttributeError, match="has no attribute `missing`"):
        s.set_submodule("0.missing", nn.Tanh(), strict=True)
    with pytest.raises(AttributeError, match="`steps` is not an nn.Module"):
        s.set_submodule("0.steps", nn.Tanh())
    with pytest.raises(ValueError, match="is not an nn.Module"):
        s.set_submodule("0.fc", 3)
    with pytest.raises(ValueError, match="without a target name"):
        s.set_submodule("", nn.Tanh())


def test_dir_lists_registered_names_but_no_index_names():
    d = dir(nn.ModuleDict({"0a": nn.ReLU(), "x": nn.ReLU()}))
    assert "x" in d and "0a" not in d
    assert {"fc", "steps", "training", "forward"} <= set(dir(Net()))
    assert Net()._get_name() == "Net"


# traversal ---------------------------------------------------------------------------------

def test_named_parameters_and_children_remove_duplicates_as_asked():
    t = Tied()
    assert [n for n, _ in t.named_parameters()] == ["a.weight", "a.bias"]
    assert [n for n, _ in t.named_parameters(remove_duplicate=False)] == ["a.weight", "a.bias", "b.weight",
                                                                           "b.bias"]
    assert [n for n, _ in t.named_children()] == ["a"]
    assert len(list(t.modules(remove_duplicate=False))) == 3


def test_named_buffers_without_removing_duplicates_follows_shared_modules():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = Net()
            self.b = self.a

    assert [n for n, _ in M().named_buffers(remove_duplicate=False)] == ["a.steps", "b.steps"]


def test_train_goes_through_each_childs_train_and_wants_a_bool():
    class Frozen(nn.Module):
        def train(self, mode=True):
            return super().train(False)

    s = nn.Sequential(Frozen(), nn.ReLU())
    assert s.train() is s and s.training and not s[0].training and s[1].training
    with pytest.raises(ValueError, match="boolean"):
        s.train("yes")


def test_requires_grad_takes_its_pytorch_keyword():
    n = Net()
    assert n.requires_grad_(requires_grad=False) is n
    assert not any(p.requires_grad for p in n.parameters())


def test_zero_grad_without_set_to_none_zeroes_in_place():
    lin = nn.Linear(2, 2)
    lin(md.ones(1, 2)).sum().backward()
    g = lin.weight.grad
    lin.zero_grad(set_to_none=False)
    assert lin.weight.grad is g and not np.any(g.numpy())
    lin.zero_grad()
    assert lin.weight.grad is None


def test_type_casts_every_tensor():
    n = Net().type(md.float64)
    assert n.fc.weight.dtype == md.float64 and n.steps.dtype == md.float64


# state_dict / load_state_dict ------------------------------------------------------------

def test_state_dict_prefix_is_prepended_as_given():
    assert list(Net().state_dict(prefix="p")) == ["psteps", "pfc.weight", "pfc.bias"]
    with pytest.warns(FutureWarning):
        assert list(Net().state_dict(None, "q.")) == ["q.steps", "q.fc.weight", "q.fc.bias"]


def test_state_dict_hooks():
    n, seen = Net(), []
    n.register_state_dict_pre_hook(lambda m, prefix, keep_vars: seen.append(("pre", prefix)))
    n.fc.register_state_dict_pre_hook(lambda m, prefix, keep_vars: seen.append(("pre", prefix)))

    def post(m, sd, prefix, local_metadata):
        sd[prefix + "added"] = md.ones(1)

    n.register_state_dict_post_hook(post)
    assert list(n.state_dict(prefix="p.")) == ["p.steps", "p.fc.weight", "p.fc.bias", "p.added"]
    assert seen == [("pre", "p."), ("pre", "p.fc.")]
    n.register_state_dict_post_hook(lambda m, sd, prefix, meta: {})
    with pytest.raises(RuntimeError, match="must return None"):
        n.state_dict()


def test_load_state_dict_reports_keys_as_pytorch():
    result = Net().load_state_dict({"fc.weight": md.ones(3, 2), "zz": md.ones(1), "fc.zz": md.ones(1),
                                    "fc": md.ones(1)}, strict=False)
    assert result.missing_keys == ["steps", "fc.bias"]
    assert sorted(result.unexpected_keys) == ["fc", "fc.zz", "zz"]


def test_load_state_dict_takes_a_one_element_vector_into_a_scalar():
    n = Net()
    n.load_state_dict({**n.state_dict(), "steps": md.full((1,), 7.0)})
    assert float(n.steps) == 7.0


def test_load_state_dict_with_assign_takes_the_checkpoint_tensors():
    n = Net()
    n.fc.weight.requires_grad_(False)
    sd = Net().state_dict()
    w = md.full((3, 2), 5.0, dtype=md.float64)
    sd["fc.weight"] = w
    n.load_state_dict(sd, assign=True)
    assert isinstance(n.fc.weight, nn.Parameter) and n.fc.weight.dtype == md.float64
    assert not n.fc.weight.requires_grad and n.fc.bias.requires_grad
    assert n.steps is sd["steps"]
    w.add_(1)                          # the same memory, not a copy
    assert float(n.fc.weight.sum()) == 36.0


def test_load_state_dict_copies_and_counts_a_write():
    n = Net()
    y = (n.fc.weight * n.fc.weight).sum()
    n.load_state_dict(Net().state_dict())
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_load_state_dict_pre_hook_may_rename_keys():
    n = Net()

    def rename(module, state_dict, prefix, local_metadata, strict, missing, unexpected, errors):
        if prefix + "old_w" in state_dict:
            state_dict[prefix + "weight"] = state_dict.pop(prefix + "old_w")

    n.fc.register_load_state_dict_pre_hook(rename)
    sd = Net().state_dict()
    sd["fc.old_w"] = sd.pop("fc.weight") * 0 + 3
    result = n.load_state_dict(sd)
    assert not result.missing_keys and not result.unexpected_keys
    assert float(n.fc.weight.sum()) == 18.0


def test_load_state_dict_pre_hooks_get_the_modules_prefix():
    seen = []
    s = nn.Sequential(Net())
    s[0].fc.register_load_state_dict_pre_hook(lambda m, sd, prefix, *rest: seen.append(prefix))
    s[0].fc._register_load_state_dict_pre_hook(lambda sd, prefix, *rest: seen.append("private " + prefix))
    s.load_state_dict(s.state_dict())
    assert seen == ["0.fc.", "private 0.fc."]


def test_load_state_dict_post_hook_may_forgive_missing_keys():
    n = Net()
    n.register_load_state_dict_post_hook(lambda module, keys: keys.missing_keys.clear())
    result = n.load_state_dict({"fc.weight": md.ones(3, 2)})
    assert result.missing_keys == [] and float(n.fc.weight.sum()) == 6.0
    n.register_load_state_dict_post_hook(lambda module, keys: 1)
    with pytest.raises(AssertionError, match="not expected to return new values"):
        n.load_state_dict(n.state_dict())


def test_extra_state_is_saved_and_loaded():
    class WithExtra(nn.Module):
        def __init__(self):
            super().__init__()
            self.v = 5
            self.lin = nn.Linear(1, 1)

        def get_extra_state(self):
            return {"v": self.v}

        def set_extra_state(self, state):
            self.v = state["v"]

    sd = WithExtra().state_dict()
    assert list(sd) == ["_extra_state", "lin.weight", "lin.bias"]
    other = WithExtra()
    other.v = 0
    other.load_state_dict(sd)
    assert other.v == 5
    del sd["_extra_state"]
    assert WithExtra().load_state_dict(sd, strict=False).missing_keys == ["_extra_state"]
    result = nn.Linear(1, 1).load_state_dict({"_extra_state": 1, "weight": md.ones(1, 1), "bias": md.ones(1)},
                                             strict=False)
    assert result.unexpected_keys == ["_extra_state"]


def test_state_dict_and_loading_agree_with_pytorch():
    torch = pytest.importorskip("torch")

    def build(lib):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.body = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.LayerNorm(3))
                self.head = self.body[0]
                self.register_buffer("scratch", lib.zeros(1), persistent=False)
                self.register_buffer("count", lib.zeros(()))
        return M()

    ours, theirs = build(md), build(torch)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert list(ours.state_dict(prefix="x")) == list(theirs.state_dict(prefix="x"))
    partial = {"body.0.weight": None, "body.9.x": None, "head": None, "body.1.zz": None}
    r_ours = ours.load_state_dict({k: md.zeros(3, 2) for k in partial}, strict=False)
    r_theirs = theirs.load_state_dict({k: torch.zeros(3, 2) for k in partial}, strict=False)
    assert r_ours.missing_keys == r_theirs.missing_keys
    assert sorted(r_ours.unexpected_keys) == sorted(r_theirs.unexpected_keys)


# module hooks ------------------------------------------------------------------------------

def test_forward_hooks_with_kwargs():
    n, seen = Net(), []

    def pre(module, args, kwargs):
        seen.append(sorted(kwargs))
        return args, {"scale": 2.0}

    def post(module, args, kwargs, output):
        seen.append(kwargs["scale"])
        return output * 0 + 1

    n.register_forward_pre_hook(pre, with_kwargs=True)
    n.register_forward_hook(post, with_kwargs=True)
    assert float(n(md.ones(1, 2), scale=3.0).sum()) == 3.0
    assert seen == [["scale"], 2.0]


def test_a_kwargs_pre_hook_must_return_args_and_kwargs():
    n = Net()
    n.register_forward_pre_hook(lambda m, args, kwargs: args, with_kwargs=True)
    with pytest.raises(RuntimeError, match="tuple of \\(new_args, new_kwargs\\)"):
        n(md.ones(1, 2))


def test_prepended_hooks_run_first():
    n, order = Net(), []
    n.register_forward_hook(lambda m, a, o: order.append(1))
    n.register_forward_hook(lambda m, a, o: order.append(2), prepend=True)
    n.register_forward_pre_hook(lambda m, a: order.append("p1"))
    n.register_forward_pre_hook(lambda m, a: order.append("p2"), prepend=True)
    n(md.ones(1, 2))
    assert order == ["p2", "p1", 2, 1]


def test_an_always_call_hook_runs_when_forward_raises():
    class Broken(nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    b, seen = Broken(), []
    b.register_forward_hook(lambda m, a, o: seen.append(("always", o)), always_call=True)
    b.register_forward_hook(lambda m, a, o: seen.append("normal"))
    with pytest.raises(ValueError, match="boom"):
        b(md.ones(1))
    assert seen == [("always", None)]


def test_removing_a_hook_forgets_its_flags():
    n = Net()
    handle = n.register_forward_hook(lambda m, a, k, o: o * 0, with_kwargs=True, always_call=True)
    handle.remove()
    assert float(n(md.ones(1, 2)).abs().sum()) > 0
    assert not n._forward_hooks and not n._forward_hooks_with_kwargs and not n._forward_hooks_always_called


def test_full_backward_pre_hook_can_replace_grad_output():
    lin, seen = nn.Linear(2, 2), []

    def pre(module, grad_output):
        seen.append(("pre", float(grad_output[0].sum())))
        return (grad_output[0] * 2,)

    lin.register_full_backward_pre_hook(pre)
    lin.register_full_backward_hook(lambda m, gi, go: seen.append(("full", float(go[0].sum()))))
    x = md.ones(1, 2, requires_grad=True)
    lin(x).sum().backward()
    assert seen == [("pre", 2.0), ("full", 4.0)]
    np.testing.assert_allclose(x.grad.numpy()[0], 2 * lin.weight.detach().numpy().sum(0), rtol=1e-6)


def test_global_module_hooks_run_for_every_module_and_can_be_removed():
    seen = []
    h1 = module_mod.register_module_forward_pre_hook(lambda m, a: seen.append(("pre", type(m).__name__)))
    h2 = module_mod.register_module_forward_hook(lambda m, a, o: seen.append(("fwd", type(m).__name__)))
    h3 = module_mod.register_module_full_backward_hook(lambda m, gi, go: seen.append(("bwd", type(m).__name__)))
    try:
        nn.Sequential(nn.Linear(2, 2))(md.ones(1, 2, requires_grad=True)).sum().backward()
    finally:
        h1.remove(), h2.remove(), h3.remove()
    nn.ReLU()(md.ones(1))
    assert seen == [("pre", "Sequential"), ("pre", "Linear"), ("fwd", "Linear"), ("fwd", "Sequential"),
                    ("bwd", "Linear"), ("bwd", "Sequential")]


def test_hooks_registered_on_a_lazy_module_survive_its_first_call():
    lazy, seen = nn.LazyLinear(2), []
    lazy.register_forward_hook(lambda m, a, k, o: seen.append(sorted(k)), with_kwargs=True)
    lazy(md.ones(3, 4))
    lazy(md.ones(3, 4))
    assert seen == [[], []]


def test_a_deep_copy_keeps_hooks_and_ties():
    t = Tied()
    t.register_forward_hook(lambda m, a, o: None)
    c = copy.deepcopy(t)
    assert c.a is c.b and c.a.weight is not t.a.weight and len(c._forward_hooks) == 1


# containers --------------------------------------------------------------------------------

def _kinds(container):
    return [type(m).__name__ for m in container]


def test_sequential_insert_counts_a_negative_index_from_the_end():
    s = nn.Sequential(nn.Identity(), nn.Tanh(), nn.Sigmoid())
    s.insert(-1, nn.ReLU())
    assert _kinds(s) == ["Identity", "Tanh", "ReLU", "Sigmoid"] and list(s._modules) == ["0", "1", "2", "3"]
    s.insert(-4, nn.ELU())
    assert _kinds(s)[0] == "ELU"
    with pytest.raises(IndexError):
        s.insert(-6, nn.ReLU())


def test_sequential_pop_iadd_and_repetition():
    s = nn.Sequential(nn.Identity(), nn.ReLU(), nn.Tanh())
    assert isinstance(s.pop(1), nn.ReLU) and _kinds(s) == ["Identity", "Tanh"] and list(s._modules) == ["0", "1"]
    same = s
    s += nn.Sequential(nn.Sigmoid())
    assert s is same and _kinds(s) == ["Identity", "Tanh", "Sigmoid"]
    with pytest.raises(ValueError, match="only objects of Sequential"):
        s += [nn.ReLU()]
    with pytest.raises(ValueError, match="only objects of Sequential"):
        s + [nn.ReLU()]
    lin = nn.Linear(1, 1)
    twice = nn.Sequential(lin) * 2
    assert _kinds(twice) == ["Linear", "Linear"] and twice[0] is twice[1]
    assert _kinds(3 * nn.Sequential(lin)) == ["Linear"] * 3
    rep = nn.Sequential(lin)
    same = rep
    rep *= 3
    assert rep is same and len(rep) == 3
    with pytest.raises(ValueError, match="Non-positive"):
        nn.Sequential(lin) * 0


def test_module_list_pop_extend_and_indices():
    ml = nn.ModuleList([nn.Identity(), nn.ReLU(), nn.Tanh()])
    assert isinstance(ml.pop(-1), nn.Tanh) and len(ml) == 2
    assert isinstance(ml.pop(slice(0, 1)), nn.ModuleList) and _kinds(ml) == ["ReLU"]
    with pytest.raises(TypeError, match="should be called with an iterable"):
        ml.extend(3)
    with pytest.raises(TypeError):
        ml[0.0]
    ml.extend(ml)
    assert len(ml) == 2
    ml.insert(-1, nn.Identity())
    assert _kinds(ml) == ["ReLU", "Identity", "ReLU"]
    del ml[::2]
    assert _kinds(ml) == ["Identity"] and list(ml._modules) == ["0"]


def test_module_dict_update_checks_its_argument():
    with pytest.raises(TypeError, match="iterable of key/value pairs"):
        nn.ModuleDict(3)
    with pytest.raises(ValueError, match="has length 3; 2 is required"):
        nn.ModuleDict([("a", nn.ReLU(), 1)])
    d = nn.ModuleDict([("b", nn.ReLU()), ("a", nn.Tanh())])
    assert list(d) == ["b", "a"]
    d.clear()
    assert len(d) == 0 and not hasattr(d, "a")


def test_parameter_dict_has_the_dict_methods_of_pytorch():
    pd = nn.ParameterDict(OrderedDict(a=md.zeros(1), b=md.ones(2)))
    assert list(reversed(pd)) == ["b", "a"]
    assert pd.setdefault("c", md.ones(3)).shape == (3,) and list(pd) == ["a", "b", "c"]
    copied = pd.copy()
    assert isinstance(copied, nn.ParameterDict) and copied["a"] is pd["a"]
    assert pd.popitem()[0] == "c" and list(pd) == ["a", "b"]
    assert list(pd | nn.ParameterDict({"z": md.zeros(1)})) == ["a", "b", "z"]
    assert list(pd.fromkeys(["x", "y"], md.zeros(1))) == ["x", "y"]
    pd |= {"q": md.zeros(1)}
    assert "q" in pd
    with pytest.raises(TypeError, match="not a string"):
        pd[1] = md.zeros(1)


@pytest.mark.parametrize("container", [nn.ParameterList([md.zeros(1)]), nn.ParameterDict({"a": md.zeros(1)})])
def test_parameter_containers_cannot_be_called(container):
    with pytest.raises(RuntimeError, match="should not be called"):
        container(md.zeros(1))


def test_container_operations_agree_with_pytorch():
    torch = pytest.importorskip("torch")

    def run(lib):
        s = lib.nn.Sequential(lib.nn.Identity(), lib.nn.ReLU(), lib.nn.Tanh())
        s.insert(-1, lib.nn.Sigmoid())
        s.pop(0)
        s += lib.nn.Sequential(lib.nn.ELU())
        s = 2 * s
        del s[1:3]
        ml = lib.nn.ModuleList([lib.nn.ReLU(), lib.nn.Tanh()])
        ml.pop(0)
        ml += [lib.nn.ELU()]
        return [type(m).__name__ for m in s], list(s._modules), [type(m).__name__ for m in ml]

    assert run(md) == run(torch)


# init --------------------------------------------------------------------------------------

def test_init_counts_as_an_in_place_write():
    p = nn.Parameter(md.ones(3))
    y = (p * p).sum()
    init.constant_(p, 2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_init_records_no_history_and_returns_its_tensor():
    p = nn.Parameter(md.ones(4, 3))
    for fn in (init.zeros_, init.ones_, init.uniform_, init.normal_, init.xavier_uniform_, init.kaiming_normal_,
               init.trunc_normal_, lambda t: init.constant_(t, 0.5), lambda t: init.sparse_(t, 0.5)):
        assert fn(p) is p
        assert p.is_leaf and p.requires_grad and p.grad_fn is None
    with md.no_grad():
        assert init.kaiming_uniform_(p, mode="fan_out", nonlinearity="relu") is p


def test_sparse_zeroes_a_fraction_of_each_column():
    md.manual_seed(0)
    w = init.sparse_(md.empty(10, 4), sparsity=0.3, std=0.5)
    assert ((w.numpy() == 0).sum(axis=0) == 3).all()
    with pytest.raises(ValueError, match="2 dimensions"):
        init.sparse_(md.empty(3), 0.5)


def test_deprecated_init_names_warn_and_work():
    t = md.empty(3, 3)
    with pytest.warns(FutureWarning, match="nn.init.uniform_"):
        assert init.uniform(t, 2.0, 3.0) is t
    assert (t.numpy() >= 2).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        init.uniform_(t)


def test_a_batch_norm_state_without_its_batch_counter_loads_as_pytorch():
    bn = nn.BatchNorm1d(3)
    bn.num_batches_tracked.fill_(4)
    older = {k: v for k, v in nn.BatchNorm1d(3).state_dict().items() if k != "num_batches_tracked"}
    result = bn.load_state_dict(older)
    assert not result.missing_keys and not result.unexpected_keys and bn.num_batches_tracked.item() == 4
    assert isinstance(nn.Buffer(md.zeros(2)), md.Tensor)


def test_to_empty_keeps_the_objects_and_drops_the_values():
    m = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    weight = m[0].weight
    assert m.to_empty(device="cpu") is m
    assert m[0].weight is weight and weight.requires_grad and m[0].weight.abs().sum().item() == 0
    assert m[1].num_batches_tracked.dtype == md.int64
