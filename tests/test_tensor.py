"""Tensors: creation and its dtype rules, factories, conversions, attributes, and the
errors bad input raises (each naming what was expected and what came)."""
import numpy as np
import pytest

import minidl as md
from minidl import backends


# md.tensor and dtypes ----------------------------------------------------------------------

@pytest.mark.parametrize("data,dtype", [
    ([1.0, 2.0], md.float32),                       # Python floats: the default float dtype
    (2.5, md.float32),
    ([[1, 2], [3, 4]], md.int64),                   # Python ints: int64
    ([True, False], md.bool),
    ([1, 2.5], md.float32),                         # mixed: float
    (np.zeros(3), md.float64),                      # an ndarray keeps its float dtype
    (np.zeros(3, np.float32), md.float32),
    (np.zeros(3, np.float16), md.float16),
    (np.arange(3, dtype=np.int32), md.int32),
    (np.float64(1.5), md.float64),                  # so does a NumPy scalar (as torch.tensor)
    (np.int64(7), md.int64),
])
def test_tensor_default_dtype(data, dtype):
    t = md.tensor(data)
    assert t.dtype == dtype
    assert t.numpy().dtype == dtype
    np.testing.assert_array_equal(t.numpy(), np.asarray(data))


@pytest.mark.parametrize("dtype,expected", [
    (md.float64, md.float64), ("float64", md.float64), (np.float16, md.float16), (float, md.float32),
    (int, md.int64), (bool, md.bool), (md.int64, md.int64),
])
def test_tensor_explicit_dtype(dtype, expected):
    assert md.tensor([1, 0, 2], dtype=dtype).dtype == expected


def test_tensor_copies_its_data():
    a = np.ones(3)
    t = md.tensor(a)
    a[0] = 5
    assert t.numpy()[0] == 1
    u = md.tensor(t)
    t.numpy()[1] = 7
    assert u.numpy()[1] == 1


def test_tensor_from_tensors_and_scalars():
    assert md.tensor(3.0).shape == () and md.tensor(3.0).ndim == 0
    assert md.tensor([md.tensor(1.0), md.tensor(2.0)]).shape == (2,)
    assert md.tensor([[1.0], [2.0]]).shape == (2, 1)


@pytest.mark.parametrize("data", [[1j, 2j], np.array(["a", "b"]), np.zeros(2, np.complex64)])
def test_unsupported_data_dtype_raises(data):
    with pytest.raises(TypeError, match="unsupported dtype.*float32"):
        md.tensor(data)


@pytest.mark.parametrize("dtype", ["complex64", np.uint16, "float128"])
def test_unsupported_requested_dtype_raises(dtype):
    with pytest.raises(TypeError, match="unsupported dtype.*minidl supports"):
        md.tensor([1.0], dtype=dtype)


@pytest.mark.parametrize("make", [
    lambda dt: md.tensor([1.0], dtype=dt), lambda dt: md.zeros(2, dtype=dt), lambda dt: md.ones(2, dtype=dt),
    lambda dt: md.empty(2, dtype=dt), lambda dt: md.full((2,), 1.0, dtype=dt), lambda dt: md.randn(2, dtype=dt),
    lambda dt: md.rand(2, dtype=dt), lambda dt: md.arange(3, dtype=dt),
])
@pytest.mark.parametrize("dtype", ["foo", 5])
def test_a_dtype_that_is_not_one_raises_in_every_factory(make, dtype):
    # not float64: NumPy cannot read "foo" or 5 as a dtype, and np.dtype("float64") == None
    with pytest.raises(TypeError, match=f"unsupported dtype {dtype!r}; minidl supports float16, .*int64"):
        make(dtype)


@pytest.mark.parametrize("layout", [">f4", ">f8", ">i4", ">i8"])
def test_big_endian_arrays_become_native_tensors_of_the_same_dtype(layout):
    a = np.arange(6, dtype=layout).reshape(2, 3)
    for t in (md.tensor(a), md.from_numpy(a), md.as_tensor(a), md.tensor(a, dtype=layout)):
        assert t.numpy().dtype.isnative
        assert t.dtype is md.tensor(a.astype(a.dtype.newbyteorder("="))).dtype
        np.testing.assert_array_equal(t.numpy(), a)


def test_a_big_endian_batch_and_weight_run_through_a_layer():
    # kept big-endian, they would fail as "dtypes differ: input is float32 but weight is float32"
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    layer = md.nn.Linear(3, 2)
    expected = layer(md.tensor(a)).detach().numpy()
    layer.weight = md.nn.Parameter(layer.weight.detach().numpy().astype(">f4"))
    np.testing.assert_allclose(layer(md.tensor(a.astype(">f4"))).detach().numpy(), expected)


def test_ragged_data_raises():
    with pytest.raises(ValueError, match="rectangular"):
        md.tensor([[1.0], [1.0, 2.0]])


def test_non_numbers_raise():
    with pytest.raises(TypeError, match="non-numbers"):
        md.tensor([object()])


# requires_grad ---------------------------------------------------------------------------------

def test_float_tensors_can_require_grad():
    t = md.tensor([1.0, 2.0], requires_grad=True)
    assert t.requires_grad and t.is_leaf and t.grad is None
    assert not md.tensor([1.0]).requires_grad


@pytest.mark.parametrize("make", [
    lambda: md.tensor([1, 2], requires_grad=True),
    lambda: md.zeros(2, dtype=md.int64, requires_grad=True),
    lambda: md.arange(3, requires_grad=True),
    lambda: md.tensor([True]).requires_grad_(),
])
def test_non_float_tensor_cannot_require_grad(make):
    with pytest.raises(RuntimeError, match="only floating point tensors can require gradients, got dtype"):
        make()


def test_requires_grad_of_a_non_leaf_cannot_change():
    y = md.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="leaf"):
        y.requires_grad_(False)


def test_ops_on_int_tensors_do_not_require_grad():
    y = md.arange(3) + md.arange(3)
    assert y.dtype == md.int64 and not y.requires_grad


# factories -------------------------------------------------------------------------------------

def test_zeros_ones_shapes_and_dtypes():
    assert md.zeros(2, 3).shape == (2, 3) and md.zeros((2, 3)).shape == (2, 3)
    assert md.zeros(2, 3).dtype == md.float32
    assert md.ones(4, dtype=md.float64).dtype == md.float64
    np.testing.assert_array_equal(md.ones(2, 2).numpy(), np.ones((2, 2)))
    np.testing.assert_array_equal(md.zeros(3).numpy(), np.zeros(3))
    assert md.zeros(()).shape == ()
    assert md.ones(2, requires_grad=True).requires_grad


def test_like_factories_keep_shape_dtype():
    t = md.tensor(np.arange(6.0).reshape(2, 3))
    z, o = md.zeros_like(t), md.ones_like(t)
    assert z.shape == o.shape == (2, 3)
    assert z.dtype == o.dtype == md.float64
    assert (z.numpy() == 0).all() and (o.numpy() == 1).all()
    assert md.zeros_like(t, dtype=md.float32).dtype == md.float32
    assert md.ones_like(md.arange(3)).dtype == md.int64


def test_arange():
    np.testing.assert_array_equal(md.arange(5).numpy(), np.arange(5))
    assert md.arange(5).dtype == md.int64
    np.testing.assert_allclose(md.arange(0, 1, 0.25).numpy(), [0, 0.25, 0.5, 0.75])
    assert md.arange(0, 1, 0.25).dtype == md.float32
    assert md.arange(2, 8, 2, dtype=md.float64).dtype == md.float64


@pytest.mark.parametrize("make", [
    lambda: md.zeros(2.5), lambda: md.ones(2.0), lambda: md.zeros((2.0, 3)), lambda: md.randn(2, 1.5),
    lambda: md.rand(True), lambda: md.full((2.5,), 1.0), lambda: md.normal(0.0, 1.0, (2.0,)),
])
def test_a_size_that_is_not_ints_raises_instead_of_truncating(make):
    with pytest.raises(TypeError, match=r"argument 'size' must be a tuple of ints, but found element of type "
                                        r"(float|bool) .* at pos \d"):
        make()


def test_a_size_may_be_numpy_ints_or_an_integer_0d_tensor():
    assert md.zeros(np.int64(2), 3).shape == (2, 3)
    assert md.ones((md.tensor(2), np.int32(1))).shape == (2, 1)


@pytest.mark.parametrize("make,op", [
    (lambda: md.randn(5, dtype=md.int64), "randn"), (lambda: md.rand(5, dtype=md.bool), "rand"),
    (lambda: md.normal(0.0, 1.0, (3,), dtype=md.int32), "normal"),
    (lambda: md.randn_like(md.arange(3)), "randn"), (lambda: md.rand_like(md.arange(3)), "rand"),
])
def test_continuous_random_factories_refuse_non_floating_dtypes(make, op):
    # as PyTorch ("normal_kernel_cpu" not implemented for 'Long'): not draws truncated to zeros
    with pytest.raises(NotImplementedError, match=f"{op}: not implemented for dtype minidl.(int|bool).*expected a "
                                                  "floating point dtype"):
        make()


@pytest.mark.parametrize("fill", [lambda t: t.normal_(), lambda t: t.uniform_()])
def test_in_place_continuous_draws_refuse_integer_tensors(fill):
    t = md.zeros(3, dtype=md.int64)
    with pytest.raises(NotImplementedError, match="not implemented for dtype minidl.int64"):
        fill(t)
    assert (t.numpy() == 0).all()


def test_random_factories_and_manual_seed():
    md.manual_seed(123)
    a, b = md.randn(3, 4), md.rand(1000)
    md.manual_seed(123)
    np.testing.assert_array_equal(md.randn(3, 4).numpy(), a.numpy())
    np.testing.assert_array_equal(md.rand(1000).numpy(), b.numpy())
    assert a.dtype == b.dtype == md.float32
    assert 0 <= b.numpy().min() and b.numpy().max() < 1
    assert abs(md.randn(10_000).numpy().mean()) < 0.05
    assert md.randn(2, dtype=md.float64).dtype == md.float64
    assert md.randn(2, 2, requires_grad=True).requires_grad


# attributes and conversions ----------------------------------------------------------------------

def test_attributes():
    t = md.tensor(np.zeros((2, 3, 4), np.float32))
    assert t.shape == (2, 3, 4) and isinstance(t.shape, tuple)
    assert t.ndim == 3 and t.dtype == md.float32 and t.device == "cpu"
    assert t.is_leaf and t.grad is None and not t.requires_grad
    assert t.numel() == 24 and len(t) == 2 and t.size(1) == 3


def test_numpy_shares_memory_on_cpu_and_item():
    t = md.tensor([[2.5]])
    t.numpy()[0, 0] = 4.0
    assert t.item() == 4.0 and isinstance(t.item(), float)
    assert md.tensor(3).item() == 3 and isinstance(md.tensor(3).item(), int)
    with pytest.raises(RuntimeError, match="2 elements cannot be converted"):
        md.tensor([1.0, 2.0]).item()


def test_float_double_and_to():
    t = md.arange(3)
    assert t.float().dtype == md.float32
    assert t.double().dtype == md.float64
    assert t.to(md.float64).dtype == md.float64
    assert t.to("float32").dtype == md.float32
    assert t.to("cpu") is t and t.cpu() is t
    assert md.ones(2).float().dtype == md.float32


def test_to_is_differentiable_and_gradient_keeps_leaf_dtype():
    x = md.tensor([1.0, 2.0], requires_grad=True)
    y = x.double()
    assert y.dtype == md.float64 and y.requires_grad
    (y * y).sum().backward()
    assert x.grad.dtype == md.float32
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])


def test_detach_shares_memory_and_cuts():
    x = md.ones(3, requires_grad=True)
    d = (x * 2).detach()
    assert d.is_leaf and not d.requires_grad
    e = x.detach()
    e.numpy()[0] = 9
    assert x.detach().numpy()[0] == 9


def test_repr_mentions_dtype_and_grad():
    assert "float64" in repr(md.ones(2, dtype=md.float64))
    assert "requires_grad=True" in repr(md.ones(2, requires_grad=True))
    assert "grad_fn" in repr(md.ones(2, requires_grad=True) * 2)


# dtype promotion: as PyTorch, so float32 models stay float32 -------------------------------------

@pytest.mark.parametrize("make,dtype", [
    (lambda: md.arange(3) * 0.5, md.float32),
    (lambda: md.arange(3) / 2, md.float32),
    (lambda: md.arange(3) / md.arange(1, 4), md.float32),
    (lambda: md.arange(3) + md.ones(3), md.float32),
    (lambda: md.ones(3) * np.float64(2.0), md.float32),
    (lambda: np.float64(2.0) * md.ones(3), md.float32),
    (lambda: md.ones(3, dtype=md.float64) + md.arange(3), md.float64),
    (lambda: md.ones(3) + md.ones(3, dtype=md.float64), md.float64),
    (lambda: md.arange(3) + 1, md.int64),
    (lambda: md.ones(3, dtype=md.float16) * 3.0, md.float16),
])
def test_type_promotion(make, dtype):
    assert make().dtype == dtype


# errors ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op,name", [
    (lambda a, b: a + b, "add"), (lambda a, b: a - b, "sub"), (lambda a, b: a * b, "mul"),
    (lambda a, b: a / b, "div"), (lambda a, b: a ** b, "pow"),
])
def test_broadcast_error_names_both_shapes_and_the_op(op, name):
    with pytest.raises(ValueError, match=rf"{name}: shapes \[2, 3\] and \[4, 3\]"):
        op(md.ones(2, 3), md.ones(4, 3))


@pytest.mark.parametrize("make,pattern", [
    (lambda: md.ones(2, 3) @ md.ones(4, 3), r"matmul: shapes \[2, 3\] and \[4, 3\]"),
    (lambda: md.ones(2, 2, 3) @ md.ones(3, 3, 1), r"matmul: batch dims of shapes \[2, 2, 3\] and \[3, 3, 1\]"),
    (lambda: md.ones(3) @ md.tensor(2.0), r"matmul: .*\[3\] and \[\]"),
    (lambda: md.ones(2, 3).reshape(4, 2), r"reshape: shape \[4, 2\] is invalid for input of shape \[2, 3\]"),
    (lambda: md.cat([md.ones(2, 3), md.ones(2, 4)]), r"cat: .*\[2, 3\].*\[2, 4\]"),
    (lambda: md.stack([md.ones(2, 3), md.ones(3, 2)]), r"stack: .*\[2, 3\].*\[3, 2\]"),
    (lambda: md.ones(2, 3).expand(4, 4), r"expand: cannot expand shape \[2, 3\] to \[4, 4\]"),
    (lambda: md.ones(2, 3).permute(0, 0), r"permute: dims \[0, 0\]"),
    (lambda: md.ones(2, 3).masked_fill(md.ones(4, 3) > 0, 0), r"masked_fill: mask of shape \[4, 3\]"),
])
def test_shape_errors_name_the_shapes(make, pattern):
    with pytest.raises(ValueError, match=pattern):
        make()


def test_dim_errors():
    with pytest.raises(IndexError, match="sum: dimension 3 is out of range for a tensor with 2 dims"):
        md.ones(2, 3).sum(3)
    with pytest.raises(ValueError, match="repeated"):
        md.ones(2, 3).sum((1, -1))
    with pytest.raises(IndexError, match="softmax"):
        md.ones(2, 3).softmax(2)


def test_reductions_of_0d_tensors_accept_dim_0():
    t = md.tensor(3.0, requires_grad=True)
    assert t.sum(0).item() == 3.0 and t.max(-1).values.item() == 3.0 and t.mean(0).shape == ()
    t.sum(0).backward()
    assert t.grad.item() == 1.0


@pytest.mark.parametrize("dim", [(), []])
def test_an_empty_dim_list_reduces_over_every_dim_as_torch(dim):
    torch = pytest.importorskip("torch")
    a = np.arange(6.0).reshape(2, 3)
    x, tx = md.tensor(a), torch.tensor(a)
    for name in ("sum", "mean", "var", "std", "amax", "amin"):
        np.testing.assert_allclose(getattr(x, name)(dim).numpy(), getattr(tx, name)(dim).numpy(), err_msg=name)
    assert x.sum(dim, keepdim=True).shape == tuple(tx.sum(dim, keepdim=True).shape) == (1, 1)
    assert md.flip(x, dim).tolist() == a.tolist()   # flip is no reduction: no dims, nothing flips


def test_reductions_accept_numpy_int_dims():
    assert md.ones(2, 3).sum(np.int64(1)).shape == (2,)


def test_non_float_reductions_that_need_floats_raise():
    with pytest.raises(RuntimeError, match="mean: expected a floating point tensor, got dtype minidl.int64"):
        md.arange(3).mean()
    with pytest.raises(RuntimeError, match="var: expected a floating point tensor, got dtype minidl.int64"):
        md.arange(3).var()


def test_iterating_gives_rows_and_a_0d_tensor_refuses():
    assert [r.tolist() for r in md.tensor([[1, 2], [3, 4]])] == [[1, 2], [3, 4]]
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        list(md.tensor(1.0))


def test_float_index_raises():
    with pytest.raises(IndexError, match="integer or bool, got dtype float32"):
        md.ones(3)[md.tensor([1.0])]


def test_unknown_device_raises():
    with pytest.raises(RuntimeError, match="unknown device 'tpu'"):
        md.tensor([1.0], device="tpu")


class _FakeArray:
    """Stands in for another device's array type: the device check must come before any math."""

    def __init__(self, shape):
        self.shape, self.dtype, self.ndim = shape, np.dtype("float32"), len(shape)


class _FakeBackend(backends.Backend):
    name = "fake"
    xp = None
    array_type = _FakeArray


@pytest.fixture
def fake_device():
    backends.register(_FakeBackend())
    yield
    del backends._BACKENDS["fake"]


def test_mixing_devices_raises(fake_device):
    from minidl.tensor.tensor import Tensor
    other = Tensor._wrap(_FakeArray((2,)), None, 0)
    assert other.device == "fake"
    with pytest.raises(RuntimeError, match="Add: expected all tensors on the same device, but found cpu and fake"):
        md.ones(2) + other
    with pytest.raises(RuntimeError, match="same device, but found fake and cpu"):
        other * md.ones(2)


@pytest.mark.parametrize("make,pattern", [
    (lambda: md.cat([md.ones(2)], dim=3), r"cat: dimension 3 is out of range \(expected one in \[-1, 0\]\)"),
    (lambda: md.stack([md.ones(2)], dim=-3), r"stack: dimension -3 is out of range \(expected one in \[-2, 1\]\)"),
    (lambda: md.ones(2, 3).transpose(0, 5), r"transpose: dimension 5 is out of range"),
    (lambda: md.ones(2, 3).squeeze(2), r"squeeze: dimension 2 is out of range"),
    (lambda: md.ones(2, 3).unsqueeze(3), r"unsqueeze: dim 3 out of range"),
    (lambda: md.ones(2, 3).flatten(0, 4), r"flatten: dimension 4 is out of range"),
    (lambda: md.ones(2, 3).max(dim=-3), r"max: dimension -3 is out of range"),
])
def test_dims_out_of_range_raise_instead_of_wrapping(make, pattern):
    with pytest.raises(IndexError, match=pattern):
        make()


def test_where_and_cat_errors():
    with pytest.raises(ValueError, match=r"where: shapes of condition \[2, 3\], input \[4, 3\] and other \[2, 3\]"):
        md.where(md.ones(2, 3) > 0, md.ones(4, 3), md.ones(2, 3))
    with pytest.raises(TypeError, match="where: expected a bool condition/mask, got dtype float32"):
        md.where(md.ones(2), md.ones(2), md.ones(2))
    with pytest.raises(ValueError, match="cat: zero-dimensional"):
        md.cat([md.tensor(1.0), md.tensor(2.0)])


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "tanh", "sigmoid"])
def test_float_functions_of_integer_tensors_give_float32(name):
    out = getattr(md.tensor([1, 2]), name)()
    assert out.dtype == md.float32
    np.testing.assert_allclose(out.numpy(), getattr(md.tensor([1.0, 2.0]), name)().numpy())


def test_0d_float_tensors_promote_like_numbers():
    x = md.ones(3)
    s = md.tensor(2.0, dtype=md.float64)
    assert (x * s).dtype == md.float32 and (s * x).dtype == md.float32
    assert (md.tensor(1.0) * s).dtype == md.float64     # both 0-d: the usual rule
    assert (md.ones(3, dtype=md.float16) * md.ones(3)).dtype == md.float32
    w = md.ones(3, requires_grad=True)
    t = md.tensor(np.float64(3.0), requires_grad=True)
    (w * t).sum().backward()
    assert t.grad.dtype == md.float64 and t.grad.item() == 3.0
    assert w.grad.dtype == md.float32
