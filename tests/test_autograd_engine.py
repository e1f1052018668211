"""The backward engine, custom Functions and gradcheck: accumulation, deep graphs, freed
graphs, no_grad / detach, error messages, and the public Function API."""
import pathlib
import re
import sys
import warnings

import numpy as np
import pytest

import minidl as md
from minidl.autograd import GradcheckError, gradcheck
from minidl.autograd.op_function import Function   # the array-level base the engine runs (ops' idiom)

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"


# accumulation ------------------------------------------------------------------------------

def test_leaf_gradients_accumulate_across_backward_calls():
    x = md.tensor([1.0, 2.0], requires_grad=True)
    (x * 2).sum().backward()
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2 + 2, 2 + 4])


@pytest.mark.parametrize("expr, slope", [
    (lambda c: c + c + c, 3.0),                # Add returns one array for both of its inputs
    (lambda c: c + (c + c), 3.0),              # ... the leaf first, the node second
    (lambda c: c + c + c + c, 4.0),
    (lambda c: (c + c) * 2 + c, 5.0),
    (lambda c: c - (c + c), -1.0),
    (lambda c: (c + c).expand(2, 3).sum(0) + c, 5.0),
])
def test_a_gradient_array_shared_by_two_inputs_is_kept_by_no_leaf(expr, slope):
    w = np.array([0.5, -1.0, 2.0])
    c = md.tensor([2.0, 3.0, 4.0], dtype=md.float64, requires_grad=True)
    (expr(c) * md.tensor(w)).sum().backward()
    np.testing.assert_allclose(c.grad.numpy(), slope * w)
    c.grad = None
    (expr(c) * md.tensor(w)).sum().backward()      # and again, accumulating into a fresh .grad
    (expr(c) * md.tensor(w)).sum().backward()
    np.testing.assert_allclose(c.grad.numpy(), 2 * slope * w)


def test_gradients_of_a_reused_tensor_add_up():
    x = md.tensor([1.0, -2.0], requires_grad=True)
    h = x * 3                        # used by three consumers
    (h * h + h + h.exp()).sum().backward()
    expected = (2 * 3 * np.array([1.0, -2.0]) * 3) + 3 + 3 * np.exp([3.0, -6.0])
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6)


def test_non_leaf_grad_stays_none_and_leaf_grad_is_a_tensor():
    x = md.ones(2, 3, requires_grad=True)
    y = x * 2
    y.sum().backward()
    assert y.grad is None and not y.is_leaf
    assert isinstance(x.grad, md.Tensor) and x.grad.shape == (2, 3) and x.grad.dtype == md.float32
    assert x.grad.is_leaf and not x.grad.requires_grad


def test_gradients_never_share_memory():
    a, b = md.ones(3, requires_grad=True), md.ones(3, requires_grad=True)
    g = md.tensor([1.0, 2.0, 3.0])
    (a + b).backward(g)
    a.grad.numpy()[0] = 100
    assert b.grad.numpy()[0] == 1 and g.numpy()[0] == 1
    c = md.ones(3, requires_grad=True)
    c.backward(g)  # a leaf as the root: its .grad must be a copy of the caller's gradient
    c.grad.numpy()[1] = 50
    assert g.numpy()[1] == 2


def test_inputs_that_do_not_require_grad_get_no_grad():
    x = md.ones(2, requires_grad=True)
    c = md.ones(2)
    (x * c).sum().backward()
    assert c.grad is None and x.grad is not None


# deep graphs -----------------------------------------------------------------------------------

def test_chain_of_100000_ops_backpropagates_without_recursion_error():
    limit = sys.getrecursionlimit()
    x = md.tensor([1.0, 2.0], dtype=md.float64, requires_grad=True)
    y = x
    for _ in range(50_000):
        y = y * 1.0
        y = y + 0.5
    y.sum().backward()
    assert sys.getrecursionlimit() == limit
    np.testing.assert_allclose(y.detach().numpy(), [25_001.0, 25_002.0])
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 1.0])


def test_wide_graph_each_node_runs_once():
    calls = []

    class Count(Function):
        @staticmethod
        def forward(ctx, x):
            return x.copy()

        @staticmethod
        def backward(ctx, g):
            calls.append(1)
            return g

    x = md.ones(2, requires_grad=True)
    h = Count.apply(x)
    sum(h * float(k) for k in range(50)).sum().backward()
    assert len(calls) == 1
    np.testing.assert_allclose(x.grad.numpy(), [sum(range(50))] * 2)


# freed graph, retain_graph --------------------------------------------------------------------------

def test_second_backward_through_a_freed_graph_raises():
    x = md.ones(2, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time.*retain_graph=True"):
        y.backward()


def test_a_shared_freed_subgraph_raises_too():
    x = md.ones(2, requires_grad=True)
    h = x.exp()
    h.sum().backward()
    with pytest.raises(RuntimeError, match="second time"):
        (h * 2).sum().backward()


def test_retain_graph_allows_a_second_backward():
    x = md.tensor([1.0, 3.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 12.0])


def test_saved_arrays_are_released_after_backward():
    x = md.ones(3, requires_grad=True)
    y = x.exp()
    node = y.grad_fn
    assert node.saved_tensors
    y.sum().backward()
    assert not hasattr(node, "saved_tensors")


# no_grad and detach ----------------------------------------------------------------------------------

def test_no_grad_records_nothing_and_restores_the_mode():
    x = md.ones(2, requires_grad=True)
    with md.no_grad():
        y = x * 2
        assert not md.is_grad_enabled()
        with md.enable_grad():
            z = x * 2
    assert md.is_grad_enabled()
    assert not y.requires_grad and y.is_leaf and y.grad_fn is None
    assert z.requires_grad and z.grad_fn is not None


def test_no_grad_as_decorator_and_restored_on_exceptions():
    @md.no_grad()
    def f(t):
        return t * 2

    assert not f(md.ones(2, requires_grad=True)).requires_grad
    with pytest.raises(ZeroDivisionError):
        with md.no_grad():
            1 / 0
    assert md.is_grad_enabled()


def test_detach_cuts_the_graph():
    x = md.tensor([2.0], requires_grad=True)
    y = x * x.detach()          # d/dx treats the detached factor as a constant
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0])
    d = (x * 3).detach()
    assert d.is_leaf and not d.requires_grad
    with pytest.raises(RuntimeError, match="does not require grad"):
        d.sum().backward()


# backward() arguments -------------------------------------------------------------------------------

def test_non_scalar_backward_without_gradient_raises():
    y = md.ones(2, 3, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match=r"only for scalar outputs.*\(2, 3\)"):
        y.backward()
    with pytest.raises(RuntimeError, match="scalar outputs"):
        md.autograd.backward([y])


def test_non_scalar_backward_with_gradient_is_a_vector_jacobian_product():
    x = md.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * x).backward(md.tensor([1.0, 0.0, -1.0]))
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 0.0, -6.0])


def test_one_element_tensor_backward_is_implicit():
    x = md.ones(1, 1, requires_grad=True)
    (x * 3).backward()
    np.testing.assert_allclose(x.grad.numpy(), [[3.0]])


def test_gradient_of_the_wrong_shape_raises():
    y = md.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match=r"gradient has shape \(3,\) but the tensor has shape \(2,\)"):
        y.backward(md.ones(3))


def test_backward_of_several_roots():
    x = md.tensor([1.0, 2.0], requires_grad=True)
    md.autograd.backward([(x * 2).sum(), x * x], [None, md.tensor([1.0, 1.0])])
    np.testing.assert_allclose(x.grad.numpy(), [2 + 2, 2 + 4])


# custom Functions -------------------------------------------------------------------------------------

class MulAdd(Function):
    """out = a * b + c, with a non-Tensor flag; dL/da = g b, dL/db = g a, dL/dc = g."""

    seen_needs = None

    @staticmethod
    def forward(ctx, a, b, c, flag):
        assert flag == "passed through"
        assert isinstance(a, np.ndarray)
        ctx.save_for_backward(a, b)
        MulAdd.seen_needs = ctx.needs_input_grad
        return a * b + c

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        na, nb, nc, _ = ctx.needs_input_grad
        return (g * b if na else None), (g * a if nb else None), (g if nc else None), None


def test_custom_function_public_api():
    a = md.tensor([1.0, 2.0], requires_grad=True)
    b = md.tensor([3.0, 4.0])
    c = md.tensor([0.5, 0.5], requires_grad=True)
    out = MulAdd.apply(a, b, c, "passed through")
    assert isinstance(out, md.Tensor) and out.requires_grad and isinstance(out.grad_fn, MulAdd)
    assert MulAdd.seen_needs == (True, False, True, False)
    out.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [3.0, 4.0])
    np.testing.assert_allclose(c.grad.numpy(), [1.0, 1.0])
    assert b.grad is None


def test_custom_function_without_grad_inputs_records_nothing():
    out = MulAdd.apply(md.ones(2), md.ones(2), md.ones(2), "passed through")
    assert out.is_leaf and not out.requires_grad


class MinMax(Function):
    """Two outputs: (min over dim 1, max over dim 1); each gradient goes to its arg element."""

    @staticmethod
    def forward(ctx, x):
        lo, hi = x.argmin(1), x.argmax(1)
        ctx.save_for_backward(lo, hi)
        ctx.shape = x.shape
        rows = np.arange(x.shape[0])
        return x[rows, lo], x[rows, hi]

    @staticmethod
    def backward(ctx, g_lo, g_hi):
        lo, hi = ctx.saved_tensors
        gx = np.zeros(ctx.shape, g_lo.dtype)
        rows = np.arange(ctx.shape[0])
        np.add.at(gx, (rows, lo), g_lo)
        np.add.at(gx, (rows, hi), g_hi)
        return gx


def test_multi_output_function():
    x = md.tensor([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]], requires_grad=True)
    lo, hi = MinMax.apply(x)
    assert lo.grad_fn is hi.grad_fn
    (lo * 2 + hi * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[2, 3, 0], [0, 2, 3]])


def test_multi_output_function_with_one_output_unused():
    x = md.tensor([[1.0, 5.0, 3.0]], requires_grad=True)
    lo, hi = MinMax.apply(x)
    hi.sum().backward()    # lo never reached the loss: its gradient arrives as zeros
    np.testing.assert_allclose(x.grad.numpy(), [[0, 1, 0]])


def test_multi_output_function_passes_gradcheck():
    x = md.tensor(np.random.default_rng(0).standard_normal((3, 4)), requires_grad=True)
    assert gradcheck(MinMax.apply, (x,))


def test_backward_returning_a_wrong_shape_raises():
    class BadShape(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g.sum()

    with pytest.raises(RuntimeError, match=r"BadShape.backward returned a gradient of shape \(\) for an input of shape (minidl.Size\(\[3\]\)|\(3,\))"):
        BadShape.apply(md.ones(3, requires_grad=True)).sum().backward()


def test_backward_returning_too_few_gradients_raises():
    class TooFew(Function):
        @staticmethod
        def forward(ctx, x, k):
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError, match="TooFew.backward returned 1 gradients, expected 2"):
        TooFew.apply(md.ones(3, requires_grad=True), 2.0).sum().backward()


# gradcheck ------------------------------------------------------------------------------------------

class Cube(Function):
    """y = x**3; dy/dx = 3 x**2."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x ** 2 * g


class WrongCube(Cube):
    """The same forward with a wrong backward: 2 x**2 instead of 3 x**2."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x ** 2 * g


def _x64(*shape, seed=0):
    return md.tensor(np.random.default_rng(seed).standard_normal(shape) + 0.5, requires_grad=True)


def test_gradcheck_passes_a_correct_function():
    assert gradcheck(Cube.apply, (_x64(3, 2),)) is True


def test_gradcheck_fails_a_wrong_function_naming_input_index_and_values():
    x = _x64(3, 2)
    with pytest.raises(GradcheckError) as info:
        gradcheck(WrongCube.apply, (x,))
    msg = str(info.value)
    assert isinstance(info.value, RuntimeError)
    m = re.search(r"input 0 .*at index \((\d+), (\d+)\): numerical ([-\d.e+]+), analytic ([-\d.e+]+)", msg)
    assert m, msg
    i, j = int(m.group(1)), int(m.group(2))
    xv = x.detach().numpy()[i, j]
    numerical, analytic = float(m.group(3)), float(m.group(4))
    # with a cotangent v, numerical = 3 x^2 v and analytic = 2 x^2 v: their ratio names the bug
    np.testing.assert_allclose(analytic / numerical, 2 / 3, rtol=1e-4)
    assert abs(numerical) > 0 and xv != 0


def test_gradcheck_names_the_failing_input_among_several():
    a, b = _x64(2, seed=1), _x64(3, seed=2)
    with pytest.raises(GradcheckError, match="input 1 "):
        gradcheck(lambda p, q: Cube.apply(p).sum() + WrongCube.apply(q).sum(), (a, b))


def test_gradcheck_raise_exception_false_returns_false():
    assert gradcheck(WrongCube.apply, (_x64(4),), raise_exception=False) is False
    assert gradcheck(Cube.apply, (_x64(4),), raise_exception=False) is True


def test_gradcheck_fails_a_nan_gradient_even_beside_a_wrong_one():
    class NanAndWrong(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            r = g * 2
            r[0], r[1] = np.nan, 100.0
            return r

    with pytest.raises(GradcheckError, match=r"at index \(0,\): numerical [-\d.e+]+, analytic nan"):
        gradcheck(NanAndWrong.apply, (_x64(3),))


def test_gradcheck_fails_where_both_gradients_are_nan():
    # sqrt at -1: NaN on both sides is no agreement (as torch.allclose)
    x = md.tensor(np.array([-1.0, 1.0]), requires_grad=True)
    with np.errstate(invalid="ignore"):
        assert gradcheck(lambda t: t.sqrt(), (x,), raise_exception=False) is False


@pytest.mark.parametrize("kwargs", [dict(eps=0.0), dict(eps=-1e-6), dict(eps=float("nan")), dict(atol=-1.0)])
def test_gradcheck_rejects_a_step_or_tolerance_it_cannot_use(kwargs):
    with pytest.raises(ValueError, match="gradcheck: (eps|atol)"):
        gradcheck(Cube.apply, (_x64(2),), **kwargs)


def test_gradcheck_warns_for_float32_inputs():
    x = md.tensor(np.array([0.5, 1.5], np.float32), requires_grad=True)
    with pytest.warns(UserWarning, match="float32"):
        gradcheck(Cube.apply, (x,), eps=1e-3, atol=1e-2, rtol=1e-2)


def test_gradcheck_leaves_the_callers_tensors_alone():
    x = _x64(3)
    before = x.detach().numpy().copy()
    gradcheck(Cube.apply, (x,))
    assert x.grad is None
    np.testing.assert_array_equal(x.detach().numpy(), before)


def test_gradcheck_uses_random_cotangents():
    """The sum of a softmax is constant, so with all-ones cotangents any backward passes;
    gradcheck must catch a backward that drops the softmax's own term."""
    class BadSoftmax(Function):
        @staticmethod
        def forward(ctx, x):
            e = np.exp(x - x.max())
            y = e / e.sum()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            return np.zeros_like(g)  # right only for g = const

    with pytest.raises(GradcheckError):
        gradcheck(BadSoftmax.apply, (_x64(4),))


def test_gradcheck_needs_an_input_requiring_grad():
    with pytest.raises(ValueError, match="no input requires grad"):
        gradcheck(Cube.apply, (md.ones(2, dtype=md.float64),))


def test_gradcheck_on_non_contiguous_input():
    x = md.tensor(np.random.default_rng(0).standard_normal((4, 3)).T, requires_grad=True)
    assert gradcheck(lambda t: (t.exp() * t).sum(0), (x,))


# the documentation's example runs ----------------------------------------------------------------------

def _doc_snippets(path):
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


def test_custom_functions_doc_snippets_run(capsys):
    snippets = _doc_snippets(DOCS / "custom_functions.md")
    assert len(snippets) >= 2
    namespace = {"__name__": "docs_custom_functions"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the doc's example must not trigger the float32 warning
        for code in snippets:
            exec(compile(code, str(DOCS / "custom_functions.md"), "exec"), namespace)
    assert "Jacobian mismatch for input 0" in capsys.readouterr().out
