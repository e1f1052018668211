"""The public ``minidl.autograd.Function`` in PyTorch's idiom: forward and backward on Tensors.

Each program below is written once against a framework module ``lib`` (minidl or torch) and runs
unchanged under both: values and gradients are checked against NumPy without torch, and against
torch where it is installed. Covered: GradReverse (``view_as``), a straight-through ``round``, a clamp
with saved Tensors, ``mark_dirty`` (in-place ReLU), ``mark_non_differentiable`` (argmax), the
``setup_context`` style, keyword arguments to ``apply``, double backward (``create_graph``),
``once_differentiable``, saved-tensor checks (in-place writes, freed graphs, hooks) and gradcheck."""
import numpy as np
import pytest

import minidl as md
from minidl.autograd import gradcheck, gradgradcheck
from minidl.autograd.function import once_differentiable as md_once_differentiable
from minidl.autograd.graph import saved_tensors_hooks as md_saved_tensors_hooks

X = np.array([-1.5, -0.2, 0.4, 1.6, 2.5])


def _functions(lib, once_differentiable):
    """The custom Functions, defined against ``lib`` exactly as a PyTorch user writes them."""

    class GradReverse(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, alpha):
            ctx.alpha = alpha
            return x.view_as(x)

        @staticmethod
        def backward(ctx, g):
            return g.neg() * ctx.alpha, None

    class RoundSTE(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.round()

        @staticmethod
        def backward(ctx, g):
            return g

    class Clamp(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, lo, hi):
            ctx.save_for_backward(x)
            ctx.lo, ctx.hi = lo, hi
            return x.clamp(min=lo, max=hi)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * ((x > ctx.lo) & (x < ctx.hi)).float(), None, None

    class ReLUInPlace(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.clamp_(min=0)
            ctx.mark_dirty(x)
            ctx.save_for_backward(x)
            return x

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * (y > 0).float()

    class MaxWithIndex(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            idx = x.argmax()
            ctx.mark_non_differentiable(idx)
            ctx.save_for_backward(x, idx)
            return x.max(), idx

        @staticmethod
        def backward(ctx, g_value, g_index):
            x, idx = ctx.saved_tensors
            g = lib.zeros_like(x)
            g[idx] = g_value
            return g

    class Scale(lib.autograd.Function):
        @staticmethod
        def forward(x, k=2.0):
            return x * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.k = inputs[1]

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None

    class Power(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, k=1.0):
            ctx.save_for_backward(x)
            ctx.k = k
            return x ** k

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * ctx.k * x ** (ctx.k - 1), None

    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x ** 2 * g

    class Exp(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    class CubeOnce(Cube):
        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x ** 2 * g

    return {k: v for k, v in locals().items() if isinstance(v, type)}


def _leaf(lib, a=X, dtype="float64"):
    return lib.tensor(np.array(a), dtype=getattr(lib, dtype), requires_grad=True)


def _np(t):
    return None if t is None else t.detach().numpy()


def program_first_order(lib, once_differentiable):
    """Values and gradients of each Function on X (a dict of NumPy arrays)."""
    f = _functions(lib, once_differentiable)
    out = {}
    x = _leaf(lib)
    y = f["GradReverse"].apply(x, 0.5)
    out["reverse_name"] = y.grad_fn.name()
    (y * y).sum().backward()
    out["reverse"], out["reverse_grad"] = _np(y), _np(x.grad)

    x = _leaf(lib)
    y = f["RoundSTE"].apply(x)
    (y * lib.arange(5.0, dtype=lib.float64)).sum().backward()
    out["ste"], out["ste_grad"] = _np(y), _np(x.grad)

    x = _leaf(lib)
    y = f["Clamp"].apply(x, -1.0, 2.0)
    (y * y).sum().backward()
    out["clamp"], out["clamp_grad"] = _np(y), _np(x.grad)

    x = _leaf(lib)
    h = x * 2
    y = f["ReLUInPlace"].apply(h)
    out["relu_is_input"] = y is h
    out["relu_version"] = h._version
    out["relu_name"] = h.grad_fn.name()
    (y * y).sum().backward()
    out["relu"], out["relu_grad"] = _np(y), _np(x.grad)

    x = _leaf(lib)
    value, index = f["MaxWithIndex"].apply(x)
    out["argmax_flags"] = (value.requires_grad, index.requires_grad, index.grad_fn is None)
    (value * 3).backward()
    out["argmax"], out["argmax_index"], out["argmax_grad"] = _np(value), _np(index), _np(x.grad)

    x = _leaf(lib)
    f["Scale"].apply(x, k=3.0).sum().backward()
    out["setup_kw_grad"] = _np(x.grad)
    x = _leaf(lib)
    f["Scale"].apply(x).sum().backward()
    out["setup_default_grad"] = _np(x.grad)

    x = _leaf(lib, np.abs(X) + 0.5)
    y = f["Power"].apply(x, k=3.0)
    y.sum().backward()
    out["power"], out["power_grad"] = _np(y), _np(x.grad)
    return out


def program_double_backward(lib, once_differentiable):
    f = _functions(lib, once_differentiable)
    x = _leaf(lib)
    (g,) = lib.autograd.grad(f["Cube"].apply(x).sin().sum(), x, create_graph=True)
    (gg,) = lib.autograd.grad(g.sum(), x)
    x2 = _leaf(lib)
    (e,) = lib.autograd.grad(f["Exp"].apply(x2).sum(), x2, create_graph=True)
    (ee,) = lib.autograd.grad((e * e).sum(), x2)
    return {"g": _np(g), "gg": _np(gg), "e": _np(e), "ee": _np(ee)}


def _numpy_first_order():
    x = X
    clip = np.clip(x, -1.0, 2.0)
    relu = np.maximum(2 * x, 0)
    p = np.abs(x) + 0.5
    return {"reverse": x, "reverse_grad": -0.5 * 2 * x,
            "ste": np.round(x), "ste_grad": np.arange(5.0),
            "clamp": clip, "clamp_grad": 2 * clip * ((x > -1) & (x < 2)),
            "relu": relu, "relu_grad": 2 * 2 * relu * (relu > 0),
            "argmax": x.max(), "argmax_index": np.argmax(x), "argmax_grad": 3.0 * (np.arange(5) == np.argmax(x)),
            "setup_kw_grad": np.full(5, 3.0), "setup_default_grad": np.full(5, 2.0),
            "power": p ** 3, "power_grad": 3 * p ** 2}


def test_first_order_values_and_gradients_match_numpy():
    out = program_first_order(md, md_once_differentiable)
    for k, want in _numpy_first_order().items():
        np.testing.assert_allclose(out[k], want, rtol=1e-12, err_msg=k)
    assert out["reverse_name"] == "GradReverseBackward" and out["relu_name"] == "ReLUInPlaceBackward"
    assert out["relu_is_input"] is True and out["relu_version"] == 2     # the clamp_, then mark_dirty's bump
    assert out["argmax_flags"] == (True, False, True)


def test_double_backward_through_a_custom_function_matches_numpy():
    out = program_double_backward(md, md_once_differentiable)
    x = X
    np.testing.assert_allclose(out["g"], np.cos(x ** 3) * 3 * x ** 2, rtol=1e-12)
    np.testing.assert_allclose(out["gg"], -np.sin(x ** 3) * 9 * x ** 4 + np.cos(x ** 3) * 6 * x, rtol=1e-12)
    np.testing.assert_allclose(out["e"], np.exp(x), rtol=1e-12)
    np.testing.assert_allclose(out["ee"], 2 * np.exp(2 * x), rtol=1e-12)


def test_programs_match_torch():
    torch = pytest.importorskip("torch")
    from torch.autograd.function import once_differentiable
    for program in (program_first_order, program_double_backward):
        ours, theirs = program(md, md_once_differentiable), program(torch, once_differentiable)
        assert ours.keys() == theirs.keys()
        for k in ours:
            if isinstance(ours[k], np.ndarray):
                np.testing.assert_allclose(ours[k], theirs[k], rtol=1e-12, err_msg=k)
            else:
                assert ours[k] == theirs[k], k


def test_gradcheck_and_gradgradcheck_on_custom_functions():
    f = _functions(md, md_once_differentiable)
    x = _leaf(md, [0.3, -0.7, 1.1])
    assert gradcheck(f["Cube"].apply, (x,)) and gradgradcheck(f["Cube"].apply, (x,))
    assert gradcheck(lambda t: f["Clamp"].apply(t, -0.5, 0.5), (x,))
    assert gradcheck(lambda t: f["Power"].apply(t.abs() + 0.5, k=2.5), (x,))
    assert gradgradcheck(f["Exp"].apply, (x,))


# PyTorch's semantics, one by one -----------------------------------------------------------------------

def test_forward_sees_tensors_with_grad_mode_off_and_an_input_comes_back_as_an_alias():
    seen = {}

    class Probe(md.autograd.Function):
        @staticmethod
        def forward(ctx, x, k, flag=None):
            seen.update(types=(type(x), type(k), flag), grad=md.is_grad_enabled(), needs=ctx.needs_input_grad)
            return x

        @staticmethod
        def backward(ctx, g):
            seen["bwd_grad"] = md.is_grad_enabled()
            return g * 2, None, None

    x = md.ones(3, requires_grad=True)
    h = x * 1
    y = Probe.apply(h, 2.0, flag="kw")
    # a keyword argument is bound to forward's parameter: it counts as a positional one, as in PyTorch
    assert seen["types"] == (md.Tensor, float, "kw") and seen["grad"] is False and seen["needs"] == (True, False, False)
    assert y is not h and y._base is h and y._version_counter is h._version_counter
    assert y.grad_fn.name() == "ProbeBackward"
    y.sum().backward()
    assert seen["bwd_grad"] is False
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0, 2.0])
    with md.no_grad():
        assert Probe.apply(x, 1.0).grad_fn is None
    assert not Probe.apply(md.ones(2), 1.0).requires_grad        # no input requires grad


def test_numpy_array_and_non_tensor_outputs():
    class Split(md.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return np.asarray(x.detach()) * 2, 7, "tag"   # an array is wrapped; others pass through

        @staticmethod
        def backward(ctx, g, g_seven, g_tag):
            assert g_seven is None and g_tag is None
            return g * 2

    x = md.ones(2, dtype=md.float64, requires_grad=True)
    y, seven, tag = Split.apply(x)
    assert isinstance(y, md.Tensor) and y.requires_grad and (seven, tag) == (7, "tag")
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


def test_materialize_grads_and_a_non_differentiable_float_output():
    seen = []

    class Masked(md.autograd.Function):
        @staticmethod
        def forward(ctx, x, materialize):
            m = (x > 0).float()
            ctx.mark_non_differentiable(m)
            ctx.set_materialize_grads(materialize)
            return x * m, m

        @staticmethod
        def backward(ctx, g, gm):
            seen.append(gm)
            return g, None

    for materialize in (True, False):
        x = md.tensor([1.0, -1.0], requires_grad=True)
        y, m = Masked.apply(x, materialize)
        assert not m.requires_grad and m.is_leaf
        y.sum().backward()
    assert isinstance(seen[0], md.Tensor) and np.all(seen[0].numpy() == 0) and seen[1] is None


def test_saved_tensor_modified_in_place_raises_pytorchs_error():
    f = _functions(md, md_once_differentiable)
    x = _leaf(md)
    h = x * 1
    y = f["Cube"].apply(h)
    h.add_(1.0)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation: \[minidl.DoubleTensor \[5\]\], which "
                                           r"is output 0 of Add, is at version 1; expected version 0 instead"):
        y.sum().backward()
    y = f["Exp"].apply(x)                                  # a saved output
    with md.no_grad():
        y.mul_(2)
    with pytest.raises(RuntimeError, match="which is output 0 of Exp, is at version 1; expected version 0"):
        y.sum().backward()


def test_saved_tensors_after_backward_and_what_they_are():
    f = _functions(md, md_once_differentiable)
    x = _leaf(md)
    h = x * 1
    node = f["Cube"].apply(h).grad_fn
    assert node.saved_tensors[0] is h                      # an input: the very Tensor
    y = f["Exp"].apply(x)
    (saved,) = y.grad_fn.saved_tensors                     # an output: a Tensor with this node as history
    assert saved is not y and saved.grad_fn is y.grad_fn and saved._version_counter is y._version_counter
    y.sum().backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.grad_fn.saved_tensors
    with pytest.raises(TypeError, match="save_for_backward can only save variables, but argument 1 is of type int"):
        class Bad(md.autograd.Function):
            @staticmethod
            def forward(ctx, t):
                ctx.save_for_backward(t, 3)
                return t * 2
        Bad.apply(x)


def test_saved_tensors_hooks_see_the_saved_tensors():
    f = _functions(md, md_once_differentiable)
    packed = []
    x = _leaf(md)
    h = x * 1
    with md_saved_tensors_hooks(lambda t: packed.append(t) or t.detach().clone(), lambda p: p * 1):
        y = f["Cube"].apply(h)
        z = f["Exp"].apply(x)
    assert packed[0] is h and packed[1] is z
    h.add_(1.0)                                           # stored by the hook: not version-checked, as PyTorch
    (y.sum() + z.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * X ** 2 + np.exp(X), rtol=1e-12)
    with md_saved_tensors_hooks(lambda t: t, lambda p: "not a tensor"):
        y = f["Cube"].apply(x * 1)
    with pytest.raises(TypeError, match="unpack_hook expected to be a Tensor but got result of type str"):
        y.sum().backward()


def test_once_differentiable_backward_records_nothing_and_a_second_derivative_raises():
    f = _functions(md, md_once_differentiable)
    x = _leaf(md)
    (g,) = md.autograd.grad(f["CubeOnce"].apply(x).sin().sum(), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), np.cos(X ** 3) * 3 * X ** 2, rtol=1e-12)
    with pytest.raises(RuntimeError, match="trying to differentiate twice a function that was marked with "
                                           "@once_differentiable"):
        g.sum().backward()
    f["CubeOnce"].apply(x).sum().backward()               # a first derivative is fine
    np.testing.assert_allclose(x.grad.numpy(), 3 * X ** 2, rtol=1e-12)


def test_mark_dirty_errors():
    f = _functions(md, md_once_differentiable)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad has been used in an in-place operation"):
        f["ReLUInPlace"].apply(_leaf(md))

    class NotReturned(md.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x * 1

    with pytest.raises(RuntimeError, match="Some elements marked as dirty during the forward method were not returned"):
        NotReturned.apply(_leaf(md) * 1)


def test_wrong_gradient_count_and_a_gradient_for_a_non_tensor_raise():
    class Two(md.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g

    class ForNumber(md.autograd.Function):
        @staticmethod
        def forward(ctx, a, k):
            return a * k

        @staticmethod
        def backward(ctx, g):
            return g, g

    x = md.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"function TwoBackward returned an incorrect number of gradients "
                                           r"\(expected 2, got 1\)"):
        Two.apply(x, x).sum().backward()
    with pytest.raises(RuntimeError, match="ForNumberBackward returned a gradient different than None at position 2"):
        ForNumber.apply(x, 2.0).sum().backward()
    with pytest.raises(TypeError, match="apply"):
        Two.apply(x, x, c=1)


def test_internal_ops_keep_the_array_level_base():
    from minidl.autograd import op_function
    from minidl.ops.unary import Exp
    assert md.autograd.Function is not op_function.Function and issubclass(Exp, op_function.Function)
    assert not issubclass(Exp, md.autograd.Function)
    assert md.tensor([1.0], requires_grad=True).exp().grad_fn.name() == "ExpBackward0"
