"""autograd's anomaly detection (detect_anomaly / set_detect_anomaly), the legacy Variable, and
autograd.functional's jacobian and vjp, against hand-computed Jacobians, finite differences
and torch.autograd."""
import warnings

import numpy as np
import pytest

import minidl as md
from minidl import autograd
from minidl.autograd import Function, functional
from minidl.autograd import op_function as function_module


@pytest.fixture(autouse=True)
def anomaly_off_after():
    yield
    autograd.set_detect_anomaly(False)


def _run_recording(fn):
    """fn() under warnings recorded: (its exception or None, the UserWarning messages)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fn()
            err = None
        except RuntimeError as e:
            err = e
    return err, [str(w.message) for w in caught if w.category is UserWarning]


def _nan_backward():
    """d/dx of sum(0 * sqrt(x)) at x = 0: Sqrt's backward computes 0 / (2 sqrt 0) = NaN."""
    x = md.zeros(3, requires_grad=True)
    y = md.sqrt(x)  # the forward line anomaly mode names
    (y * 0).sum().backward()
    return x


# anomaly detection ---------------------------------------------------------------------------
def test_nan_from_a_backward_raises_naming_the_node_and_warns_with_the_forward_line():
    def run():
        with autograd.detect_anomaly():
            _nan_backward()
    err, msgs = _run_recording(run)
    assert err is not None and str(err) == "Function 'Sqrt' returned nan values in its 0th output."
    assert any(m.startswith("Anomaly Detection has been enabled.") for m in msgs)
    (report,) = [m for m in msgs if m.startswith("Error detected in Sqrt.")]
    assert "Traceback of forward call that caused the error:" in report
    assert "y = md.sqrt(x)  # the forward line anomaly mode names" in report
    assert __file__ in report and "in _nan_backward" in report
    assert "autograd/op_function.py" not in report          # apply's own frames are left out


def test_without_anomaly_detection_the_nan_passes_silently():
    with warnings.catch_warnings(), pytest.raises(RuntimeError, match="returned nan values"):
        warnings.simplefilter("ignore")
        with autograd.detect_anomaly():
            _nan_backward()
    with np.errstate(invalid="ignore"):
        err, msgs = _run_recording(_nan_backward)
    assert err is None and not msgs
    with np.errstate(invalid="ignore"):
        assert np.isnan(_nan_backward().grad.numpy()).all()


def test_check_nan_false_records_but_does_not_check():
    def run():
        with autograd.detect_anomaly(check_nan=False):
            assert autograd.is_anomaly_enabled() and not autograd.is_anomaly_check_nan_enabled()
            with np.errstate(invalid="ignore"):
                _nan_backward()
    err, _ = _run_recording(run)
    assert err is None


def test_the_nan_check_names_the_forward_argument_index():
    class Twice(Function):
        @staticmethod
        def forward(ctx, scale, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return None, g * np.nan

    x = md.ones(2, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with autograd.detect_anomaly():
            y = Twice.apply(3.0, x).sum()
            message = r"^Function 'TwiceBackward' returned nan values in its 1th output\.$"
            with pytest.raises(RuntimeError, match=message):
                y.backward()


def test_an_error_in_a_backward_is_reported_with_its_forward_traceback():
    class Broken(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            raise ValueError("broken backward")

    def run():
        with autograd.detect_anomaly():
            x = md.ones(2, requires_grad=True)
            out = Broken.apply(x * 3)  # the failing node
            out.sum().backward()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="broken backward"):
            run()
    (report,) = [str(w.message) for w in caught if "Error detected" in str(w.message)]
    assert report.startswith("Error detected in BrokenBackward. Traceback of forward call that caused the error:")
    assert "out = Broken.apply(x * 3)  # the failing node" in report


def test_a_node_built_before_anomaly_mode_is_reported_without_a_traceback():
    x = md.zeros(2, requires_grad=True)
    loss = (md.sqrt(x) * 0).sum()

    def run():
        with autograd.detect_anomaly(), np.errstate(invalid="ignore"):
            loss.backward()
    err, msgs = _run_recording(run)
    assert "returned nan values" in str(err)
    assert any(m.startswith("Error detected in Sqrt. No forward pass information available.") for m in msgs)


def test_nodes_record_their_forward_stack_only_while_anomaly_detection_is_on():
    x = md.ones(2, requires_grad=True)
    assert "_forward_stack" not in (x * 2)._node.__dict__
    autograd.set_detect_anomaly(True)
    try:
        assert "_forward_stack" in (x * 2)._node.__dict__
        with md.no_grad():
            assert (x * 2)._node is None
    finally:
        autograd.set_detect_anomaly(False)
    assert not function_module._anomaly
    assert "_forward_stack" not in (x * 2)._node.__dict__


def test_set_detect_anomaly_works_as_a_call_and_as_a_context_manager():
    assert not autograd.is_anomaly_enabled() and autograd.is_anomaly_check_nan_enabled()
    autograd.set_detect_anomaly(True, check_nan=False)
    assert autograd.is_anomaly_enabled() and not autograd.is_anomaly_check_nan_enabled()
    with autograd.set_detect_anomaly(False):
        assert not autograd.is_anomaly_enabled() and autograd.is_anomaly_check_nan_enabled()
    assert autograd.is_anomaly_enabled() and not autograd.is_anomaly_check_nan_enabled()
    autograd.set_detect_anomaly(False)
    assert not autograd.is_anomaly_enabled() and not function_module._anomaly


def test_detect_anomaly_restores_the_state_after_an_error_and_works_as_a_decorator():
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        mode = autograd.detect_anomaly()
    with pytest.raises(KeyError):
        with mode:
            assert autograd.is_anomaly_enabled()
            raise KeyError
    assert not autograd.is_anomaly_enabled()

    with pytest.warns(UserWarning):
        @autograd.detect_anomaly(check_nan=False)
        def inside():
            return autograd.is_anomaly_enabled(), autograd.is_anomaly_check_nan_enabled()
    assert inside() == (True, False)
    assert inside() == (True, False)
    assert not autograd.is_anomaly_enabled() and autograd.is_anomaly_check_nan_enabled()


def test_anomaly_detection_leaves_healthy_gradients_alone():
    x = md.tensor([1.0, 4.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with autograd.detect_anomaly():
            (md.sqrt(x) * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 1.5 / np.sqrt([1.0, 4.0]))


# Variable ------------------------------------------------------------------------------------
def test_variable_makes_a_detached_leaf_sharing_memory():
    t = md.ones(3)
    v = autograd.Variable(t, requires_grad=True)
    assert type(v) is md.Tensor and v is not t and v.is_leaf and v.requires_grad and not t.requires_grad
    t.add_(1)
    np.testing.assert_allclose(v.detach().numpy(), [2, 2, 2])
    w = autograd.Variable(md.ones(2, requires_grad=True) * 2)
    assert not w.requires_grad and w.is_leaf and w.grad_fn is None
    assert autograd.Variable().shape == (0,)
    (v * v).sum().backward()
    np.testing.assert_allclose(v.grad.numpy(), [4, 4, 4])


def test_every_tensor_is_a_variable():
    assert isinstance(md.ones(1), autograd.Variable)
    assert isinstance(md.nn.Parameter(md.ones(1)), autograd.Variable)
    assert not isinstance(np.ones(1), autograd.Variable)


def test_variable_rejects_non_tensors_and_warns_on_volatile():
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got list"):
        autograd.Variable([1.0, 2.0])
    with pytest.warns(UserWarning, match="volatile was removed"):
        autograd.Variable(md.ones(1), volatile=True)


# jacobian --------------------------------------------------------------------------------------
def _numerical_jacobian(f, xs, eps=1e-6):
    """d f(xs)[i] / d xs[j] by central differences on NumPy arrays: [i][j] of shape out_i + x_j."""
    outs = f(*xs)
    jac = [[np.zeros(o.shape + x.shape) for x in xs] for o in outs]
    for j, x in enumerate(xs):
        for idx in np.ndindex(*x.shape):
            plus, minus = [a.copy() for a in xs], [a.copy() for a in xs]
            plus[j][idx] += eps
            minus[j][idx] -= eps
            for i, (p, m) in enumerate(zip(f(*plus), f(*minus))):
                jac[i][j][(Ellipsis,) + idx] = (p - m) / (2 * eps)
    return jac


def test_jacobian_of_a_matrix_vector_product_is_the_matrix():
    rng = np.random.default_rng(0)
    W, x = rng.standard_normal((2, 3)), rng.standard_normal(3)
    jw, jx = functional.jacobian(lambda W, x: W @ x, (md.tensor(W), md.tensor(x)))
    np.testing.assert_allclose(jx.numpy(), W)
    ref = np.zeros((2, 2, 3))            # d(Wx)_i / dW_jk = delta_ij x_k
    for i in range(2):
        ref[i, i] = x
    np.testing.assert_allclose(jw.numpy(), ref)
    assert jw.dtype == md.float64 and not jw.requires_grad


def test_jacobian_nesting_follows_the_inputs_and_outputs():
    a, b = md.tensor([1.0, 2.0]), md.tensor([3.0, 4.0, 5.0])
    one = functional.jacobian(lambda x: x * x, a)
    assert isinstance(one, md.Tensor)
    np.testing.assert_allclose(one.numpy(), np.diag([2.0, 4.0]))
    per_input = functional.jacobian(lambda x, y: x.sum() * y.sum(), (a, b))
    assert isinstance(per_input, tuple) and [t.shape for t in per_input] == [(2,), (3,)]
    np.testing.assert_allclose(per_input[0].numpy(), [12, 12])
    np.testing.assert_allclose(per_input[1].numpy(), [3, 3, 3])
    per_output = functional.jacobian(lambda x: (x.exp(), x.sum()), a)
    assert isinstance(per_output, tuple) and isinstance(per_output[0], md.Tensor)
    np.testing.assert_allclose(per_output[0].numpy(), np.diag(np.exp([1.0, 2.0])), rtol=1e-6)
    np.testing.assert_allclose(per_output[1].numpy(), [1, 1])
    both = functional.jacobian(lambda x, y: (x * 2, y.sum()), (a, b))
    assert isinstance(both[0], tuple) and [[t.shape for t in row] for row in both] == [[(2, 2), (2, 3)], [(2,), (3,)]]
    np.testing.assert_allclose(both[0][1].numpy(), np.zeros((2, 3)))    # x * 2 ignores y: zeros
    np.testing.assert_allclose(both[1][1].numpy(), [1, 1, 1])


def test_jacobian_agrees_with_finite_differences():
    rng = np.random.default_rng(1)
    xs = (rng.standard_normal((2, 3)), rng.standard_normal(3))

    def f_np(x, y):
        return np.tanh(x * y).sum(0), (x ** 2).sum() * y

    def f_md(x, y):
        return (x * y).tanh().sum(0), (x ** 2).sum() * y

    jac = functional.jacobian(f_md, tuple(md.tensor(x) for x in xs))
    ref = _numerical_jacobian(f_np, xs)
    for i in range(2):
        for j in range(2):
            np.testing.assert_allclose(jac[i][j].numpy(), ref[i][j], atol=1e-7)


def test_jacobian_does_not_touch_the_callers_gradients():
    x = md.tensor([1.0, 2.0], requires_grad=True)
    j = functional.jacobian(lambda t: t * x, x)      # also reads x directly, as a constant
    np.testing.assert_allclose(j.numpy(), np.diag([1.0, 2.0]))
    assert x.grad is None


def test_jacobian_vectorize_and_forward_mode_give_the_same_values():
    x = md.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=md.float64)
    ref = functional.jacobian(lambda t: t.pow(3).sum(1), x)
    np.testing.assert_allclose(functional.jacobian(lambda t: t.pow(3).sum(1), x, vectorize=True).numpy(), ref.numpy())
    fwd = functional.jacobian(lambda t: t.pow(3).sum(1).float(), x, vectorize=True, strategy="forward-mode")
    assert fwd.dtype == md.float32                   # forward mode: the output's dtype
    np.testing.assert_allclose(fwd.numpy(), ref.numpy(), rtol=1e-6)


def test_jacobian_strict_and_argument_errors():
    a, b = md.ones(2), md.ones(3)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function is independent of input 1"):
        functional.jacobian(lambda x, y: x * 2, (a, b), strict=True)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function does not require gradients"):
        functional.jacobian(lambda x: md.ones(2), a, strict=True)
    np.testing.assert_allclose(functional.jacobian(lambda x: md.ones(2), a).numpy(), np.zeros((2, 2)))
    with pytest.raises(RuntimeError, match="`strict=True` and `vectorized=True` are not supported together"):
        functional.jacobian(lambda x: x, a, strict=True, vectorize=True)
    with pytest.raises(NotImplementedError, match="only implemented for `vectorize=True`"):
        functional.jacobian(lambda x: x, a, strategy="forward-mode")
    with pytest.raises(AssertionError, match='Expected strategy to be either "forward-mode" or "reverse-mode"'):
        functional.jacobian(lambda x: x, a, strategy="sideways")
    with pytest.raises(TypeError, match="The inputs given to jacobian must be either a Tensor or a tuple of Tensors"):
        functional.jacobian(lambda x: x, [a])
    with pytest.raises(TypeError, match="outputs of the user-provided function given to jacobian"):
        functional.jacobian(lambda x: [x], a)


# vjp -------------------------------------------------------------------------------------------
def test_vjp_is_v_times_the_jacobian():
    rng = np.random.default_rng(2)
    W, x, v = rng.standard_normal((2, 3)), rng.standard_normal(3), rng.standard_normal(2)
    out, (gw, gx) = functional.vjp(lambda W, x: W @ x, (md.tensor(W), md.tensor(x)), md.tensor(v))
    np.testing.assert_allclose(out.numpy(), W @ x)
    np.testing.assert_allclose(gx.numpy(), v @ W)
    np.testing.assert_allclose(gw.numpy(), np.outer(v, x))
    assert not out.requires_grad and not gx.requires_grad


def test_vjp_with_tuple_outputs_implicit_v_and_unused_inputs():
    a, b = md.tensor([1.0, 2.0]), md.tensor([3.0])
    outs, grads = functional.vjp(lambda x, y: (x * 2, x.sum()), (a, b), (md.tensor([1.0, 1.0]), md.tensor(3.0)))
    assert isinstance(outs, tuple) and len(outs) == 2
    np.testing.assert_allclose(grads[0].numpy(), [5.0, 5.0])
    np.testing.assert_allclose(grads[1].numpy(), [0.0])                 # y unused: zeros
    out, g = functional.vjp(lambda x: (x ** 2).sum(), a)                 # one element: v may be omitted
    np.testing.assert_allclose(g.numpy(), [2.0, 4.0])
    assert float(out) == 5.0


def test_vjp_errors():
    a = md.ones(2)
    with pytest.raises(RuntimeError, match="The vector v can only be None if the user-provided function returns"):
        functional.vjp(lambda x: x * 2, a)
    with pytest.raises(RuntimeError, match=r"v has invalid size: should be .*\[2\].* but got .*\[3\]"):
        functional.vjp(lambda x: x * 2, a, md.ones(3))
    with pytest.raises(RuntimeError, match="v is a tuple of invalid length: should be 2 but got 1"):
        functional.vjp(lambda x: (x, x), a, (md.ones(2),))
    with pytest.raises(RuntimeError, match="The given v should contain a single Tensor"):
        functional.vjp(lambda x: x, a, (md.ones(2), md.ones(2)))
    with pytest.raises(RuntimeError, match="The output of the user-provided function is independent of input 1"):
        functional.vjp(lambda x, y: x.sum(), (a, md.ones(1)), strict=True)


# what needs second-order gradients -----------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda f, x: functional.hessian(f, x),
    lambda f, x: functional.hvp(f, x, md.ones(2))[1],
    lambda f, x: functional.vhp(f, x, md.ones(2))[1],
], ids=["hessian", "hvp", "vhp"])
def test_second_order_functions(call):
    x = md.tensor([0.5, -1.5])
    res = call(lambda t: (t ** 3).sum(), x).numpy()
    expected = np.diag(6 * x.numpy())
    np.testing.assert_allclose(res, expected if res.ndim == 2 else expected.sum(1), rtol=1e-6)


def test_create_graph_and_gradgradcheck():
    x = md.tensor([0.5, -1.5], requires_grad=True)
    jac = functional.jacobian(lambda t: t * t, x, create_graph=True)
    assert jac.requires_grad
    np.testing.assert_allclose(jac.detach().numpy(), np.diag(2 * x.detach().numpy()))
    _, g = functional.vjp(lambda t: (t * t).sum(), x, create_graph=True)
    (gg,) = autograd.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), [2.0, 2.0])
    assert autograd.gradgradcheck(lambda t: t * t * t, (md.tensor([0.3, 2.0], dtype=md.float64, requires_grad=True),))


def test_gradcheck_agrees_with_the_jacobian_row_sums():
    # the vjp with v = 1 is the column sums of the Jacobian; gradcheck validates the same backward
    x = md.tensor([0.3, -0.7, 1.1], dtype=md.float64, requires_grad=True)
    assert autograd.gradcheck(lambda t: (t * t).tanh(), (x,))
    jac = functional.jacobian(lambda t: (t * t).tanh(), x.detach())
    _, g = functional.vjp(lambda t: (t * t).tanh(), x.detach(), md.ones(3, dtype=md.float64))
    np.testing.assert_allclose(g.numpy(), jac.numpy().sum(0))


# against torch ---------------------------------------------------------------------------------
def test_jacobian_and_vjp_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    a, b, v0, v1 = rng.standard_normal((3, 2)), rng.standard_normal(2), rng.standard_normal(3), rng.standard_normal(2)

    def f(x, y):
        return (x * y).exp().sum(1), x.pow(2).sum() * y.sigmoid()

    jm = functional.jacobian(f, (md.tensor(a), md.tensor(b)))
    jt = torch.autograd.functional.jacobian(f, (torch.tensor(a), torch.tensor(b)))
    for i in range(2):
        for j in range(2):
            assert tuple(jm[i][j].shape) == tuple(jt[i][j].shape)
            np.testing.assert_allclose(jm[i][j].numpy(), jt[i][j].numpy(), rtol=1e-12, atol=1e-12)
    om, gm = functional.vjp(f, (md.tensor(a), md.tensor(b)), (md.tensor(v0), md.tensor(v1)))
    ot, gt = torch.autograd.functional.vjp(f, (torch.tensor(a), torch.tensor(b)), (torch.tensor(v0), torch.tensor(v1)))
    for m, t in zip(om + gm, ot + gt):
        np.testing.assert_allclose(m.numpy(), t.numpy(), rtol=1e-12, atol=1e-12)


def test_single_tensor_nesting_and_float32_match_torch():
    torch = pytest.importorskip("torch")
    x = np.array([0.5, -1.5, 2.0], dtype=np.float32)
    jm = functional.jacobian(lambda t: (t.relu() * 3, t.sum()), md.tensor(x))
    jt = torch.autograd.functional.jacobian(lambda t: (t.relu() * 3, t.sum()), torch.tensor(x))
    assert isinstance(jm, tuple) and isinstance(jm[0], md.Tensor) and isinstance(jt[0], torch.Tensor)
    for m, t in zip(jm, jt):
        assert m.dtype == md.float32 and t.dtype == torch.float32
        np.testing.assert_array_equal(m.numpy(), t.numpy())


def test_anomaly_message_matches_torch_up_to_the_node_name():
    torch = pytest.importorskip("torch")
    x = torch.zeros(3, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.autograd.detect_anomaly(), autograd.detect_anomaly():
            with pytest.raises(RuntimeError) as torch_err:
                (torch.sqrt(x) * 0).sum().backward()
            with pytest.raises(RuntimeError) as md_err:
                _nan_backward()
    assert str(md_err.value) == str(torch_err.value).replace("SqrtBackward0", "Sqrt")
    assert isinstance(md.ones(1), autograd.Variable) == isinstance(torch.ones(1), torch.autograd.Variable)


def test_the_anomaly_switch_at_the_top_level():
    assert md.is_anomaly_enabled() is False
    md.set_anomaly_enabled(True)
    try:
        assert md.is_anomaly_enabled() and md.autograd.is_anomaly_enabled()
    finally:
        md.set_anomaly_enabled(False)
    assert not md.autograd.is_anomaly_enabled()
