"""A number written into a tensor (full, full_like, fill_) is refused where the dtype cannot hold
it, as in PyTorch, and float()/complex() of a tensor that requires grad warn once
(minidl/tensor/scalar_fit.py, minidl/tensor/conversion.py)."""
import math
import os
import subprocess
import sys

import pytest

import minidl as md

OVERFLOW = "without overflow"
# (value, dtype name, what PyTorch 2.13 writes, or the error it raises)
CASES = [
    (float("inf"), "int64", RuntimeError), (float("nan"), "int32", RuntimeError), (1e30, "int64", RuntimeError),
    (2 ** 63, "int64", RuntimeError), (2 ** 70, "int64", OverflowError), (-2 ** 64, "int32", OverflowError),
    (2 ** 31, "int32", RuntimeError), (300, "int8", RuntimeError), (-129, "int8", RuntimeError),
    (-128, "int8", -128), (2 ** 63 - 1, "int64", 2 ** 63 - 1), (-2 ** 63, "int64", -2 ** 63),
    (-1, "uint8", 255), (-129, "uint8", 127), (256, "uint8", RuntimeError), (255, "uint8", 255),
    (2.7, "int64", 2), (3.9, "uint8", 3), (-0.5, "uint8", RuntimeError), (255.9, "uint8", RuntimeError),
    (1e300, "float32", RuntimeError), (3.5e38, "float32", RuntimeError), (float("inf"), "float32", math.inf),
    (1e300, "float64", 1e300), (65504.0, "float16", 65504.0), (-math.inf, "bfloat16", -math.inf),
    (1e10, "float16", RuntimeError), (-1e39, "bfloat16", RuntimeError), (1 + 2j, "float32", RuntimeError),
    (5, "bool", True), (True, "int8", 1)]


def _write(how, value, dtype):
    if how == "full":
        return md.full((2,), value, dtype=dtype)
    if how == "full_like":
        return md.full_like(md.zeros(2), value, dtype=dtype)
    return md.zeros(2, dtype=dtype).fill_(value)


@pytest.mark.parametrize("how", ["full", "full_like", "fill_"])
@pytest.mark.parametrize("value, dtype, want", CASES, ids=[f"{v!r}-{d}" for v, d, _ in CASES])
def test_a_number_that_does_not_fit_is_refused_as_in_pytorch(how, value, dtype, want):
    dt = getattr(md, dtype)
    if isinstance(want, type):
        with pytest.raises(want, match=OVERFLOW if want is RuntimeError else "too big"):
            _write(how, value, dt)
        return
    got = _write(how, value, dt)
    assert got.dtype == dt and [float(v) for v in got.tolist()] == [float(want)] * 2


@pytest.mark.parametrize("value, dtype, want", CASES, ids=[f"{v!r}-{d}" for v, d, _ in CASES])
def test_pytorch_agrees(value, dtype, want):
    torch = pytest.importorskip("torch")
    dt = getattr(torch, dtype)
    if isinstance(want, type):
        with pytest.raises(want):
            torch.full((2,), value, dtype=dt)
    else:
        assert [float(v) for v in torch.full((2,), value, dtype=dt).tolist()] == [float(want)] * 2


def test_a_tensor_fill_value_is_written_as_before():
    assert md.full((2,), md.tensor(3.0)).tolist() == [3.0, 3.0]
    assert md.zeros(2, dtype=md.int8).fill_(md.tensor(5)).tolist() == [5, 5]


def test_float_and_complex_of_a_tensor_that_requires_grad_warn_once_per_process():
    code = ("import warnings, minidl as md\n"
            "x = md.tensor(2.0, requires_grad=True)\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    int(x); bool(x); x.item(); float(md.tensor(1.0))\n"
            "    before = len(w)\n"
            "    float(x); float(x * 1); complex(x)\n"
            "print(before, len(w), 'requires_grad=True to a scalar' in str(w[-1].message), complex(x))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert out.split() == ["0", "1", "True", "(2+0j)"]
