"""More torch.Tensor methods: in-place shape methods, index_put, the view scatters, as_strided,
narrow_copy, resize_, index_reduce, nonzero_static, the per-element callables and the fixed
queries, against NumPy references, finite differences and (where installed) PyTorch."""
import numpy as np
import pytest

import minidl as md
from minidl.autograd import gradcheck
from minidl.testing import OpSpec
from minidl.testing.op_spec import check_forward, check_gradcheck, forward_cases, spec_id


def _t(a, **kw):
    return md.tensor(np.asarray(a), **kw)


def _select_scatter_ref(x, s):
    out = x.copy()
    out[:, 1] = s
    return out


def _slice_scatter_ref(x, s):
    out = x.copy()
    out[1:5:2] = s
    return out


def _diag_scatter_ref(x, s):
    out = x.copy()
    for b in range(x.shape[0]):
        for i in range(s.shape[1]):
            out[b, i, i + 1] = s[b, i]
    return out


def _as_strided_ref(x):
    return np.lib.stride_tricks.as_strided(x.reshape(-1)[1:], (3, 2), (x.itemsize, 2 * x.itemsize)).copy()


def _index_put_acc_ref(x, v):
    out = x.copy()
    np.add.at(out, (np.array([0, 2, 0]), np.array([1, 1, 1])), v)
    return out


def _index_reduce_ref(reduce, include_self):
    def ref(x, s):
        idx = [0, 2, 0]
        out = x.copy()
        for row in set(idx):
            factors = [s[i] for i, r in enumerate(idx) if r == row] + ([x[row]] if include_self else [])
            st = np.stack(factors)
            out[row] = {"prod": st.prod(0), "mean": st.mean(0), "amax": st.max(0), "amin": st.min(0)}[reduce]
        return out
    return ref


def _rng_pair(sx, ss):
    return lambda rng: (rng.standard_normal(sx), rng.standard_normal(ss))


SPECS = [
    OpSpec("select_scatter", lambda x, s: md.select_scatter(x, s, 1, 1), _select_scatter_ref, _rng_pair((3, 4), 3)),
    OpSpec("slice_scatter", lambda x, s: x.slice_scatter(s, 0, 1, 5, 2), _slice_scatter_ref,
           _rng_pair((6, 2), (2, 2))),
    OpSpec("diagonal_scatter", lambda x, s: md.diagonal_scatter(x, s, 1, 1, 2), _diag_scatter_ref,
           _rng_pair((2, 3, 4), (2, 3))),
    OpSpec("as_strided", lambda x: md.as_strided(x, (3, 2), (1, 2), 1), _as_strided_ref,
           lambda rng: (rng.standard_normal((2, 4)),)),
    OpSpec("narrow_copy", lambda x: x.narrow_copy(1, 1, 2), lambda x: x[:, 1:3].copy(),
           lambda rng: (rng.standard_normal((3, 4)),)),
    OpSpec("index_put_accumulate",
           lambda x, v: md.index_put(x, (_t([0, 2, 0]), _t([1, 1, 1])), v, accumulate=True),
           _index_put_acc_ref, _rng_pair((3, 2), 3)),
] + [
    OpSpec(f"index_reduce_{r}_{inc}", lambda x, s, r=r, inc=inc: x.index_reduce(0, _t([0, 2, 0]), s, r,
                                                                               include_self=inc),
           _index_reduce_ref(r, inc), _rng_pair((3, 2), (3, 2)))
    for r in ("prod", "mean", "amax", "amin") for inc in (True, False)
]


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward(spec, dtype, device):
    check_forward(spec, dtype, device)


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck(spec):
    assert check_gradcheck(spec)


# in-place shape methods -----------------------------------------------------------------------
@pytest.mark.parametrize("call,shape", [(lambda t: t.t_(), (3, 2)), (lambda t: t.transpose_(0, 1), (3, 2)),
                                        (lambda t: t.swapaxes_(1, 0), (3, 2)), (lambda t: t.swapdims_(0, 1), (3, 2)),
                                        (lambda t: t.unsqueeze_(1), (2, 1, 3)),
                                        (lambda t: t.unsqueeze_(0).squeeze_(0), (2, 3))])
def test_inplace_shape_changes_the_tensor_and_its_history(call, shape):
    x = md.randn(2, 3, dtype=md.float64, requires_grad=True)
    y = x * 2
    node = y.grad_fn
    assert call(y) is y
    assert y.shape == shape and y._version >= 1 and y.grad_fn is not node
    w = md.randn(*shape, dtype=md.float64)
    (y * w).sum().backward()
    expected = 2 * w.numpy().reshape(shape)
    if shape == (3, 2):
        expected = expected.T
    np.testing.assert_allclose(x.grad.numpy(), expected.reshape(2, 3))


def test_inplace_shape_shares_memory_and_strides():
    base = md.arange(6.).reshape(2, 3)
    alias = base.view(6)
    base.t_()
    assert base.stride() == (1, 3) and not base.is_contiguous()
    alias[1] = 10.0
    assert base[1, 0].item() == 10.0
    v = md.arange(4.)
    v.squeeze_().unsqueeze_(-1)
    assert v.shape == (4, 1) and v.is_leaf


def test_inplace_shape_leaf_requiring_grad_refused_in_grad_mode():
    leaf = md.randn(2, 3, requires_grad=True)
    for call in (lambda t: t.t_(), lambda t: t.squeeze_(), lambda t: t.unsqueeze_(0), lambda t: t.transpose_(0, 1)):
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            call(leaf)
    with pytest.raises(RuntimeError, match="view of a leaf Variable"):
        leaf[0].unsqueeze_(0)
    with md.no_grad():
        leaf.t_()
    assert leaf.shape == (3, 2) and leaf.is_leaf and leaf.requires_grad


def test_inplace_shape_bad_input():
    with pytest.raises(RuntimeError, match="t_\\(\\) expects a tensor with <= 2 dimensions"):
        md.zeros(2, 3, 4).t_()
    with pytest.raises(IndexError):
        md.zeros(2, 1, 3).squeeze_(5)
    with pytest.raises(IndexError):
        md.zeros(2, 3).unsqueeze_(4)
    with pytest.raises(IndexError):
        md.zeros(2, 3).transpose_(0, 5)


def test_inplace_shape_on_a_view_keeps_the_base_history():
    x = md.randn(2, 3, dtype=md.float64, requires_grad=True)
    y = x * 1
    v = y[0]
    v.unsqueeze_(0)
    assert v.shape == (1, 3)
    (v * _t([[0.0, 1.0, 2.0]])).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0, 1, 2], [0, 0, 0]])


# index_put -----------------------------------------------------------------------------------
def test_index_put_values_and_in_place():
    a = md.zeros(3, 2)
    out = md.index_put(a, (_t([0, 0, 2]),), md.ones(2), accumulate=True)
    np.testing.assert_array_equal(out.numpy(), [[2, 2], [0, 0], [1, 1]])
    out = a.index_put((_t([True, False, True]),), md.tensor(5.0))
    np.testing.assert_array_equal(out.numpy(), [[5, 5], [0, 0], [5, 5]])
    np.testing.assert_array_equal(md.index_put(md.arange(4), (_t([1, 1]),), _t([5, 6]), True).numpy(), [0, 12, 2, 3])
    b = md.arange(6.).reshape(2, 3)
    assert b.index_put_((_t([-1]),), md.tensor(9.0)) is b
    np.testing.assert_array_equal(b.numpy(), [[0, 1, 2], [9, 9, 9]])
    assert b._version == 1


def test_index_put_gradients_without_accumulate():
    x = md.randn(3, 2, dtype=md.float64, requires_grad=True)
    v = md.randn(2, dtype=md.float64, requires_grad=True)
    assert gradcheck(lambda x, v: md.index_put(x, (_t([2, 0]), _t([1, 0])), v), (x, v))


def test_index_put_bad_input():
    a = md.zeros(3, 2)
    with pytest.raises(RuntimeError, match="dtypes match, got Float for the destination and Double"):
        md.index_put(a, (_t([0]),), md.tensor([5.0], dtype=md.float64))
    with pytest.raises(TypeError, match="tuple of Tensors"):
        md.index_put(a, _t([0]), md.tensor([5.0]))
    with pytest.raises(TypeError, match="expected Tensor as element 0"):
        md.index_put(a, (0,), md.tensor([5.0]))
    with pytest.raises(IndexError, match="long, int, byte or bool"):
        md.index_put(a, (md.tensor([0.0]),), md.tensor([5.0]))
    with pytest.raises(IndexError, match="index 7 is out of bounds for dimension 0 with size 3"):
        md.index_put(a, (_t([7]),), md.tensor([5.0]))
    with pytest.raises(IndexError, match="too many indices"):
        md.index_put(a, (_t([0]), _t([0]), _t([0])), md.tensor([5.0]))
    with pytest.raises(RuntimeError, match="shape mismatch"):
        md.index_put(a, (_t([0, 1]),), md.tensor([5.0, 6, 7]))
    with pytest.raises(RuntimeError, match="leaf Variable"):
        md.zeros(3, requires_grad=True).index_put_((_t([0]),), md.tensor([1.0]))


# view scatters and narrow_copy ------------------------------------------------------------------
def test_view_scatters_bad_input():
    with pytest.raises(RuntimeError, match="src size = \\[3\\], slice size = \\[2\\]"):
        md.select_scatter(md.zeros(2, 2), md.ones(3), 0, 0)
    with pytest.raises(IndexError, match="index 5 out of range"):
        md.select_scatter(md.zeros(2, 2), md.ones(2), 0, 5)
    with pytest.raises(RuntimeError, match="slice step must be positive"):
        md.slice_scatter(md.zeros(4, 2), md.ones(2, 2), 0, 0, None, 0)
    with pytest.raises(RuntimeError, match="src size = \\[3\\], slice size = \\[2\\]"):
        md.diagonal_scatter(md.zeros(3, 3), md.ones(3), 1)
    with pytest.raises(RuntimeError, match="cannot be identical"):
        md.diagonal_scatter(md.zeros(3, 3), md.ones(3), 0, 0, 0)
    with pytest.raises(IndexError, match="start out of range"):
        md.narrow_copy(md.arange(6.), 0, 10, 2)


def test_view_scatter_values_and_copies():
    out = md.slice_scatter(md.zeros(4, 2), md.ones(1, 2), 0, -1)
    np.testing.assert_array_equal(out.numpy()[:, 0], [0, 0, 0, 1])
    out = md.diagonal_scatter(md.zeros(3, 4), md.ones(3, dtype=md.int32))
    assert out.dtype == md.float32 and out.numpy().trace() == 3
    x = md.arange(6.)
    c = x.narrow_copy(0, 2, 2)
    c[0] = 100.0
    assert x[2].item() == 2.0


# as_strided ----------------------------------------------------------------------------------
def test_as_strided_views_the_storage():
    s = md.arange(6.)
    v = s[2:].as_strided((2,), (1,))
    np.testing.assert_array_equal(v.numpy(), [2, 3])
    w = md.as_strided(s[2:], (2, 2), (1, 2), 0)
    np.testing.assert_array_equal(w.numpy(), [[0, 2], [1, 3]])
    w[0, 0] = 50.0
    assert s[0].item() == 50.0 and w.stride() == (1, 2) and w.storage_offset() == 0
    assert s[2:].as_strided((2,), (1,)).storage_offset() == 2
    assert md.as_strided(s, (0,), (1,), 100).shape == (0,)


def test_as_strided_gradient_through_overlap_and_expand():
    a = md.arange(6.0, dtype=md.float64, requires_grad=True)
    z = (a * 1)[1:].as_strided((3, 2), (1, 1), 0)
    z.backward(md.arange(6.0, dtype=md.float64).reshape(3, 2))
    np.testing.assert_array_equal(a.grad.numpy(), [0, 3, 7, 5, 0, 0])
    a.grad = None
    z = (a * 1).expand(2, 6).as_strided((3,), (2,), 0)
    z.backward(md.tensor([1.0, 10, 100], dtype=md.float64))
    np.testing.assert_array_equal(a.grad.numpy(), [1, 0, 10, 0, 100, 0])
    x = md.randn(3, 4, dtype=md.float64, requires_grad=True)
    assert gradcheck(lambda x: x.t().as_strided((2, 3), (2, 1), 1), (x,))


def test_as_strided_bad_input():
    s = md.arange(6.)
    with pytest.raises(RuntimeError, match="out of bounds for storage of size 24"):
        md.as_strided(s, (4,), (2,))
    with pytest.raises(RuntimeError, match="Negative strides"):
        md.as_strided(s, (2,), (-1,))
    with pytest.raises(RuntimeError, match="mismatch in length of strides and shape"):
        md.as_strided(s, (2, 2), (1,))
    with pytest.raises(RuntimeError, match="invalid storage offset -1"):
        md.as_strided(s, (2,), (1,), -1)


# resize_ -------------------------------------------------------------------------------------
def test_resize_keeps_or_grows_the_storage():
    x = md.arange(6.)
    assert x.resize_(2, 2) is x and x._version == 1
    np.testing.assert_array_equal(x.numpy(), [[0, 1], [2, 3]])
    x.resize_((3, 3))
    assert x.shape == (3, 3)
    np.testing.assert_array_equal(x.numpy().reshape(-1)[:6], np.arange(6.0))
    z = md.arange(6.).reshape(2, 3).t()
    z.resize_(2, 3)    # storage order, not the transposed one
    np.testing.assert_array_equal(z.numpy(), [[0, 1, 2], [3, 4, 5]])
    b = md.arange(10.)
    v = b[2:6]
    v.resize_(2, 2)
    np.testing.assert_array_equal(v.numpy(), [[2, 3], [4, 5]])
    assert v.storage_offset() == 2
    assert md.arange(4).resize_as_(md.zeros(2, 2)).shape == (2, 2)
    assert md.resize_as_(md.arange(4), md.zeros(4, 1)).shape == (4, 1)


def test_resize_bad_input():
    with pytest.raises(RuntimeError, match="cannot resize variables that require grad"):
        md.zeros(3, requires_grad=True).resize_(2)
    with pytest.raises(RuntimeError, match="cannot resize variables that require grad"):
        (md.zeros(3, requires_grad=True) * 2).resize_as_(md.zeros(3))
    with pytest.raises(RuntimeError, match="negative dimension"):
        md.arange(6.).resize_(2, -1)
    with pytest.raises(TypeError, match="tuple of ints"):
        md.arange(6.).resize_(2.5)
    with pytest.raises(TypeError, match="must be Tensor"):
        md.arange(6.).resize_as_(5)


# index_reduce --------------------------------------------------------------------------------
def test_index_reduce_integers_and_in_place():
    x = md.arange(6).reshape(3, 2)
    src = _t([[2, -1], [3, 5], [4, 4]])
    np.testing.assert_array_equal(x.index_reduce(0, _t([0, 2, 0]), src, "mean").numpy(), [[2, 1], [2, 3], [3, 5]])
    y = md.arange(1.0, 7.0).reshape(3, 2)
    assert y.index_reduce_(1, _t([1, 1]), md.ones(3, 2), "amax") is y
    np.testing.assert_array_equal(y.numpy(), [[1, 2], [3, 4], [5, 6]])


def test_index_reduce_bad_input():
    x, src, i = md.zeros(3, 2), md.ones(3, 2), _t([0, 2, 0])
    with pytest.raises(RuntimeError, match="one of prod, mean, amax or amin but got sum"):
        x.index_reduce(0, i, src, "sum")
    with pytest.raises(RuntimeError, match="Number of indices \\(3\\) should be equal to source.size\\(dim\\)"):
        x.index_reduce(0, i, src[:2], "prod")
    with pytest.raises(RuntimeError, match="same scalar type"):
        x.index_reduce(0, i, src.double(), "prod")
    with pytest.raises(RuntimeError, match="int32/int64 for index"):
        x.index_reduce(0, i.float(), src, "prod")
    with pytest.raises(IndexError, match="index out of range in self"):
        x.index_reduce(0, _t([0, -1, 0]), src, "prod")
    with pytest.raises(IndexError, match="supposed to be a vector"):
        x.index_reduce(0, _t([[0, 1, 0]]), src, "prod")
    with pytest.raises(RuntimeError, match="source tensor shape must match"):
        x.index_reduce(0, i, md.ones(3, 3), "prod")


# the rest ------------------------------------------------------------------------------------
def test_nonzero_static():
    np.testing.assert_array_equal(md.nonzero_static(_t([0, 1, 0, 2]), size=4).numpy(), [[1], [3], [-1], [-1]])
    out = _t([[0, 1], [2, 0]]).nonzero_static(size=1, fill_value=7)
    assert out.dtype == md.int64 and out.tolist() == [[0, 1]]
    assert md.nonzero_static(md.tensor(3), size=2).shape == (2, 0)
    with pytest.raises(RuntimeError, match="non-negative"):
        md.nonzero_static(_t([1]), size=-1)


def test_apply_map_map2():
    x = md.arange(4.)
    assert x.apply_(lambda v: v * 2) is x and x._version == 0
    np.testing.assert_array_equal(x.numpy(), [0, 2, 4, 6])
    x.map_(md.ones(1), lambda a, b: a + b)
    np.testing.assert_array_equal(x.numpy(), [1, 3, 5, 7])
    x.map2_(md.ones(4), md.full((4,), 2.0), lambda a, b, c: a * b + c)
    np.testing.assert_array_equal(x.numpy(), [3, 5, 7, 9])
    np.testing.assert_array_equal(md.arange(4).apply_(lambda a: a / 2).numpy(), [0, 0, 1, 1])
    with pytest.raises(RuntimeError, match="Can't call apply_\\(\\) on Variable that requires grad"):
        md.zeros(2, requires_grad=True).apply_(lambda a: a)
    with pytest.raises(RuntimeError, match="Can't call map_\\(\\)"):
        md.zeros(2).map_(md.zeros(2, requires_grad=True), lambda a, b: a)
    with pytest.raises(TypeError, match="expected minidl.FloatTensor for 'tensor'"):
        md.zeros(2).map_(md.zeros(2, dtype=md.float64), lambda a, b: a)
    with pytest.raises(RuntimeError, match="broadcast"):
        md.zeros(4).map_(md.zeros(2), lambda a, b: a)
    with pytest.raises(TypeError, match="must be real number, not str"):
        md.zeros(2).apply_(lambda a: "x")
    with pytest.raises(TypeError, match="not callable"):
        md.zeros(2).apply_(5)


def test_small_methods():
    x = md.arange(6.).reshape(2, 3)
    assert md.resolve_neg(x) is x and x.resolve_conj() is x
    assert not md.is_neg(x) and not x.is_conj() and not md.is_inference(x) and not x.is_inference()
    leaf = md.randn(3, requires_grad=True)
    assert leaf.output_nr == 0 and (leaf * 2).output_nr == 0
    e = x.new_empty_strided((2, 3), (1, 2))
    assert e.stride() == (1, 2) and e.dtype == md.float32
    assert x.new_empty_strided((2,), (1,), dtype=md.int32).dtype == md.int32
    for got, want in ((md.unsafe_split(md.arange(5), 2), [[0, 1], [2, 3], [4]]),
                      (md.unsafe_chunk(md.arange(5), 2), [[0, 1, 2], [3, 4]]),
                      (md.arange(5).unsafe_split_with_sizes([2, 3]), [[0, 1], [2, 3, 4]])):
        assert [t.tolist() for t in got] == want
    np.testing.assert_allclose(md.tensor([-1.0, 2.0]).prelu(md.tensor([0.25])).numpy(), [-0.25, 2.0])
    np.testing.assert_allclose(md.prelu(md.tensor([-4.0]), md.tensor([0.5])).numpy(), [-2.0])


def test_cuda_sim_scatter_and_unsupported():
    cuda = pytest.importorskip("minidl.cuda")
    if not cuda.is_available():
        pytest.skip("no cuda device (set NUMBA_ENABLE_CUDASIM=1 for the simulator)")
    x = md.zeros(3, 2).cuda()
    out = md.select_scatter(x, md.ones(2).cuda(), 0, 1)
    np.testing.assert_array_equal(out.cpu().numpy(), [[0, 0], [1, 1], [0, 0]])
    assert md.as_strided(x, (2,), (1,)).device == "cuda"
    with pytest.raises(NotImplementedError, match="apply_.*cuda"):
        x.apply_(lambda v: v)


# against PyTorch --------------------------------------------------------------------------------
def _pair(torch, a):
    return md.tensor(a, dtype=md.float64, requires_grad=True), torch.tensor(a, dtype=torch.float64, requires_grad=True)


@pytest.mark.parametrize("name", ["select_scatter", "slice_scatter", "diagonal_scatter", "index_put", "as_strided",
                                  "index_reduce_prod", "index_reduce_amax", "index_reduce_mean"])
def test_against_torch(name):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    xa, sa = rng.standard_normal((4, 4)), rng.standard_normal((4, 4))
    sa[1, 1] = 0.0
    xa[2, :] = sa[3, :]   # ties for amax
    (x, tx), (s, ts) = _pair(torch, xa), _pair(torch, sa)
    calls = {
        "select_scatter": lambda m, a, b: m.select_scatter(a, b[0], 1, 2),
        "slice_scatter": lambda m, a, b: m.slice_scatter(a, b[:2], 0, 1, None, 2),
        "diagonal_scatter": lambda m, a, b: m.diagonal_scatter(a, b[0, :3], -1),
        "index_put": lambda m, a, b: m.index_put(a, (m.tensor([3, 0, 3]),), b[:3], accumulate=True),
        "as_strided": lambda m, a, b: m.as_strided(a * b, (3, 3), (3, 1), 2),
        "index_reduce_prod": lambda m, a, b: a.index_reduce(0, m.tensor([2, 0, 2, 1]), b, "prod"),
        "index_reduce_amax": lambda m, a, b: a.index_reduce(0, m.tensor([2, 0, 2, 2]), b, "amax", include_self=True),
        "index_reduce_mean": lambda m, a, b: a.index_reduce(1, m.tensor([1, 1, 3, 0]), b, "mean",
                                                           include_self=False),
    }
    out, tout = calls[name](md, x, s), calls[name](torch, tx, ts)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-12, atol=1e-12)
    w = rng.standard_normal(tuple(tout.shape))
    (out * md.tensor(w)).sum().backward()
    (tout * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(s.grad.numpy(), ts.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("method,args", [("t_", ()), ("transpose_", (1, 0)), ("swapaxes_", (0, 1)),
                                         ("swapdims_", (1, 0)), ("squeeze_", ()), ("unsqueeze_", (-1,))])
def test_inplace_shape_against_torch(method, args):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3))
    (x, tx) = _pair(torch, a)
    y, ty = x * 3, tx * 3
    getattr(y, method)(*args)
    getattr(ty, method)(*args)
    assert tuple(y.shape) == tuple(ty.shape) and y.stride() == ty.stride() and y._version == ty._version
    w = rng.standard_normal(tuple(ty.shape))
    (y.exp() * md.tensor(w)).sum().backward()
    (ty.exp() * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


def test_resize_and_nonzero_static_against_torch():
    torch = pytest.importorskip("torch")
    x, tx = md.arange(12.)[3:], torch.arange(12.)[3:]
    x.resize_(2, 3)
    tx.resize_(2, 3)
    np.testing.assert_array_equal(x.numpy(), tx.numpy())
    assert x.storage_offset() == tx.storage_offset() and x.stride() == tx.stride()
    a = np.array([[0, 3, 0], [1, 0, 2]])
    np.testing.assert_array_equal(md.nonzero_static(md.tensor(a), size=5, fill_value=-9).numpy(),
                                  torch.nonzero_static(torch.tensor(a), size=5, fill_value=-9).numpy())
