"""Every differentiable core op, through the declarative harness (minidl.testing):
forward against a NumPy reference in float32 and float64, and gradcheck in float64 over
several shapes, including size-1 and broadcast dimensions."""
import numpy as np
import pytest

import minidl as md
from minidl.autograd import Function, GradcheckError
from minidl.testing import OpSpec, check_forward, check_gradcheck, forward_cases, spec_id


def _shape_id(shapes):
    return ",".join("x".join(map(str, s)) or "scalar" for s in shapes)


def _randn(*shapes, low=None):
    """inputs(rng) drawing standard normals of the given shapes; ``low`` shifts them to
    positive values (for log, sqrt, a base of **)."""
    def make(rng):
        arrays = [rng.standard_normal(s) for s in shapes]
        if low is not None:
            arrays = [np.abs(a) + low for a in arrays]
        return tuple(np.asarray(a, dtype=np.float64) for a in arrays)
    return make


def _specs_over(name, op, reference, shape_sets, low=None, **kw):
    return [OpSpec(name=f"{name}[{_shape_id(shapes)}]", op=op, reference=reference,
                   inputs=_randn(*shapes, low=low), **kw)
            for shapes in shape_sets]


# shapes for binary broadcasting ops: equal, trailing broadcast, size-1 on both sides,
# a new leading axis, and a 0-d operand
BINARY_SHAPES = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 4)), ((1,), (2, 3)),
                 ((2, 1, 3), (2, 4, 1)), ((), (2, 3))]
UNARY_SHAPES = [(5,), (3, 4), (2, 1, 3), ()]


def _softmax_ref(x, dim):
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


def _log_softmax_ref(x, dim):
    s = x - x.max(axis=dim, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=dim, keepdims=True))


def _relu_ref(x):
    return np.maximum(x, 0)


def _sigmoid_ref(x):
    return 1 / (1 + np.exp(-x))


SPECS = []

# broadcasting arithmetic -------------------------------------------------------------
SPECS += _specs_over("add", lambda a, b: a + b, np.add, BINARY_SHAPES)
SPECS += _specs_over("sub", lambda a, b: a - b, np.subtract, BINARY_SHAPES)
SPECS += _specs_over("mul", lambda a, b: a * b, np.multiply, BINARY_SHAPES)
SPECS += _specs_over("div", lambda a, b: a / b, np.divide, BINARY_SHAPES, low=0.5)
SPECS += _specs_over("pow", lambda a, b: a ** b, np.power, BINARY_SHAPES, low=0.5)
SPECS += _specs_over("pow_scalar_exponent", lambda a: a ** 3, lambda a: a ** 3, [[(3, 4)], [()]])
SPECS += _specs_over("pow_scalar_base", lambda a: 2.5 ** a, lambda a: 2.5 ** a, [[(3, 4)]])
SPECS += _specs_over("rsub_number", lambda a: 1.5 - a, lambda a: 1.5 - a, [[(3, 4)]])
SPECS += _specs_over("rdiv_number", lambda a: 2.0 / a, lambda a: 2.0 / a, [[(3, 4)]], low=0.5)
SPECS += _specs_over("neg", lambda a: -a, np.negative, [[s] for s in UNARY_SHAPES])

# elementwise ---------------------------------------------------------------------------
for _name, _op, _ref, _low in [
        ("exp", lambda x: x.exp(), np.exp, None),
        ("log", lambda x: x.log(), np.log, 0.2),
        ("sqrt", lambda x: x.sqrt(), np.sqrt, 0.2),
        ("tanh", lambda x: x.tanh(), np.tanh, None),
        ("sigmoid", lambda x: x.sigmoid(), _sigmoid_ref, None),
        ("relu", lambda x: x.relu(), _relu_ref, None),
        ("abs", lambda x: x.abs(), np.abs, None),
        ("clamp", lambda x: x.clamp(-0.5, 0.7), lambda x: np.clip(x, -0.5, 0.7), None),
        ("clamp_min", lambda x: x.clamp(min=0.1), lambda x: np.maximum(x, 0.1), None),
        ("clone", lambda x: x.clone(), np.copy, None)]:
    SPECS += _specs_over(_name, _op, _ref, [[s] for s in UNARY_SHAPES], low=_low)

# reductions ----------------------------------------------------------------------------
for _dim, _keep in [(None, False), (1, False), (-1, True), ((0, 2), False), ((0, 2), True)]:
    _tag = f"dim={_dim},keepdim={_keep}"
    SPECS += _specs_over(f"sum({_tag})", lambda x, d=_dim, k=_keep: x.sum(d, k),
                         lambda x, d=_dim, k=_keep: x.sum(axis=d, keepdims=k), [[(2, 3, 4)], [(1, 3, 1)]])
    SPECS += _specs_over(f"mean({_tag})", lambda x, d=_dim, k=_keep: x.mean(d, k),
                         lambda x, d=_dim, k=_keep: x.mean(axis=d, keepdims=k), [[(2, 3, 4)], [(1, 3, 1)]])
    SPECS += _specs_over(f"amax({_tag})", lambda x, d=_dim, k=_keep: x.amax(d, k),
                         lambda x, d=_dim, k=_keep: x.max(axis=d, keepdims=k), [[(2, 3, 4)], [(1, 3, 1)]])
    SPECS += _specs_over(f"amin({_tag})", lambda x, d=_dim, k=_keep: x.amin(d, k),
                         lambda x, d=_dim, k=_keep: x.min(axis=d, keepdims=k), [[(2, 3, 4)]])
    for _unbiased in (True, False):
        SPECS += _specs_over(f"var({_tag},unbiased={_unbiased})",
                             lambda x, d=_dim, k=_keep, u=_unbiased: x.var(d, u, k),
                             lambda x, d=_dim, k=_keep, u=_unbiased: x.var(axis=d, ddof=int(u), keepdims=k),
                             [[(2, 3, 4)]])
SPECS += _specs_over("sum(0-d,dim=0)", lambda x: x.sum(0), lambda x: x, [[()]])
SPECS += _specs_over("std(dim=1)", lambda x: x.std(1), lambda x: x.std(axis=1, ddof=1), [[(3, 4)]])

# shapes --------------------------------------------------------------------------------
SPECS += [
    OpSpec("reshape", lambda x: x.reshape(4, 6), lambda x: x.reshape(4, 6), _randn((2, 3, 4))),
    OpSpec("reshape(-1)", lambda x: x.reshape(-1, 3), lambda x: x.reshape(-1, 3), _randn((2, 3, 1))),
    OpSpec("view(tuple)", lambda x: x.view((3, 8)), lambda x: x.reshape(3, 8), _randn((2, 3, 4))),
    OpSpec("transpose", lambda x: x.transpose(0, 2), lambda x: x.swapaxes(0, 2), _randn((2, 3, 4))),
    OpSpec("transpose(neg)", lambda x: x.transpose(-1, -2), lambda x: x.swapaxes(-1, -2), _randn((3, 4))),
    OpSpec("permute", lambda x: x.permute(2, 0, 1), lambda x: x.transpose(2, 0, 1), _randn((2, 3, 4))),
    OpSpec("T", lambda x: x.T, lambda x: x.T, _randn((3, 4))),
    OpSpec("unsqueeze", lambda x: x.unsqueeze(1), lambda x: x[:, None], _randn((3, 4))),
    OpSpec("unsqueeze(-1)", lambda x: x.unsqueeze(-1), lambda x: x[..., None], _randn((3, 4))),
    OpSpec("squeeze", lambda x: x.squeeze(), lambda x: x.squeeze(), _randn((3, 1, 4, 1))),
    OpSpec("squeeze(dim)", lambda x: x.squeeze(1), lambda x: x.squeeze(1), _randn((3, 1, 4, 1))),
    OpSpec("flatten", lambda x: x.flatten(), lambda x: x.reshape(-1), _randn((2, 3, 4))),
    OpSpec("flatten(1)", lambda x: x.flatten(1), lambda x: x.reshape(2, -1), _randn((2, 3, 4))),
    OpSpec("expand", lambda x: x.expand(2, 3, 4), lambda x: np.broadcast_to(x, (2, 3, 4)), _randn((3, 1))),
    OpSpec("to(float64)", lambda x: x.double() * 1.0, lambda x: x, _randn((3, 4)), dtypes=("float64",)),
]

# indexing ------------------------------------------------------------------------------
_IDX = np.array([2, 0, 2, 2])  # repeated indices: their gradients must accumulate
_MASK = np.array([[True, False, True, True], [False, False, True, False], [True, True, False, False]])
SPECS += [
    OpSpec("getitem(int)", lambda x: x[1], lambda x: x[1], _randn((3, 4))),
    OpSpec("getitem(neg int)", lambda x: x[-1, 2], lambda x: x[-1, 2], _randn((3, 4))),
    OpSpec("getitem(slice)", lambda x: x[1:, ::2], lambda x: x[1:, ::2], _randn((3, 4))),
    OpSpec("getitem(None,ellipsis)", lambda x: x[None, ..., 1], lambda x: x[None, ..., 1], _randn((2, 3, 4))),
    OpSpec("getitem(list)", lambda x: x[[2, 0, 2, 2]], lambda x: x[_IDX], _randn((3, 4))),
    OpSpec("getitem(ndarray)", lambda x: x[:, _IDX], lambda x: x[:, _IDX], _randn((3, 4))),
    OpSpec("getitem(int64 tensor)", lambda x: x[md.tensor(_IDX)], lambda x: x[_IDX], _randn((3, 4))),
    OpSpec("getitem(two arrays)", lambda x: x[[0, 2, 0], [1, 3, 1]], lambda x: x[[0, 2, 0], [1, 3, 1]],
           _randn((3, 4))),
    OpSpec("getitem(bool mask)", lambda x: x[md.tensor(_MASK)], lambda x: x[_MASK], _randn((3, 4))),
    OpSpec("getitem(bool rows)", lambda x: x[[True, False, True]], lambda x: x[[True, False, True]],
           _randn((3, 4))),
]

# joining and selection -----------------------------------------------------------------
_COND = np.array([[True, False, True, False]])
SPECS += [
    OpSpec("cat(dim=0)", lambda a, b: md.cat([a, b]), lambda a, b: np.concatenate([a, b]), _randn((2, 3), (1, 3))),
    OpSpec("cat(dim=-1)", lambda a, b, c: md.cat([a, b, c], dim=-1), lambda a, b, c: np.concatenate([a, b, c], -1),
           _randn((2, 1), (2, 3), (2, 2))),
    OpSpec("stack(dim=0)", lambda a, b: md.stack([a, b]), lambda a, b: np.stack([a, b]), _randn((2, 3), (2, 3))),
    OpSpec("stack(dim=-1)", lambda a, b: md.stack([a, b], -1), lambda a, b: np.stack([a, b], -1),
           _randn((2, 3), (2, 3))),
    OpSpec("where(broadcast)", lambda a, b: md.where(md.tensor(_COND), a, b), lambda a, b: np.where(_COND, a, b),
           _randn((3, 4), (3, 1))),
    OpSpec("where(number)", lambda a: md.where(md.tensor(_COND), a, 0.0), lambda a: np.where(_COND, a, 0.0),
           _randn((2, 4))),
    OpSpec("masked_fill", lambda a: a.masked_fill(md.tensor(_COND), -1.0), lambda a: np.where(_COND, -1.0, a),
           _randn((3, 4))),
]

# softmax -------------------------------------------------------------------------------
for _dim in (-1, 0):
    SPECS += _specs_over(f"softmax(dim={_dim})", lambda x, d=_dim: x.softmax(d), lambda x, d=_dim: _softmax_ref(x, d),
                         [[(3, 4)], [(2, 3, 1)], [(5,)]])
    SPECS += _specs_over(f"log_softmax(dim={_dim})", lambda x, d=_dim: x.log_softmax(d),
                         lambda x, d=_dim: _log_softmax_ref(x, d), [[(3, 4)], [(2, 3, 1)], [(5,)]])

# matmul --------------------------------------------------------------------------------
SPECS += _specs_over("matmul", lambda a, b: a @ b, np.matmul, [
    [(3, 4), (4, 2)],
    [(2, 3, 4), (4, 5)],          # batch on one side
    [(2, 1, 3, 4), (5, 4, 2)],    # batch dims broadcast against each other
    [(1, 4), (4, 1)],
    [(4,), (4, 2)],               # 1-D operands
    [(3, 4), (4,)],
    [(4,), (4,)],
    [(4,), (2, 4, 3)],
    [(2, 3, 4), (4,)],
])


def test_every_core_op_has_a_spec():
    """The specs cover every differentiable op the core exports."""
    covered = " ".join(s.name for s in SPECS)
    ops = ["add", "sub", "mul", "div", "pow", "neg", "exp", "log", "sqrt", "tanh", "sigmoid", "relu", "abs",
           "clamp", "clone", "sum", "mean", "var", "max", "min", "reshape", "view", "transpose", "permute",
           "unsqueeze", "squeeze", "flatten", "expand", "getitem", "cat", "stack", "where", "masked_fill",
           "softmax", "log_softmax", "matmul"]
    assert [op for op in ops if op not in covered] == []


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward(spec, dtype, device):
    check_forward(spec, dtype, device)


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck(spec):
    assert check_gradcheck(spec)


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_float32_gradients_stay_float32(spec):
    """A float32 graph gives float32 gradients of the inputs' shapes (no silent float64)."""
    arrays = spec.make_inputs()
    leaves = [md.tensor(a.astype(np.float32), requires_grad=True) if isinstance(a, np.ndarray) else a for a in arrays]
    out = spec.op(*leaves)
    out.backward(md.tensor(np.ones(out.shape, np.float32)))
    for leaf in leaves:
        assert leaf.grad is not None, spec.name
        assert leaf.grad.dtype == md.float32 and leaf.grad.shape == leaf.shape, spec.name
        assert np.isfinite(leaf.grad.numpy()).all(), spec.name


# the harness itself ----------------------------------------------------------------------

class _WrongSquare(Function):
    """y = x**2 with a deliberately wrong backward (forgets the factor 2)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x


def test_harness_catches_a_wrong_backward():
    spec = OpSpec("wrong_square", _WrongSquare.apply, np.square, _randn((3, 2)))
    check_forward(spec, "float64")  # the forward is right...
    with pytest.raises(GradcheckError, match="input 0"):
        check_gradcheck(spec)  # ...but the harness must catch the backward


def test_harness_catches_a_wrong_forward():
    spec = OpSpec("wrong_forward", lambda x: x * 2, lambda x: x * 3, _randn((3,)))
    with pytest.raises(AssertionError, match="wrong_forward"):
        check_forward(spec, "float32")


# special values: stability, ties -------------------------------------------------------

@pytest.mark.parametrize("dtype", [md.float32, md.float64])
def test_softmax_is_stable_near_1e3(dtype):
    x = md.tensor(np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -1001.0, -1002.0]]), dtype=dtype, requires_grad=True)
    ref = _softmax_ref(np.array([[0.0, 1.0, 2.0], [0.0, -1.0, -2.0]]), -1)
    y = x.softmax(-1)
    np.testing.assert_allclose(y.detach().numpy(), ref, rtol=1e-5)
    np.testing.assert_allclose(x.log_softmax(-1).detach().numpy(), np.log(ref), rtol=1e-5)
    (y * md.tensor(np.arange(6.0).reshape(2, 3), dtype=dtype)).sum().backward()
    assert np.isfinite(x.grad.numpy()).all()


def test_amax_and_max_of_all_elements_split_the_gradient_between_ties():
    x = md.tensor([[1.0, 3.0, 3.0], [2.0, 0.0, 2.0]], requires_grad=True)
    x.amax(dim=1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0, 0.5, 0.5], [0.5, 0, 0.5]])
    y = md.tensor([2.0, 2.0, 2.0, 1.0], requires_grad=True)
    y.max().backward()
    np.testing.assert_allclose(y.grad.numpy(), [1 / 3, 1 / 3, 1 / 3, 0])


def test_repeated_indices_accumulate():
    x = md.zeros(4, requires_grad=True)
    x[[1, 1, 3, 1]].backward(md.tensor([1.0, 2.0, 3.0, 4.0]))
    np.testing.assert_allclose(x.grad.numpy(), [0, 7, 0, 3])


def test_var_unbiased_matches_numpy():
    a = np.random.default_rng(0).standard_normal((4, 5))
    x = md.tensor(a)
    np.testing.assert_allclose(x.var().item(), a.var(ddof=1))
    np.testing.assert_allclose(x.var(unbiased=False).item(), a.var())
    np.testing.assert_allclose(x.var(dim=(0, 1)).item(), a.var(ddof=1))
    np.testing.assert_allclose(x.var(1, keepdim=True).numpy(), a.var(1, ddof=1, keepdims=True))


def test_against_torch_on_a_composite_graph():
    """An optional oracle: a small network-like graph's gradients equal PyTorch's."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal(s) for s in [(2, 3, 4), (4, 5), (5,)]]

    def f(x, w, b, max_values):
        h = (x @ w + b).tanh()
        z = h.log_softmax(-1)[:, [0, 2, 2]] * max_values(h)
        return (z.mean(0).var(dim=1) + (h.sigmoid() ** 2).sum((0, 2)).sqrt()).sum()

    ours = [md.tensor(a, requires_grad=True) for a in xs]
    theirs = [torch.tensor(a, requires_grad=True) for a in xs]
    f(*ours, lambda h: h.max(dim=1, keepdim=True).values).backward()
    f(*theirs, lambda h: h.max(dim=1, keepdim=True).values).backward()
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)


_HALF = [s for s in SPECS if s.name.split("[")[0].split("(")[0] in
         ("add", "mul", "div", "exp", "tanh", "sigmoid", "relu", "sum", "mean", "var", "amax", "softmax",
          "log_softmax", "matmul", "reshape", "getitem")]


@pytest.mark.parametrize("spec", _HALF, ids=spec_id)
def test_float16_forward_and_gradient_dtype(spec):
    check_forward(spec, "float16")
    leaves = [md.tensor(a.astype(np.float16), requires_grad=True) for a in spec.make_inputs()]
    out = spec.op(*leaves)
    out.backward(md.ones_like(out))
    assert all(leaf.grad.dtype == md.float16 for leaf in leaves), spec.name


@pytest.mark.parametrize("dim", [1.0, (0, 1.0), True])
def test_reduction_dim_of_wrong_type_names_dim_and_value(dim):
    x = md.zeros(2, 3)
    with pytest.raises(TypeError, match=r"sum\(\): argument 'dim' must be an int or a tuple of ints, got "
                                        rf"{'bool' if dim is True else 'float'} \((1.0|True)\)"):
        x.sum(dim)
    assert x.sum(()).shape == ()   # an empty tuple is still every dim
    with pytest.raises(TypeError, match=r"argmax\(\): argument 'dim'"):
        x.argmax(1.0)
