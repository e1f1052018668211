"""torch.autograd.graph's surface on minidl's graph: Node (name, next_functions, metadata, hooks),
AccumulateGrad, GradientEdge, register_multi_grad_hook, increment_version and the saved-tensor
hooks (saved_tensors_hooks, save_on_cpu, disable_saved_tensors_hooks). Each behaviour is checked
on its own and, where torch is installed, against torch running the same program."""
import threading

import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl.autograd import Function, gradcheck
from minidl.autograd import op_function as function_module
from minidl.autograd.graph import (AccumulateGrad, GradientEdge, Node, disable_saved_tensors_hooks,
                                   get_gradient_edge, increment_version, register_multi_grad_hook, save_on_cpu,
                                   saved_tensors_hooks)

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 3))
W = RNG.standard_normal((2, 3))


class Cube(Function):
    """y = x**3 * k + b;  dy/dx = 3 k x**2, dy/db = 1 (k a number, not a Tensor)."""

    @staticmethod
    def forward(ctx, x, k, b):
        ctx.save_for_backward(x)
        ctx.k = k
        return x ** 3 * k + b

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * ctx.k * x ** 2 * g, None, g


def _leaf(a=X, lib=md):
    return lib.tensor(a.copy(), requires_grad=True)


# Node: name, next_functions, metadata ---------------------------------------------------------------

def test_grad_fn_is_a_node_named_as_pytorch_names_it():
    x = _leaf()
    y = x.exp()
    assert isinstance(y.grad_fn, Node)
    assert y.grad_fn.name() == "ExpBackward0"
    assert repr(y.grad_fn).startswith("<ExpBackward0 object at 0x")
    assert Cube.apply(x, 2.0, md.ones(3)).grad_fn.name() == "CubeBackward"     # a custom Function
    gelu = F.gelu(x).grad_fn        # its class keeps a kernel-name attribute called ``name``
    assert gelu.name() == "GeluBackward0"
    assert not isinstance(x, Node) and not isinstance(3, Node)


def test_next_functions_lead_to_producers_accumulate_grad_and_none():
    x, w = _leaf(), md.tensor(W)
    h = x * 2
    y = h * w
    (mul_node, i), (none, j) = y.grad_fn.next_functions
    assert mul_node is h.grad_fn and i == 0 and none is None and j == 0
    ((acc, k),) = h.grad_fn.next_functions            # ``* 2``: the number is not an input
    assert isinstance(acc, AccumulateGrad) and isinstance(acc, Node) and k == 0
    assert acc.variable is x and acc.next_functions == () and acc.name() == "torch::autograd::AccumulateGrad"
    assert x.exp().grad_fn.next_functions[0][0] is acc          # one node per leaf while it is held
    out = Cube.apply(x, 2.0, md.ones(3))                        # one entry per Tensor argument
    assert [(type(n), k) for n, k in out.grad_fn.next_functions] == [(AccumulateGrad, 0), (type(None), 0)]


def test_metadata_is_a_dict_kept_on_the_node():
    x = _leaf()
    y = x.exp()
    assert y.grad_fn.metadata == {}
    y.grad_fn.metadata["layer"] = "fc1"
    assert y.grad_fn.metadata == {"layer": "fc1"} and x.exp().grad_fn.metadata == {}
    acc = y.grad_fn.next_functions[0][0]
    acc.metadata["k"] = 1
    assert y.grad_fn.next_functions[0][0].metadata == {"k": 1}


# Node hooks -----------------------------------------------------------------------------------------

def _node_hook_program(lib):
    """Tensor hook, node pre-hook and post hook on one node; the post hook scales grad_inputs[0]."""
    a, b = _leaf(X, lib), _leaf(W, lib)
    c = a * b
    log = []
    c.register_hook(lambda g: log.append(("tensor", g.tolist())))
    c.grad_fn.register_prehook(lambda go: log.append(("pre", [g.tolist() for g in go])))
    c.grad_fn.register_hook(lambda gi, go: log.append(("post", len(gi), len(go))) or (gi[0] * 10, None))
    c.sum().backward()
    return log, a.grad.numpy(), b.grad


def test_node_hooks_run_in_order_and_replace_gradients():
    log, ga, gb = _node_hook_program(md)
    ones = np.ones_like(X).tolist()
    assert log == [("tensor", ones), ("pre", [ones]), ("post", 2, 1)]
    np.testing.assert_allclose(ga, 10 * W, rtol=1e-6)
    assert gb is None                                    # the hook dropped b's gradient


def test_node_hooks_match_torch():
    torch = pytest.importorskip("torch")
    log, ga, gb = _node_hook_program(md)
    tlog, tga, tgb = _node_hook_program(torch)
    assert log == tlog and gb is None and tgb is None
    np.testing.assert_allclose(ga, tga, rtol=1e-6)


def test_prehook_replaces_grad_outputs_and_handles_remove_hooks():
    x = _leaf()
    y = x.exp()
    handle = y.grad_fn.register_prehook(lambda go: (go[0] * 2,))
    y.sum().backward(retain_graph=True)
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(X), rtol=1e-6)
    handle.remove()
    x.grad = None
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp(X), rtol=1e-6)


def test_prehook_dropping_every_gradient_stops_the_flow():
    x = _leaf()
    h = x.exp()
    y = h * 3
    y.grad_fn.register_prehook(lambda go: (None,))
    (y.sum() + x.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), np.ones_like(X))


def test_accumulate_grad_hooks_see_the_leaf_gradient():
    x = _leaf()
    y = x.exp()
    acc = y.grad_fn.next_functions[0][0]
    seen = []
    acc.register_prehook(lambda go: seen.append("pre") or (go[0] * 0 + 1,))
    acc.register_hook(lambda gi, go: seen.append(("post", gi, go[0].tolist())))
    x.register_hook(lambda g: seen.append("tensor"))
    y.sum().backward()
    assert seen == ["tensor", "pre", ("post", (), np.ones_like(X).tolist())]
    np.testing.assert_allclose(x.grad.numpy(), np.ones_like(X))    # the pre-hook's replacement


_BAD_RESULTS = {
    "not a tuple": lambda g: 5,
    "a list": lambda g: [g],
    "two values": lambda g: (g, g),
    "a number inside": lambda g: (3,),
    "another shape": lambda g: (g[:1],),
    "another dtype": lambda g: (g.double(),),
}


@pytest.mark.parametrize("kind", ["pre", "post"])
@pytest.mark.parametrize("bad", sorted(_BAD_RESULTS))
def test_bad_hook_results_raise(kind, bad):
    expected = TypeError if bad in ("not a tuple", "a list", "a number inside") else RuntimeError
    x = md.tensor(X.astype(np.float32), requires_grad=True)
    y = x.exp()
    ret = _BAD_RESULTS[bad]
    if kind == "pre":
        y.grad_fn.register_prehook(lambda go: ret(go[0]))
    else:
        y.grad_fn.register_hook(lambda gi, go: ret(gi[0]))
    with pytest.raises(expected, match="hook|expected"):
        y.sum().backward()


@pytest.mark.parametrize("kind", ["pre", "post"])
@pytest.mark.parametrize("bad", sorted(_BAD_RESULTS))
def test_bad_hook_results_raise_what_torch_raises(kind, bad):
    torch = pytest.importorskip("torch")

    def run(lib):
        x = lib.tensor(X.astype(np.float32), requires_grad=True)
        y = x.exp()
        ret = _BAD_RESULTS[bad]
        if kind == "pre":
            y.grad_fn.register_prehook(lambda go: ret(go[0]))
        else:
            y.grad_fn.register_hook(lambda gi, go: ret(gi[0]))
        try:
            y.sum().backward()
        except (TypeError, RuntimeError) as e:
            return type(e)
        return None
    assert run(md) is run(torch) is not None


def test_registering_a_non_callable_hook_is_a_type_error():
    with pytest.raises(TypeError, match="callable"):
        _leaf().exp().grad_fn.register_hook(3)


# GradientEdge -----------------------------------------------------------------------------------------

def test_gradient_edge_names_where_the_gradient_is_computed():
    x = _leaf()
    h = x * 2
    y = h.exp().sum()
    ex, eh = get_gradient_edge(x), get_gradient_edge(h)
    assert isinstance(ex, GradientEdge) and isinstance(ex.node, AccumulateGrad) and ex.output_nr == 0
    assert eh.node is h.grad_fn and eh.output_nr == 0 and eh.ownership_token is None
    (gx,) = md.autograd.grad(y, ex, retain_graph=True)
    gh, gx2 = md.autograd.grad(y, [eh, x])
    np.testing.assert_allclose(gx.numpy(), 2 * np.exp(2 * X), rtol=1e-6)
    np.testing.assert_allclose(gh.numpy(), np.exp(2 * X), rtol=1e-6)
    np.testing.assert_allclose(gx2.numpy(), gx.numpy())
    with pytest.raises(RuntimeError, match="does not require gradients"):
        get_gradient_edge(md.ones(2))


def test_gradient_edge_matches_torch():
    torch = pytest.importorskip("torch")
    results = []
    for lib, get in ((md, get_gradient_edge), (torch, torch.autograd.graph.get_gradient_edge)):
        x = _leaf(X, lib)
        h = x * 2
        y = h.exp().sum()
        gh, gx = lib.autograd.grad(y, [get(h), get(x)])
        results.append((gh.numpy(), gx.numpy(), get(x).node.name(), get(h).node.name(), get(h).output_nr))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-6)
    assert results[0][2:] == results[1][2:]


# register_multi_grad_hook -----------------------------------------------------------------------------

def _multi_hook_program(lib, register):
    a, b = _leaf(X, lib), _leaf(W, lib)
    c, d = a * b, a * b
    calls = []
    handle = register((a, b, c, d), lambda grads: calls.append([g is not None for g in grads]))
    c.sum().backward(retain_graph=True)
    c.sum().backward(inputs=(a,), retain_graph=True)
    handle.remove()
    c.sum().backward(retain_graph=True)
    anys = []
    register((a, b), lambda g: anys.append(tuple(g.shape)), mode="any")
    (a * b).sum().backward()
    return calls, anys


def test_multi_grad_hook_waits_for_the_gradients_this_backward_computes():
    calls, anys = _multi_hook_program(md, register_multi_grad_hook)
    assert calls == [[True, True, True, False], [True, False, True, False]]
    assert anys == [X.shape]


def test_multi_grad_hook_matches_torch():
    torch = pytest.importorskip("torch")
    assert _multi_hook_program(md, register_multi_grad_hook) == \
        _multi_hook_program(torch, torch.autograd.graph.register_multi_grad_hook)


def test_multi_grad_hook_under_autograd_grad_and_bad_mode():
    a, b = _leaf(), _leaf(W)
    calls = []
    register_multi_grad_hook((a, b), lambda grads: calls.append([g is not None for g in grads]))
    md.autograd.grad((a * b).sum(), [a])           # b is not an input: not waited for
    assert calls == [[True, False]]
    with pytest.raises(ValueError, match="mode to be one of"):
        register_multi_grad_hook((a,), print, mode="some")
    with pytest.raises(AssertionError):
        register_multi_grad_hook((md.ones(2),), print)


# increment_version ------------------------------------------------------------------------------------

def test_increment_version_counts_writes_autograd_did_not_see():
    v = md.ones(3)
    increment_version(v)
    increment_version([v, v])
    assert v._version == 3
    x = _leaf()
    h = x * 1
    y = h.exp()              # saves its output
    z = h.sin()              # saves h
    increment_version(h)
    y.sum().backward(retain_graph=True)       # exp's output was not written
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()
    with pytest.raises(RuntimeError, match="Iterable"):
        increment_version(3)


def test_increment_version_matches_torch():
    torch = pytest.importorskip("torch")
    for lib, inc in ((md, increment_version), (torch, torch.autograd.graph.increment_version)):
        v = lib.ones(3)
        inc(v)
        inc([v, v])
        assert v._version == 3
        with pytest.raises(RuntimeError):
            inc(3)


# saved_tensors_hooks ---------------------------------------------------------------------------------

def _pack_program(lib, hooks_cls):
    """Which tensors pack receives (the op's own input or output where the saved value is one),
    how often unpack runs, and the gradients through numpy round trips."""
    x, w = _leaf(X, lib), lib.tensor(W)
    packed, unpacked = [], []

    def pack(t):
        packed.append((t is x, t is w, t.grad_fn is not None))
        return t.detach().numpy().copy()

    def unpack(a):
        unpacked.append(a.shape)
        return lib.tensor(a)

    with hooks_cls(pack, unpack):
        y = (x * w).sum() + x.exp().sum()
    y.backward()
    return packed, unpacked, x.grad.numpy()


def test_pack_sees_inputs_and_outputs_and_unpack_feeds_backward():
    packed, unpacked, gx = _pack_program(md, saved_tensors_hooks)
    assert packed == [(False, True, False), (False, False, True)]     # w for x * w; exp's output
    assert unpacked == [X.shape, X.shape]
    np.testing.assert_allclose(gx, W + np.exp(X), rtol=1e-6)


def test_saved_tensors_hooks_match_torch():
    torch = pytest.importorskip("torch")
    mine = _pack_program(md, saved_tensors_hooks)
    theirs = _pack_program(torch, torch.autograd.graph.saved_tensors_hooks)
    assert mine[:2] == theirs[:2]
    np.testing.assert_allclose(mine[2], theirs[2], rtol=1e-6)


def test_custom_function_saves_and_attributes_go_through_the_hooks():
    x = _leaf()
    packed = []

    def pack(t):
        packed.append(t is x)
        return ("kept", t.detach().numpy().copy())

    with saved_tensors_hooks(pack, lambda p: md.tensor(p[1])):
        y = Cube.apply(x, 2.0, md.ones(3))
        ln = F.layer_norm(x, (3,))             # keeps its arrays as ctx attributes
    assert packed[0] is True and len(packed) > 1
    node = y.grad_fn
    assert "saved_tensors" not in node.__dict__                 # only the packed form is kept
    np.testing.assert_allclose(node.saved_tensors[0], X)        # unpacked on access
    (y.sum() + (ln * md.tensor(W)).sum()).backward()
    mean, var = X.mean(1, keepdims=True), X.var(1, keepdims=True)
    xhat, g = (X - mean) / np.sqrt(var + 1e-5), W
    dln = (g - g.mean(1, keepdims=True) - xhat * (g * xhat).mean(1, keepdims=True)) / np.sqrt(var + 1e-5)
    np.testing.assert_allclose(x.grad.numpy(), 6 * X ** 2 + dln, rtol=1e-5, atol=1e-8)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        node.saved_tensors


def test_gradcheck_through_packed_saves():
    def f(x, w):
        with saved_tensors_hooks(lambda t: t.detach().numpy().copy(), md.tensor):
            return F.layer_norm(x * w, (3,)).tanh()
    assert gradcheck(f, (md.tensor(X, requires_grad=True), md.tensor(W, requires_grad=True)))


def test_nested_hooks_innermost_applies_and_ops_inside_pack_save_plainly():
    x = _leaf()
    outer, inner = [], []
    with saved_tensors_hooks(lambda t: outer.append(1) or t, lambda t: t):
        with saved_tensors_hooks(lambda t: inner.append(1) or (t.exp().sin(), t), lambda p: p[1]):
            x.sin()
        x.exp()
    assert inner == [1] and outer == [1]


def test_hooks_are_per_thread_and_ops_pay_nothing_once_they_are_left():
    plain = function_module._inner_apply      # the apply without the packing seam (autocast's, if on)
    assert function_module.Function.__dict__["apply"].__func__ is plain
    packed, other = [], []
    with saved_tensors_hooks(lambda t: packed.append(1) or t, lambda t: t):
        assert function_module.Function.__dict__["apply"].__func__ is not plain
        th = threading.Thread(target=lambda: other.append(_leaf().exp().grad_fn.__dict__.get("_packed")))
        th.start()
        th.join()
        _leaf().exp()
    assert packed == [1] and other == [None]
    assert function_module.Function.__dict__["apply"].__func__ is plain


def test_version_check_without_hooks_and_none_with_them_as_in_torch():
    x = _leaf()
    h = x * 1
    y = h.sin()
    h.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    h = x * 1
    with saved_tensors_hooks(lambda t: t, lambda t: t):
        y = h.sin()
    h.add_(1)
    y.sum().backward()          # the hooks own what is stored: no check, as in PyTorch
    np.testing.assert_allclose(x.grad.numpy(), np.cos(X + 1), rtol=1e-6)


def test_bad_unpack_results_raise():
    cases = [(lambda t: 3, TypeError, "expected to be a Tensor but got result of type int"),
             (lambda t: t.numpy(), TypeError, "type numpy.ndarray"),
             (lambda t: t[:1], RuntimeError, "shape")]
    for unpack, err, msg in cases:
        x = _leaf()
        with saved_tensors_hooks(lambda t: t.detach(), unpack):
            y = x.exp()
        with pytest.raises(err, match=msg):
            y.sum().backward()
    x = _leaf()
    with saved_tensors_hooks(lambda t: t.detach(), lambda t: t.float()):   # another dtype: cast back
        y = x.exp()
    y.sum().backward()
    assert x.grad.dtype == md.float64
    np.testing.assert_allclose(x.grad.numpy(), np.exp(X), rtol=1e-6)
    with pytest.raises(TypeError, match="callable"):
        with saved_tensors_hooks(1, 2):
            pass


def test_bad_unpack_results_raise_what_torch_raises():
    torch = pytest.importorskip("torch")
    for lib in (md, torch):
        x = _leaf(X, lib)
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t.detach(), lambda t: t.numpy()):
            y = x.exp()
        with pytest.raises(TypeError, match="expected to be a Tensor but got result of type numpy.ndarray"):
            y.sum().backward()
        with pytest.raises(TypeError):
            with lib.autograd.graph.saved_tensors_hooks(1, 2):
                pass


def test_disable_saved_tensors_hooks():
    with disable_saved_tensors_hooks("no hooks here"):
        with pytest.raises(RuntimeError, match="no hooks here"):
            with save_on_cpu():
                pass
        with disable_saved_tensors_hooks("inner"):
            with pytest.raises(RuntimeError, match="inner"):
                saved_tensors_hooks(lambda t: t, lambda t: t).__enter__()
        with pytest.raises(RuntimeError, match="no hooks here"):   # the outer message is back
            save_on_cpu().__enter__()
    with save_on_cpu():                                            # enabled again
        with pytest.raises(RuntimeError, match="while set"):
            with disable_saved_tensors_hooks("while set"):
                pass

    @disable_saved_tensors_hooks("decorated")
    def f():
        with save_on_cpu():
            pass
    with pytest.raises(RuntimeError, match="decorated"):
        f()


def test_disable_saved_tensors_hooks_matches_torch():
    torch = pytest.importorskip("torch")
    for lib in (md, torch):
        graph = lib.autograd.graph
        with graph.disable_saved_tensors_hooks("off"):
            with pytest.raises(RuntimeError, match="off"):
                with graph.save_on_cpu():
                    pass
        with graph.save_on_cpu():
            with pytest.raises(RuntimeError, match="off"):
                with graph.disable_saved_tensors_hooks("off"):
                    pass


# save_on_cpu ------------------------------------------------------------------------------------------

def test_save_on_cpu_keeps_cpu_tensors_as_they_are_unless_pinning():
    t = md.ones(2)
    device, kept = save_on_cpu().pack_hook(t)
    assert kept is t and save_on_cpu().unpack_hook((device, kept)) is t
    device, kept = save_on_cpu(pin_memory=True).pack_hook(t)
    assert kept is not t and not np.shares_memory(kept.numpy(), t.numpy()) and kept.tolist() == [1.0, 1.0]
    x = _leaf()
    with save_on_cpu():
        y = (x.exp() * x).sum()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp(X) * (X + 1), rtol=1e-6)


def test_save_on_cpu_matches_torch():
    torch = pytest.importorskip("torch")
    grads = []
    for lib in (md, torch):
        x = _leaf(X, lib)
        with lib.autograd.graph.save_on_cpu(pin_memory=True):
            y = (x.exp() * x.tanh()).sum()
        y.backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)


def test_save_on_cpu_moves_cuda_saves_to_the_host_and_back():
    try:
        xc = md.tensor(X, device="cuda", requires_grad=True)
    except Exception as exc:      # no cuda device and no simulator
        pytest.skip(f"cuda device unavailable: {exc}")
    with save_on_cpu():
        y = (xc.exp() * xc).sum()
    kept = [e.packed for e in y.grad_fn.next_functions[0][0].__dict__["_packed"]["saved_tensors"].items]
    assert kept and all(str(d) == "cuda:0" and t.device == "cpu" for d, t in kept)
    y.backward()
    assert xc.grad.device == "cuda"
    np.testing.assert_allclose(xc.grad.cpu().numpy(), np.exp(X) * (X + 1), rtol=1e-6)
