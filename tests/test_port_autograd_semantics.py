"""PyTorch's autograd semantics as a ported script relies on them: the graph's structure after a
backward (``next_functions``, ``metadata``, ``retains_grad`` stay; only what the nodes saved is
freed), ``backward(inputs=...)`` and ``autograd.grad`` arguments (empty, dict and unused inputs,
``only_inputs``, ``is_grads_batched``), requires_grad on computed tensors, the non-leaf ``.grad``
warning, hooks' checks, grad-mode class decoration, and the other ways of writing a custom
Function (``setup_context``, ``vjp``, ``set_materialize_grads``, ``once_differentiable``)."""
import gc
import weakref

import numpy as np
import pytest

import minidl as md
from minidl.autograd import Function, gradcheck
from minidl.autograd.function import once_differentiable


def _names(t):
    """(name, [(child name or None, output index)]) per node reachable from t, depth first."""
    out, stack, seen = [], [t.grad_fn], set()
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        out.append((n.name(), [(None if m is None else m.name(), i) for m, i in n.next_functions]))
        stack.extend(m for m, _ in reversed(n.next_functions))
    return out


def _chain(lib, x, w):
    h = lib.tanh(w @ x)
    return (h * h.exp()).sum()


# the graph after backward ----------------------------------------------------------------------

def test_next_functions_and_metadata_survive_a_backward_that_frees_the_graph():
    x = md.tensor([0.5, -1.0], requires_grad=True)
    w = md.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    loss = _chain(md, x, w)
    loss.grad_fn.metadata["tag"] = "loss"
    before = _names(loss)
    first = loss.grad_fn.next_functions[0][0]
    loss.backward()
    assert _names(loss) == before
    assert loss.grad_fn.next_functions[0][0] is first
    assert loss.grad_fn.metadata == {"tag": "loss"}
    mul = loss.grad_fn.next_functions[0][0]
    tanh = mul.next_functions[0][0]
    leaves = [n.variable for n, _ in tanh.next_functions[0][0].next_functions]
    assert leaves[0] is w and leaves[1] is x
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()
    with pytest.raises(RuntimeError, match="already been freed"):
        tanh._saved_result


def test_a_freed_graph_keeps_no_activation_alive():
    x = md.ones(3, requires_grad=True)
    h1 = x * 2
    h2 = h1.exp()
    loss = h2.sum()
    refs = [weakref.ref(h1), weakref.ref(h2)]
    del h1, h2
    gc.collect()
    assert all(r() is not None for r in refs)       # the graph holds them until the backward
    loss.backward()
    gc.collect()
    assert all(r() is None for r in refs)
    assert loss.grad_fn.next_functions[0][0].name() == "ExpBackward0"


def test_structure_survives_autograd_grad_and_a_create_graph_pass():
    x = md.tensor([0.3, 0.7], requires_grad=True)
    y = (x.exp() * 2).sum()
    before = _names(y)
    md.autograd.grad(y, x)
    assert _names(y) == before
    z = (x.tanh() * x).sum()
    before = _names(z)
    (g,) = md.autograd.grad(z, x, create_graph=True, retain_graph=False)
    assert _names(z) == before
    assert g.requires_grad


def test_retains_grad_stays_true_after_backward():
    x = md.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    (y ** 2).sum().backward()
    assert y.retains_grad
    np.testing.assert_allclose(y.grad.numpy(), [4.0, 8.0])


def test_next_functions_after_backward_match_pytorch():
    torch = pytest.importorskip("torch")
    names = []
    for lib in (md, torch):
        x = lib.tensor([0.5, -1.0], requires_grad=True)
        w = lib.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        loss = (lib.tanh(w * x).exp() * x).sum()
        loss.backward()
        names.append(_names(loss))
    assert names[0] == names[1]


# backward(inputs=...) and autograd.grad's arguments ----------------------------------------------

def test_backward_inputs_must_be_nonempty_and_require_grad():
    x = md.tensor([1.0, 2.0], requires_grad=True)
    w = md.tensor([3.0, 4.0])
    with pytest.raises(RuntimeError, match="`inputs` argument to `backward\\(\\)` cannot be empty"):
        (x * 2).sum().backward(inputs=[])
    with pytest.raises(RuntimeError, match="does not require grad"):
        (x * w).sum().backward(inputs=[w])
    (x * w).sum().backward(inputs={"x": x})
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 4.0])


def test_backward_grad_variables_is_the_deprecated_name_of_grad_tensors():
    x = md.tensor([1.0, 2.0], requires_grad=True)
    with pytest.warns(FutureWarning, match="grad_variables"):
        md.autograd.backward(x * 2, grad_variables=md.tensor([1.0, 5.0]))
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 10.0])
    with pytest.raises(RuntimeError, match="both passed"), pytest.warns(FutureWarning):
        md.autograd.backward(x * 2, md.ones(2), grad_variables=md.ones(2))


def test_grad_only_inputs_keeps_pytorchs_positions_and_warns_when_false():
    x = md.tensor([1.0, 2.0], requires_grad=True)
    w = md.tensor([1.0, 2.0], requires_grad=True)
    # positional as in PyTorch: (outputs, inputs, grad_outputs, retain_graph, create_graph, only_inputs, allow_unused)
    gx, gw = md.autograd.grad((x * 3).sum(), [x, w], None, None, False, True, True)
    np.testing.assert_allclose(gx.numpy(), [3.0, 3.0])
    assert gw is None
    with pytest.warns(FutureWarning, match="only_inputs"):
        md.autograd.grad((x * 3).sum(), x, only_inputs=False)


def test_grad_takes_a_dict_of_inputs_and_refuses_an_empty_one():
    x = md.tensor([1.0, 2.0], requires_grad=True)
    w = md.tensor([3.0, 4.0], requires_grad=True)
    y = (x * w).sum()
    out = md.autograd.grad(y, {"x": x, "w": w}, retain_graph=True)
    assert list(out) == ["x", "w"]
    np.testing.assert_allclose(out["x"].numpy(), [3.0, 4.0])
    np.testing.assert_allclose(out["w"].numpy(), [1.0, 2.0])
    with pytest.raises(RuntimeError, match="`inputs` argument to `grad\\(\\)` cannot be empty"):
        md.autograd.grad(y, [])


def test_grad_is_grads_batched_gives_one_vector_jacobian_product_per_row():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4))
    x = md.tensor(rng.standard_normal(4), requires_grad=True)
    y = md.tanh(md.tensor(a) @ x)                         # J = diag(1 - y^2) A
    v = rng.standard_normal((5, 3))
    (g,) = md.autograd.grad(y, x, md.tensor(v), is_grads_batched=True)
    jac = (1 - np.tanh(a @ x.detach().numpy()) ** 2)[:, None] * a
    np.testing.assert_allclose(g.numpy(), v @ jac, rtol=1e-10)
    assert y.grad_fn.next_functions[0][0].name() == "MatMulBackward0"
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        md.autograd.grad(y, x, md.tensor(v[0]))            # the last batch element freed the graph


def test_grad_is_grads_batched_unused_inputs_shapes_and_create_graph():
    x = md.tensor([1.0, 2.0], dtype=md.float64, requires_grad=True)
    w = md.tensor([1.0, 2.0], dtype=md.float64, requires_grad=True)
    y = x ** 3
    gx, gw = md.autograd.grad(y, [x, w], md.eye(2, dtype=md.float64), is_grads_batched=True, allow_unused=True,
                              retain_graph=True)
    np.testing.assert_allclose(gx.numpy(), [[3.0, 0.0], [0.0, 12.0]])
    assert gw is None
    with pytest.raises(RuntimeError, match="first dimension of each grad_output as the batch dimension"):
        md.autograd.grad(y, x, md.ones(2, 3, dtype=md.float64), is_grads_batched=True, retain_graph=True)
    (h,) = md.autograd.grad(y, x, md.eye(2, dtype=md.float64), is_grads_batched=True, create_graph=True)
    h.sum().backward()                                     # d/dx of sum of the Jacobian's rows: 6x
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 12.0])


def test_grad_is_grads_batched_matches_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    xs, vs = rng.standard_normal((2, 3)), rng.standard_normal((4, 2, 3))
    out = []
    for lib in (md, torch):
        x = lib.tensor(xs, requires_grad=True)
        y = (x.sin() * x).exp()
        out.append(lib.autograd.grad(y, x, lib.tensor(vs), is_grads_batched=True)[0].detach().numpy())
    np.testing.assert_allclose(out[0], out[1], rtol=1e-10)


# requires_grad, .grad, hooks -------------------------------------------------------------------

def test_requires_grad_on_a_computed_tensor():
    x = md.ones(2, requires_grad=True)
    y = x * 2
    assert y.requires_grad_() is y and y.requires_grad_(True) is y
    with pytest.raises(RuntimeError, match="leaf variables. If you want to use a computed variable"):
        y.requires_grad_(False)
    with pytest.raises(RuntimeError, match="leaf variables. If you want to use a computed variable"):
        y.requires_grad = False
    with pytest.raises(RuntimeError, match="^you can only change requires_grad flags of leaf variables.$"):
        y.requires_grad = True


def test_reading_grad_of_a_non_leaf_warns_unless_it_retains_it(recwarn):
    x = md.ones(2, requires_grad=True)
    y = x * 2
    (y * y).sum().backward()
    with pytest.warns(UserWarning, match="not a leaf Tensor is being accessed"):
        assert y.grad is None
    z = x * 3
    z.retain_grad()
    z.sum().backward()
    recwarn.clear()
    assert z.grad is not None and x.grad is not None and md.ones(2).grad is None
    assert not [w for w in recwarn if "leaf Tensor" in str(w.message)]


def test_post_accumulate_grad_hook_must_return_none():
    x = md.tensor([1.0, 2.0], requires_grad=True)
    x.register_post_accumulate_grad_hook(lambda t: t * 2)
    with pytest.raises(RuntimeError, match="post accumulate grad hooks should return None"):
        (x * 3).sum().backward()


def test_a_hook_that_changes_the_dtype_names_both():
    x = md.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: g.double())
    with pytest.raises(RuntimeError, match=r"changed the type of value \(was float32 got float64\)"):
        y.sum().backward()


def test_grad_mode_decorating_a_class_is_deprecated_and_constructs_in_the_mode():
    with pytest.warns(FutureWarning, match="Decorating classes is deprecated"):
        @md.no_grad()
        class Probe:
            def __init__(self):
                self.enabled = md.is_grad_enabled()
    assert Probe().enabled is False and md.is_grad_enabled()


# custom Functions --------------------------------------------------------------------------------

class Scale(Function):
    """y = k x, ctx-less forward with setup_context; dL/dx = k dL/dy."""

    @staticmethod
    def forward(x, k):
        return x * k

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.k = inputs[1]

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k, None


class Cube(Function):
    """y = x**3, its backward under the name vjp: dL/dx = 3 x**2 dL/dy."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    @once_differentiable
    def vjp(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x ** 2 * g, None        # a trailing None beyond the arguments is allowed


def test_setup_context_style_function():
    x = md.tensor([1.0, 2.0], dtype=md.float64, requires_grad=True)
    y = Scale.apply(x, 3.0)
    np.testing.assert_allclose(y.detach().numpy(), [3.0, 6.0])
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0])
    assert gradcheck(lambda t: Scale.apply(t, -1.5), (md.tensor([0.3, -0.2], dtype=md.float64, requires_grad=True),))

    class Scale2(Scale):                    # a subclass that only changes setup_context
        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.k = 2 * inputs[1]
    z = md.tensor([1.0], requires_grad=True)
    Scale2.apply(z, 3.0).sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), [6.0])


def test_vjp_is_backward_and_only_extra_none_gradients_are_dropped():
    assert Function.vjp is Function.backward and Cube.backward is Cube.vjp
    x = md.tensor([1.0, -2.0], dtype=md.float64, requires_grad=True)
    Cube.apply(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 12.0])
    assert gradcheck(Cube.apply, (md.tensor([0.4, -0.7], dtype=md.float64, requires_grad=True),))
    assert repr(Cube.apply(x)).endswith("grad_fn=<CubeBackward>)")

    class Extra(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2, g               # an extra gradient that is not None: an error

    with pytest.raises(RuntimeError, match=r"function ExtraBackward returned an incorrect number of gradients "
                                           r"\(expected 1, got 2\)"):
        Extra.apply(md.ones(2, requires_grad=True)).sum().backward()
    with pytest.raises(RuntimeError, match="both 'backward' and 'vjp'"):
        class Both(Function):
            @staticmethod
            def backward(ctx, g):
                return g

            @staticmethod
            def vjp(ctx, g):
                return g


def test_missing_forward_or_backward_names_what_to_implement():
    class NoForward(Function):
        pass

    class NoBackward(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

    with pytest.raises(NotImplementedError, match="must implement the forward"):
        NoForward.apply(md.ones(2, requires_grad=True))
    with pytest.raises(NotImplementedError, match="either the backward or vjp"):
        NoBackward.apply(md.ones(2, requires_grad=True)).sum().backward()


class TwoOut(Function):
    """(2x, 3x); backward sees None for an output no gradient reached when materialize is off."""
    seen = []

    @staticmethod
    def forward(ctx, x, materialize):
        ctx.set_materialize_grads(materialize)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g1, g2):
        TwoOut.seen.append(g2)
        return g1 * 2 + (0 if g2 is None else g2 * 3), None


@pytest.mark.parametrize("materialize", [False, True])
def test_set_materialize_grads(materialize):
    TwoOut.seen.clear()
    x = md.ones(2, requires_grad=True)
    y, _ = TwoOut.apply(x, materialize)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])
    (g2,) = TwoOut.seen
    if materialize:
        np.testing.assert_array_equal(g2, np.zeros(2, np.float32))
    else:
        assert g2 is None


def test_set_materialize_grads_matches_pytorch():
    torch = pytest.importorskip("torch")
    seen = {}
    for lib in (md, torch):
        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(False)
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, g1, g2):
                seen[lib.__name__] = g2
                return g1 * 2
        x = lib.ones(2, requires_grad=True)
        F.apply(x)[0].sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])
    assert seen == {"minidl": None, "torch": None}
