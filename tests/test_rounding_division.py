"""Floor division and remainders (``//``, ``%``, floor_divide, remainder, fmod, div with a
rounding mode), against PyTorch: the values and their signs, the dtypes, integer division by
zero, the gradients PyTorch defines, and the in-place forms."""
import numpy as np
import pytest

import minidl as md
from minidl.autograd import gradcheck

torch = pytest.importorskip("torch")

A = np.array([[5.0, -5.0, 7.5, -7.5], [0.3, -2.9, 6.0, -6.0]])
B = np.array([[3.0, 3.0, -2.0, -2.0], [0.7, 1.1, -2.5, 2.5]])
AI = np.array([7, -7, 6, -6, 0, 13])
BI = np.array([2, 2, -4, -4, 3, -5])

BINARY = {
    "floor_divide": (lambda a, b: md.floor_divide(a, b), lambda a, b: torch.floor_divide(a, b)),
    "remainder": (lambda a, b: md.remainder(a, b), lambda a, b: torch.remainder(a, b)),
    "fmod": (lambda a, b: md.fmod(a, b), lambda a, b: torch.fmod(a, b)),
    "//": (lambda a, b: a // b, lambda a, b: a // b),
    "%": (lambda a, b: a % b, lambda a, b: a % b),
    "div trunc": (lambda a, b: md.div(a, b, rounding_mode="trunc"), lambda a, b: torch.div(a, b, rounding_mode="trunc")),
    "div floor": (lambda a, b: a.div(b, rounding_mode="floor"), lambda a, b: torch.div(a, b, rounding_mode="floor")),
    "Tensor.fmod": (lambda a, b: a.fmod(b), lambda a, b: a.fmod(b)),
    "Tensor.remainder": (lambda a, b: a.remainder(b), lambda a, b: a.remainder(b)),
}


def _same(mine, theirs):
    assert str(mine.dtype).replace("minidl.", "") == str(theirs.dtype).replace("torch.", "")
    np.testing.assert_array_equal(mine.numpy(), theirs.numpy())


@pytest.mark.parametrize("name", list(BINARY))
@pytest.mark.parametrize("a, b", [(A, B), (AI, BI), (A.astype(np.float32), B[0].astype(np.float32))],
                         ids=["float64", "int64", "float32 broadcast"])
def test_values_and_dtypes_match_pytorch(name, a, b):
    ours, theirs = BINARY[name]
    _same(ours(md.tensor(a), md.tensor(b)), theirs(torch.tensor(a), torch.tensor(b)))


@pytest.mark.parametrize("name", ["floor_divide", "remainder", "fmod", "//", "%", "div trunc", "div floor"])
@pytest.mark.parametrize("scalar", [2, -3, 2.5, -1.5])
def test_a_python_number_on_either_side(name, scalar):
    ours, theirs = BINARY[name]
    for data in (A.astype(np.float32), AI):
        if name in ("floor_divide", "remainder", "fmod", "div trunc", "div floor"):
            _same(ours(md.tensor(data), scalar), theirs(torch.tensor(data), scalar))
        else:   # the operators also reflect: number // tensor
            _same(ours(md.tensor(data), scalar), theirs(torch.tensor(data), scalar))
            divisor = np.where(data == 0, 1, data)
            _same(ours(scalar, md.tensor(divisor)), theirs(scalar, torch.tensor(divisor)))


def test_remainder_takes_the_divisors_sign_and_fmod_the_dividends():
    a, b = md.tensor([5.0, -5.0, 5.0, -5.0]), md.tensor([3.0, 3.0, -3.0, -3.0])
    np.testing.assert_array_equal((a % b).numpy(), [2, 1, -1, -2])
    np.testing.assert_array_equal(md.fmod(a, b).numpy(), [2, -2, 2, -2])
    np.testing.assert_array_equal((a // b).numpy(), [1, -2, -2, 1])
    np.testing.assert_array_equal(md.div(a, b, rounding_mode="trunc").numpy(), [1, -1, -1, 1])


def test_integer_results_stay_integers_and_true_division_does_not():
    i = md.tensor([7, -7])
    assert (i // 2).dtype == md.int64 and (i % 2).dtype == md.int64
    assert md.div(i, 2, rounding_mode="floor").dtype == md.int64
    assert md.div(i, 2).dtype == md.float32 and i.div(2, rounding_mode=None).dtype == md.float32
    assert (i // 2.0).dtype == md.float32 and (i % 2.5).dtype == md.float32
    assert (md.tensor([7, 9], dtype=md.int32) // 2).dtype == md.int32


@pytest.mark.parametrize("op", [lambda a, b: a // b, lambda a, b: a % b, lambda a, b: md.fmod(a, b),
                                lambda a, b: md.div(a, b, rounding_mode="trunc"),
                                lambda a, b: md.div(a, b, rounding_mode="floor")])
def test_integer_division_by_zero_raises_as_pytorch(op):
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        op(md.tensor([4, 5]), md.tensor([1, 0]))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        op(md.tensor([4, 5]), 0)


def test_float_division_by_zero_gives_inf_and_nan():
    a = md.tensor([5.0, -5.0, 0.0])
    ta = torch.tensor([5.0, -5.0, 0.0])
    _same(a // 0.0, ta // 0.0)
    _same(md.div(a, 0.0, rounding_mode="trunc"), torch.div(ta, 0.0, rounding_mode="trunc"))
    assert np.isnan((a % 0.0).numpy()).all() and np.isnan(md.fmod(a, 0.0).numpy()).all()


def test_bad_rounding_mode_and_bool_operands_are_refused():
    with pytest.raises(RuntimeError, match="rounding_mode to be one of None, 'trunc', or 'floor'"):
        md.div(md.tensor([1.0]), 2, rounding_mode="round")
    b = md.tensor([True, False])
    for op in (md.floor_divide, md.remainder, md.fmod):
        with pytest.raises(NotImplementedError):
            op(b, b)


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-4, 4, (3, 4))
    b = rng.choice([-1, 1], (3, 4)) * rng.uniform(0.6, 2.0, (3, 4))
    # keep a / b away from the integers, where the rounded quotient jumps
    frac = a / b - np.floor(a / b)
    a = np.where(np.abs(frac - 0.5) > 0.4, a + 0.3 * b, a)
    return md.tensor(a, requires_grad=True), md.tensor(b, requires_grad=True)


@pytest.mark.parametrize("op", [md.remainder, md.fmod, lambda a, b: a % b])
def test_remainder_and_fmod_gradients(op):
    a, b = _inputs()
    assert gradcheck(op, (a, b))
    assert gradcheck(lambda x: op(x, 1.3), (a,))
    assert gradcheck(lambda y: op(md.tensor(A[:, :3].copy()), y), (b[:2, :3].detach().requires_grad_(),))


@pytest.mark.parametrize("name", ["remainder", "fmod"])
def test_remainder_gradients_equal_pytorchs(name):
    a, b = _inputs(1)
    ta, tb = (torch.tensor(t.detach().numpy(), requires_grad=True) for t in (a, b))
    g = np.random.default_rng(2).standard_normal((3, 4))
    getattr(md, name)(a, b[0]).backward(md.tensor(g))
    getattr(torch, name)(ta, tb[0]).backward(torch.tensor(g))
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy())
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy())


@pytest.mark.parametrize("mode", ["trunc", "floor"])
def test_rounding_division_has_a_zero_gradient(mode):
    a, b = _inputs()
    y = md.div(a, b, rounding_mode=mode)
    assert y.requires_grad
    y.backward(md.ones_like(y))
    np.testing.assert_array_equal(a.grad.numpy(), 0)
    np.testing.assert_array_equal(b.grad.numpy(), 0)
    assert gradcheck(lambda x, y: md.div(x, y, rounding_mode=mode), _inputs(3))


def test_floor_divide_records_but_has_no_derivative_as_pytorch():
    a, b = _inputs()
    y = a // b
    assert y.requires_grad
    with pytest.raises(RuntimeError, match="derivative for floor_divide is not implemented"):
        y.sum().backward()
    ta = torch.tensor(a.detach().numpy(), requires_grad=True)
    with pytest.raises(RuntimeError, match="derivative for aten::floor_divide is not implemented"):
        (ta // 2).sum().backward()


@pytest.mark.parametrize("name, call", [
    ("floor_divide_", lambda t, o: t.floor_divide_(o)), ("remainder_", lambda t, o: t.remainder_(o)),
    ("fmod_", lambda t, o: t.fmod_(o)), ("div_ trunc", lambda t, o: t.div_(o, rounding_mode="trunc")),
    ("div_ floor", lambda t, o: t.div_(o, rounding_mode="floor")),
])
def test_in_place_forms_write_into_the_tensor_and_return_it(name, call):
    for data, other in ((A.copy(), B[0]), (AI.copy(), 4)):
        t = md.tensor(data)
        v = t[:1]
        out = call(t, md.tensor(other) if isinstance(other, np.ndarray) else other)
        expected = call(torch.tensor(data), torch.tensor(other) if isinstance(other, np.ndarray) else other)
        assert out is t and t._version == 1
        np.testing.assert_array_equal(t.numpy(), expected.numpy())
        np.testing.assert_array_equal(v.numpy(), expected.numpy()[:1])   # a view sees the write


def test_augmented_operators_are_in_place():
    t = md.tensor([7.5, -7.5])
    same = t
    t //= 2
    assert t is same
    np.testing.assert_array_equal(t.numpy(), [3, -4])
    t %= 3
    assert t is same
    np.testing.assert_array_equal(t.numpy(), [0, 2])
    i = md.tensor([5, -5])
    with pytest.raises(RuntimeError, match="can't be cast"):
        i %= 2.5        # a float result does not fit an int tensor (PyTorch refuses it too)


def test_in_place_remainder_in_the_graph_backpropagates():
    a, b = _inputs()
    x = a * 1.0
    x.remainder_(b)
    x.backward(md.ones_like(x))
    ta, tb = (torch.tensor(t.detach().numpy(), requires_grad=True) for t in (a, b))
    tx = ta * 1.0
    tx.remainder_(tb)
    tx.backward(torch.ones_like(tx))
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy())
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy())
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        a.fmod_(2.0)
