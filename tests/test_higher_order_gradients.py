"""Gradients of gradients: backward(create_graph=True), autograd.grad(create_graph=True), gradgradcheck,
Hessians (autograd.functional, minidl.func), and the PyTorch recipes built on them (WGAN-GP, MAML)."""
import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl import autograd, func
from minidl.autograd import functional, gradgradcheck

RNG = np.random.default_rng(0)


def T(a, grad=True):
    return md.tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


def away_from_zero(shape, lo=0.3):
    """Values with |x| >= lo, so kinks (relu, abs, clamp bounds) are far from every finite difference."""
    x = RNG.uniform(lo, 1.5, shape)
    return x * RNG.choice([-1.0, 1.0], shape)


POS = lambda shape: RNG.uniform(0.5, 2.0, shape)   # noqa: E731
IDX = np.array([2, 0, 1, 2])
CLASS_WEIGHT = md.tensor([0.5, 2.0, 1.5], dtype=md.float64)

# name -> (function of tensors, input arrays); every op with a differentiable backward, through its public form
CASES = {
    "add": (lambda a, b: a + b, [RNG.standard_normal((3, 4)), RNG.standard_normal(4)]),
    "sub": (lambda a, b: a - b * b, [RNG.standard_normal((3, 1)), RNG.standard_normal(4)]),
    "mul": (lambda a, b: a * b, [RNG.standard_normal((3, 4)), RNG.standard_normal((1, 4))]),
    "mul_number": (lambda a: a * 2.5 * a, [RNG.standard_normal(5)]),
    "div": (lambda a, b: a / b, [RNG.standard_normal((3, 4)), POS((3, 1))]),
    "neg": (lambda a: -(a * a), [RNG.standard_normal(4)]),
    "pow_scalar": (lambda a: a ** 3 + a.abs() ** 2.5 + a ** -2.0 + a ** 0, [away_from_zero(5)]),
    "rpow": (lambda a: 2.0 ** a, [RNG.standard_normal(5)]),
    "pow_tensor": (lambda a, b: a ** b, [POS((2, 3)), RNG.standard_normal(3)]),
    "exp": (lambda a: a.exp(), [RNG.standard_normal(5)]),
    "log": (lambda a: a.log(), [POS(5)]),
    "sqrt": (lambda a: a.sqrt(), [POS(5)]),
    "abs": (lambda a: a.abs() * a, [away_from_zero(5)]),
    "tanh": (lambda a: a.tanh(), [RNG.standard_normal(5)]),
    "sigmoid": (lambda a: a.sigmoid(), [RNG.standard_normal(5)]),
    "relu": (lambda a: F.relu(a) * a, [away_from_zero(6)]),
    "leaky_relu": (lambda a: F.leaky_relu(a, 0.2) * a, [away_from_zero(6)]),
    "gelu": (lambda a: F.gelu(a), [RNG.standard_normal(6)]),
    "gelu_tanh": (lambda a: F.gelu(a, approximate="tanh"), [RNG.standard_normal(6)]),
    "sin": (lambda a: a.sin(), [RNG.standard_normal(5)]),
    "cos": (lambda a: a.cos(), [RNG.standard_normal(5)]),
    "matmul": (lambda a, b: a @ b, [RNG.standard_normal((2, 3, 4)), RNG.standard_normal((4, 2))]),
    "matmul_vector": (lambda a, b: (a @ b) * (b @ b), [RNG.standard_normal((3, 4)), RNG.standard_normal(4)]),
    "linear": (lambda x, w, b: F.linear(x, w, b).tanh(),
               [RNG.standard_normal((2, 3, 4)), RNG.standard_normal((5, 4)), RNG.standard_normal(5)]),
    "sum": (lambda a: a.sum(1, keepdim=True) * a.sum(), [RNG.standard_normal((3, 4))]),
    "mean": (lambda a: a.mean(0) * a.mean(), [RNG.standard_normal((3, 4))]),
    "reshape_view": (lambda a: a.reshape(4, 3).view(2, 6) * a.reshape(2, 6), [RNG.standard_normal((3, 4))]),
    "transpose_permute": (lambda a: a.transpose(0, 1) * a.permute(1, 0) ** 2, [RNG.standard_normal((3, 4))]),
    "expand": (lambda a: a.expand(3, 4) * a.expand(3, 4), [RNG.standard_normal((1, 4))]),
    "squeeze_unsqueeze": (lambda a: a.unsqueeze(0).squeeze(0) ** 2, [RNG.standard_normal((3, 1))]),
    "getitem_basic": (lambda a: a[1:, ::2] ** 2 + a[0, 1] * a[2, None, :2], [RNG.standard_normal((3, 4))]),
    "getitem_advanced": (lambda a: a[IDX] ** 2, [RNG.standard_normal((3, 2))]),
    "cat": (lambda a, b: md.cat([a * a, b], 1) ** 2, [RNG.standard_normal((2, 3)), RNG.standard_normal((2, 2))]),
    "stack": (lambda a, b: md.stack([a, b * a], 1) ** 2, [RNG.standard_normal((2, 3)), RNG.standard_normal((2, 3))]),
    "softmax": (lambda a: F.softmax(a, 1), [RNG.standard_normal((2, 4))]),
    "log_softmax": (lambda a: F.log_softmax(a, 0), [RNG.standard_normal((3, 2))]),
    "mse_loss": (lambda a, b: F.mse_loss(a * a, b), [RNG.standard_normal((2, 3)), RNG.standard_normal((2, 3))]),
    "mse_loss_sum": (lambda a, b: F.mse_loss(a, b.tanh(), reduction="sum"),
                     [RNG.standard_normal((2, 3)), RNG.standard_normal((2, 3))]),
    "cross_entropy": (lambda a: F.cross_entropy(a, md.tensor([1, 0, 3])), [RNG.standard_normal((3, 4))]),
    "cross_entropy_smooth": (lambda a: F.cross_entropy(a, md.tensor([[1, -100], [2, 0]]), weight=CLASS_WEIGHT,
                                                       label_smoothing=0.2, reduction="sum"),
                             [RNG.standard_normal((2, 3, 2))]),
    "cross_entropy_none": (lambda a: F.cross_entropy(a, md.tensor([1, 0]), reduction="none"),
                           [RNG.standard_normal((2, 3))]),
    "nll_loss": (lambda a: F.nll_loss(F.log_softmax(a, 1), md.tensor([1, 0, 2])), [RNG.standard_normal((3, 3))]),
    "clamp": (lambda a: a.clamp(-0.5, 0.7) * a, [away_from_zero(6, 0.05) * 0.4 + np.array([0, 0, 0, 1, 1, -1])]),
    "clamp_tensor_bounds": (lambda a, lo, hi: md.clamp(a, lo, hi) ** 2,
                            [np.array([-2.0, 0.0, 2.0, 0.1]), np.full(4, -1.0), np.full(4, 1.0)]),
    "where": (lambda a, b: md.where(md.tensor([True, False, True]), a * a, b * a), [RNG.standard_normal(3),
                                                                                 RNG.standard_normal(3)]),
    "maximum_minimum": (lambda a, b: md.maximum(a, b) ** 2 + md.minimum(a, b * 2) * a,
                        [RNG.standard_normal(5), RNG.standard_normal(5)]),
    "norm": (lambda a: md.linalg.vector_norm(a, dim=1) * a.norm(), [RNG.standard_normal((2, 3))]),
    "norm_p3": (lambda a: md.linalg.vector_norm(a, 3), [away_from_zero(4)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradgradcheck_every_covered_op(name):
    fn, arrays = CASES[name]
    assert gradgradcheck(fn, tuple(T(a) for a in arrays), atol=1e-6, rtol=1e-4)


def test_gradgradcheck_catches_a_wrong_second_derivative():
    from minidl.autograd import GradcheckError
    from minidl.ops.unary import Tanh
    right = Tanh.differentiable_backward
    try:
        Tanh.differentiable_backward = staticmethod(lambda ctx, inputs, g: g * (1 - inputs[0].detach().tanh() ** 2))
        with pytest.raises(GradcheckError, match="Jacobian mismatch"):
            gradgradcheck(lambda a: a.tanh(), (T(RNG.standard_normal(3)),))
    finally:
        Tanh.differentiable_backward = right


def test_grad_create_graph_gives_differentiable_gradients():
    a = RNG.standard_normal(4)
    x = T(a)
    (g,) = autograd.grad((x ** 3).sum(), x, create_graph=True)
    assert g.requires_grad and g.grad_fn is not None
    np.testing.assert_allclose(g.detach().numpy(), 3 * a ** 2)
    (h,) = autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), 6 * a)
    # a seed that requires grad is part of the graph: d/dv <v, dy/dx> = dy/dx
    v = T(np.ones(4))
    (g,) = autograd.grad(x.sin(), x, v, create_graph=True)
    (gv,) = autograd.grad((g * g).sum(), v)
    np.testing.assert_allclose(gv.numpy(), 2 * np.cos(a) ** 2)


def test_backward_create_graph_sets_grads_that_carry_the_graph():
    a = RNG.standard_normal(3)
    x = T(a)
    (x ** 3).sum().backward(create_graph=True)
    g = x.grad
    assert g.requires_grad and g.grad_fn is not None
    x.grad = None
    (g * g).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * (3 * a ** 2) * 6 * a)
    # accumulates out of place: the old .grad keeps its value
    x.grad = None
    y = (x ** 2).sum()
    y.backward(create_graph=True)
    first = x.grad
    y.backward(create_graph=True)
    np.testing.assert_allclose(first.detach().numpy(), 2 * a)
    np.testing.assert_allclose(x.grad.detach().numpy(), 4 * a)


def test_create_graph_false_paths_are_unchanged():
    x = T(RNG.standard_normal(3))
    (g,) = autograd.grad((x ** 3).sum(), x)
    assert not g.requires_grad and g.grad_fn is None
    (x ** 3).sum().backward()
    assert not x.grad.requires_grad
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y = (x.exp() * x).sum()
        autograd.grad(y, x)
        autograd.grad(y, x)
    # create_graph keeps the graph by default, as PyTorch's retain_graph=create_graph
    y = (x.exp() * x).sum()
    autograd.grad(y, x, create_graph=True)
    autograd.grad(y, x)


def test_unsupported_op_raises_naming_it():
    x = T(RNG.standard_normal((3, 4)))
    y = F.embedding_bag(md.tensor([0, 1, 2]), x * 2, md.tensor([0])).sum()
    with pytest.raises(NotImplementedError, match=r"create_graph=True: EmbeddingBagBackward0 has no differentiable "
                                                  r"backward in minidl; ops that have one: .*MatMul"):
        autograd.grad(y, x, create_graph=True)
    # a Function written on arrays (the ops' base), without a differentiable_backward
    class Cube(md.autograd.op_function.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a ** 3

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return 3 * a ** 2 * g
    with pytest.raises(NotImplementedError, match="CubeBackward has no differentiable backward"):
        func.hessian(lambda a: Cube.apply(a).sum())(md.ones(2))
    with pytest.raises(NotImplementedError, match="CubeBackward"):
        functional.hvp(lambda a: Cube.apply(a).sum(), md.ones(2), md.ones(2))


def test_in_place_write_after_forward_is_an_error_with_create_graph():
    x = T(RNG.standard_normal(3))
    h = x * 1.0
    y = h.exp().sum()
    h.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        autograd.grad(y, x, create_graph=True)


def _mlp(params, x):
    w1, b1, w2, b2 = params
    return (F.linear(x, w1, b1).tanh() @ w2.transpose(0, 1) + b2).sum()


def test_hessian_of_a_tanh_mlp_matches_finite_differences():
    w1, b1, w2, b2 = RNG.standard_normal((3, 2)), RNG.standard_normal(3), RNG.standard_normal((1, 3)), \
        RNG.standard_normal(1)
    x0 = RNG.standard_normal(2)

    def f_np(x):
        return float((np.tanh(w1 @ x + b1) @ w2.T + b2).sum())

    eps, n = 1e-4, 2
    fd = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            e_i, e_j = np.eye(n)[i] * eps, np.eye(n)[j] * eps
            fd[i, j] = (f_np(x0 + e_i + e_j) - f_np(x0 + e_i - e_j) - f_np(x0 - e_i + e_j) + f_np(x0 - e_i - e_j)) \
                / (4 * eps * eps)
    params = [T(p, grad=False) for p in (w1, b1, w2, b2)]
    f = lambda x: _mlp(params, x)   # noqa: E731
    for h in (functional.hessian(f, T(x0, grad=False)), func.hessian(f)(T(x0, grad=False))):
        np.testing.assert_allclose(h.numpy(), fd, atol=1e-6)
    # hvp / vhp are H v for the symmetric H
    v = RNG.standard_normal(2)
    value, hv = functional.hvp(f, T(x0, grad=False), T(v, grad=False))
    np.testing.assert_allclose(value.numpy(), f_np(x0))
    np.testing.assert_allclose(hv.numpy(), fd @ v, atol=1e-6)
    np.testing.assert_allclose(functional.vhp(f, T(x0, grad=False), T(v, grad=False))[1].numpy(), v @ fd, atol=1e-6)
    # the Hessian of all parameters at once, by nested func transforms
    hp = func.hessian(lambda w: _mlp([w] + params[1:], T(x0, grad=False)))(params[0])
    assert tuple(hp.shape) == (3, 2, 3, 2)
    np.testing.assert_allclose(hp.numpy().reshape(6, 6), hp.numpy().reshape(6, 6).T, atol=1e-12)


def test_nested_func_transforms():
    a = RNG.standard_normal(3)
    x = T(a, grad=False)
    f = lambda t: (t.sin() * t).sum()   # noqa: E731
    h_ref = np.diag(2 * np.cos(a) - a * np.sin(a))
    np.testing.assert_allclose(func.jacrev(func.grad(f))(x).numpy(), h_ref, atol=1e-12)
    np.testing.assert_allclose(func.jacrev(func.jacrev(f))(x).numpy(), h_ref, atol=1e-12)
    np.testing.assert_allclose(func.jacfwd(func.jacrev(f))(x).numpy(), h_ref, atol=1e-12)
    np.testing.assert_allclose(func.grad(lambda t: func.grad(f)(t).sum())(x).numpy(), h_ref.sum(1), atol=1e-12)
    # third order: d3/dx3 of x**4 = 24 x
    g3 = func.grad(lambda p: func.grad(lambda q: func.grad(lambda r: (r ** 4).sum())(q).sum())(p).sum())(x)
    np.testing.assert_allclose(g3.numpy(), 24 * a)
    # an inner transform that the outer one does not differentiate through is a constant
    c = T(RNG.standard_normal(3), grad=False)
    np.testing.assert_allclose(func.grad(lambda t: (t * func.grad(f)(c)).sum())(x).numpy(),
                               np.cos(c.numpy()) * c.numpy() + np.sin(c.numpy()))


def _wgan_gp_step(lib, nn_fn, D_params, real, fake, alpha, lam=10.0):
    """One critic loss with the gradient penalty of WGAN-GP; returns (loss, penalty)."""
    w1, b1, w2, b2 = D_params
    critic = lambda z: nn_fn.linear(nn_fn.leaky_relu(nn_fn.linear(z, w1, b1), 0.2), w2, b2)   # noqa: E731
    inter = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    d_inter = critic(inter)
    (grads,) = lib.autograd.grad(d_inter, inter, grad_outputs=lib.ones_like(d_inter), create_graph=True,
                                 retain_graph=True)
    penalty = ((grads.reshape(grads.shape[0], -1).norm(2, dim=1) - 1) ** 2).mean() * lam
    loss = critic(fake).mean() - critic(real).mean() + penalty
    loss.backward()
    return loss, penalty


def test_wgan_gp_penalty_step_matches_torch():
    torch = pytest.importorskip("torch")
    import torch.nn.functional as TF
    shapes = [(8, 5), (8,), (1, 8), (1,)]
    arrays = [RNG.standard_normal(s) * 0.5 for s in shapes]
    real, fake, alpha = RNG.standard_normal((4, 5)), RNG.standard_normal((4, 5)), RNG.uniform(size=(4, 1))
    mp = [md.tensor(a, dtype=md.float32, requires_grad=True) for a in arrays]
    tp = [torch.tensor(a, dtype=torch.float32, requires_grad=True) for a in arrays]
    m_loss, m_pen = _wgan_gp_step(md, F, mp, *(md.tensor(v, dtype=md.float32) for v in (real, fake, alpha)))
    t_loss, t_pen = _wgan_gp_step(torch, TF, tp, *(torch.tensor(v, dtype=torch.float32) for v in (real, fake, alpha)))
    np.testing.assert_allclose(m_pen.item(), t_pen.item(), rtol=1e-5)
    np.testing.assert_allclose(m_loss.item(), t_loss.item(), rtol=1e-5)
    for p, q in zip(mp, tp):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-6)


def _maml_step(lib, nn_fn, params, xs, ys, xq, yq, lr=0.1):
    """One MAML outer step: an inner SGD step with create_graph, then the query loss backward."""
    def model(p, x):
        return nn_fn.linear(nn_fn.gelu(nn_fn.linear(x, p[0], p[1])), p[2], p[3])
    inner = nn_fn.cross_entropy(model(params, xs), ys)
    grads = lib.autograd.grad(inner, params, create_graph=True)
    fast = [p - lr * g for p, g in zip(params, grads)]
    outer = nn_fn.mse_loss(model(fast, xq).softmax(1), nn_fn.one_hot(yq, 3).to(xq.dtype)) + \
        nn_fn.cross_entropy(model(fast, xq), yq)
    outer.backward()
    return outer


def test_maml_step_matches_torch():
    torch = pytest.importorskip("torch")
    import torch.nn.functional as TF
    shapes = [(6, 4), (6,), (3, 6), (3,)]
    arrays = [RNG.standard_normal(s) * 0.5 for s in shapes]
    xs, xq = RNG.standard_normal((5, 4)), RNG.standard_normal((5, 4))
    ys, yq = RNG.integers(0, 3, 5), RNG.integers(0, 3, 5)
    mp = [md.tensor(a, requires_grad=True) for a in arrays]
    tp = [torch.tensor(a, requires_grad=True) for a in arrays]
    m = _maml_step(md, F, mp, md.tensor(xs), md.tensor(ys), md.tensor(xq), md.tensor(yq))
    t = _maml_step(torch, TF, tp, torch.tensor(xs), torch.tensor(ys), torch.tensor(xq), torch.tensor(yq))
    np.testing.assert_allclose(m.item(), t.item(), rtol=1e-10)
    for p, q in zip(mp, tp):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-8, atol=1e-12)


def test_functional_second_order_matches_torch():
    torch = pytest.importorskip("torch")
    import torch.autograd.functional as TAF
    a, b, v = RNG.standard_normal(3), RNG.standard_normal((2, 3)), RNG.standard_normal(3)

    def f(lib):
        return lambda x, w: (lib.tanh(w @ x) ** 2).sum() + (x ** 3).sum()
    mh, th = functional.hessian(f(md), (T(a), T(b))), TAF.hessian(f(torch), (torch.tensor(a), torch.tensor(b)))
    for i in range(2):
        for j in range(2):
            np.testing.assert_allclose(mh[i][j].numpy(), th[i][j].numpy(), atol=1e-12)
    mv = functional.vhp(f(md), (T(a), T(b)), (T(v), T(b)), create_graph=True)[1]
    tv = TAF.vhp(f(torch), (torch.tensor(a), torch.tensor(b)), (torch.tensor(v), torch.tensor(b)),
                 create_graph=True)[1]
    for p, q in zip(mv, tv):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), atol=1e-12)
    mj = functional.jvp(lambda x: x.sin() * x, T(a), T(v), create_graph=True)[1]
    np.testing.assert_allclose(mj.detach().numpy(), (np.cos(a) * a + np.sin(a)) * v, atol=1e-12)
    with pytest.raises(RuntimeError, match="should return a single Tensor"):
        functional.hessian(lambda x: (x, x), T(a))
    with pytest.raises(RuntimeError, match="should contain a single element"):
        functional.vhp(lambda x: x * 2, T(a), T(v))
