"""Tensor behaviours a ported PyTorch script meets at the edges: comparisons with None, strings and
out-of-range ints, uint8 any/all, unique with NaNs, isclose's dtypes, keepdims=, flatten's dim order,
nonzero of a 0-d tensor, string indices, logical ops with numbers, logsumexp over no dims, round."""
import math

import numpy as np
import pytest

import minidl as md


def test_compare_with_none_and_strings():
    t = md.tensor([1, 2])
    assert (t == None) is False and (t != None) is True   # noqa: E711
    assert (t == "a") is False and (t != "a") is True
    assert (None == t) is False   # noqa: E711
    with pytest.raises(TypeError):
        t < "a"
    with pytest.raises(TypeError):
        md.eq(t, None)


@pytest.mark.parametrize("dtype,np_dtype", [(md.uint8, np.uint8), (md.int8, np.int8), (md.int32, np.int32)])
@pytest.mark.parametrize("value", [-1, 256, 1000, -1000, 2 ** 40])
def test_compare_narrow_int_with_out_of_range_int_wraps(dtype, np_dtype, value):
    a = np.array([1, 2], np_dtype)
    v = np.array(value, np.int64).astype(np_dtype)   # C cast: the value modulo 2**bits
    t = md.tensor(a, dtype=dtype)
    np.testing.assert_array_equal((t < value).numpy(), a < v)
    np.testing.assert_array_equal((t >= value).numpy(), a >= v)
    np.testing.assert_array_equal((t == value).numpy(), a == v)
    np.testing.assert_array_equal((value > t).numpy(), v > a)
    np.testing.assert_array_equal(md.lt(t, md.tensor(value)).numpy(), a < v)


def test_compare_beyond_64_bits_overflows():
    with pytest.raises(OverflowError):
        md.tensor([1, 2]) < 2 ** 70


def test_uint8_all_any_keep_uint8():
    a = np.array([[0, 1], [1, 1]], np.uint8)
    t = md.tensor(a, dtype=md.uint8)
    for got, want in ((t.all(), np.all(a)), (t.any(), np.any(a)), (t.all(1), np.all(a, 1)),
                      (md.any(t, dim=0, keepdim=True), np.any(a, 0, keepdims=True))):
        assert got.dtype == md.uint8
        np.testing.assert_array_equal(got.numpy(), np.asarray(want, np.uint8))
    assert md.tensor([0, 1], dtype=md.int8).all().dtype == md.bool
    assert md.tensor([0.0, 1.0]).any().dtype == md.bool


def test_unique_keeps_each_nan():
    values, inverse, counts = md.unique(md.tensor([1.0, math.nan, math.nan, 1.0]), return_inverse=True,
                                        return_counts=True)
    np.testing.assert_array_equal(values.numpy(), np.array([1.0, np.nan, np.nan], np.float32))
    np.testing.assert_array_equal(inverse.numpy(), [0, 1, 2, 0])
    np.testing.assert_array_equal(counts.numpy(), [2, 1, 1])


def test_isclose_allclose_refuse_mixed_dtypes():
    for fn in (md.isclose, md.allclose):
        with pytest.raises(RuntimeError, match="same dtype"):
            fn(md.tensor([1, 2]), md.tensor([1.0, 2.0]))
        with pytest.raises(RuntimeError, match="same dtype"):
            fn(md.tensor([1.0, 2.0]), md.tensor([1.0, 2.0], dtype=md.float64))
    assert md.allclose(md.tensor([1, 2]), md.tensor([1, 2]))


@pytest.mark.parametrize("name", ["mean", "sum", "amax", "amin", "prod", "std", "var", "logsumexp", "nansum",
                                  "argmax", "all", "any"])
def test_keepdims_is_keepdim(name):
    a = np.arange(24.0).reshape(2, 3, 4)
    x = md.tensor(a)
    want = getattr(md, name)(x, 1, keepdim=True)
    for got in (getattr(md, name)(x, 1, keepdims=True), getattr(x, name)(1, keepdims=True)):
        assert got.shape == (2, 1, 4)
        np.testing.assert_allclose(got.numpy(), want.numpy())
    with pytest.raises(TypeError):
        getattr(md, name)(x, 1, keepdim=True, keepdims=True)


def test_keepdims_on_tuple_reductions():
    x = md.tensor(np.arange(6.0).reshape(2, 3))
    for name in ("max", "min", "median", "mode"):
        assert getattr(md, name)(x, 1, keepdims=True)[0].shape == (2, 1)
    assert x.kthvalue(1, 1, keepdims=True)[0].shape == (2, 1)
    with pytest.raises(TypeError):
        md.norm(x, 2, 1, keepdims=True)   # torch.norm, a Python function, has no alias


def test_flatten_start_after_end_is_runtime_and_value_error():
    x = md.zeros(2, 3, 4)
    for err in (RuntimeError, ValueError):
        with pytest.raises(err, match="start_dim"):
            x.flatten(2, 1)


def test_nonzero_of_0d():
    assert md.nonzero(md.tensor(3.0)).shape == (1, 0)
    assert md.tensor(0.0).nonzero().shape == (0, 0)
    assert md.argwhere(md.tensor(2)).shape == (1, 0)
    (i,) = md.nonzero(md.tensor(3.0), as_tuple=True)
    np.testing.assert_array_equal(i.numpy(), [0])
    (i,) = md.nonzero(md.tensor(0.0), as_tuple=True)
    assert i.shape == (0,) and i.dtype == md.int64


def test_string_index_is_type_and_index_error():
    x = md.tensor([1, 2])
    for err in (TypeError, IndexError):
        with pytest.raises(err):
            x["a"]
        with pytest.raises(err):
            x["a"] = 1


def test_logical_ops_need_tensors():
    t = md.tensor([True, False])
    for name in ("logical_xor", "logical_and", "logical_or"):
        with pytest.raises(TypeError, match="must be Tensor"):
            getattr(md, name)(t, 1)
        with pytest.raises(TypeError, match="must be Tensor"):
            getattr(t, name)(True)
    np.testing.assert_array_equal(md.logical_xor(t, md.tensor(1)).numpy(), np.logical_xor([True, False], 1))


def test_logsumexp_over_no_dims():
    a = np.arange(6.0).reshape(2, 3)
    x = md.tensor(a)
    with pytest.raises(RuntimeError, match="keepdim"):
        md.logsumexp(x, dim=())
    got = md.logsumexp(x, dim=(), keepdim=True)
    np.testing.assert_allclose(got.numpy(), np.log(np.exp(a).sum(keepdims=True)), rtol=1e-6)
    np.testing.assert_allclose(md.logsumexp(md.tensor(2.0), dim=()).numpy(), 2.0)


def test_round_int_with_decimals_refused():
    i = md.tensor([1, 2, 5])
    np.testing.assert_array_equal(md.round(i).numpy(), [1, 2, 5])
    np.testing.assert_array_equal(i.round().numpy(), [1, 2, 5])
    for d in (0, 1):
        with pytest.raises(NotImplementedError, match="decimals"):
            md.round(i, decimals=d)
    np.testing.assert_array_equal(md.round(md.tensor([1.5, 2.5, 1.25]), decimals=1).numpy(),
                                  np.round(np.array([1.5, 2.5, 1.25], np.float32), 1))


def test_against_torch():
    torch = pytest.importorskip("torch")
    for dt, mdt in ((torch.uint8, md.uint8), (torch.int8, md.int8)):
        for v in (-1, 256, 1000, -1000):
            for op in ("__lt__", "__eq__", "__gt__"):
                want = getattr(torch.tensor([1, 2], dtype=dt), op)(v).numpy()
                np.testing.assert_array_equal(getattr(md.tensor([1, 2], dtype=mdt), op)(v).numpy(), want)
    tu, mu = torch.tensor([0, 1], dtype=torch.uint8), md.tensor([0, 1], dtype=md.uint8)
    assert str(tu.all(0).dtype).split(".")[1] == str(mu.all(0).dtype).split(".")[1]
    x = [1.0, math.nan, math.nan, 1.0]
    for w, g in zip(torch.unique(torch.tensor(x), return_inverse=True, return_counts=True),
                    md.unique(md.tensor(x), return_inverse=True, return_counts=True)):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    for v in (3.0, 0.0):
        assert tuple(md.nonzero(md.tensor(v)).shape) == tuple(torch.nonzero(torch.tensor(v)).shape)
    assert (torch.tensor([1]) == None) == (md.tensor([1]) == None)   # noqa: E711
    a = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_allclose(md.tensor(a).amax(1, keepdims=True).numpy(),
                               torch.tensor(a).amax(1, keepdims=True).numpy())
    for call in (lambda m: m.isclose(m.tensor([1, 2]), m.tensor([1.0, 2.0])), lambda m: m.zeros(2, 3, 4).flatten(2, 1),
                 lambda m: m.logsumexp(m.zeros(2, 3), dim=())):
        with pytest.raises(RuntimeError):
            call(torch)
        with pytest.raises(RuntimeError):
            call(md)
    for call in (lambda m: m.logical_xor(m.tensor([True]), 1), lambda m: m.tensor([1, 2])["a"]):
        with pytest.raises(TypeError):
            call(torch)
        with pytest.raises(TypeError):
            call(md)
    for m in (torch, md):
        with pytest.raises(NotImplementedError):
            m.round(m.tensor([1, 2]), decimals=0)
