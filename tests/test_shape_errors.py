"""Operands whose shapes do not fit: the error names the op and both shapes, and it is a
RuntimeError (what PyTorch raises, so a ported ``except RuntimeError`` catches it) that is also
a ValueError (what NumPy-minded callers expect)."""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.ops.shape_error import ShapeError

CASES = {
    "add": (lambda m: m.ones(3) + m.ones(4), r"add: shapes \[3\] and \[4\]"),
    "in-place mul": (lambda m: m.ones(3).mul_(m.ones(4)), r"mul: shapes \[3\] and \[4\]"),
    "where": (lambda m: m.where(m.ones(3) > 0, m.ones(4), m.ones(3)), r"where: shapes"),
    "matmul": (lambda m: m.ones(2, 3) @ m.ones(4, 2), r"matmul: shapes \[2, 3\] and \[4, 2\]"),
    "linear": (lambda m: m.nn.functional.linear(m.ones(2, 3), m.ones(4, 5)), r"linear: input of shape \[2, 3\]"),
    "cat": (lambda m: m.cat([m.ones(2, 3), m.ones(2, 4)]), r"cat: sizes must match"),
    "stack": (lambda m: m.stack([m.ones(2, 3), m.ones(2, 4)]), r"stack: tensor 0 has shape \[2, 3\]"),
    "view": (lambda m: m.ones(6).view(4, 2), r"shape \[4, 2\] is invalid for input of shape \[6\]"),
    "expand": (lambda m: m.ones(3).expand(2, 4), r"expand: cannot expand shape \[3\] to \[2, 4\]"),
    "cross_entropy": (lambda m: m.nn.functional.cross_entropy(m.ones(3, 4), m.zeros(5, dtype=m.int64)),
                      r"cross_entropy: expected target of shape \[3\]"),
    "mse_loss": (lambda m: m.nn.functional.mse_loss(m.ones(3), m.ones(4)), r"mse_loss: input shape \[3\]"),
    "batch_norm": (lambda m: m.nn.BatchNorm1d(3)(m.ones(4, 5)), r"expected input with 3 channels"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_shape_mismatch_is_a_runtime_error_naming_the_shapes(name):
    run, message = CASES[name]
    with pytest.raises(RuntimeError, match=message) as info:
        run(md)
    assert isinstance(info.value, ValueError) and isinstance(info.value, ShapeError)


@pytest.mark.filterwarnings("ignore:Using a target size")
@pytest.mark.parametrize("name", sorted(CASES))
def test_whatever_pytorch_raises_there_a_shape_error_also_is(name):
    """PyTorch raises RuntimeError, or ValueError for some losses' batch sizes: either catches
    minidl's error."""
    torch = pytest.importorskip("torch")
    run, _ = CASES[name]
    with pytest.raises((RuntimeError, ValueError)) as info:
        run(torch)
    assert issubclass(ShapeError, type(info.value))


def test_a_ported_except_runtime_error_recovers():
    layer = nn.Linear(4, 2)
    try:
        layer(md.ones(3, 5))
    except RuntimeError as exc:
        caught = str(exc)
    assert "linear" in caught
    out = F.relu(layer(md.ones(3, 4)))
    assert out.shape == (3, 2) and np.all(out.detach().numpy() >= 0)
