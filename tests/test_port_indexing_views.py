"""Indexing, views and in-place writes as PyTorch programs use them: ``x[...]`` and ``x[...] = v``
with every kind of index (ints applied before the index tensors, Python bools, lists read as
tuples, byte masks), ``view`` only where the strides allow it, writes through overlapping views,
the index writes' dtype checks, ``where``/``masked_fill``/``cat``/``stack`` result dtypes, and the
keyword forms of ``tensor_split``, ``gather`` and ``clone``.

Values are checked against NumPy references written here, gradients with gradcheck in float64,
and, where torch is installed, against torch itself (values, dtypes, shapes and gradients)."""
import warnings

import numpy as np
import pytest

import minidl as md
from minidl.autograd import gradcheck


def _x(*shape, dtype=np.float64):
    return np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)


# getitem ----------------------------------------------------------------------------------------
def test_int_is_applied_before_the_index_tensors():
    a = _x(3, 4, 5)
    x = md.tensor(a)
    # the int selects first, so the one index list stays in place: (4, 2), not NumPy's (2, 4)
    np.testing.assert_array_equal(x[0, :, [1, 2]].numpy(), a[0][:, [1, 2]])
    assert x[0, :, [1, 2]].shape == (4, 2)
    # 0-d index tensors count as ints
    assert x[md.tensor(0), :, [1, 2]].shape == (4, 2)
    # two lists separated by a slice still go first
    b = _x(2, 3, 4, 5)
    np.testing.assert_array_equal(md.tensor(b)[[0, 1], 1, :, [1, 2]].numpy(), b[:, 1][[0, 1], :, [1, 2]])


def test_python_bool_is_a_new_dim_in_place():
    x = md.tensor(_x(2, 3, 4))
    assert x[0, :, True].shape == (3, 1, 4)
    assert x[0, :, False].shape == (3, 0, 4)
    assert x[True].shape == (1, 2, 3, 4)
    assert x[[0, 1], :, True].shape == (2, 3, 4)


def test_staged_getitem_gradient():
    a = md.tensor(np.random.default_rng(0).standard_normal((3, 4, 5)), requires_grad=True)
    assert a[1, :, [0, 3, 3]].shape == (4, 3)
    assert gradcheck(lambda t: t[1, :, [0, 3, 3]] * md.arange(12.).reshape(4, 3), (a,))
    assert gradcheck(lambda t: t[None, 2, :, True], (a,))


def test_list_index_forms():
    a = _x(2, 3)
    x = md.tensor(a)
    with pytest.warns(UserWarning, match="non-tuple sequence"):
        np.testing.assert_array_equal(x[[0, slice(None)]].numpy(), a[0, :])
    with pytest.warns(UserWarning, match="non-tuple sequence"):
        np.testing.assert_array_equal(x[[[1, 0], [0, 2]]].numpy(), a[[1, 0], [0, 2]])
    with pytest.warns(UserWarning, match="non-tuple sequence"):
        assert x[[md.tensor(1), md.tensor(2)]].item() == a[1, 2]
    empty = x[[]]
    assert empty.shape == (0, 3) and empty.dtype == md.float64


def test_index_dtypes():
    x = md.arange(3)
    with pytest.warns(UserWarning, match="uint8 is now deprecated"):
        np.testing.assert_array_equal(x[md.tensor([1, 0, 1], dtype=md.uint8)].numpy(), [0, 2])
    with pytest.raises(IndexError, match="long, int, byte or bool"):
        x[md.tensor([1], dtype=md.int16)]
    with pytest.raises(IndexError):
        x[1.5]


# setitem ----------------------------------------------------------------------------------------
def test_staged_setitem_values_and_gradients():
    ref = np.zeros((3, 4, 5))
    ref[0][:, [1, 2]] = _x(4, 2)
    x = md.zeros(3, 4, 5, dtype=md.float64)
    x[0, :, [1, 2]] = md.tensor(_x(4, 2))
    np.testing.assert_array_equal(x.numpy(), ref)

    def f(base, v):
        y = base * 1
        y[1, :, [0, 4]] = v * 3
        return y
    rng = np.random.default_rng(1)
    base = md.tensor(rng.standard_normal((3, 4, 5)), requires_grad=True)
    v = md.tensor(rng.standard_normal((4, 2)), requires_grad=True)
    assert gradcheck(f, (base, v))


def test_setitem_values_as_pytorch():
    x = md.zeros(3)
    x[:] = md.ones(1, 1, 3)           # leading dims of length 1 are dropped
    np.testing.assert_array_equal(x.numpy(), [1, 1, 1])
    with pytest.raises(RuntimeError, match="shape mismatch"):
        x[:] = md.ones(2, 3)
    for bad in (None, "a", ["a", "b", "c"]):
        with pytest.raises(TypeError, match="can't assign a"):
            x[:] = bad
    i8 = md.zeros(2, dtype=md.int8)
    with pytest.raises(RuntimeError, match="without overflow"):
        i8[0] = 300
    with pytest.raises(RuntimeError, match="without overflow"):
        md.zeros(2, dtype=md.int64)[0] = float("nan")
    with pytest.raises(RuntimeError, match="without overflow"):
        md.zeros(2)[0] = 1e300
    u8 = md.zeros(2, dtype=md.uint8)
    u8[0] = -1
    assert u8.tolist() == [255, 0]
    h = md.zeros(1, dtype=md.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        h[0] = 1e6
    assert np.isinf(h.numpy()[0])


def test_setitem_through_an_overlapping_view_writes_one_location():
    x = md.arange(5.)
    w = x.unfold(0, 2, 1)        # windows share memory: w[0, 1] and w[1, 0] are x[1]
    w[0, 1] = 100
    np.testing.assert_array_equal(x.numpy(), [0, 100, 2, 3, 4])
    assert w[1, 0].item() == 100


# views ------------------------------------------------------------------------------------------
def test_view_needs_compatible_strides():
    x = md.arange(24.).reshape(2, 3, 4)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        x.transpose(0, 1).view(-1)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        x[:, :2, :].view(-1)
    y = x[:, :, :2].view(6, 2)           # each (3, 2) block of rows is still one stride apart
    y[0, 0] = -1
    assert x[0, 0, 0].item() == -1 and y.stride() == (4, 1)
    z = x.transpose(1, 2).view(2, 4, 3, 1)
    assert z._base is x._base       # the root of x's views, as in PyTorch
    flat = md.arange(24.).reshape(2, 3, 4).transpose(0, 1).reshape(-1)    # reshape copies where view cannot
    np.testing.assert_array_equal(flat.numpy(), _x(2, 3, 4).transpose(1, 0, 2).ravel())


def test_clone_memory_format_and_adjoint():
    x = md.arange(6.).reshape(2, 3)
    c = x.clone(memory_format=md.contiguous_format)
    c[0, 0] = 9
    assert x[0, 0].item() == 0
    assert md.clone(x, memory_format=md.preserve_format).shape == (2, 3)
    with pytest.raises(RuntimeError, match="rank 4"):
        x.clone(memory_format=md.channels_last)
    a = x.adjoint()
    assert a.shape == (3, 2) and a._base is x._base
    np.testing.assert_array_equal(md.adjoint(x).numpy(), _x(2, 3).T)
    with pytest.raises(RuntimeError, match="matrices"):
        md.arange(3.).adjoint()


# gather, index writes, masks --------------------------------------------------------------------
def test_gather_zero_dim_and_sparse_grad():
    s = md.tensor(5.)
    assert s.gather(0, md.tensor(0)).shape == ()
    np.testing.assert_array_equal(s.gather(0, md.tensor([0, 0])).numpy(), [5, 5])
    assert md.arange(3.).gather(0, md.tensor(2)).item() == 2
    np.testing.assert_array_equal(md.gather(md.arange(3.), 0, md.tensor([2]), sparse_grad=True).numpy(), [2])


def test_index_writes_refuse_other_dtypes():
    with pytest.raises(RuntimeError, match="same dtype"):
        md.zeros(3, 2).index_copy(0, md.tensor([2, 0]), md.arange(4).reshape(2, 2))
    with pytest.raises(RuntimeError, match="same dtypes"):
        md.zeros(2, 3).masked_scatter(md.tensor([True, False, True]), md.arange(1, 7))


def test_masked_fill_value_tensor():
    x = md.zeros(2, 3)
    with pytest.raises(RuntimeError, match="0-dimensional value tensor"):
        x.masked_fill(md.tensor([True, False, True]), md.tensor([2.]))
    with pytest.raises(RuntimeError, match="bool"):
        x.masked_fill(md.tensor([1, 0, 1]), 2.)
    mask = md.tensor([True, False, True])
    base = md.tensor(np.random.default_rng(2).standard_normal((2, 3)), requires_grad=True)
    v = md.tensor(0.5, dtype=md.float64, requires_grad=True)
    assert gradcheck(lambda b, val: b.masked_fill(mask, val) * md.arange(6.).reshape(2, 3), (base, v))
    y = base.masked_fill(mask, v)
    y.sum().backward()
    assert v.grad.item() == 4


def test_where_result_dtype():
    c = md.tensor([True, False])
    assert md.where(c, 1., 0.).dtype == md.float32
    assert md.where(c, 1, 0).dtype == md.int64
    assert md.where(c, md.tensor([1, 2]), 0.5).dtype == md.float32
    r = md.where(c, md.tensor([1, 2], dtype=md.int8), md.tensor(3))
    assert r.dtype == md.int8 and r.tolist() == [1, 3]
    assert md.where(c, md.tensor([1., 2.], dtype=md.float64), 0).dtype == md.float64
    with pytest.warns(UserWarning, match="uint8 condition"):
        r = md.where(md.tensor([1, 0], dtype=md.uint8), 1., 0.)
    assert r.tolist() == [1, 0]
    with pytest.raises(RuntimeError, match="bool"):
        md.where(md.tensor([1, 0]), 1., 0.)


# joining and splitting --------------------------------------------------------------------------
def test_cat_and_stack_promote():
    i32, f32 = md.ones(2, dtype=md.int32), md.zeros(2)
    assert md.cat([i32, f32]).dtype == md.float32
    assert md.stack([i32, f32]).dtype == md.float32
    assert md.stack([md.tensor(1.), md.tensor(2)]).dtype == md.float32
    assert md.hstack([md.ones(2, dtype=md.int64), md.zeros(3)]).dtype == md.float32
    assert md.column_stack([md.ones(3), md.zeros(3, 2, dtype=md.int32)]).dtype == md.float32
    assert md.dstack([md.ones(3), md.zeros(3, dtype=md.int32)]).dtype == md.float32
    a = md.ones(2, dtype=md.float64, requires_grad=True)
    b = md.ones(3, requires_grad=True)
    y = md.cat([b, a])
    (y * md.arange(5.)).sum().backward()
    assert y.dtype == md.float64 and b.grad.dtype == md.float32
    np.testing.assert_array_equal(a.grad.numpy(), [3, 4])


def test_cat_skips_the_legacy_empty_tensor():
    out = md.cat([md.ones(2, 3, dtype=md.int64), md.tensor([])])
    assert out.shape == (2, 3) and out.dtype == md.float32
    assert md.cat([md.tensor([]), md.ones(2, 3)], dim=1).shape == (2, 3)
    with pytest.raises(RuntimeError):
        md.cat([md.ones(2, 3), md.zeros(0, 4)])


def test_tensor_split_keywords_and_errors():
    x = md.arange(10.)
    assert [p.shape[0] for p in md.tensor_split(x, sections=3)] == [4, 3, 3]
    assert [p.shape[0] for p in x.tensor_split(indices=[1, 4])] == [1, 3, 6]
    assert [p.shape[0] for p in md.tensor_split(x, tensor_indices_or_sections=md.tensor(2))] == [5, 5]
    with pytest.raises(RuntimeError, match="dtype of long"):
        x.tensor_split(md.tensor([1., 3.]))
    with pytest.raises(RuntimeError, match="zero-dimensional or one-dimensional"):
        x.tensor_split(md.tensor([[1, 3]]))
    with pytest.raises(RuntimeError, match="total dims >= 2"):
        x.rot90()


# against torch ----------------------------------------------------------------------------------
PROGRAMS = {
    "get_int_then_list": "y = x.reshape(3, 4, 5)[0, :, [1, 2]]; out = [y]",
    "get_int_slice_list": "y = x.reshape(3, 4, 5)[2, 1:, [0, 4]]; out = [y]",
    "get_int_then_mask": "y = x.reshape(3, 4, 5)[2, :, T.tensor([True, False, True, False, True])]; out = [y]",
    "get_bools": "y = x.reshape(3, 4, 5)[1, :, True][None, ..., False]; out = [y, y.reshape(-1)]",
    "set_staged": "y = x.reshape(3, 4, 5) * 1; y[2, :, [0, 3]] = w[:8].reshape(4, 2) * 2; out = [y]",
    "set_leading_ones": "y = x.reshape(12, 5) * 1; y[3] = w[:5].reshape(1, 1, 5); out = [y]",
    "masked_fill_tensor": "y = x.masked_fill(x > 20, w[0]); out = [y]",
    "where_scalars": "y = T.where(x > 30, x.float(), 0.5) * T.where(x < 10, 2., 1.); out = [y]",
    "cat_promote": "y = T.cat([x[:3].float(), T.tensor([], dtype=T.int64), x[3:6].int()]); out = [y]",
    "stack_promote": "y = T.stack([x[:5].float(), T.arange(5, dtype=T.int32)], 1); out = [y]",
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_against_torch(name):
    torch = pytest.importorskip("torch")
    xs = np.random.default_rng(3).standard_normal(60)
    ws = np.random.default_rng(4).standard_normal(60)
    results = {}
    for T in (torch, md):
        x = T.tensor(xs, requires_grad=True)
        w = T.tensor(ws, requires_grad=True)
        scope = {"T": T, "x": x, "w": w}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(PROGRAMS[name], scope)
        outs = scope["out"]
        total = sum((o.double() * (1 + T.arange(o.numel(), dtype=T.float64).reshape(o.shape))).sum()
                    for o in outs)
        total.backward()
        results[T.__name__] = ([(str(o.dtype).split(".")[-1], tuple(o.shape), o.detach().numpy().copy())
                                 for o in outs],
                               [None if g is None else g.numpy().copy() for g in (x.grad, w.grad)])
    (t_outs, t_grads), (m_outs, m_grads) = results["torch"], results["minidl"]
    for (td, ts, tv), (mdt, ms, mv) in zip(t_outs, m_outs):
        assert (td, ts) == (mdt, ms)
        np.testing.assert_allclose(mv, tv, rtol=1e-6, atol=1e-6)
    for tg, mg in zip(t_grads, m_grads):
        assert (tg is None) == (mg is None)
        if tg is not None:
            np.testing.assert_allclose(mg, tg, rtol=1e-6, atol=1e-6)
