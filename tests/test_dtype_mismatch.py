"""Mixed dtypes are an error, as in PyTorch, never a silent promotion: a float64 (or int64)
batch through a float32 layer raises instead of returning float64. The exceptions are
PyTorch's own: a float16 input to a norm with float32 parameters (the norms accumulate in
float32), and layers without parameters of their own (RMSNorm, whose PyTorch version takes
any mix, a norm without affine parameters or running statistics).

The error is DtypeMismatchError, a RuntimeError (PyTorch's type) that is also a TypeError."""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.tensor.dtype import DtypeMismatchError

# (name, constructor arguments, input shape); each name is also a torch.nn module
LAYERS = [
    ("Linear", (4, 3), (2, 4)),
    ("Conv2d", (4, 2, 1), (1, 4, 3, 3)),
    ("LayerNorm", (4,), (2, 4)),
    ("BatchNorm1d", (4,), (2, 4)),
    ("BatchNorm1d", (4,), (2, 4, 3)),
    ("BatchNorm2d", (4,), (2, 4, 3, 3)),
    ("GroupNorm", (2, 4), (2, 4, 3)),
    ("InstanceNorm1d", (4, 1e-5, 0.1, True), (2, 4, 3)),
    ("InstanceNorm2d", (4, 1e-5, 0.1, True), (2, 4, 3, 3)),
]
NORMS = [case for case in LAYERS if case[0] not in ("Linear", "Conv2d")]


def _input(shape, dtype):
    return md.tensor((np.arange(np.prod(shape)).reshape(shape) % 5).astype(dtype))


def _ids(case):
    return f"{case[0]}{len(case[2])}d"


@pytest.mark.parametrize("case", LAYERS, ids=_ids)
@pytest.mark.parametrize("dtype", [np.float64, np.int64])
def test_float32_layer_rejects_a_float64_or_int64_input(case, dtype):
    name, args, shape = case
    if dtype == np.int64 and name in [n for n, _, _ in NORMS]:
        expected = TypeError   # "expected a floating point input", raised before the dtypes are compared
    else:
        expected = RuntimeError
    with pytest.raises(expected, match="dtypes differ" if expected is RuntimeError else "floating point"):
        getattr(nn, name)(*args)(_input(shape, dtype))


@pytest.mark.parametrize("case", LAYERS, ids=_ids)
def test_torch_rejects_the_same_float64_input(case):
    torch = pytest.importorskip("torch")
    name, args, shape = case
    with pytest.raises(RuntimeError):
        getattr(torch.nn, name)(*args)(torch.tensor(_input(shape, np.float64).numpy()))


def test_the_error_is_a_runtime_error_and_a_type_error_naming_both_dtypes():
    with pytest.raises(DtypeMismatchError) as info:
        nn.Linear(4, 3)(md.randn(2, 4).double())
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, TypeError)
    assert "input is float64 but weight is float32" in str(info.value)


@pytest.mark.parametrize("case", LAYERS, ids=_ids)
def test_a_layer_converted_to_the_input_dtype_accepts_it(case):
    name, args, shape = case
    out = getattr(nn, name)(*args).double()(_input(shape, np.float64))
    assert out.dtype == md.float64


@pytest.mark.parametrize("case", NORMS, ids=_ids)
def test_norms_take_float16_input_with_float32_parameters(case):
    name, args, shape = case
    layer = getattr(nn, name)(*args)
    out = layer(_input(shape, np.float16))
    assert out.dtype == md.float16
    assert all(p.dtype == md.float32 for p in layer.parameters())


def test_linear_and_conv_reject_float16_input_with_float32_parameters_as_torch():
    with pytest.raises(RuntimeError, match="input is float16 but weight is float32"):
        nn.Linear(4, 3)(md.randn(2, 4).half())
    with pytest.raises(RuntimeError, match="input is float16 but weight is float32"):
        nn.Conv2d(2, 1, 1)(md.randn(1, 2, 3, 3).half())


def test_mixed_parameters_are_rejected_even_for_float16_input():
    """float32 parameters for a float16 input must be all of them (PyTorch: 'expected scalar
    type Half but found Float' for a float16 bias next to a float32 weight)."""
    x = md.randn(2, 4).half()
    with pytest.raises(RuntimeError, match="dtypes differ"):
        F.layer_norm(x, (4,), md.ones(4), md.zeros(4).half())
    with pytest.raises(RuntimeError, match="dtypes differ"):
        F.batch_norm(md.randn(2, 3).half(), md.zeros(3), md.ones(3), md.ones(3).half(), training=True)
    with pytest.raises(RuntimeError, match="bias is float64"):
        F.linear(md.randn(2, 4), md.randn(3, 4), md.zeros(3).double())
    with pytest.raises(RuntimeError, match="bias is float64"):
        F.conv2d(md.randn(1, 1, 3, 3), md.randn(1, 1, 1, 1), md.zeros(1).double())


def test_layers_without_parameters_of_their_own_take_any_float_input_as_torch():
    x = md.randn(2, 4, 3).double()
    assert nn.RMSNorm(3)(x).dtype == md.float64                        # PyTorch's RMSNorm takes any mix
    assert F.rms_norm(md.randn(2, 3), (3,), md.ones(3).double()).dtype == md.float32
    assert nn.LayerNorm(3, elementwise_affine=False)(x).dtype == md.float64
    assert nn.InstanceNorm1d(4)(x).dtype == md.float64
    assert nn.InstanceNorm1d(4, track_running_stats=True)(x).dtype == md.float64   # its stats are converted
    assert nn.BatchNorm1d(4, affine=False, track_running_stats=False)(x).dtype == md.float64
    assert nn.GroupNorm(2, 4, affine=False)(x).dtype == md.float64
    with pytest.raises(RuntimeError, match="running_mean is float32"):   # running statistics count
        nn.BatchNorm1d(4, affine=False)(x)


def test_scale_norm_follows_layer_norm():
    """PyTorch has no ScaleNorm: it takes LayerNorm's rule (its scale is a parameter)."""
    with pytest.raises(RuntimeError, match="scale is float32"):
        nn.ScaleNorm(4)(md.randn(2, 4).double())
    assert nn.ScaleNorm(4)(md.randn(2, 4).half()).dtype == md.float16
    assert nn.FixNorm(4)(md.randn(2, 4).double()).dtype == md.float64   # a fixed scale: no parameter


def test_attention_rejects_mixed_query_key_value_and_a_float32_module_a_float64_input():
    q = md.randn(1, 2, 4)
    with pytest.raises(RuntimeError, match="query is float32 but key is float64"):
        F.scaled_dot_product_attention(q, q.double(), q)
    with pytest.raises(RuntimeError, match="dtypes differ"):
        nn.MultiheadAttention(4, 2)(q.double(), q.double(), q.double())


def test_embedding_output_takes_the_weight_dtype_for_any_integer_indices():
    for dtype in (np.int32, np.int64):
        out = nn.Embedding(5, 2).double()(md.tensor(np.array([1, 4], dtype)))
        assert out.dtype == md.float64
