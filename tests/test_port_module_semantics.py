"""Module machinery PyTorch programs rely on beyond the attribute API: what full and deprecated
backward hooks see, global registration hooks, containers holding None, lazy modules loaded
from a checkpoint, the state_dict's version metadata, deep copies of parameters, init's
generator argument and the PackedSequence conversions."""
import copy
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.modules.module as module_mod
from minidl.nn import init
from minidl.nn.utils import rnn


class TwoInputs(nn.Module):
    def forward(self, a, b):
        self.seen = (a.requires_grad, b.requires_grad)
        return a * b + a


class ThreeOutputs(nn.Module):
    def forward(self, a):
        return a * 2, a * 3, a * 4


def _np(t):
    return None if t is None else t.detach().numpy()


# full backward hooks ---------------------------------------------------------------------

def test_an_input_without_grad_stays_so_and_gets_a_zero_grad_input():
    m, rec = TwoInputs(), []
    m.register_full_backward_hook(lambda mod, gi, go: rec.append(gi))
    a, b = md.tensor([1.0, 2.0], requires_grad=True), md.tensor([3.0, 4.0])
    m(a, b).sum().backward()
    assert m.seen == (True, False)
    (gi,) = rec
    np.testing.assert_allclose(_np(gi[0]), [4.0, 5.0])
    np.testing.assert_allclose(_np(gi[1]), [0.0, 0.0])
    np.testing.assert_allclose(a.grad.numpy(), [4.0, 5.0])


def test_an_output_outside_the_loss_has_a_none_grad_output():
    m, pre, full = ThreeOutputs(), [], []
    m.register_full_backward_pre_hook(lambda mod, go: pre.append(go))
    m.register_full_backward_hook(lambda mod, gi, go: full.append(go))
    a = md.tensor([1.0, 2.0], requires_grad=True)
    o = m(a)
    (o[1] * o[2]).sum().backward()
    assert pre[0][0] is None and full[0][0] is None
    np.testing.assert_allclose(_np(pre[0][1]), [4.0, 8.0])        # d(3a * 4a)/d(3a) = 4a
    np.testing.assert_allclose(a.grad.numpy(), [24.0, 48.0])


def test_a_pre_hook_may_fill_a_missing_grad_output():
    m, missing = ThreeOutputs(), []

    def fill(mod, go):
        missing.append([g is None for g in go])
        return md.ones(2), go[1], go[2]

    m.register_full_backward_pre_hook(fill)
    a = md.tensor([1.0, 2.0], requires_grad=True)
    m(a)[1].sum().backward()
    assert missing == [[True, False, True]]
    np.testing.assert_allclose(a.grad.numpy(), [5.0, 5.0])        # 2 * 1 + 3 * 1


def test_the_same_tensor_twice_gives_two_separate_grad_inputs():
    m, rec = TwoInputs(), []
    m.register_full_backward_hook(lambda mod, gi, go: rec.append(gi))
    a = md.tensor([1.0, 2.0], requires_grad=True)
    m(a, a).sum().backward()
    np.testing.assert_allclose(_np(rec[0][0]), [2.0, 3.0])        # b + 1
    np.testing.assert_allclose(_np(rec[0][1]), [1.0, 2.0])        # a


def test_no_full_hook_runs_when_the_output_is_not_a_tensor():
    class DictOut(nn.Module):
        def forward(self, a):
            return {"x": a * 2}

    m, rec = DictOut(), []
    m.register_full_backward_hook(lambda mod, gi, go: rec.append(gi))
    a = md.tensor([1.0, 2.0], requires_grad=True)
    m(a)["x"].sum().backward()
    assert rec == [] and a.grad.tolist() == [2.0, 2.0]


def test_full_hooks_agree_with_pytorch():
    torch = pytest.importorskip("torch")

    def run(lib):
        class M(lib.nn.Module):
            def forward(self, a, b):
                return a * b, a + 1, b * 2

        m, rec = M(), []
        m.register_full_backward_pre_hook(lambda mod, go: rec.append(["pre"] + [None if g is None else g.tolist()
                                                                                 for g in go]))
        m.register_full_backward_hook(lambda mod, gi, go: rec.append(
            [None if g is None else g.tolist() for g in gi] + [None if g is None else g.tolist() for g in go]))
        a = lib.tensor([1.0, -2.0], requires_grad=True)
        out = m(a, lib.tensor([3.0, 5.0]))
        (out[0] * out[1]).sum().backward()
        return rec, a.grad.tolist(), out[2].requires_grad

    assert run(md) == run(torch)


# deprecated (non-full) backward hooks --------------------------------------------------------

def test_a_backward_hook_sees_the_output_nodes_gradients_and_may_replace_them():
    t, rec = nn.Tanh(), []
    t.register_backward_hook(lambda mod, gi, go: rec.append((_np(gi[0]), _np(go[0]))))
    x = md.tensor([0.0, 1.0], requires_grad=True)
    t(x * 1).sum().backward()
    np.testing.assert_allclose(rec[0][0], 1 - np.tanh([0.0, 1.0]) ** 2, rtol=1e-6)
    np.testing.assert_allclose(rec[0][1], [1.0, 1.0])
    t2 = nn.Tanh()
    t2.register_backward_hook(lambda mod, gi, go: (gi[0] * 0 + 5,))
    x = md.tensor([0.0, 1.0], requires_grad=True)
    t2(x * 1).sum().backward()
    assert x.grad.tolist() == [5.0, 5.0]


def test_a_backward_hook_on_a_leaf_input_warns_that_grad_input_may_be_partial():
    lin = nn.Linear(3, 2)
    lin.register_backward_hook(lambda *a: None)
    with pytest.warns(FutureWarning, match="multiple autograd Nodes"):
        lin(md.ones(4, 3, requires_grad=True)).sum().backward()


def test_backward_hooks_of_both_kinds_cannot_share_a_module():
    r = nn.ReLU()
    assert r._is_full_backward_hook is None
    r.register_backward_hook(lambda *a: None)
    assert r._is_full_backward_hook is False
    with pytest.raises(RuntimeError, match="Cannot use both regular backward hooks and full backward hooks"):
        r.register_full_backward_hook(lambda *a: None)
    r2 = nn.ReLU()
    r2.register_full_backward_hook(lambda *a: None).remove()
    with pytest.raises(RuntimeError, match="on a single Module"):
        r2.register_backward_hook(lambda *a: None)


def test_a_global_deprecated_backward_hook_runs_for_every_module(monkeypatch):
    from minidl.nn.modules import hooks
    monkeypatch.setattr(hooks, "_global_is_full", [None])   # a global full hook registered by an earlier test
    seen = []                                                # would make this one a mixing error, as in PyTorch
    handle = module_mod.register_module_backward_hook(lambda m, gi, go: seen.append(type(m).__name__))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            nn.Sequential(nn.Tanh())(md.ones(2, requires_grad=True) * 1).sum().backward()
    finally:
        handle.remove()
    assert seen == ["Tanh", "Sequential"]


# registration hooks, compile -----------------------------------------------------------------

def test_global_registration_hooks_see_and_may_replace_what_is_registered():
    seen = []
    hooks = [module_mod.register_module_parameter_registration_hook(lambda m, n, p: seen.append(("p", n))),
             module_mod.register_module_buffer_registration_hook(lambda m, n, b: seen.append(("b", n))),
             module_mod.register_module_module_registration_hook(lambda m, n, c: seen.append(("m", n))),
             module_mod.register_module_buffer_registration_hook(
                 lambda m, n, b: None if b is None else b + 10)]
    try:
        s = nn.Sequential(nn.BatchNorm1d(2))
    finally:
        for h in hooks:
            h.remove()
    assert seen == [("p", "weight"), ("p", "bias"), ("b", "running_mean"), ("b", "running_var"),
                    ("b", "num_batches_tracked"), ("m", "0")]
    assert s[0].running_var.tolist() == [11.0, 11.0]
    assert nn.BatchNorm1d(2).running_var.tolist() == [1.0, 1.0]


def test_module_compile_is_a_no_op():
    lin = nn.Linear(2, 2)
    assert lin.compile(fullgraph=True) is None and type(lin) is nn.Linear


# containers ----------------------------------------------------------------------------------

def test_containers_hold_none_as_pytorch_does():
    ml = nn.ModuleList([None, nn.ReLU()])
    ml.append(None)
    assert [type(m).__name__ for m in ml] == ["NoneType", "ReLU", "NoneType"]
    assert [n for n, _ in ml.named_children()] == ["1"]
    assert repr(ml) == "ModuleList(\n  (0): None\n  (1): ReLU()\n  (2): None\n)"
    ml[1] = None
    assert ml[1] is None
    d = nn.ModuleDict({"a": None, "b": nn.Tanh()})
    assert list(d) == ["a", "b"] and d["a"] is None
    s = nn.Sequential(None)
    assert repr(s) == "Sequential(\n  (0): None\n)"


def test_sequential_insert_of_a_non_module_is_an_assertion_error():
    with pytest.raises(AssertionError, match="module should be of type"):
        nn.Sequential(nn.ReLU()).insert(0, 3)


def test_parameter_container_reprs_agree_with_pytorch():
    torch = pytest.importorskip("torch")

    def reprs(lib):
        values = [lib.tensor(1.0), lib.ones(2, 3, dtype=lib.float64)]
        return (repr(lib.nn.ParameterList(values)).replace("torch.", "").replace("minidl.", ""),
                repr(lib.nn.ParameterDict({"a": values[0], "b": values[1]})).replace("torch.", "").replace(
                    "minidl.", ""))

    assert reprs(md) == reprs(torch)


# parameters ----------------------------------------------------------------------------------

def test_a_deep_copied_parameter_has_no_grad_but_keeps_requires_grad():
    lin = nn.Linear(2, 2)
    lin(md.ones(1, 2)).sum().backward()
    c = copy.deepcopy(lin)
    assert c.weight.grad is None and lin.weight.grad is not None
    assert type(c.weight) is nn.Parameter and c.weight.requires_grad
    frozen = nn.Parameter(md.ones(2, dtype=md.float64), requires_grad=False)
    q = copy.deepcopy([frozen, frozen])
    assert q[0] is q[1] and not q[0].requires_grad and q[0].dtype == md.float64
    q[0].add_(1)
    assert frozen.tolist() == [1.0, 1.0]


def test_nn_parameter_exports_the_lazy_placeholders():
    from minidl.nn.parameter import UninitializedBuffer, UninitializedParameter, is_lazy
    assert is_lazy(UninitializedParameter()) and is_lazy(UninitializedBuffer())
    assert not is_lazy(nn.Parameter(md.ones(1)))


# init ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [init.uniform_, init.normal_, init.xavier_uniform_, init.xavier_normal_,
                                init.kaiming_uniform_, init.kaiming_normal_, init.trunc_normal_, init.orthogonal_,
                                lambda t, generator: init.sparse_(t, 0.5, generator=generator)])
def test_init_draws_from_a_minidl_generator(fn):
    a = fn(md.empty(4, 3), generator=md.Generator().manual_seed(3))
    b = fn(md.empty(4, 3), generator=md.Generator().manual_seed(3))
    c = fn(md.empty(4, 3), generator=md.Generator().manual_seed(4))
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not np.array_equal(a.numpy(), c.numpy())


# lazy modules ----------------------------------------------------------------------------------

def test_a_lazy_linear_loads_a_checkpoint_before_its_first_forward():
    lazy = nn.LazyLinear(3)
    opt_params = list(lazy.parameters())
    sd = nn.Linear(4, 3).state_dict()
    result = lazy.load_state_dict(sd)
    assert not result.missing_keys and not result.unexpected_keys
    assert isinstance(lazy, nn.LazyLinear) and tuple(lazy.weight.shape) == (3, 4)
    x = md.ones(2, 4)
    y = lazy(x)
    assert type(lazy) is nn.Linear and lazy.weight is opt_params[0]
    np.testing.assert_allclose(lazy.weight.detach().numpy(), sd["weight"].detach().numpy())
    np.testing.assert_allclose(y.detach().numpy(), x.numpy() @ sd["weight"].numpy().T + sd["bias"].numpy(),
                               rtol=1e-6)


def test_a_lazy_batch_norm_loads_its_running_statistics():
    src = nn.BatchNorm1d(3)
    src.running_mean.fill_(2.0)
    src.num_batches_tracked.fill_(7)
    lazy = nn.LazyBatchNorm1d()
    lazy.load_state_dict(src.state_dict())
    lazy.eval()
    lazy(md.ones(2, 3))
    assert type(lazy) is nn.BatchNorm1d
    assert lazy.running_mean.tolist() == [2.0, 2.0, 2.0] and int(lazy.num_batches_tracked) == 7


# state_dict metadata ------------------------------------------------------------------------

def test_state_dict_records_each_modules_version_as_pytorch():
    torch = pytest.importorskip("torch")

    def meta(lib):
        m = lib.nn.Sequential(lib.nn.Linear(1, 1), lib.nn.Sequential(lib.nn.ReLU()))
        return dict(m.state_dict()._metadata), dict(m.state_dict(prefix="p.")._metadata)

    assert meta(md) == meta(torch)


def test_loading_passes_the_saved_metadata_to_each_module():
    seen = []
    s = nn.Sequential(nn.Linear(1, 1))
    s[0]._register_load_state_dict_pre_hook(lambda sd, prefix, meta, *rest: seen.append(meta.get("version")))
    sd = s.state_dict()
    assert sd._metadata["0"] == {"version": 1}
    sd._metadata["0"]["version"] = 5
    s.load_state_dict(sd)
    assert seen == [5]
    assert copy.deepcopy(sd)._metadata["0"] == {"version": 5}


# flatten ---------------------------------------------------------------------------------------

def test_unflatten_keeps_its_size_as_given_and_checks_it():
    assert repr(nn.Unflatten(1, [2, 3])) == "Unflatten(dim=1, unflattened_size=[2, 3])"
    assert nn.Unflatten(1, [2, -1])(md.ones(4, 6)).shape == (4, 2, 3)
    with pytest.raises(TypeError, match="found element of type tuple at pos 0"):
        nn.Unflatten(1, (("a", 2), ("b", 3)))
    with pytest.raises(TypeError, match="a tuple of ints, but found type int"):
        nn.Unflatten(1, 5)


# rnn utilities ---------------------------------------------------------------------------------

def test_pad_sequence_rejects_an_unknown_side_as_pytorch():
    with pytest.raises(RuntimeError, match="Expected padding_side to be one of left or right, but got middle"):
        rnn.pad_sequence([md.ones(2), md.ones(1)], padding_side="middle")


def test_packed_sequence_converts_its_data_only():
    p = rnn.pack_sequence([md.tensor([1.0]), md.tensor([2.0, 3.0])], enforce_sorted=False)
    for name, dtype in (("double", md.float64), ("float", md.float32), ("half", md.float16), ("long", md.int64),
                        ("int", md.int32), ("short", md.int16), ("char", md.int8), ("byte", md.uint8)):
        q = getattr(p, name)()
        assert q.data.dtype == dtype and q.batch_sizes.dtype == md.int64
        assert q.sorted_indices.tolist() == [1, 0] and q.unsorted_indices.tolist() == [1, 0]
    assert p.cpu() is p and p.float() is p and not p.is_cuda and not p.is_pinned()


def test_invert_permutation():
    perm = md.tensor([2, 0, 3, 1], dtype=md.int32)
    inv = rnn.invert_permutation(perm)
    assert inv.dtype == md.int32 and inv.tolist() == np.argsort([2, 0, 3, 1]).tolist()
    assert rnn.invert_permutation(None) is None


def test_packed_sequence_conversions_agree_with_pytorch():
    torch = pytest.importorskip("torch")

    def run(lib):
        p = lib.nn.utils.rnn.pack_sequence([lib.tensor([1.0]), lib.tensor([2.0, 3.0]), lib.tensor([4.0, 5, 6])],
                                           enforce_sorted=False).double()
        inv = lib.nn.utils.rnn.invert_permutation(lib.tensor([1, 2, 0]))
        return str(p.data.dtype).split(".")[-1], p.data.tolist(), p.batch_sizes.tolist(), inv.tolist()

    assert run(md) == run(torch)


def test_module_dict_with_none_and_ordered_update_agrees_with_pytorch():
    torch = pytest.importorskip("torch")

    def run(lib):
        d = lib.nn.ModuleDict(OrderedDict([("z", None), ("a", lib.nn.ReLU())]))
        d.update([("m", None)])
        s = lib.nn.Sequential(lib.nn.ReLU())
        s.append(None)
        return list(d), repr(d), repr(s)

    assert run(md) == run(torch)
