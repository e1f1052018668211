"""Property-based tests: hypothesis draws the shapes, broadcast pairs, dims, indices and
memory layouts (transposed, sliced, reversed views), so stride and broadcasting bugs cannot
hide behind the shapes someone thought of. Forward results are compared with NumPy;
gradients with closed forms written independently here, or with finite differences."""
import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minidl as md
from minidl.autograd import gradcheck

# modest by default so the suite stays fast; MINIDL_HYPOTHESIS_EXAMPLES=500 for a deeper search
SETTINGS = settings(max_examples=int(os.environ.get("MINIDL_HYPOTHESIS_EXAMPLES", 30)), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=4)


@st.composite
def arrays(draw, shape, positive=False):
    """A float64 array of ``shape`` in one of several memory layouts: contiguous, transposed
    (a view of the reversed shape), strided (every other element of a larger array), or
    reversed along an axis. The values are distinct, so max has no ties."""
    layout = draw(st.sampled_from(["contiguous", "transposed", "strided", "reversed"]))
    n = int(np.prod(shape, dtype=np.int64))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    values = rng.permutation(np.linspace(-2, 2, max(2 * n, 2)))[:n]
    if positive:
        values = np.abs(values) + 0.5
    base = values.reshape(shape)
    if layout == "transposed" and base.ndim >= 2:
        a = np.ascontiguousarray(base.T).T
    elif layout == "strided" and base.ndim >= 1:
        big = np.zeros(shape[:-1] + (2 * shape[-1],))
        big[..., ::2] = base
        a = big[..., ::2]
    elif layout == "reversed" and base.ndim >= 1:
        a = np.ascontiguousarray(base[::-1])[::-1]
    else:
        a = base.copy()
    np.testing.assert_array_equal(a, base)
    return a


def leaf(a):
    """A leaf tensor sharing ``a``'s memory and strides (md.tensor would copy it contiguous)."""
    return md.from_numpy(a).requires_grad_()


def sum_to(g, shape):
    """Sum a broadcast gradient back to ``shape`` (the reference for unbroadcast)."""
    while g.ndim > len(shape):
        g = g.sum(axis=0)
    for axis, n in enumerate(shape):
        if n == 1 and g.shape[axis] != 1:
            g = g.sum(axis=axis, keepdims=True)
    return g


def cotangent(shape, seed=1):
    return np.random.default_rng(seed).standard_normal(shape)


# binary broadcasting ops -------------------------------------------------------------------------

BINARY = {
    "add": (lambda a, b: a + b, lambda a, b, g: (g, g)),
    "sub": (lambda a, b: a - b, lambda a, b, g: (g, -g)),
    "mul": (lambda a, b: a * b, lambda a, b, g: (g * b, g * a)),
    "div": (lambda a, b: a / b, lambda a, b, g: (g / b, -g * a / b ** 2)),
    "pow": (lambda a, b: a ** b, lambda a, b, g: (g * b * a ** (b - 1), g * a ** b * np.log(a))),
}


@SETTINGS
@given(st.sampled_from(sorted(BINARY)), hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=3),
       st.data())
def test_binary_broadcasting_ops(name, bshapes, data):
    op, grads = BINARY[name]
    (sa, sb), out_shape = bshapes.input_shapes, bshapes.result_shape
    positive = name in ("div", "pow")
    a = data.draw(arrays(sa, positive=positive), label="a")
    b = data.draw(arrays(sb, positive=positive), label="b")
    ta, tb = leaf(a), leaf(b)
    out = op(ta, tb)
    np.testing.assert_allclose(out.detach().numpy(), op(a, b), rtol=1e-12)
    assert out.shape == out_shape
    g = cotangent(out_shape)
    out.backward(md.tensor(g))
    ga, gb = grads(a, b, g)
    np.testing.assert_allclose(ta.grad.numpy(), sum_to(np.broadcast_to(ga, out_shape), sa), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(tb.grad.numpy(), sum_to(np.broadcast_to(gb, out_shape), sb), rtol=1e-10, atol=1e-12)


@SETTINGS
@given(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3), st.data())
def test_binary_ops_with_a_python_number(bshapes, data):
    a = data.draw(arrays(bshapes.input_shapes[0]))
    c = data.draw(st.floats(-3, 3, allow_nan=False))
    t = leaf(a)
    out = (c * t - t / 2.0 + 1.0) * t
    np.testing.assert_allclose(out.detach().numpy(), (c * a - a / 2 + 1) * a, rtol=1e-12, atol=1e-12)
    g = cotangent(a.shape)
    out.backward(md.tensor(g))
    np.testing.assert_allclose(t.grad.numpy(), g * (2 * c * a - a + 1), rtol=1e-10, atol=1e-12)


# reductions over random dims ------------------------------------------------------------------------

@st.composite
def reduction_case(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4))
    axes = draw(st.lists(st.integers(0, len(shape) - 1), unique=True, min_size=1, max_size=len(shape)))
    # as the user might write them: negative, an int, or a tuple, or None for all
    dims = [a - len(shape) if draw(st.booleans()) else a for a in axes]
    form = draw(st.sampled_from(["int", "tuple", "none"]))
    if form == "int":
        dim, axes = dims[0], (axes[0],)
    elif form == "tuple":
        dim = tuple(dims)
    else:
        dim, axes = None, tuple(range(len(shape)))
    return shape, dim, tuple(sorted(axes)), draw(st.booleans())


def _expand(g, shape, axes, keepdim):
    """Broadcast a reduced gradient back over the reduced axes."""
    if not keepdim:
        g = np.expand_dims(g, axes)
    return np.broadcast_to(g, shape)


@SETTINGS
@given(reduction_case(), st.sampled_from(["sum", "mean", "var", "var_biased", "max", "min"]), st.data())
def test_reductions(case, name, data):
    shape, dim, axes, keepdim = case
    x = data.draw(arrays(shape))
    t = leaf(x)
    n = int(np.prod([shape[a] for a in axes]))
    if name == "sum":
        out, ref = t.sum(dim, keepdim), x.sum(axis=axes, keepdims=keepdim)
    elif name == "mean":
        out, ref = t.mean(dim, keepdim), x.mean(axis=axes, keepdims=keepdim)
    elif name.startswith("var"):
        unbiased = name == "var"
        if unbiased and n == 1:
            return  # the unbiased variance of one element is undefined (nan), as in PyTorch
        out, ref = t.var(dim, unbiased, keepdim), x.var(axis=axes, ddof=int(unbiased), keepdims=keepdim)
    elif name == "max":
        out, ref = t.amax(dim, keepdim), x.max(axis=axes, keepdims=keepdim)
    else:
        out, ref = t.amin(dim, keepdim), x.min(axis=axes, keepdims=keepdim)
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-12, atol=1e-12)
    assert out.shape == np.shape(ref)
    g = cotangent(out.shape)
    out.backward(md.tensor(g))
    ge = _expand(g, shape, axes, keepdim)
    if name == "sum":
        expected = ge
    elif name == "mean":
        expected = ge / n
    elif name.startswith("var"):
        expected = ge * 2 * (x - x.mean(axis=axes, keepdims=True)) / (n - (name == "var"))
    else:  # the values are distinct: the whole gradient goes to the one extreme element
        extreme = _expand(ref, shape, axes, keepdim)
        expected = ge * (x == extreme)
    np.testing.assert_allclose(t.grad.numpy(), expected, rtol=1e-10, atol=1e-12)


# moving elements around -----------------------------------------------------------------------------

@SETTINGS
@given(shapes, st.data())
def test_permute_and_reshape(shape, data):
    x = data.draw(arrays(shape))
    perm = data.draw(st.permutations(range(len(shape))))
    t = leaf(x)
    p = t.permute(*perm)
    np.testing.assert_array_equal(p.detach().numpy(), x.transpose(perm))
    new_shape = data.draw(st.sampled_from([(-1,), tuple(reversed(p.shape)), (1,) + p.shape, (p.numel(), 1)]))
    r = p.reshape(*new_shape)
    np.testing.assert_array_equal(r.detach().numpy(), x.transpose(perm).reshape(new_shape))
    g = cotangent(r.shape)
    r.backward(md.tensor(g))
    np.testing.assert_array_equal(t.grad.numpy(), g.reshape(p.shape).transpose(np.argsort(perm)))


@SETTINGS
@given(shapes, st.data())
def test_views_through_ops_then_elementwise(shape, data):
    """Non-contiguous intermediates made by the graph itself (transpose, step slices) feeding
    elementwise ops and a reduction: checked against finite differences."""
    x = data.draw(arrays(shape))
    t = leaf(x)

    def f(u):
        if u.ndim >= 2:
            u = u.transpose(0, -1)
        if u.ndim >= 1:
            u = u[::-1] if u.shape[0] > 1 else u[::2]
        return (u.tanh() * u + u.sigmoid()).sum(dim=-1 if u.ndim else None)

    expected = f(md.tensor(x))  # same values from a contiguous copy
    np.testing.assert_allclose(f(t).detach().numpy(), expected.detach().numpy(), rtol=1e-12)
    assert gradcheck(f, (t,))


# matmul ---------------------------------------------------------------------------------------------

@st.composite
def matmul_shapes(draw):
    n, k, m = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    batch = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=2, max_side=3))
    ba, bb = batch.input_shapes
    sa = (k,) if draw(st.integers(0, 4)) == 0 else ba + (n, k)
    sb = (k,) if draw(st.integers(0, 4)) == 0 else bb + (k, m)
    return sa, sb


@SETTINGS
@given(matmul_shapes(), st.data())
def test_matmul(shapes_ab, data):
    sa, sb = shapes_ab
    a, b = data.draw(arrays(sa)), data.draw(arrays(sb))
    ta, tb = leaf(a), leaf(b)
    out = ta @ tb
    ref = np.matmul(a, b)
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-12, atol=1e-12)
    # closed form for the matrix case, promoting 1-D operands as matmul does
    g = cotangent(ref.shape)
    out.backward(md.tensor(g))
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    g2 = g.reshape(np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2]) + (a2.shape[-2], b2.shape[-1]))
    full = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    ga = sum_to(np.broadcast_to(g2 @ np.swapaxes(b2, -1, -2), full + a2.shape[-2:]), a2.shape).reshape(a.shape)
    gb = sum_to(np.broadcast_to(np.swapaxes(a2, -1, -2) @ g2, full + b2.shape[-2:]), b2.shape).reshape(b.shape)
    np.testing.assert_allclose(ta.grad.numpy(), ga, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(tb.grad.numpy(), gb, rtol=1e-10, atol=1e-12)


# getitem --------------------------------------------------------------------------------------------

@st.composite
def index_case(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
    kind = draw(st.sampled_from(["basic", "int array", "bool mask"]))
    if kind == "basic":
        index = draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    elif kind == "int array":  # repeated and negative indices along the first axis
        idx = draw(st.lists(st.integers(-shape[0], shape[0] - 1), min_size=1, max_size=6))
        form = draw(st.sampled_from(["list", "ndarray", "tensor"]))
        index = {"list": idx, "ndarray": np.array(idx), "tensor": md.tensor(idx)}[form]
        if len(shape) > 1 and draw(st.booleans()):
            index = (slice(None), np.array(draw(st.lists(st.integers(0, shape[1] - 1), min_size=1, max_size=4))))
    else:
        mask = draw(hnp.arrays(np.bool_, shape[:draw(st.integers(1, len(shape)))]))
        index = md.tensor(mask) if draw(st.booleans()) else mask
    return shape, index


def _np_index(index):
    if isinstance(index, md.Tensor):
        return index.numpy()
    if isinstance(index, list):
        return np.array(index)
    return index


@SETTINGS
@given(index_case(), st.data())
def test_getitem(case, data):
    shape, index = case
    x = data.draw(arrays(shape))
    t = leaf(x)
    out = t[index]
    ref = x[_np_index(index)]
    np.testing.assert_array_equal(out.detach().numpy(), ref)
    g = cotangent(ref.shape)
    out.backward(md.tensor(g))
    expected = np.zeros(shape)
    np.add.at(expected, _np_index(index), g)  # each pick of an element adds its gradient
    np.testing.assert_allclose(t.grad.numpy(), expected, rtol=1e-12, atol=1e-12)


@SETTINGS
@given(index_case(), st.data())
def test_getitem_gradcheck(case, data):
    shape, index = case
    t = leaf(data.draw(arrays(shape)))
    assert gradcheck(lambda u: u[index] * u[index], (t,))


# softmax --------------------------------------------------------------------------------------------

@SETTINGS
@given(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4), st.data(),
       st.sampled_from([0.0, 1e3, -1e3]))
def test_softmax_family(shape, data, shift):
    x = data.draw(arrays(shape)) + shift
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    t = leaf(x)
    s = x - x.max(axis=dim, keepdims=True)
    ref = np.exp(s) / np.exp(s).sum(axis=dim, keepdims=True)
    np.testing.assert_allclose(t.softmax(dim).detach().numpy(), ref, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(t.log_softmax(dim).detach().numpy(), np.log(ref), rtol=1e-10, atol=1e-12)
    g = cotangent(shape)
    t.softmax(dim).backward(md.tensor(g))
    np.testing.assert_allclose(t.grad.numpy(), ref * (g - (g * ref).sum(axis=dim, keepdims=True)),
                               rtol=1e-10, atol=1e-12)
