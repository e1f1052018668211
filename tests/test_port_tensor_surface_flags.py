"""Tensor attributes and functions that library code and older scripts use: the kind-of-tensor flags,
the layout, the complex-number functions on real tensors, and the legacy surface (new, set_, the
deprecated positional overloads, md.range, md.binomial, md.put)."""
import math
import pickle
import warnings

import numpy as np
import pytest

import minidl as md
from minidl.autograd import gradcheck

FLAGS = ("is_sparse", "is_sparse_csr", "is_quantized", "is_meta", "is_nested", "is_mkldnn", "is_xpu", "is_mps",
         "is_ipu", "is_vulkan", "is_maia", "is_mtia", "is_xla")


# flags ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", FLAGS)
def test_kind_flags_are_false(name):
    assert getattr(md.randn(2, 3), name) is False
    assert getattr(md.arange(3), name) is False


def test_is_distributed_and_volatile():
    x = md.randn(3, requires_grad=True)
    assert x.is_distributed() is False
    with pytest.warns(UserWarning, match="volatile was removed"):
        assert x.volatile is False


def test_is_shared_after_share_memory():
    x = md.zeros(4)
    assert x.is_shared() is False
    assert x.share_memory_() is x
    assert x.is_shared() is True
    assert x[1:].is_shared() is True            # a view of the same memory
    assert md.zeros(4).is_shared() is False      # other memory is not
    assert x.clone().is_shared() is False


def test_dim_order():
    assert md.randn(2, 3, 4).dim_order() == (0, 1, 2)
    assert md.randn(2, 3).t().dim_order() == (1, 0)
    assert md.randn(2, 3, 4).permute(2, 0, 1).dim_order() == (1, 2, 0)
    assert md.randn(2, 3).dim_order(ambiguity_check=True) == (0, 1)
    with pytest.raises(RuntimeError, match="unique dim order"):
        md.randn(2, 1, 3).dim_order(ambiguity_check=True)


def test_storage_type():
    x = md.zeros(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # unlike storage(), no deprecation warning
        assert x.storage_type() is md.TypedStorage
    with pytest.warns(UserWarning):
        assert isinstance(x.storage(), x.storage_type())


# layout ------------------------------------------------------------------------------------------
def test_layout_object():
    assert repr(md.strided) == "minidl.strided"
    assert isinstance(md.strided, md.layout)
    assert md.randn(2).layout is md.strided
    assert pickle.loads(pickle.dumps(md.strided)) is md.strided


@pytest.mark.parametrize("make", [
    lambda **k: md.zeros(2, 3, **k), lambda **k: md.ones(2, **k), lambda **k: md.empty(2, **k),
    lambda **k: md.full((2,), 1.5, **k), lambda **k: md.randn(2, **k), lambda **k: md.rand(2, **k),
    lambda **k: md.randint(0, 3, (2,), **k), lambda **k: md.randperm(3, **k), lambda **k: md.arange(3, **k),
    lambda **k: md.linspace(0, 1, 3, **k), lambda **k: md.eye(2, **k),
    lambda **k: md.zeros_like(md.ones(2), **k), lambda **k: md.ones_like(md.ones(2), **k),
    lambda **k: md.full_like(md.ones(2), 3.0, **k), lambda **k: md.randn_like(md.ones(2), **k),
    lambda **k: md.rand_like(md.ones(2), **k), lambda **k: md.empty_like(md.ones(2), **k),
    lambda **k: md.randint_like(md.ones(2), 5, **k), lambda **k: md.ones(2).new_zeros(3, **k),
    lambda **k: md.ones(2).new_ones(3, **k), lambda **k: md.ones(2).new_empty(3, **k),
    lambda **k: md.ones(2).new_full((3,), 2.0, **k), lambda **k: md.ones(2).new_tensor([1.0], **k),
    lambda **k: md.empty_strided((2,), (1,), **k), lambda **k: md.scalar_tensor(1.0, **k),
])
def test_factories_accept_strided_and_refuse_other_layouts(make):
    assert make(layout=md.strided).layout is md.strided
    assert make(layout=None).layout is md.strided
    with pytest.raises(TypeError, match="layout"):
        make(layout="sparse_coo")


def test_foreign_layout_refused_like_sparse():
    torch = pytest.importorskip("torch")
    with pytest.raises(NotImplementedError, match="sparse"):
        md.zeros(2, layout=torch.sparse_coo)
    with pytest.raises(NotImplementedError, match="sparse"):
        md.sparse_coo


# real tensors under the complex-number functions ----------------------------------------------------
def test_real_and_conj_are_the_tensor_itself():
    x = md.tensor([1.0, -2.0, 3.0], requires_grad=True)
    for y in (x.real, md.real(x), x.conj(), md.conj(x), x.resolve_conj(), md.resolve_conj(x)):
        assert y is x
    y = x.conj_physical()
    assert y is not x and np.array_equal(y.detach().numpy(), x.detach().numpy())
    assert not np.shares_memory(y.detach().numpy(), x.detach().numpy())
    md.conj_physical(x).sum().backward()
    assert np.array_equal(x.grad.numpy(), np.ones(3))
    assert x.is_complex() is False and md.is_complex(x) is False


def test_real_of_a_view_shares_memory_and_gradient_flows():
    x = md.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * 2).real.sum().backward()
    assert np.array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])
    z = md.zeros(3)
    z.real[0] = 5.0
    assert z[0].item() == 5.0
    assert gradcheck(lambda t: md.real(t * t), (md.randn(4, dtype=md.float64, requires_grad=True),))


def test_imag_refused():
    x = md.randn(3)
    with pytest.raises(RuntimeError, match="imag is not implemented for tensors with non-complex dtypes"):
        x.imag
    with pytest.raises(RuntimeError, match="non-complex"):
        md.imag(x)
    with pytest.raises(TypeError):
        md.real([1.0])


def test_angle_values_and_dtypes():
    a = np.array([1.5, -2.0, 0.0, -0.0, np.nan, -np.inf, np.inf], np.float32)
    expected = np.where(np.isnan(a), np.nan, np.where(a < 0, np.pi, 0.0)).astype(np.float32)
    got = md.angle(md.tensor(a))
    assert got.dtype == md.float32
    np.testing.assert_array_equal(got.numpy(), expected)
    np.testing.assert_array_equal(md.tensor(a).angle().numpy(), expected)
    ints = md.angle(md.tensor([3, -1, 0]))
    assert ints.dtype == md.float32
    np.testing.assert_allclose(ints.numpy(), [0.0, np.pi, 0.0], rtol=1e-7)
    assert md.angle(md.tensor([1.0], dtype=md.float64)).dtype == md.float64


def test_angle_gradient_is_zero():
    x = md.tensor([1.0, -2.0, 0.0, float("nan")], dtype=md.float64, requires_grad=True)
    md.angle(x).sum().backward()
    assert np.array_equal(x.grad.numpy(), np.zeros(4))
    assert gradcheck(md.angle, (md.tensor([0.5, -1.5, 2.0, -0.25], dtype=md.float64, requires_grad=True),))


def test_complex_dtypes_still_unsupported():
    for name in ("complex64", "view_as_complex", "polar"):
        with pytest.raises(NotImplementedError, match="complex"):
            getattr(md, name)


# legacy surface -------------------------------------------------------------------------------
def test_new():
    x = md.randn(2, dtype=md.float64)
    assert x.new(2, 3).shape == (2, 3) and x.new(2, 3).dtype == md.float64
    assert x.new(md.Size([4])).shape == (4,)
    assert x.new().shape == (0,)
    y = md.arange(3).new([1.5, 2.0])
    assert y.dtype == md.int64 and y.tolist() == [1, 2]
    with pytest.raises(TypeError, match="sequence"):
        x.new(2.5)


def test_set_():
    x = md.zeros(3)
    src = md.ones(2, 2)
    v = x._version
    assert x.set_(src) is x
    assert x.shape == (2, 2) and x._version == v + 1
    src[0, 0] = 7.0                             # one memory
    assert x[0, 0].item() == 7.0
    assert md.zeros(2).set_().shape == (0,)
    with pytest.raises(RuntimeError, match="Could not set tensor"):
        md.zeros(2).set_(md.ones(2, dtype=md.int64))
    with pytest.raises(TypeError):
        md.zeros(2).set_(3)


def test_set_refused_where_autograd_would_be_confused():
    leaf = md.zeros(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        leaf.set_(md.ones(2))
    with pytest.raises(RuntimeError, match="not differentiable"):
        (leaf * 2).set_(md.ones(2))
    with pytest.raises(RuntimeError, match="not differentiable"):
        md.zeros(2).set_(md.ones(2, requires_grad=True))
    with md.no_grad():
        leaf.set_(md.ones(3))
    assert leaf.shape == (3,)


def test_alpha_first_overloads_warn():
    x, o = md.tensor([1.0, 2.0]), md.tensor([10.0, 20.0])
    with pytest.warns(UserWarning, match="This overload of add is deprecated"):
        np.testing.assert_array_equal(x.add(2, o).numpy(), [21.0, 42.0])
    with pytest.warns(UserWarning, match="This overload of sub is deprecated"):
        np.testing.assert_array_equal(x.sub(2, o).numpy(), [-19.0, -38.0])
    with pytest.warns(UserWarning, match="This overload of add is deprecated"):
        np.testing.assert_array_equal(md.add(x, 2, o).numpy(), [21.0, 42.0])
    with pytest.raises(TypeError):
        x.add(o, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(x.add(o, alpha=2).numpy(), [21.0, 42.0])


def test_value_first_addcmul_addcdiv_warn():
    a, b = md.tensor([1.0, 2.0]), md.tensor([4.0, 8.0])
    with pytest.warns(UserWarning, match="This overload of addcmul_ is deprecated"):
        np.testing.assert_array_equal(md.zeros(2).addcmul_(3, a, b).numpy(), 3 * np.array([4.0, 16.0]))
    with pytest.warns(UserWarning, match="This overload of addcdiv_ is deprecated"):
        np.testing.assert_array_equal(md.zeros(2).addcdiv_(2, a, b).numpy(), 2 * np.array([0.25, 0.25]))
    with pytest.warns(UserWarning, match="This overload of addcmul is deprecated"):
        np.testing.assert_array_equal(md.addcmul(md.ones(2), 3, a, b).numpy(), 1 + 3 * np.array([4.0, 16.0]))
    with pytest.warns(UserWarning, match="This overload of addcdiv is deprecated"):
        np.testing.assert_array_equal(md.addcdiv(md.ones(2), 2, a, b).numpy(), [1.5, 1.5])
    with pytest.raises(TypeError):
        md.zeros(2).addcmul_(a, b, a)


def test_range():
    with pytest.warns(UserWarning, match="torch.range is deprecated"):
        r = md.range(0, 3)
    assert r.dtype == md.float32
    np.testing.assert_array_equal(r.numpy(), [0.0, 1.0, 2.0, 3.0])
    with pytest.warns(UserWarning):
        np.testing.assert_allclose(md.range(0, 1, 0.25).numpy(), np.arange(5) * 0.25)
        np.testing.assert_allclose(md.range(0, 3, 0.7).numpy(), np.arange(5) * np.float32(0.7), rtol=1e-6)
        np.testing.assert_array_equal(md.range(3, 0, -1).numpy(), [3.0, 2.0, 1.0, 0.0])
        ints = md.range(1, 4, dtype=md.int64)
        assert ints.dtype == md.int64 and ints.tolist() == [1, 2, 3, 4]
        with pytest.raises(RuntimeError, match="step must be nonzero"):
            md.range(0, 3, 0)
        with pytest.raises(RuntimeError, match="inconsistent with step sign"):
            md.range(3, 0)
    with pytest.raises(TypeError):
        md.range(5)


def test_binomial():
    md.manual_seed(0)
    count = md.tensor([[10.0], [0.0], [1000.0]])
    prob = md.tensor([0.0, 0.3, 1.0])
    s = md.binomial(count, prob)
    assert s.shape == (3, 3) and s.dtype == md.float32 and not s.requires_grad
    v = s.numpy()
    assert (v >= 0).all() and (v <= count.numpy()).all() and (v == np.floor(v)).all()
    np.testing.assert_array_equal(v[:, 0], 0.0)      # p = 0
    np.testing.assert_array_equal(v[:, 2], [10.0, 0.0, 1000.0])   # p = 1
    big = md.binomial(md.full((4000,), 20.0, dtype=md.float64), md.full((4000,), 0.25, dtype=md.float64))
    assert big.dtype == md.float64 and abs(big.numpy().mean() - 5.0) < 0.2
    with pytest.raises(ValueError, match="floating-point"):
        md.binomial(md.tensor([3]), md.tensor([0.5]))
    with pytest.raises(RuntimeError, match="dtype"):
        md.binomial(md.tensor([3.0]), md.tensor([0.5], dtype=md.float64))
    with pytest.raises(TypeError):
        md.binomial(md.tensor([3.0]), 0.5)
    with pytest.raises(RuntimeError, match=r"\[0, 1\]"):
        md.binomial(md.tensor([3.0]), md.tensor([1.5]))


def test_put():
    x = md.zeros(2, 2)
    y = md.put(x, md.tensor([0, 3]), md.tensor([1.0, 2.0]))
    np.testing.assert_array_equal(y.numpy(), [[1.0, 0.0], [0.0, 2.0]])
    assert np.array_equal(x.numpy(), np.zeros((2, 2)))     # out of place
    z = md.put(md.zeros(3), md.tensor([0, 0]), md.tensor([1.0, 2.0]), accumulate=True)
    np.testing.assert_array_equal(z.numpy(), [3.0, 0.0, 0.0])
    src = md.tensor([1.0, 2.0], dtype=md.float64, requires_grad=True)
    base = md.randn(2, 2, dtype=md.float64, requires_grad=True)
    assert gradcheck(lambda b, s: md.put(b, md.tensor([1, 2]), s), (base, src))


# against PyTorch ------------------------------------------------------------------------------------
def test_against_torch():
    torch = pytest.importorskip("torch")
    for name in FLAGS:
        assert getattr(md.randn(2), name) == getattr(torch.randn(2), name)
    a = np.array([1.5, -2.0, 0.0, -0.0, np.nan], np.float32)
    np.testing.assert_array_equal(md.angle(md.tensor(a)).numpy(), torch.angle(torch.tensor(a)).numpy())
    np.testing.assert_array_equal(md.angle(md.tensor([3, -1])).numpy(), torch.angle(torch.tensor([3, -1])).numpy())
    tx = torch.tensor(a[:3].astype(np.float64), requires_grad=True)
    mx = md.tensor(a[:3].astype(np.float64), requires_grad=True)
    torch.angle(tx).sum().backward()
    md.angle(mx).sum().backward()
    np.testing.assert_array_equal(mx.grad.numpy(), tx.grad.numpy())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for args in ((0, 3), (0, 1, 0.25), (3, 0, -1), (0, 3, 0.7), (-1.5, 2.5)):
            np.testing.assert_allclose(md.range(*args).numpy(), torch.range(*args).numpy(), rtol=1e-6)
        assert str(md.range(1, 4).dtype).split(".")[1] == str(torch.range(1, 4).dtype).split(".")[1]
    for shape in ((2, 3, 4), (3,), ()):
        assert md.randn(*shape).dim_order() == torch.randn(shape).dim_order()
    assert md.randn(2, 3, 4).permute(2, 0, 1).dim_order() == torch.randn(2, 3, 4).permute(2, 0, 1).dim_order()
    assert md.arange(3).new(2, 3).dtype == md.int64 and torch.arange(3).new(2, 3).dtype == torch.int64
    t = torch.zeros(3)
    assert t.is_shared() == md.zeros(3).is_shared()
    assert math.isclose(torch.angle(torch.tensor(-1.0)).item(), md.angle(md.tensor(-1.0)).item(), rel_tol=1e-7)
