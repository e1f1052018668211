"""``minidl.autograd.function`` as ``torch.autograd.function``: the names a ported script imports from
it, and how a custom Function's backward results are checked and fitted to the inputs (summed down
to an input's shape when it expands to the gradient's, errors for other shapes, for wrong counts,
for numbers and for gradients of non-Tensor arguments; cast to the input's dtype)."""
import subprocess
import sys
import warnings

import numpy as np
import pytest

import minidl as md
from minidl.autograd import function as fn_module
from minidl.autograd import op_function
from minidl.autograd.function import (BackwardCFunction, Function, FunctionCtx, FunctionMeta, InplaceFunction,
                                      NestedIOFunction, once_differentiable)

TORCH_ALL = {"FunctionCtx", "BackwardCFunction", "FunctionMeta", "Function", "once_differentiable", "InplaceFunction",
             "NestedIOFunction"}


def _lib(name):
    return md if name == "minidl" else pytest.importorskip("torch")


def _function_module(lib):
    return sys.modules[lib.__name__ + ".autograd.function"]


# the module ------------------------------------------------------------------------------------------

def test_the_public_module_is_the_tensor_level_function():
    assert set(fn_module.__all__) == TORCH_ALL
    assert md.autograd.Function is fn_module.Function is Function
    assert md.autograd.function is fn_module
    assert fn_module.once_differentiable is once_differentiable


def test_the_ops_keep_their_array_level_base_in_op_function():
    from minidl.ops.unary import Exp
    assert issubclass(Exp, op_function.Function)
    assert not issubclass(Exp, Function) and op_function.Function is not Function
    assert md.tensor([1.0], requires_grad=True).exp().grad_fn.name() == "ExpBackward0"


def test_module_all_matches_torch():
    torch = pytest.importorskip("torch")
    import torch.autograd.function as tf
    assert set(tf.__all__) == set(fn_module.__all__)


def test_the_public_module_imports_first_in_a_fresh_process():
    code = ("from minidl.autograd.function import Function, FunctionCtx, once_differentiable, InplaceFunction\n"
            "import minidl\nassert minidl.autograd.Function is Function\nprint('ok')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


class _Square(Function):
    @staticmethod
    def forward(ctx: FunctionCtx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


def test_ctx_node_and_class_types_as_torch():
    x = md.tensor([1.0, -3.0], requires_grad=True)
    y = _Square.apply(x)
    node = y.grad_fn
    assert isinstance(node, FunctionCtx) and isinstance(node, BackwardCFunction)
    assert type(node).__name__ == "_SquareBackward" and node.name() == "_SquareBackward"
    assert type(_Square) is FunctionMeta and isinstance(Function, FunctionMeta)
    assert issubclass(Function, FunctionCtx)
    # grad_fn.apply: the user's backward, called directly
    assert node.apply(md.tensor([1.0, 1.0])).tolist() == [2.0, -6.0]
    y.sum().backward()
    assert x.grad.tolist() == [2.0, -6.0]


def test_grad_fn_apply_matches_torch():
    torch = pytest.importorskip("torch")

    class Sq(torch.autograd.Function):
        forward, backward = _Square.forward, _Square.backward
    xt = torch.tensor([1.0, -3.0], requires_grad=True)
    assert Sq.apply(xt).grad_fn.apply(torch.ones(2)).tolist() == _Square.apply(
        md.tensor([1.0, -3.0], requires_grad=True)).grad_fn.apply(md.ones(2)).tolist()


def test_vjp_and_setup_context_still_map_through_the_metaclass():
    class V(Function):
        @staticmethod
        def forward(x, k):
            return x * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.k = inputs[1]

        @staticmethod
        def vjp(ctx, g):
            return g * ctx.k, None
    x = md.tensor([1.0, 2.0], requires_grad=True)
    V.apply(x, 5.0).sum().backward()
    assert x.grad.tolist() == [5.0, 5.0]
    assert V.backward is V.vjp


def test_instantiating_warns_and_calling_an_instance_raises():
    with pytest.warns(DeprecationWarning, match="should not be instantiated"):
        f = _Square()
    with pytest.raises(RuntimeError, match="Legacy autograd function with non-static forward"):
        f(md.ones(2))


def test_legacy_subclasses():
    class Neg(InplaceFunction):
        @staticmethod
        def forward(ctx, x):
            return -x

        @staticmethod
        def backward(ctx, g):
            return -g
    with pytest.warns(DeprecationWarning):
        assert Neg(inplace=True).inplace is True
    with pytest.warns(DeprecationWarning):
        assert Neg().inplace is False
    x = md.ones(2, requires_grad=True)
    Neg.apply(x).sum().backward()
    assert x.grad.tolist() == [-1.0, -1.0]

    class Nested(NestedIOFunction):
        def forward_extended(self, a):
            return a
    assert issubclass(Nested, Function)
    with pytest.raises(NotImplementedError):
        NestedIOFunction.backward_extended(None, md.ones(1))


def test_function_ctx_on_its_own():
    x = md.ones(2, requires_grad=True)
    ctx = FunctionCtx()
    ctx.save_for_backward(x, None)       # Tensors or None; anything else is refused below
    ctx.save_for_forward(x, None)
    assert ctx.saved_for_forward == (x, None)
    with pytest.raises(AssertionError, match="save_for_forward expects all arguments to be tensors"):
        ctx.save_for_forward(3)
    with pytest.warns(FutureWarning, match="mark_shared_storage"):
        ctx.mark_shared_storage((x, x))
    with pytest.raises(TypeError, match="save_for_backward can only save variables"):
        ctx.save_for_backward(3)


# backward results ------------------------------------------------------------------------------------
# Each case: forward returns a copy of its first argument (of shape (2, 3) unless given), backward
# returns what ``ret(lib, g)`` builds. The expected .grad is computed with NumPy from the gradient
# backward returns (sum over the dims the input's shape was expanded along).

def _run(lib, ret, inputs):
    """(".grad" of each input that has one as (shape, dtype name, values), or None) or the error raised."""
    args = inputs(lib)

    class X(_function_module(lib).Function):
        @staticmethod
        def forward(ctx, *a):
            return a[0].clone()

        @staticmethod
        def backward(ctx, g):
            return ret(lib, g)
    try:
        X.apply(*args).sum().backward()
    except Exception as e:          # the outcome compared is the error itself
        return type(e).__name__, str(e)
    return [None if not hasattr(a, "grad") or a.grad is None else
            (tuple(a.grad.shape), str(a.grad.dtype).split(".")[-1], np.asarray(a.grad.tolist()))
            for a in args]


def _x(shape=(2, 3), dtype="float32"):
    return lambda lib: (lib.ones(shape, dtype=getattr(lib, dtype), requires_grad=True),)


def _x_and(other):
    return lambda lib: (lib.ones(2, 3, requires_grad=True), other(lib))


SUMMED = {   # name: (input shape, gradient shape) where the input's shape expands to the gradient's
    "leading batch": ((2, 3), (4, 2, 3)),
    "leading one": ((2, 3), (1, 2, 3)),
    "stretched middle": ((2, 1, 3), (2, 4, 3)),
    "scalar from one": ((), (1,)),
    "scalar from many": ((), (5,)),
}


@pytest.mark.parametrize("lib", ["minidl", "torch"])
@pytest.mark.parametrize("case", sorted(SUMMED))
def test_a_gradient_the_input_expands_to_is_summed_down(lib, case):
    lib = _lib(lib)
    shape, gshape = SUMMED[case]
    values = np.arange(int(np.prod(gshape)), dtype=np.float32).reshape(gshape)
    out = _run(lib, lambda L, g: L.tensor(values), _x(shape))
    lead = len(gshape) - len(shape)
    dims = tuple(range(lead)) + tuple(lead + d for d, n in enumerate(shape) if n == 1 and gshape[lead + d] != 1)
    expected = values.sum(axis=dims, keepdims=True).reshape(shape)
    assert out[0][0] == shape and out[0][1] == "float32"
    np.testing.assert_allclose(out[0][2], expected)


BAD_SHAPES = {"trailing only": ((2, 3), (3,)), "transposed": ((2, 3), (3, 2)), "scalar": ((2, 3), ()),
              "scalar for one": ((1,), ()), "keepdim row": ((2, 3), (1, 3))}


@pytest.mark.parametrize("lib", ["minidl", "torch"])
@pytest.mark.parametrize("case", sorted(BAD_SHAPES))
def test_a_gradient_of_an_incompatible_shape_is_an_error(lib, case):
    lib = _lib(lib)
    shape, gshape = BAD_SHAPES[case]
    kind, msg = _run(lib, lambda L, g: L.ones(gshape), _x(shape))
    assert kind == "RuntimeError"
    assert (f"XBackward returned an invalid gradient at index 0 - got {list(gshape)} but expected shape "
            f"compatible with {list(shape)}") in msg


ERRORS = {   # name: (inputs, backward's result, what the message says)
    "python float": (_x(), lambda L, g: 2.0, "expected Variable or None (got float)"),
    "python int": (_x(), lambda L, g: 2, "expected Variable or None (got int)"),
    "list": (_x(), lambda L, g: [g], "expected Variable or None (got list)"),
    "number for a tensor without grad": (_x_and(lambda L: L.ones(2, 3)), lambda L, g: (g, 1.0),
                                         "expected Variable or None (got float)"),
    "too many": (_x(), lambda L, g: (g, g), "returned an incorrect number of gradients (expected 1, got 2)"),
    "too few": (_x_and(lambda L: L.ones(2, 3)), lambda L, g: g,
                "returned an incorrect number of gradients (expected 2, got 1)"),
    "for a number argument": (_x_and(lambda L: 3), lambda L, g: (g, g),
                              "returned a gradient different than None at position 2, but the corresponding "
                              "forward input was not a Variable"),
}


@pytest.mark.parametrize("lib", ["minidl", "torch"])
@pytest.mark.parametrize("case", sorted(ERRORS))
def test_invalid_results_raise(lib, case):
    lib = _lib(lib)
    inputs, ret, msg = ERRORS[case]
    kind, text = _run(lib, ret, inputs)
    assert kind == "RuntimeError" and msg in text, text


ACCEPTED = {   # name: (inputs, backward's result, expected .grad of each input as (dtype, value) or None)
    "trailing Nones": (_x(), lambda L, g: (g, None, None), [("float32", 1.0)]),
    "any shape for a tensor without grad": (_x_and(lambda L: L.ones(2, 3)), lambda L, g: (g, L.ones(5)),
                                            [("float32", 1.0), None]),
    "float64 gradient": (_x(), lambda L, g: g.double() * 0.1, [("float32", np.float32(0.1))]),
    "int64 gradient": (_x(), lambda L, g: (g * 3).long(), [("float32", 3.0)]),
    "bool gradient": (_x(), lambda L, g: g.bool(), [("float32", 1.0)]),
    "float32 for float64": (_x(dtype="float64"), lambda L, g: g.float() * 0.1, [("float64", np.float32(0.1))]),
    "int64 expanded for float16": (_x(dtype="float16"), lambda L, g: L.ones(4, 2, 3, dtype=L.int64),
                                   [("float16", 4.0)]),
}


@pytest.mark.parametrize("lib", ["minidl", "torch"])
@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_accepted_results_are_cast_to_the_inputs_dtype(lib, case):
    lib = _lib(lib)
    inputs, ret, expected = ACCEPTED[case]
    out = _run(lib, ret, inputs)
    assert isinstance(out, list), out
    for got, want in zip(out, expected):
        if want is None:
            assert got is None
            continue
        assert got[0] == (2, 3) and got[1] == want[0]
        np.testing.assert_allclose(got[2], np.full((2, 3), want[1]), rtol=1e-3)


def test_arrays_are_checked_as_tensors_are():
    """A NumPy array is a gradient too (minidl's older idiom): it is summed down, and a complex one
    for a real input is an error, not a silent loss of its imaginary part."""
    out = _run(md, lambda L, g: np.ones((3, 2, 3), np.float64), _x())
    assert out[0][1] == "float32" and (out[0][2] == 3.0).all()
    kind, msg = _run(md, lambda L, g: np.ones((2, 3), np.complex64), _x())
    assert kind == "RuntimeError" and "invalid gradient at index 0 - got dtype complex64" in msg
    kind, msg = _run(md, lambda L, g: np.ones((3,), np.float32), _x())
    assert kind == "RuntimeError" and "expected shape compatible with [2, 3]" in msg
    kind, msg = _run(md, lambda L, g: np.float32(1.0), _x())
    assert kind == "RuntimeError" and "expected Variable or None (got float32)" in msg


class _PerSample(Function):
    """y = x**2, whose backward returns 2 x g once per sample of a batch of three: the input's
    gradient is their sum, 6 x g, and its derivative (with create_graph) 6 g."""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return (2 * x * g).unsqueeze(0).expand(3, *x.shape)


def test_the_sum_down_is_differentiable_in_the_create_graph_pass():
    x = md.tensor([1.0, -2.0, 0.5], requires_grad=True)
    (gx,) = md.autograd.grad(_PerSample.apply(x).sum(), x, create_graph=True)
    assert gx.shape == (3,) and gx.requires_grad
    np.testing.assert_allclose(gx.tolist(), 6 * np.array([1.0, -2.0, 0.5]))
    (ggx,) = md.autograd.grad(gx.sum(), x)
    np.testing.assert_allclose(ggx.tolist(), [6.0, 6.0, 6.0])


def test_the_create_graph_pass_matches_torch():
    torch = pytest.importorskip("torch")

    class PerSample(torch.autograd.Function):
        forward, backward = _PerSample.forward, _PerSample.backward
    xt = torch.tensor([1.0, -2.0, 0.5], requires_grad=True)
    (gt,) = torch.autograd.grad(PerSample.apply(xt).sum(), xt, create_graph=True)
    (ggt,) = torch.autograd.grad((gt * gt).sum(), xt)
    x = md.tensor([1.0, -2.0, 0.5], requires_grad=True)
    (g,) = md.autograd.grad(_PerSample.apply(x).sum(), x, create_graph=True)
    (gg,) = md.autograd.grad((g * g).sum(), x)
    np.testing.assert_allclose(g.tolist(), gt.tolist())
    np.testing.assert_allclose(gg.tolist(), ggt.tolist())


def test_a_number_in_the_create_graph_pass_raises():
    class Num(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return 1.0
    x = md.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"expected Variable or None \(got float\)"):
        md.autograd.grad(Num.apply(x).sum(), x, create_graph=True)


def test_once_differentiable_backward_is_fitted_too():
    class Once(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            return g.unsqueeze(0).expand(2, *g.shape)
    x = md.ones(3, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Once.apply(x).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]
