"""A node's saved tensors as PyTorch exposes them (``grad_fn._saved_self``, ``_saved_result``,
``_raw_saved_*.register_hooks``), and a tensor's storage as an object (``untyped_storage()``,
``storage()``, ``is_set_to``)."""
import warnings

import numpy as np
import pytest

import minidl as md
from minidl.autograd import gradcheck


def _x(*shape, seed=0, grad=True):
    return md.tensor(np.random.default_rng(seed).uniform(0.5, 2.0, shape), requires_grad=grad)


# _saved_* -----------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["exp", "sigmoid", "tanh", "sqrt"])
def test_saved_result_is_the_output(op):
    x = _x(3)
    y = getattr(x, op)()
    r = y.grad_fn._saved_result
    assert r is not y and r.grad_fn is y.grad_fn and r.requires_grad
    np.testing.assert_array_equal(r.detach().numpy(), y.detach().numpy())


@pytest.mark.parametrize("op", ["log", "sin", "cos"])
def test_saved_self_is_the_input_itself(op):
    x = _x(3)
    assert getattr(x, op)().grad_fn._saved_self is x


def test_binary_ops_save_what_the_other_gradient_needs():
    a, b = _x(3), _x(3, seed=1, grad=False)
    n = (a * b).grad_fn
    assert n._saved_self is None and n._saved_other is b     # b's gradient is not needed: a is not kept
    b.requires_grad_()
    n = (a / b).grad_fn
    assert n._saved_self is a and n._saved_other is b
    n = (a * 3).grad_fn
    assert n._saved_other.ndim == 0 and n._saved_other.item() == 3
    m, w = _x(2, 3), _x(3, 4, seed=2)
    n = (m @ w).grad_fn
    assert n._saved_self is m and n._saved_other is w and n._saved_mat2 is w
    wt = w.t()
    lin = md.nn.functional.linear(m, wt, None).grad_fn
    assert lin._saved_input is m and lin._saved_weight is wt


def test_pow_saves_its_exponent_and_result():
    x = _x(3)
    n = x.pow(2).grad_fn
    assert n._saved_self is x and n._saved_exponent == 2 and type(n._saved_exponent) is int
    e = _x(3, seed=3)
    y = x.pow(e)
    assert y.grad_fn._saved_exponent is e
    np.testing.assert_array_equal(y.grad_fn._saved_result.detach().numpy(), x.detach().numpy() ** e.detach().numpy())


def test_saved_after_backward_is_the_freed_error():
    x = _x(3)
    y = x.exp()
    y.sum().backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.grad_fn._saved_result
    z = x.exp()
    z.sum().backward(retain_graph=True)
    np.testing.assert_array_equal(z.grad_fn._saved_result.detach().numpy(), np.exp(x.detach().numpy()))


def test_unknown_saved_attribute_is_an_attribute_error():
    x = _x(3)
    assert not hasattr(x.exp().grad_fn, "_saved_self")
    assert not hasattr(x.neg().grad_fn, "_saved_self")


def test_saved_under_saved_tensors_hooks_goes_through_unpack():
    x = _x(3)
    seen = []
    with md.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: (seen.append(1), t)[1]):
        y = x.sin()
    assert y.grad_fn._saved_self is x and seen == [1]


# _raw_saved_*.register_hooks ------------------------------------------------------------------
def test_raw_saved_register_hooks_packs_now_and_unpacks_for_backward():
    x = _x(3)
    y = x.exp()
    log = []
    y.grad_fn._raw_saved_result.register_hooks(lambda t: (log.append("pack"), t.detach() * 1)[1],
                                               lambda p: (log.append("unpack"), p)[1])
    assert log == ["pack"]
    y.sum().backward()
    assert log == ["pack", "unpack"]
    np.testing.assert_allclose(x.grad.numpy(), np.exp(x.detach().numpy()))


def test_raw_saved_register_hooks_errors():
    x, b = _x(3), _x(3, seed=1, grad=False)
    raw = x.exp().grad_fn._raw_saved_result
    with pytest.raises(TypeError, match="pack_hook must be callable"):
        raw.register_hooks(1, lambda t: t)
    raw.register_hooks(lambda t: t, lambda t: t)
    with pytest.raises(RuntimeError, match="already been set"):
        raw.register_hooks(lambda t: t, lambda t: t)
    with pytest.raises(RuntimeError, match="value None is forbidden"):
        (x * b).grad_fn._raw_saved_self.register_hooks(lambda t: t, lambda t: t)
    y = x.sin()
    raw = y.grad_fn._raw_saved_self
    y.sum().backward()
    with pytest.raises(RuntimeError, match="after it has been freed"):
        raw.register_hooks(lambda t: t, lambda t: t)


def test_raw_saved_hooks_keep_gradients_right():
    x = md.tensor(np.linspace(0.3, 1.7, 6).reshape(2, 3), requires_grad=True)
    w = md.tensor(np.linspace(-1, 1, 12).reshape(3, 4), requires_grad=True)

    def f(x, w):
        y = x @ w
        if y.grad_fn is not None:     # gradcheck also evaluates f without recording
            y.grad_fn._raw_saved_self.register_hooks(lambda t: t.detach().clone(), lambda p: p)
        return y.tanh()
    assert gradcheck(f, (x, w))


# storage ------------------------------------------------------------------------------------------
def test_views_share_the_untyped_storage_and_copies_do_not():
    t = md.arange(20, dtype=md.float32).reshape(4, 5)
    s = t.untyped_storage()
    assert s.nbytes() == s.size() == len(s) == 80 and s.element_size() == 1
    for v in (t[1:], t.t(), t.view(20), t[:, 2], t.expand(2, 4, 5)):
        assert v.untyped_storage().data_ptr() == s.data_ptr() == t.data_ptr()
        assert v.untyped_storage().nbytes() == 80
    assert t.clone().untyped_storage().data_ptr() != s.data_ptr()
    assert s.tolist() == list(np.arange(20, dtype=np.float32).tobytes())
    assert isinstance(s, md.UntypedStorage)


def test_untyped_storage_shares_memory():
    t = md.zeros(2, dtype=md.uint8)
    s = t[1:].untyped_storage()
    s[0] = 7
    assert t.tolist() == [7, 0] and s[0] == 7
    assert md.UntypedStorage(3).nbytes() == 3


def test_typed_storage_is_deprecated_and_counts_elements():
    t = md.arange(6, dtype=md.float64).reshape(2, 3)
    with pytest.warns(UserWarning, match="TypedStorage is deprecated"):
        s = t[1].storage()
    assert isinstance(s, md.TypedStorage)
    assert s.size() == len(s) == 6 and s.element_size() == 8 and s.nbytes() == 48 and s.dtype == md.float64
    assert s.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] and s.data_ptr() == t.data_ptr()
    assert s.untyped().nbytes() == 48


def test_is_set_to():
    t = md.randn(4, 5)
    assert t.is_set_to(t.view(4, 5)) and t.is_set_to(t[:])
    assert not t.is_set_to(t[1:]) and not t.is_set_to(t.clone()) and not t.is_set_to(t.t().t().view(20))


def test_bad_storage_arguments():
    with pytest.raises(TypeError, match="must be int"):
        md.UntypedStorage(2.5)
    with pytest.raises(RuntimeError, match="negative dimension"):
        md.UntypedStorage(-1)


# against PyTorch --------------------------------------------------------------------------------
def test_saved_attributes_match_torch():
    torch = pytest.importorskip("torch")
    xs = np.random.default_rng(4).uniform(0.5, 2.0, 5)
    for op in ("exp", "sigmoid", "tanh", "sqrt", "log", "sin", "cos"):
        mx, tx = md.tensor(xs, requires_grad=True), torch.tensor(xs, requires_grad=True)
        mn, tn = getattr(mx, op)().grad_fn, getattr(tx, op)().grad_fn
        assert mn.name() == tn.name()
        for attr in ("_saved_self", "_saved_result"):
            if hasattr(tn, attr):
                np.testing.assert_allclose(getattr(mn, attr).detach().numpy(), getattr(tn, attr).detach().numpy())
    mx, tx = md.tensor(xs, requires_grad=True), torch.tensor(xs, requires_grad=True)
    assert mx.pow(3).grad_fn._saved_exponent == tx.pow(3).grad_fn._saved_exponent
    assert (mx * 3).grad_fn._saved_other.item() == (tx * 3).grad_fn._saved_other.item()
    assert ((mx * md.tensor(xs)).grad_fn._saved_self is None) == ((tx * torch.tensor(xs)).grad_fn._saved_self is None)


def test_storage_matches_torch():
    torch = pytest.importorskip("torch")
    m, t = md.randn(3, 4), torch.randn(3, 4)
    for f in (lambda a: a, lambda a: a[1:], lambda a: a.t(), lambda a: a[:, 1]):
        assert f(m).untyped_storage().nbytes() == f(t).untyped_storage().nbytes()
        assert (f(m).untyped_storage().data_ptr() == m.data_ptr()) == (f(t).untyped_storage().data_ptr()
                                                                      == t.data_ptr())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert f(m).storage().size() == f(t).storage().size()
    for f in (lambda a: a.view(3, 4), lambda a: a[1:], lambda a: a.clone()):
        assert m.is_set_to(f(m)) == t.is_set_to(f(t))


def test_storage_of_a_cuda_tensor_is_not_implemented():
    if not md.cuda.is_available():
        pytest.skip("no cuda device (tests/conftest.py sets the simulator)")
    t = md.randn(3).to("cuda")
    with pytest.raises(NotImplementedError, match="untyped_storage.*cuda"):
        t.untyped_storage()
    x = md.randn(3, device="cuda", requires_grad=True)
    np.testing.assert_allclose(x.exp().grad_fn._saved_result.cpu().detach().numpy(),
                               np.exp(x.cpu().detach().numpy()), rtol=1e-6)
