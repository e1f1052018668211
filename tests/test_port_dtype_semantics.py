"""PyTorch's dtype semantics in arithmetic, comparison-free elementwise ops, reductions and
selections, as a ported script relies on them: integer type promotion with 0-d tensors and
out-of-range Python ints (wrapping, not NumPy 2's OverflowError), integer powers with negative
exponents, min/argmin of unsigned, bool and lowest-signed values, reductions in an explicit
integer or bool ``dtype``, NaN in sign/sgn/abs/median, and the exception types for dtypes an
op has no version for. Values against NumPy references; the same programs against PyTorch
where it is installed."""
import numpy as np
import pytest

import minidl as md
from minidl.autograd import gradcheck

T = md.tensor
NAN = float("nan")


def _dt(t):
    return str(t.dtype).split(".")[-1]


def _eq(t, dtype, values):
    assert _dt(t) == dtype
    np.testing.assert_array_equal(t.numpy(), np.asarray(values, dtype=t.numpy().dtype))


# integer promotion ------------------------------------------------------------------------------
def test_zero_dim_integer_tensor_takes_the_dims_tensors_dtype():
    # PyTorch: a 0-d tensor counts like a number within one category (NumPy would widen to int64)
    a8 = T([1, 2], dtype=md.int8)
    _eq(a8 + T(1000), "int8", (np.array([1, 2], np.int8) + np.int64(1000).astype(np.int8)))
    _eq(T([1, 2], dtype=md.int32) * T(3), "int32", [3, 6])
    _eq(T(3) - T([1, 2], dtype=md.int16), "int16", [2, 1])
    _eq(T([7], dtype=md.int8) % T(-3), "int8", [-2])
    _eq(T([7], dtype=md.int8) // T(2), "int8", [3])
    _eq(T([2], dtype=md.int8) ** T(3), "int8", [8])
    _eq(T([1, 2], dtype=md.uint8) * T(-1), "uint8", [255, 254])
    # two 0-d tensors, or a bool tensor with an integer one, promote as usual
    _eq(T(2, dtype=md.int16) + T(2, dtype=md.int8), "int16", 4)
    _eq(T([True, False]) + T(5, dtype=md.int8), "int8", [6, 5])


def test_python_int_out_of_range_wraps_into_the_tensor_dtype():
    _eq(T([1, 2], dtype=md.uint8) + (-1), "uint8", [0, 1])
    _eq(T([1, 2], dtype=md.int8) * 1000, "int8", np.array([1, 2], np.int8) * np.int8(-24))
    _eq(1000 - T([1, 2], dtype=md.int8), "int8", np.int8(-24) - np.array([1, 2], np.int8))
    _eq(T([100], dtype=md.int8) + 100, "int8", [-56])


def test_integer_powers_with_negative_exponents():
    with pytest.raises(RuntimeError, match="negative integer powers"):
        T([2, 3]) ** -1
    with pytest.raises(RuntimeError, match="negative integer powers"):
        md.pow(T([True]), -2)
    base, exp = np.array([0, 2, -2, 1, -1, -1, 3]), np.array([-1, -1, -1, -5, -3, -2, 0])
    expected = np.where(exp >= 0, base ** np.maximum(exp, 0),
                        np.where(base == 1, 1, np.where(base == -1, np.where(exp % 2 == 0, 1, -1), 0)))
    _eq(T(base) ** T(exp), "int64", expected)
    _eq(md.pow(3, T([-1, 2])), "int64", [0, 9])
    _eq(md.pow(2, T([1, 2], dtype=md.int8)), "int8", [2, 4])
    assert _dt(md.pow(2.5, T([1, 2]))) == "float32"
    with pytest.raises(RuntimeError, match="overflow"):
        T([2], dtype=md.int8) ** 200
    with pytest.raises(TypeError):
        md.pow(2, 3)
    _eq(T([True, False]) ** False, "bool", [True, True])
    _eq(T([True, False]) ** True, "bool", [True, False])
    with pytest.raises(NotImplementedError, match="bool"):
        True ** T([True])


def test_pow_with_a_number_base_is_differentiable():
    x = T([0.5, 1.5, 2.0], dtype=md.float64, requires_grad=True)
    assert gradcheck(lambda t: md.pow(2.0, t), [x])
    y = md.pow(3, x)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3.0 ** x.detach().numpy() * np.log(3.0))


def test_bool_negation_and_subtraction_are_runtime_errors():
    with pytest.raises(RuntimeError, match="Negation"):
        -T([True, False])
    with pytest.raises(RuntimeError, match="Negation"):
        md.neg(T([True]))
    with pytest.raises(RuntimeError, match="Subtraction"):
        T([True]) - T([False])


def test_bitwise_ops_promote_and_wrap_as_pytorch():
    _eq(T([1], dtype=md.int8) & T(1000), "int8", np.int8(1) & np.int64(1000).astype(np.int8))
    _eq(T([1], dtype=md.int8) | 1000, "int8", [-23])
    _eq(T([1], dtype=md.uint8) ^ -1, "uint8", [254])
    _eq(T([1], dtype=md.int8) << T([1]), "int64", [2])
    _eq(T([True]) & T(3), "int64", [1])
    for bad in (lambda: T([1.0]) & T([1.0]), lambda: T([1]) & 1.5, lambda: T([1.5]) << 1, lambda: ~T([1.0])):
        with pytest.raises(NotImplementedError, match="integer or bool"):
            bad()


def test_maximum_minimum_promote():
    _eq(md.maximum(T([1, 5]), T([2.0, 3.0])), "float32", [2, 5])
    _eq(md.minimum(T([1, 5], dtype=md.int8), T(300)), "int8", [1, 5])   # 300 wraps to 44
    x = T([1.0, 5.0], dtype=md.float64, requires_grad=True)
    y = md.maximum(x, T([2, 3]))
    assert _dt(y) == "float64"
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 1.0])
    with pytest.raises(TypeError):
        md.maximum(T([1.0]), 2.0)


# elementwise rounding and signs ------------------------------------------------------------------
def test_sign_sgn_of_nan_is_zero_and_bool_is_its_own_sign():
    a = np.array([-2.0, -0.0, 0.0, 3.0, NAN], np.float32)
    expected = np.nan_to_num(np.sign(a), nan=0.0)
    _eq(md.sign(T(a)), "float32", expected)
    _eq(md.sgn(T(a)), "float32", expected)
    _eq(md.sign(T([True, False])), "bool", [True, False])


def test_abs_gradient_at_nan_is_zero():
    x = T([-1.0, NAN, 2.0], requires_grad=True)
    x.abs().sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [-1.0, 0.0, 1.0])


def test_rounding_family_dtypes():
    _eq(md.floor(T([1, 2], dtype=md.int8)), "int8", [1, 2])
    _eq(md.round(T([1, 2])), "int64", [1, 2])
    _eq(md.round(T([1.2345, 2.5, -0.5]), decimals=2), "float32", np.round(np.float32([1.2345, 2.5, -0.5]), 2))
    for bad in (lambda: md.abs(T([True])), lambda: md.floor(T([True])), lambda: md.ceil(T([True])),
                lambda: md.trunc(T([True])), lambda: md.round(T([True])),
                lambda: md.round(T([1234, 2567]), decimals=-2)):
        with pytest.raises(NotImplementedError):
            bad()


def test_clamp_errors():
    with pytest.raises(RuntimeError, match="min' or 'max"):
        md.clamp(T([1.0, 5.0]))
    with pytest.raises(RuntimeError, match="overflow"):
        md.clamp(T([1, 5], dtype=md.int8), 2, 1000)
    _eq(md.clamp(T([1, 5, 10], dtype=md.int8), 2, 7), "int8", [2, 5, 7])


# reductions -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype, np_dtype", [(md.uint8, np.uint8), (md.int8, np.int8), (md.int64, np.int64)])
def test_min_and_argmin_of_integers_at_the_ends_of_their_range(dtype, np_dtype):
    info = np.iinfo(np_dtype)
    a = np.array([[5, info.min, 3], [info.max, 0, info.min]], np_dtype)
    x = T(a, dtype=dtype)
    _eq(x.min(), str(np.dtype(np_dtype)), a.min())
    _eq(x.amin(1), str(np.dtype(np_dtype)), a.min(1))
    _eq(x.argmin(), "int64", a.argmin())
    _eq(x.argmin(1), "int64", a.argmin(1))
    _eq(md.aminmax(x).min, str(np.dtype(np_dtype)), a.min())


def test_min_of_bools_and_argmax_of_bools():
    _eq(T([True, False]).min(), "bool", False)
    _eq(T([[True, True], [False, True]]).amin(0), "bool", [False, True])
    for bad in (lambda: T([True, False]).argmax(), lambda: T([True]).argmin(0)):
        with pytest.raises(RuntimeError, match="bool"):
            bad()
    # min is its own op now (not -max(-x)): its gradient still splits between ties
    x = T([[3.0, 1.0, 1.0], [2.0, 0.5, 4.0]], dtype=md.float64, requires_grad=True)
    assert gradcheck(lambda t: t.amin(1), [T([[3.0, 1.0, 2.0], [2.0, 0.5, 4.0]], dtype=md.float64,
                                              requires_grad=True)])
    x.amin().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 0, 0], [0, 1, 0]])
    x.grad = None
    x.amin(1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 0.5, 0.5], [0, 1, 0]])


def test_sum_prod_cumsum_in_an_explicit_dtype():
    a = np.array([100, 100, 7], np.int8)
    _eq(T(a).sum(), "int64", 207)
    _eq(T(a).sum(dtype=md.int8), "int8", a.sum(dtype=np.int8))
    _eq(T([1.5, 2.5]).sum(dtype=md.int32), "int32", 3)
    _eq(T([1, 2]).sum(0, dtype=md.bool), "bool", True)
    _eq(T(a).prod(), "int64", 70000)
    _eq(T(a).prod(dtype=md.int8), "int8", np.prod(a, dtype=np.int8))
    _eq(T([1, 0]).prod(dtype=md.bool), "bool", False)
    _eq(T([True, True]).prod(), "int64", 1)
    _eq(T(a).cumsum(0), "int64", np.cumsum(a, dtype=np.int64))
    _eq(T(a).cumsum(0, dtype=md.int8), "int8", np.cumsum(a, dtype=np.int8))
    _eq(T([3, 3], dtype=md.int8).cumprod(0), "int64", [3, 9])
    with pytest.raises(RuntimeError, match="multiple times"):
        T([[1.0, 2.0]]).sum(dim=(0, 0))


def test_median_propagates_nan():
    a = np.array([[1.0, NAN, 3.0, NAN, 0.0], [1.0, 2.0, 3.0, 4.0, 5.0]])
    x = T(a, requires_grad=True)
    assert np.isnan(x[0].median().item())
    m = x.median(1)
    np.testing.assert_array_equal(m.values.detach().numpy(), [NAN, 3.0])
    np.testing.assert_array_equal(m.indices.numpy(), [1, 2])    # the first NaN
    m.values.sum().backward()
    expected = np.zeros_like(a)
    expected[0, 1] = expected[1, 2] = 1
    np.testing.assert_array_equal(x.grad.numpy(), expected)
    x.grad = None
    x[0].median().backward()                                      # split between the NaNs
    np.testing.assert_array_equal(x.grad.numpy()[0], [0, 0.5, 0, 0.5, 0])
    assert type(md.nanmedian(T([[1.0, 2.0]]), 1)).__name__ == "nanmedian"


def test_dtype_errors_of_statistics():
    with pytest.raises(RuntimeError, match="interpolation"):
        md.quantile(T([1.0, 2.0]), 0.5, interpolation="bogus")
    for bad in (lambda: md.histc(T([1, 2]), bins=4, min=0, max=3), lambda: md.bincount(T([1.0, 2.0])),
                lambda: md.logcumsumexp(T([1, 2]), 0)):
        with pytest.raises(NotImplementedError):
            bad()
    with pytest.raises(RuntimeError, match="bool"):
        T([True, False]).topk(1)


# against PyTorch --------------------------------------------------------------------------------
PROGRAMS = [
    "torch.tensor([1, 2, 3], dtype=torch.int8) + torch.tensor(1000)",
    "torch.tensor([1, 2], dtype=torch.uint8) - 300",
    "torch.tensor([1, 2], dtype=torch.int32) ** torch.tensor(3)",
    "torch.tensor([1, -1, 0, 2]) ** torch.tensor([-1, -3, 2, -2])",
    "torch.pow(2, torch.tensor([1, 2, 3]))",
    "torch.tensor([1], dtype=torch.int8) | 1000",
    "torch.maximum(torch.tensor([1, 5], dtype=torch.int8), torch.tensor([2., 3.]))",
    "torch.sign(torch.tensor([-0.0, float('nan'), 2.0]))",
    "torch.tensor([0, 5], dtype=torch.uint8).min()",
    "torch.tensor([[-128, 5], [3, -128]], dtype=torch.int8).argmin(1)",
    "torch.tensor([True, False]).amin()",
    "torch.tensor([1., 2.]).sum(dtype=torch.int32)",
    "torch.tensor([100, 100], dtype=torch.int8).cumsum(0, dtype=torch.int8)",
    "torch.tensor([1, 0]).prod(dtype=torch.bool)",
    "torch.tensor([1., float('nan'), 3.]).median()",
    "torch.tensor([[1., float('nan'), 3., float('nan')]]).median(1).indices",
    "torch.tensor([1.], dtype=torch.bfloat16) + torch.tensor(1.)",
]


@pytest.mark.parametrize("program", PROGRAMS)
def test_programs_match_pytorch(program):
    torch = pytest.importorskip("torch")
    theirs = eval(program, {"torch": torch})
    ours = eval(program, {"torch": md})
    assert _dt(ours) == str(theirs.dtype).split(".")[-1]
    np.testing.assert_array_equal(ours.float().numpy(), theirs.float().numpy())


ERRORS = [
    ("torch.tensor([2, 3]) ** -1", RuntimeError),
    ("torch.tensor([True]) ** torch.tensor(True)", NotImplementedError),
    ("-torch.tensor([True])", RuntimeError),
    ("torch.tensor([True]) - torch.tensor([True])", RuntimeError),
    ("torch.tensor([1.0]) & torch.tensor([1.0])", NotImplementedError),
    ("torch.abs(torch.tensor([True]))", NotImplementedError),
    ("torch.trunc(torch.tensor([True]))", NotImplementedError),
    ("torch.clamp(torch.tensor([1.0]))", RuntimeError),
    ("torch.tensor([True, False]).argmax()", RuntimeError),
    ("torch.tensor([[1.0]]).sum(dim=(0, 0))", RuntimeError),
    ("torch.quantile(torch.tensor([1.0]), 0.5, interpolation='x')", RuntimeError),
    ("torch.bincount(torch.tensor([1.0]))", NotImplementedError),
    ("torch.tensor([1, 2]).logcumsumexp(0)", NotImplementedError),
]


@pytest.mark.parametrize("program, error", ERRORS)
def test_errors_match_pytorch(program, error):
    torch = pytest.importorskip("torch")
    with pytest.raises(error):
        eval(program, {"torch": torch})
    with pytest.raises(error):
        eval(program, {"torch": md})


def test_gradients_match_pytorch():
    torch = pytest.importorskip("torch")
    a = np.array([[3.0, 1.0, 1.0, NAN], [2.0, 0.5, 4.0, -1.0]])
    grads = []
    for lib in (torch, md):
        x = lib.tensor(a, requires_grad=True)
        (x.amin(1) * lib.tensor([1.0, 2.0], dtype=lib.float64)).sum().backward()
        y = lib.tensor(a[1], requires_grad=True)
        (lib.pow(2, y).sum() + y.abs().sum() + lib.maximum(y, lib.tensor([1, 1, 1, 1])).sum()).backward()
        z = lib.tensor(a[0], requires_grad=True)
        (z.median() + z.abs().sum()).backward()
        grads.append([g.grad.detach().numpy() for g in (x, y, z)])
    for theirs, ours in zip(*grads):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)
