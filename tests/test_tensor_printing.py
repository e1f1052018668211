"""How tensors print: repr, str and print give PyTorch's text for the same tensor under the same
print options (minidl's dtype names, ``minidl.float64``, and grad_fn names stand for PyTorch's).

The table's expected strings were printed by PyTorch and are written out, so it runs without
torch; the tests at the end compare against torch itself: the table once more, and random
tensors of many shapes, magnitudes, dtypes and options."""
import math
import re

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
from minidl import backends

nan, inf = math.nan, math.inf


@pytest.fixture(autouse=True)
def _default_print_options():
    md.set_printoptions(profile="default")
    yield
    md.set_printoptions(profile="default")


def _build(lib, expr, dtype):
    """``lib.tensor`` (minidl's or torch's) of the values ``expr`` gives; half-precision values
    start from float32 so that both libraries round them once (torch.tensor rounds a float64
    array through float32)."""
    values = np.asarray(eval(expr, {"np": np, "nan": nan, "inf": inf}))
    if dtype in ("float16", "bfloat16"):
        values = values.astype(np.float32)
    return lib.tensor(values, dtype=getattr(lib, dtype))


# (values, dtype, the set_printoptions calls made in turn, what PyTorch prints)
CASES = [
    ("[1.0, 2.5, 3.0]", "float32", [],
     "tensor([1.0000, 2.5000, 3.0000])"),
    ("[1e-5, 1.0, 1e5]", "float32", [],
     "tensor([1.0000e-05, 1.0000e+00, 1.0000e+05])"),
    ("[0.144, 1.0]", "float32", [],
     "tensor([0.1440, 1.0000])"),
    ("[-1.5, 0.25, 10.0]", "float32", [],
     "tensor([-1.5000,  0.2500, 10.0000])"),
    ("[9.99996, 1.0]", "float64", [],
     "tensor([10.0000,  1.0000], dtype=minidl.float64)"),
    ("[1e-4, 0.1]", "float64", [],
     "tensor([0.0001, 0.1000], dtype=minidl.float64)"),
    ("[9.9e-5, 0.1]", "float64", [],
     "tensor([9.9000e-05, 1.0000e-01], dtype=minidl.float64)"),
    ("[1.0, 1000.0]", "float32", [],
     "tensor([   1., 1000.])"),
    ("[1.5, 1501.0]", "float32", [],
     "tensor([1.5000e+00, 1.5010e+03])"),
    ("[1.0, -2.0, 300.0]", "float32", [],
     "tensor([  1.,  -2., 300.])"),
    ("[1.0, 2000.0]", "float32", [],
     "tensor([1.0000e+00, 2.0000e+03])"),
    ("[2e8, 1.0]", "float32", [],
     "tensor([2.0000e+08, 1.0000e+00])"),
    ("[123456789.0]", "float32", [],
     "tensor([1.2346e+08])"),
    ("3.5", "float32", [],
     "tensor(3.5000)"),
    ("3.0", "float32", [],
     "tensor(3.)"),
    ("nan", "float32", [],
     "tensor(nan)"),
    ("-0.0", "float32", [],
     "tensor(-0.)"),
    ("1e-300", "float64", [],
     "tensor(1.0000e-300, dtype=minidl.float64)"),
    ("7", "int64", [],
     "tensor(7)"),
    ("True", "bool", [],
     "tensor(True)"),
    ("[0.0, -0.0]", "float32", [],
     "tensor([0., -0.])"),
    ("[0.0, nan]", "float32", [],
     "tensor([0., nan])"),
    ("[nan, inf, -inf]", "float32", [],
     "tensor([nan, inf, -inf])"),
    ("[1.5, nan, -inf, inf]", "float32", [],
     "tensor([1.5000,    nan,   -inf,    inf])"),
    ("[1.0, nan, -inf]", "float32", [],
     "tensor([1., nan, -inf])"),
    ("[1e10, nan]", "float32", [],
     "tensor([1.0000e+10,        nan])"),
    ("[1e-300, -1e300, 5.0]", "float64", [],
     "tensor([ 1.0000e-300, -1.0000e+300,   5.0000e+00], dtype=minidl.float64)"),
    ("[5e-324, 1.0]", "float64", [],
     "tensor([4.9407e-324,  1.0000e+00], dtype=minidl.float64)"),
    ("[0.5]", "float64", [],
     "tensor([0.5000], dtype=minidl.float64)"),
    ("np.linspace(-1, 1, 9)", "float16", [],
     "tensor([-1.0000, -0.7500, -0.5000, -0.2500,  0.0000,  0.2500,  0.5000,  0.7500,\n"
     "         1.0000], dtype=minidl.float16)"),
    ("[65504.0, 1e-4]", "float16", [],
     "tensor([6.5504e+04, 1.0002e-04], dtype=minidl.float16)"),
    ("[0.5, 1.2, -3.0]", "bfloat16", [],
     "tensor([ 0.5000,  1.2031, -3.0000], dtype=minidl.bfloat16)"),
    ("[1, -20, 300]", "int32", [],
     "tensor([  1, -20, 300], dtype=minidl.int32)"),
    ("np.arange(-3, 3)", "int8", [],
     "tensor([-3, -2, -1,  0,  1,  2], dtype=minidl.int8)"),
    ("[255, 0, 7]", "uint8", [],
     "tensor([255,   0,   7], dtype=minidl.uint8)"),
    ("[2**62, -2**62]", "int64", [],
     "tensor([ 4611686018427387904, -4611686018427387904])"),
    ("np.arange(6).reshape(2, 3) * 1000 - 2500", "int16", [],
     "tensor([[-2500, -1500,  -500],\n"
     "        [  500,  1500,  2500]], dtype=minidl.int16)"),
    ("[True, False, True]", "bool", [],
     "tensor([ True, False,  True])"),
    ("[[True], [False]]", "bool", [],
     "tensor([[ True],\n"
     "        [False]])"),
    ("np.zeros(0)", "float32", [],
     "tensor([])"),
    ("np.zeros(0)", "int32", [],
     "tensor([], dtype=minidl.int32)"),
    ("np.zeros(0)", "int64", [],
     "tensor([], dtype=minidl.int64)"),
    ("np.zeros(0)", "bool", [],
     "tensor([], dtype=minidl.bool)"),
    ("np.zeros((2, 0, 3))", "float32", [],
     "tensor([], size=(2, 0, 3))"),
    ("np.zeros((1, 0))", "int64", [],
     "tensor([], size=(1, 0), dtype=minidl.int64)"),
    ("np.arange(12.0).reshape(3, 4) / 7", "float32", [],
     "tensor([[0.0000, 0.1429, 0.2857, 0.4286],\n"
     "        [0.5714, 0.7143, 0.8571, 1.0000],\n"
     "        [1.1429, 1.2857, 1.4286, 1.5714]])"),
    ("np.arange(24.0).reshape(2, 3, 4) - 10", "float32", [],
     "tensor([[[-10.,  -9.,  -8.,  -7.],\n"
     "         [ -6.,  -5.,  -4.,  -3.],\n"
     "         [ -2.,  -1.,   0.,   1.]],\n"
     "\n"
     "        [[  2.,   3.,   4.,   5.],\n"
     "         [  6.,   7.,   8.,   9.],\n"
     "         [ 10.,  11.,  12.,  13.]]])"),
    ("np.ones((1, 1, 1, 2))", "float64", [],
     "tensor([[[[1., 1.]]]], dtype=minidl.float64)"),
    ("np.arange(30.0) / 7", "float32", [],
     "tensor([0.0000, 0.1429, 0.2857, 0.4286, 0.5714, 0.7143, 0.8571, 1.0000, 1.1429,\n"
     "        1.2857, 1.4286, 1.5714, 1.7143, 1.8571, 2.0000, 2.1429, 2.2857, 2.4286,\n"
     "        2.5714, 2.7143, 2.8571, 3.0000, 3.1429, 3.2857, 3.4286, 3.5714, 3.7143,\n"
     "        3.8571, 4.0000, 4.1429])"),
    ("np.arange(2000)", "int64", [],
     "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])"),
    ("np.arange(2000.0) / 3", "float32", [],
     "tensor([0.0000e+00, 3.3333e-01, 6.6667e-01,  ..., 6.6567e+02, 6.6600e+02,\n"
     "        6.6633e+02])"),
    ("np.arange(2000).reshape(8, 250)", "int64", [],
     "tensor([[   0,    1,    2,  ...,  247,  248,  249],\n"
     "        [ 250,  251,  252,  ...,  497,  498,  499],\n"
     "        [ 500,  501,  502,  ...,  747,  748,  749],\n"
     "        ...,\n"
     "        [1250, 1251, 1252,  ..., 1497, 1498, 1499],\n"
     "        [1500, 1501, 1502,  ..., 1747, 1748, 1749],\n"
     "        [1750, 1751, 1752,  ..., 1997, 1998, 1999]])"),
    ("np.arange(343).reshape(7, 7, 7)", "int64", [dict(threshold=100, edgeitems=1)],
     "tensor([[[  0,  ...,   6],\n"
     "         ...,\n"
     "         [ 42,  ...,  48]],\n"
     "\n"
     "        ...,\n"
     "\n"
     "        [[294,  ..., 300],\n"
     "         ...,\n"
     "         [336,  ..., 342]]])"),
    ("np.arange(1331.0).reshape(11, 11, 11) / 10", "float32", [dict(edgeitems=1)],
     "tensor([[[  0.,  ...,   1.],\n"
     "         ...,\n"
     "         [ 11.,  ...,  12.]],\n"
     "\n"
     "        ...,\n"
     "\n"
     "        [[121.,  ..., 122.],\n"
     "         ...,\n"
     "         [132.,  ..., 133.]]])"),
    ("np.arange(10)", "int64", [dict(threshold=5, edgeitems=1)],
     "tensor([0,  ..., 9])"),
    ("np.arange(10)", "int64", [dict(threshold=5, edgeitems=10)],
     "tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])"),
    ("np.arange(24.0).reshape(2, 3, 4)", "float32", [dict(threshold=5, edgeitems=0)],
     "tensor([...], size=(2, 3, 4))"),
    ("np.arange(4.0).reshape(2, 2)", "float32", [dict(edgeitems=0)],
     "tensor([[0., 1.],\n"
     "        [2., 3.]], size=(2, 2))"),
    ("np.arange(12.0).reshape(3, 4) / 7", "float32", [dict(linewidth=30)],
     "tensor([[0.0000, 0.1429,\n"
     "         0.2857, 0.4286],\n"
     "        [0.5714, 0.7143,\n"
     "         0.8571, 1.0000],\n"
     "        [1.1429, 1.2857,\n"
     "         1.4286, 1.5714]])"),
    ("np.arange(4.0) / 7", "float32", [dict(linewidth=0)],
     "tensor([0.0000,\n"
     "        0.1429,\n"
     "        0.2857,\n"
     "        0.4286])"),
    ("np.arange(20.0) / 7", "float32", [dict(linewidth=200)],
     "tensor([0.0000, 0.1429, 0.2857, 0.4286, 0.5714, 0.7143, 0.8571, 1.0000, 1.1429, 1.2857, 1.4286, "
     "1.5714, 1.7143, 1.8571, 2.0000, 2.1429, 2.2857, 2.4286, 2.5714, 2.7143])"),
    ("[1 / 3, 2.0]", "float32", [dict(precision=2)],
     "tensor([0.33, 2.00])"),
    ("[3.14159, 2.5, 3.5]", "float32", [dict(precision=0)],
     "tensor([3, 2, 4])"),
    ("[1.23456789012, 2.0]", "float64", [dict(precision=10)],
     "tensor([1.2345678901, 2.0000000000], dtype=minidl.float64)"),
    ("[1 / 3, 2.0]", "float32", [dict(sci_mode=True)],
     "tensor([3.3333e-01, 2.0000e+00])"),
    ("[1.0, 2.0]", "float32", [dict(sci_mode=True)],
     "tensor([1.0000e+00, 2.0000e+00])"),
    ("[0.0, 0.0]", "float32", [dict(sci_mode=True)],
     "tensor([0., 0.])"),
    ("[1e-9, 1e9]", "float64", [dict(sci_mode=False)],
     "tensor([         0.0000, 1000000000.0000], dtype=minidl.float64)"),
    ("np.arange(2000.0) / 3", "float32", [dict(profile="short")],
     "tensor([0.00e+00, 3.33e-01,  ..., 6.66e+02, 6.66e+02])"),
    ("np.arange(10)", "int64", [dict(threshold=5), dict(profile="full")],
     "tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])"),
    ("[1 / 3, 2.0]", "float32", [dict(precision=2), dict(profile="default")],
     "tensor([0.3333, 2.0000])"),
    ("[1e-5, 1.0]", "float32", [dict(sci_mode=False), dict(precision=3)],
     "tensor([1.000e-05, 1.000e+00])"),
]


@pytest.mark.parametrize("expr, dtype, options, expected", CASES)
def test_repr_matches_pytorchs_text(expr, dtype, options, expected):
    for opts in options:
        md.set_printoptions(**opts)
    t = _build(md, expr, dtype)
    assert repr(t) == expected
    assert str(t) == expected


def test_print_writes_the_repr(capsys):
    print(md.tensor([[1.0, -2.5]]))
    assert capsys.readouterr().out == "tensor([[ 1.0000, -2.5000]])\n"


def test_autograd_suffixes_and_where_they_wrap():
    x = md.tensor([[1.0, 2.0]], requires_grad=True)
    assert repr(x) == "tensor([[1., 2.]], requires_grad=True)"
    assert repr(x * 2) == "tensor([[2., 4.]], grad_fn=<MulBackward0>)"
    a = md.tensor(np.arange(9.0) / 7, dtype=md.float32, requires_grad=True)
    assert repr(a) == ("tensor([0.0000, 0.1429, 0.2857, 0.4286, 0.5714, 0.7143, 0.8571, 1.0000, 1.1429],\n"
                       "       requires_grad=True)")
    b = md.tensor(np.arange(8.0) / 7, dtype=md.float64, requires_grad=True)
    assert repr(b) == ("tensor([0.0000, 0.1429, 0.2857, 0.4286, 0.5714, 0.7143, 0.8571, 1.0000],\n"
                       "       dtype=minidl.float64, requires_grad=True)")
    c = md.tensor(np.arange(8.0) / 7, dtype=md.float32, requires_grad=True)
    assert repr(c * 2) == ("tensor([0.0000, 0.2857, 0.5714, 0.8571, 1.1429, 1.4286, 1.7143, 2.0000],\n"
                           "       grad_fn=<MulBackward0>)")
    md.set_printoptions(linewidth=30)      # the last line is counted two longer than it is
    assert repr(md.tensor([1.0, 2.0], requires_grad=True)) == "tensor([1., 2.],\n       requires_grad=True)"


def test_parameter_prints_as_pytorchs():
    p = nn.Parameter(md.tensor(np.arange(6.0).reshape(2, 3) / 7, dtype=md.float64))
    expected = ("Parameter containing:\n"
                "tensor([[0.0000, 0.1429, 0.2857],\n"
                "        [0.4286, 0.5714, 0.7143]], dtype=minidl.float64, requires_grad=True)")
    assert repr(p) == expected and str(p) == expected
    assert repr(nn.Parameter(md.ones(2), requires_grad=False)) == "Parameter containing:\ntensor([1., 1.])"


def test_cuda_tensors_print_their_values_with_the_device_first():
    try:
        backends.get("cuda")
    except RuntimeError as exc:   # pragma: no cover
        pytest.skip(f"cuda device unavailable: {exc}")
    x = md.tensor([0.5, 1.2, -3.0], device="cuda")
    assert repr(x) == "tensor([ 0.5000,  1.2000, -3.0000], device='cuda:0')"
    assert repr(x.bfloat16()) == "tensor([ 0.5000,  1.2031, -3.0000], device='cuda:0', dtype=minidl.bfloat16)"
    assert repr(md.zeros(0, dtype=md.int32, device="cuda")) == "tensor([], device='cuda:0', dtype=minidl.int32)"


def test_set_printoptions_keeps_until_reset_and_sci_mode_resets_every_call():
    x = md.tensor([1 / 3, 2.0])
    md.set_printoptions(precision=2, sci_mode=True)
    assert repr(x) == "tensor([3.33e-01, 2.00e+00])"
    md.set_printoptions(linewidth=100)                       # precision stays, sci_mode goes back to None
    assert repr(x) == "tensor([0.33, 2.00])"
    md.set_printoptions(profile="short")
    assert repr(md.arange(10.0).reshape(2, 5) / 3) == ("tensor([[0.00, 0.33, 0.67, 1.00, 1.33],\n"
                                                        "        [1.67, 2.00, 2.33, 2.67, 3.00]])")
    md.set_printoptions(profile="default")
    assert repr(x) == "tensor([0.3333, 2.0000])"


# against torch ------------------------------------------------------------------------------------
def _torch_text(t):
    return repr(t).replace("dtype=torch.", "dtype=minidl.")


def _same_text(ours, theirs):
    """Equal strings, except where a suffix starts a line: a dtype name one character longer
    (``minidl.`` for ``torch.``) can move that break."""
    if "dtype=" in theirs:
        ours, theirs = (re.sub(r",\n {7}(?=dtype=|requires_grad=|size=)", ", ", s) for s in (ours, theirs))
    return ours == theirs


@pytest.fixture
def torch():
    torch = pytest.importorskip("torch")
    yield torch
    torch.set_printoptions(profile="default")


def test_table_is_what_torch_prints(torch):
    for expr, dtype, options, expected in CASES:
        for lib in (md, torch):
            lib.set_printoptions(profile="default")
            for opts in options:
                lib.set_printoptions(**opts)
        theirs = _torch_text(_build(torch, expr, dtype))
        assert theirs == expected and repr(_build(md, expr, dtype)) == theirs, (expr, dtype, options)


SHAPES = [(), (1,), (5,), (7,), (30,), (2, 3), (4, 5, 6), (1, 1, 1, 2), (13, 80), (3, 400), (11, 11, 11), (0,),
          (2, 0, 3), (1001,), (2, 2, 2, 2, 2)]
OPTIONS = [{}, dict(precision=2), dict(sci_mode=True), dict(sci_mode=False), dict(threshold=5, edgeitems=1),
           dict(linewidth=40), dict(profile="short"), dict(threshold=10, edgeitems=0), dict(precision=0),
           dict(linewidth=200, precision=6), dict(threshold=20, edgeitems=2, linewidth=50), dict(profile="full"),
           dict(edgeitems=0)]
DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"]
LIMITS = {"int8": 100, "uint8": 250, "int16": 30000}


def _random_values(rng, shape, dtype):
    """Values of every kind the formatter tells apart: integers of any size, floats of any
    magnitude, whole floats, spreads of magnitude, nan / inf / zeros, few decimals."""
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if not dtype.startswith(("float", "bfloat")):
        limit = LIMITS.get(dtype, 10 ** int(rng.integers(1, 12)))
        return rng.integers(0 if dtype == "uint8" else -limit, limit, shape)
    a = rng.standard_normal(shape) * 10.0 ** rng.uniform(-12, 12)
    kind = rng.integers(5)
    if kind == 1:
        a = np.round(a)
    elif kind == 2:
        a = a * 10.0 ** rng.integers(-6, 6, shape)
    elif kind == 3 and a.size:
        a.reshape(-1)[rng.integers(0, a.size, 3)] = rng.choice([nan, inf, -inf, 0.0, -0.0], 3)
    elif kind == 4:
        a = np.round(a * 100) / 100
    if dtype == "float16":
        a = np.clip(a, -6e4, 6e4)
    return a.astype(np.float32) if dtype in ("float16", "bfloat16") else a


def test_random_tensors_print_as_torch_prints_them(torch):
    rng = np.random.default_rng(0)
    for _ in range(400):
        shape, dtype = SHAPES[rng.integers(len(SHAPES))], DTYPES[rng.integers(len(DTYPES))]
        opts = OPTIONS[rng.integers(len(OPTIONS))]
        values = _random_values(rng, shape, dtype)
        ours, theirs = md.tensor(values, dtype=getattr(md, dtype)), torch.tensor(values, dtype=getattr(torch, dtype))
        if dtype in ("float32", "float64") and rng.random() < 0.2:
            ours.requires_grad_()
            theirs.requires_grad_()
        for lib in (md, torch):
            lib.set_printoptions(profile="default")
            lib.set_printoptions(**opts)
        assert _same_text(repr(ours), _torch_text(theirs)), (shape, dtype, opts)
