"""minidl.func's transforms (grad, grad_and_value, vjp, jacrev, jacfwd, vmap, stack_module_state,
hessian) and minidl.random's torch.random names (fork_rng, seed, initial_seed, default_generator,
Generator): values against NumPy references, gradcheck through vmap, PyTorch's errors for bad
input, the first-order limit, and torch.func / torch.random where torch is installed."""
from collections import namedtuple

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
import minidl.random as mdrandom
from minidl.autograd import gradcheck
from minidl.func import (functional_call, grad, grad_and_value, hessian, jacfwd, jacrev, stack_module_state, vjp,
                         vmap)

RNG = np.random.default_rng(7)


def T(a, **kw):
    return md.tensor(np.asarray(a), **kw)


def npy(t):
    return t.detach().numpy()


# grad / grad_and_value ------------------------------------------------------------------------

def test_grad_matches_closed_form():
    x, y = RNG.standard_normal(4), RNG.standard_normal(4)
    g = grad(lambda a, b: (a.sin() * b).sum())(T(x), T(y))
    np.testing.assert_allclose(npy(g), np.cos(x) * y, rtol=1e-12)
    assert g.dtype == md.float64 and not g.requires_grad


def test_grad_argnums_tuple_negative_and_unused_argument():
    x, y = RNG.standard_normal(3), RNG.standard_normal(3)
    gx, gy = grad(lambda a, b: (a * a * b).sum(), argnums=(0, 1))(T(x), T(y))
    np.testing.assert_allclose(npy(gx), 2 * x * y, rtol=1e-12)
    np.testing.assert_allclose(npy(gy), x * x, rtol=1e-12)
    np.testing.assert_allclose(npy(grad(lambda a, b: (a * b).sum(), argnums=-1)(T(x), T(y))), x, rtol=1e-12)
    np.testing.assert_array_equal(npy(grad(lambda a, b: b.sum())(T(x), T(y))), np.zeros(3))


def test_grad_of_pytree_argument_kwargs_and_aux():
    w, b, x = RNG.standard_normal((2, 3)), RNG.standard_normal(2), RNG.standard_normal(3)

    def loss(params, inp, scale=1.0):
        out = params["w"] @ inp + params["b"]
        return scale * (out ** 2).sum(), {"out": out}

    g, aux = grad(loss, has_aux=True)({"w": T(w), "b": T(b)}, T(x), scale=3.0)
    out = w @ x + b
    assert set(g) == {"w", "b"}
    np.testing.assert_allclose(npy(g["w"]), 6 * np.outer(out, x), rtol=1e-12)
    np.testing.assert_allclose(npy(g["b"]), 6 * out, rtol=1e-12)
    np.testing.assert_allclose(npy(aux["out"]), out, rtol=1e-12)
    assert not aux["out"].requires_grad
    (g2, (value, aux2)) = grad_and_value(loss, has_aux=True)({"w": T(w), "b": T(b)}, T(x))
    np.testing.assert_allclose(value.item(), (out ** 2).sum(), rtol=1e-12)
    assert not value.requires_grad and value.ndim == 0


def test_grad_runs_under_no_grad_and_leaves_inputs_alone():
    x = md.randn(3, requires_grad=True)
    with md.no_grad():
        g = grad(lambda a: (a * a).sum())(x)
    np.testing.assert_allclose(npy(g), 2 * npy(x), rtol=1e-6)
    assert x.grad is None


@pytest.mark.parametrize("fn, args, kw, err, match", [
    (lambda x: x * 2, (md.ones(3),), {}, RuntimeError, "scalar Tensor, got tensor with 1 dims"),
    (lambda x: x.sum().reshape(1), (md.ones(3),), {}, RuntimeError, "scalar Tensor, got tensor with 1 dims"),
    (lambda x: 3.0, (md.ones(3),), {}, RuntimeError, "Expected f\\(\\*args\\) to return a Tensor"),
    (lambda x: x.sum(), (3.0,), {}, ValueError, "Thing passed to transform API must be Tensor"),
    (lambda x: x.sum(), ([md.ones(2), 3.0],), {}, ValueError, "must be Tensor, got <class 'float'>"),
    (lambda x: x.sum(), (md.tensor([1, 2]),), {}, RuntimeError, "only Tensors of floating point dtype"),
    (lambda x: x.sum(), (md.ones(3),), {"argnums": 1}, RuntimeError, "Got argnum=1, but only 1 positional inputs"),
    (lambda x: x.sum(), (md.ones(3),), {"argnums": 1.0}, RuntimeError, "argnums must be int or Tuple"),
    (lambda x, y: x.sum(), (md.ones(3), md.ones(3)), {"argnums": (0, 0)}, RuntimeError, "must be unique"),
    (lambda x, y: x.sum(), (md.ones(3), md.ones(3)), {"argnums": ()}, RuntimeError, "must be non-empty"),
    (lambda x: x.sum(), (md.ones(3),), {"has_aux": True}, RuntimeError, "should be a tuple: \\(output, aux\\)"),
    (lambda x: (x.sum(), 1), (md.ones(3),), {"has_aux": True}, RuntimeError, "Expected tensors, got unsupported"),
])
def test_grad_bad_input(fn, args, kw, err, match):
    with pytest.raises(err, match=match):
        grad(fn, **kw)(*args)


# vjp ----------------------------------------------------------------------------------------

def test_vjp_values_reuse_and_tuple_outputs():
    W, x = RNG.standard_normal((3, 4)), RNG.standard_normal(4)
    out, fn = vjp(lambda w, a: (w @ a).tanh(), T(W), T(x))
    y = np.tanh(W @ x)
    np.testing.assert_allclose(npy(out), y, rtol=1e-12)
    assert not out.requires_grad
    for _ in range(2):      # the graph is kept between calls
        v = RNG.standard_normal(3)
        gw, gx = fn(T(v))
        d = v * (1 - y ** 2)
        np.testing.assert_allclose(npy(gw), np.outer(d, x), rtol=1e-12)
        np.testing.assert_allclose(npy(gx), W.T @ d, rtol=1e-12)
    (o1, o2), fn2, aux = vjp(lambda a: ((a * 2, a.sum()), a.exp()), T(x), has_aux=True)
    (g,) = fn2((T(np.ones(4)), T(np.array(3.0))))
    np.testing.assert_allclose(npy(g), 2 + 3 * np.ones(4), rtol=1e-12)
    np.testing.assert_allclose(npy(aux), np.exp(x), rtol=1e-12)


def test_vjp_bad_input():
    out, fn = vjp(lambda a: (a * 2, a), md.ones(3))
    with pytest.raises(RuntimeError, match=r"structure of cotangents.*cotangents: \*, primal output: \(\*, \*\)"):
        fn(md.ones(3))
    with pytest.raises(RuntimeError, match="cotangents: \\[\\*, \\*\\], primal output"):
        fn([md.ones(3), md.ones(3)])
    with pytest.raises(RuntimeError, match=r"Mismatch in shape: grad_output\[1\] has a shape of"):
        fn((md.ones(3), md.ones(2)))
    with pytest.raises(TypeError, match="gradients can be either Tensors or None, but got float"):
        fn((md.ones(3), 2.0))
    with pytest.raises(RuntimeError, match="expected f\\(\\*primals\\) to return only tensors"):
        vjp(lambda a: (a, 3), md.ones(3))
    with pytest.raises(RuntimeError, match="All outputs of f must be floating-point"):
        vjp(lambda a: a.int(), md.ones(3))
    with pytest.raises(RuntimeError, match="should be a tuple: \\(output, aux\\)"):
        vjp(lambda a: a * 2, md.ones(3), has_aux=True)
    v = md.ones(3, requires_grad=True)
    (g,) = fn((v, v * 2), create_graph=True)      # a product that keeps its graph (here, to the cotangents)
    assert g.grad_fn is not None
    np.testing.assert_allclose(npy(g.detach()), [4.0, 4.0, 4.0])


# jacrev / jacfwd ----------------------------------------------------------------------------

@pytest.mark.parametrize("jac", [jacrev, jacfwd])
def test_jacobian_closed_form(jac):
    W, x = RNG.standard_normal((2, 3)), RNG.standard_normal(3)
    J = jac(lambda a, w: w @ a.sin(), argnums=0)(T(x), T(W))
    np.testing.assert_allclose(npy(J), W * np.cos(x), rtol=1e-12)
    Jx, Jw = jac(lambda a, w: w @ a.sin(), argnums=(0, 1))(T(x), T(W))
    assert tuple(Jw.shape) == (2, 2, 3)
    ref = np.zeros((2, 2, 3))
    ref[0, 0], ref[1, 1] = np.sin(x), np.sin(x)
    np.testing.assert_allclose(npy(Jw), ref, rtol=1e-12)
    np.testing.assert_allclose(npy(Jx), W * np.cos(x), rtol=1e-12)


@pytest.mark.parametrize("jac", [jacrev, jacfwd])
def test_jacobian_nesting_and_aux(jac):
    x, y = T(RNG.standard_normal(3)), T(RNG.standard_normal(2))
    res = jac(lambda a, b: {"p": a.sum() * b, "q": (a[:2] * b).sum()}, argnums=(0, 1))(x, y)
    shapes = {k: tuple(tuple(t.shape) for t in v) for k, v in res.items()}
    assert shapes == {"p": ((2, 3), (2, 2)), "q": ((3,), (2,))}
    np.testing.assert_allclose(npy(res["q"][1]), npy(x)[:2], rtol=1e-12)
    J, aux = jac(lambda d: ((d["a"] * 2, d["b"]), d["a"].sum()), has_aux=True)({"a": x, "b": y})
    assert tuple(J[0]["a"].shape) == (3, 3) and tuple(J[1]["a"].shape) == (2, 3)
    np.testing.assert_array_equal(npy(J[0]["a"]), 2 * np.eye(3))
    np.testing.assert_array_equal(npy(J[0]["b"]), np.zeros((3, 2)))
    np.testing.assert_allclose(aux.item(), npy(x).sum(), rtol=1e-12)
    assert tuple(jac(lambda a: a.sum())(x).shape) == (3,) and tuple(jac(lambda a: a * 2)(md.tensor(2.0)).shape) == ()


def test_jacobian_dtypes_and_randomness():
    x32 = md.randn(3)
    assert jacrev(lambda a: a.double() * 2)(x32).dtype == md.float32      # the input's dtype
    assert jacfwd(lambda a: a.double() * 2)(x32).dtype == md.float64      # the output's, as forward mode
    z = jacfwd(lambda a: (a > 0).int())(x32)
    assert z.dtype == md.int32 and not npy(z).any()
    with pytest.raises(RuntimeError, match="called random operation while in randomness error mode"):
        jacfwd(lambda a: a * md.rand(3))(x32)
    J = jacfwd(lambda a: a * md.rand(3), randomness="same")(x32)
    assert np.count_nonzero(npy(J)) == 3
    jacrev(lambda a: a * md.rand(3))(x32)     # reverse mode never vmaps: draws are fine
    with pytest.raises(RuntimeError, match="Only allowed values for randomness"):
        jacfwd(lambda a: a, randomness="bad")(x32)
    with pytest.raises(ValueError, match="`chunk_size` should be greater than 0"):
        jacrev(lambda a: a, chunk_size=0)
    with pytest.raises(ValueError, match="Expected primal to be floating point"):
        jacfwd(lambda a: a * 2)(md.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="jvp\\(f, primals, tangents\\): expected f"):
        jacfwd(lambda a: 3)(x32)
    with pytest.raises(RuntimeError, match="vjp\\(f, \\*primals\\): expected f"):
        jacrev(lambda a: 3)(x32)


# derivatives of derivatives ------------------------------------------------------------------

def test_second_order_through_nested_transforms():
    x = md.randn(3, dtype=md.float64)
    c = np.cos(npy(x))
    f = lambda a: a.sin().sum()     # noqa: E731
    hess = -np.diag(np.sin(npy(x)))
    cases = [(lambda: hessian(f)(x), hess), (lambda: grad(lambda a: grad(f)(a).sum())(x), hess.sum(1)),
             (lambda: jacrev(grad(f))(x), hess), (lambda: jacfwd(jacrev(f))(x), hess),
             (lambda: grad(lambda a: vjp(f, a)[0])(x), c),
             (lambda: grad(lambda w: grad(lambda a: (w * a).sum())(x).sum())(md.randn(3, dtype=md.float64)),
              np.ones(3)),
             (lambda: grad(lambda v: vjp(lambda a: a.sin(), x)[1](v)[0].sum())(md.randn(3, dtype=md.float64)), c),
             (lambda: grad(lambda a: vmap(grad(f))(a.reshape(1, 3)).sum())(x), hess.sum(1))]
    for call, expected in cases:
        np.testing.assert_allclose(npy(call()), expected, rtol=1e-12, atol=1e-15)
    # an inner transform that the outer one does not differentiate through is fine
    c = md.randn(3)
    g = grad(lambda a: (a * grad(f)(c)).sum())(x)
    np.testing.assert_allclose(npy(g), np.cos(npy(c)), rtol=1e-6)
    # an op without a differentiable backward on the way raises, naming it
    with pytest.raises(NotImplementedError, match=r"EmbeddingBagBackward0 has no differentiable backward"):
        hessian(lambda a: F.embedding_bag(md.tensor([0, 1]), a.reshape(3, 1), md.tensor([0])).sum() ** 2)(x)


# vmap ---------------------------------------------------------------------------------------

def test_vmap_in_dims_out_dims_and_kwargs():
    x, y = RNG.standard_normal((3, 4)), RNG.standard_normal(4)
    z = RNG.standard_normal(3)
    out = vmap(lambda a, b, scale=1.0: (a * b).sum() * scale, in_dims=(1, None))(T(x), T(z), scale=2.0)
    np.testing.assert_allclose(npy(out), 2 * z @ x, rtol=1e-12)     # element i: column i of x
    a, s = vmap(lambda t: (t * 2, t.sum()), out_dims=(1, 0))(T(x))
    np.testing.assert_allclose(npy(a), (2 * x).T, rtol=1e-12)
    np.testing.assert_allclose(npy(s), x.sum(1), rtol=1e-12)
    assert tuple(vmap(lambda t: t, out_dims=-1)(T(x)).shape) == (4, 3)
    res = vmap(lambda d: {"p": d["a"] * d["b"], "q": [d["a"]]}, in_dims=({"a": 0, "b": None},))(
        {"b": T(y), "a": T(x)})
    np.testing.assert_allclose(npy(res["p"]), x * y, rtol=1e-12)
    assert isinstance(res["q"], list) and tuple(res["q"][0].shape) == (3, 4)
    P = namedtuple("P", "u v")
    r = vmap(lambda p: p.u + p.v, in_dims=(P(0, 1),))(P(T(x), T(x.T)))
    np.testing.assert_allclose(npy(r), 2 * x, rtol=1e-12)
    t, n = vmap(lambda q: (q, y.shape[0]), out_dims=(0, None))(T(x))
    assert n == 4 and tuple(t.shape) == (3, 4)
    const = T(y)
    assert vmap(lambda q: const * 2, out_dims=None)(T(x)).shape == (4,)
    assert tuple(vmap(lambda q: q.sum(0))(md.zeros(0, 5)).shape) == (0,)


def test_vmap_nested_matches_einsum():
    A, B = RNG.standard_normal((3, 4)), RNG.standard_normal((5, 4))
    dot = lambda a, b: (a * b).sum()    # noqa: E731
    out = vmap(vmap(dot, in_dims=(None, 0)), in_dims=(0, None))(T(A), T(B))
    np.testing.assert_allclose(npy(out), A @ B.T, rtol=1e-12)


def test_vmap_gradients_flow_and_gradcheck():
    x = md.tensor(RNG.standard_normal((4, 3)), requires_grad=True)
    w = md.tensor(RNG.standard_normal(3), requires_grad=True)
    out = vmap(lambda a, b: (a * b).tanh().sum(), in_dims=(0, None))(x, w)
    out.sum().backward()
    d = 1 - np.tanh(npy(x) * npy(w)) ** 2
    np.testing.assert_allclose(x.grad.numpy(), d * npy(w), rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), (d * npy(x)).sum(0), rtol=1e-12)
    assert gradcheck(lambda a, b: vmap(lambda p, q: (p * q).sin(), in_dims=(1, None), out_dims=1)(a, b),
                     (md.tensor(RNG.standard_normal((2, 3)), requires_grad=True),
                      md.tensor(RNG.standard_normal(2), requires_grad=True)))


def test_per_sample_gradients_with_vmap_of_grad():
    X, y, w = RNG.standard_normal((5, 3)), RNG.standard_normal(5), RNG.standard_normal(3)
    per = vmap(grad(lambda wt, xi, yi: ((wt * xi).sum() - yi) ** 2), in_dims=(None, 0, 0))(T(w), T(X), T(y))
    np.testing.assert_allclose(npy(per), 2 * (X @ w - y)[:, None] * X, rtol=1e-12)


def test_vmap_randomness_modes():
    x = md.zeros(4)
    with pytest.raises(RuntimeError, match="called random operation while in randomness error mode"):
        vmap(lambda t: t + md.rand(()))(x)
    md.manual_seed(3)
    same = npy(vmap(lambda t: t + md.rand(()), randomness="same")(x))
    after_same = md.rand(2).numpy()
    md.manual_seed(3)
    first = md.rand(()).item()
    assert np.all(same == np.float32(first)) and np.array_equal(md.rand(2).numpy(), after_same)
    md.manual_seed(3)
    diff = npy(vmap(lambda t: t + md.rand(()), randomness="different")(x))
    md.manual_seed(3)
    np.testing.assert_array_equal(diff, [md.rand(()).item() for _ in range(4)])
    md.rand(1)      # drawing works again after the error-mode vmap
    with pytest.raises(RuntimeError, match="Only allowed values for randomness are"):
        vmap(lambda t: t, randomness="x")


@pytest.mark.parametrize("call, err, match", [
    (lambda: vmap(lambda a, b: a * b)(md.ones(2, 3), md.ones(3)), ValueError,
     r"same size in the mapped dimension, got sizes \[2, 3\]"),
    (lambda: vmap(lambda a, b: a * b, in_dims=(0, 3))(md.ones(2, 3), md.ones(3)), ValueError,
     "Got in_dim=3 for some input, but that input is a Tensor of dimensionality 1"),
    (lambda: vmap(lambda a, b: a * b, in_dims=(None, None))(md.ones(2), md.ones(2)), ValueError,
     "Expected at least one Tensor to vmap over"),
    (lambda: vmap(lambda a, b: a, in_dims=[0, None])(md.ones(2), md.ones(2)), ValueError,
     "expected `in_dims` to be int or a \\(potentially nested\\) tuple"),
    (lambda: vmap(lambda a, b: a, in_dims=(0,))(md.ones(2), md.ones(2)), ValueError,
     "in_dims is not compatible with the structure of `inputs`"),
    (lambda: vmap(lambda d: d["a"], in_dims=({"a": 0},))({"a": md.ones(2), "b": md.ones(2)}), ValueError,
     "in_dims is not compatible with the structure of `inputs`"),
    (lambda: vmap(lambda a, b: a, in_dims=(0.5, 0))(md.ones(2), md.ones(2)), ValueError,
     "in_dim must be either an integer dimension or None"),
    (lambda: vmap(lambda a, n: a * n)(md.ones(2), 3), ValueError,
     "We cannot vmap over non-Tensor arguments, please use None"),
    (lambda: vmap(lambda a: a)(), ValueError, "got no inputs"),
    (lambda: vmap(lambda a: 3)(md.ones(2)), ValueError, "must only return Tensors, got type <class 'int'>"),
    (lambda: vmap(lambda a: (a, a), out_dims=(0, None))(md.arange(2.0)), ValueError,
     "can not return a BatchedTensor when out_dim is None"),
    (lambda: vmap(lambda a: (a, a), out_dims=(1,))(md.ones(2)), ValueError,
     "out_dims is not compatible with the structure of `outputs`"),
    (lambda: vmap(lambda a: a, out_dims=0.5)(md.ones(2)), ValueError, "`out_dims` must be an int, None"),
    (lambda: vmap(lambda a: a, out_dims=2)(md.ones(2, 3)), IndexError, "Dimension out of range"),
    (lambda: vmap(lambda a: a, chunk_size=0), ValueError, "chunk_size should be None or greater than 0"),
])
def test_vmap_bad_input(call, err, match):
    with pytest.raises(err, match=match):
        call()


# stack_module_state -------------------------------------------------------------------------

def test_stack_module_state_ensemble():
    models = [nn.Linear(3, 2).double() for _ in range(4)]
    models[0].register_buffer("count", md.tensor(1))
    for i, m in enumerate(models[1:]):
        m.register_buffer("count", md.tensor(i + 2))
    params, buffers = stack_module_state(models)
    assert set(params) == {"weight", "bias"} and tuple(params["weight"].shape) == (4, 2, 3)
    assert params["weight"].is_leaf and params["weight"].requires_grad and not buffers["count"].requires_grad
    np.testing.assert_array_equal(npy(buffers["count"]), [1, 2, 3, 4])
    x = RNG.standard_normal((5, 3))
    out = vmap(lambda p, b, inp: functional_call(models[0], (p, b), (inp,)), in_dims=(0, 0, None))(
        params, buffers, T(x))
    ref = np.stack([x @ npy(m.weight).T + npy(m.bias) for m in models])
    np.testing.assert_allclose(npy(out), ref, rtol=1e-12)
    out.sum().backward()
    np.testing.assert_allclose(params["bias"].grad.numpy(), np.full((4, 2), 5.0))
    assert models[0].weight.grad is None
    with pytest.raises(RuntimeError, match="Expected at least one model, got 0"):
        stack_module_state([])
    with pytest.raises(RuntimeError, match="same training/eval mode"):
        stack_module_state([nn.Linear(2, 2), nn.Linear(2, 2).eval()])
    with pytest.raises(RuntimeError, match="same class"):
        stack_module_state([nn.Linear(2, 2), nn.Tanh()])
    frozen = nn.Linear(2, 2)
    frozen.bias.requires_grad_(False)
    with pytest.raises(RuntimeError, match="Expected bias from each model to have the same .requires_grad"):
        stack_module_state([nn.Linear(2, 2), frozen])


# minidl.random ------------------------------------------------------------------------------

def test_random_names_are_the_top_level_objects():
    assert mdrandom.seed is md.seed and mdrandom.initial_seed is md.initial_seed
    assert mdrandom.Generator is md.Generator and mdrandom.default_generator is md.default_generator
    assert mdrandom.get_rng_state is md.get_rng_state and mdrandom.set_rng_state is md.set_rng_state
    assert {"fork_rng", "seed", "initial_seed", "default_generator"} <= set(dir(mdrandom))
    assert mdrandom.manual_seed(-5) is md.default_generator and md.initial_seed() == 2 ** 64 - 5
    s = mdrandom.seed()
    assert isinstance(s, int) and md.initial_seed() == s
    a = md.rand(3).numpy()
    md.manual_seed(s)
    np.testing.assert_array_equal(md.rand(3).numpy(), a)


def test_fork_rng_restores_state_and_seed():
    md.manual_seed(11)
    ref = md.rand(4).numpy()
    md.manual_seed(11)
    with mdrandom.fork_rng():
        md.rand(10)
        md.manual_seed(99)
        assert md.initial_seed() == 99
        md.randn(3)
    assert md.initial_seed() == 11
    np.testing.assert_array_equal(md.rand(4).numpy(), ref)
    md.manual_seed(11)
    with pytest.raises(KeyError):
        with mdrandom.fork_rng(devices=iter([0])):
            md.rand(5)
            raise KeyError("body failed")
    np.testing.assert_array_equal(md.rand(4).numpy(), ref)
    md.manual_seed(11)
    with mdrandom.fork_rng(enabled=False):
        md.rand(1)
    assert not np.array_equal(md.rand(4).numpy(), ref)


# against torch ------------------------------------------------------------------------------

def test_transforms_match_torch_func():
    torch = pytest.importorskip("torch")
    tf = torch.func
    x, W = RNG.standard_normal(4), RNG.standard_normal((3, 4))
    f_md = lambda a, w: (w @ a).tanh()                       # noqa: E731
    f_t = lambda a, w: torch.tanh(w @ a)                      # noqa: E731
    xs, Ws = (T(x), T(W)), (torch.tensor(x), torch.tensor(W))
    for ours, theirs in ((jacrev(f_md, argnums=(0, 1))(*xs), tf.jacrev(f_t, argnums=(0, 1))(*Ws)),
                         (jacfwd(f_md, argnums=(0, 1))(*xs), tf.jacfwd(f_t, argnums=(0, 1))(*Ws))):
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(npy(a), b.numpy(), rtol=1e-10)
    g = grad(lambda a, w: f_md(a, w).sum(), argnums=1)(*xs)
    np.testing.assert_allclose(npy(g), tf.grad(lambda a, w: f_t(a, w).sum(), argnums=1)(*Ws).numpy(), rtol=1e-10)
    v = RNG.standard_normal(3)
    ours = vjp(f_md, *xs)[1](T(v))
    theirs = tf.vjp(f_t, *Ws)[1](torch.tensor(v))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(npy(a), b.numpy(), rtol=1e-10)
    X = RNG.standard_normal((4, 2, 5))
    ours = vmap(lambda a: (a.sum(0), a.T), in_dims=2, out_dims=(0, -1))(T(X))
    theirs = tf.vmap(lambda a: (a.sum(0), a.T), in_dims=2, out_dims=(0, -1))(torch.tensor(X))
    for a, b in zip(ours, theirs):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(npy(a), b.numpy(), rtol=1e-12)


def test_gradients_through_vmap_match_torch():
    torch = pytest.importorskip("torch")
    X, w = RNG.standard_normal((6, 3)), RNG.standard_normal(3)
    xm, wm = T(X, requires_grad=True), T(w, requires_grad=True)
    xt, wt = torch.tensor(X, requires_grad=True), torch.tensor(w, requires_grad=True)
    vmap(lambda a, b: (a * b).sin().sum(), in_dims=(0, None))(xm, wm).pow(2).sum().backward()
    torch.func.vmap(lambda a, b: (a * b).sin().sum(), in_dims=(0, None))(xt, wt).pow(2).sum().backward()
    np.testing.assert_allclose(xm.grad.numpy(), xt.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(wm.grad.numpy(), wt.grad.numpy(), rtol=1e-10)


def test_errors_match_torch_messages():
    torch = pytest.importorskip("torch")
    cases = [
        (lambda F, m: F.grad(lambda a: a * 2)(m.ones(3))),
        (lambda F, m: F.grad(lambda a: a.sum(), argnums=(0, 0))(m.ones(3))),
        (lambda F, m: F.vmap(lambda a, b: a * b)(m.ones(2, 3), m.ones(3))),
        (lambda F, m: F.vmap(lambda a: 3)(m.ones(2))),
        (lambda F, m: F.vmap(lambda a: a, chunk_size=-1)),
        (lambda F, m: F.jacfwd(lambda a: a, randomness="bad")(m.ones(2))),
        (lambda F, m: F.vjp(lambda a: (a * 2, a), m.ones(3))[1](m.ones(3))),
        (lambda F, m: F.vjp(lambda a: a * 2, m.ones(3))[1](m.ones(2))),
        (lambda F, m: F.vmap(lambda a, b: a, in_dims=(0.5, 0))(m.ones(2), m.ones(2))),
        (lambda F, m: F.vmap(lambda a: (a, a), out_dims=(0, None))(m.arange(2.0))),
    ]
    import minidl.func as mdfunc
    for case in cases:
        with pytest.raises(Exception) as ours:
            case(mdfunc, md)
        with pytest.raises(Exception) as theirs:
            case(torch.func, torch)
        assert type(ours.value) is type(theirs.value)
        assert str(ours.value).replace("minidl.", "torch.") == str(theirs.value)    # minidl.Size: torch.Size


def test_fork_rng_signature_matches_torch():
    torch = pytest.importorskip("torch")
    import inspect
    ours = inspect.signature(mdrandom.fork_rng).parameters
    theirs = inspect.signature(torch.random.fork_rng).parameters
    for name in ("devices", "enabled", "device_type"):
        assert ours[name].default == theirs[name].default


def test_vmap_is_also_at_the_top_level():
    assert md.vmap is vmap
    np.testing.assert_allclose(md.vmap(lambda x: x.sum())(md.ones(3, 2)).numpy(), [2.0, 2.0, 2.0])
