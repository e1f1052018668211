"""PyTorch's tensor functions at both levels (md.X(t, ...) and t.X(...)), checked against
PyTorch on small inputs: the values, and for the differentiable ones the gradient of one
backward."""
import numpy as np
import pytest

import minidl as md
from minidl.autograd.gradcheck import gradcheck

X = np.array([[0.3, -1.2, 0.7], [1.5, 0.2, -0.4]])
POS = np.abs(X) + 0.5

# name: (input, args, kwargs, differentiable)
CASES = {
    "sqrt": (POS, (), {}, True), "rsqrt": (POS, (), {}, True), "exp": (X, (), {}, True), "log": (POS, (), {}, True),
    "log1p": (POS, (), {}, True), "expm1": (X, (), {}, True), "sin": (X, (), {}, True), "cos": (X, (), {}, True),
    "tan": (X, (), {}, True), "tanh": (X, (), {}, True), "sigmoid": (X, (), {}, True), "relu": (X, (), {}, True),
    "abs": (X, (), {}, True), "sign": (X, (), {}, True), "floor": (X, (), {}, True), "ceil": (X, (), {}, True),
    "round": (X, (), {}, True), "trunc": (X, (), {}, True), "erf": (X, (), {}, True), "square": (X, (), {}, True),
    "pow": (POS, (1.7,), {}, True), "clamp": (X, (-0.5, 0.5), {}, True), "clip": (X, (-0.5, 0.5), {}, True),
    "sum": (X, (), {"dim": (0, 1)}, True), "mean": (X, (1,), {"keepdim": True}, True), "prod": (X, (1,), {}, True),
    "std": (X, (0,), {}, True), "var": (X, (1,), {}, True), "amax": (X, (1,), {}, True),
    "amin": (X, (0,), {}, True), "argmax": (X, (1,), {}, False), "argmin": (X, (), {}, False),
    "logsumexp": (X, (1,), {}, True), "cumsum": (X, (1,), {}, True), "cumprod": (X, (1,), {}, True),
    "norm": (X, (), {}, True), "softmax": (X, (1,), {}, True), "log_softmax": (X, (0,), {}, True),
    "transpose": (X, (0, 1), {}, True), "permute": (X, ((1, 0),), {}, True), "reshape": (X, ((3, 2),), {}, True),
    "flatten": (X, (), {}, True), "unflatten": (X, (1, (3, 1)), {}, True), "squeeze": (X[None], (0,), {}, True),
    "unsqueeze": (X, (1,), {}, True), "tril": (X, (), {}, True), "triu": (X, (1,), {}, True),
    "diag": (X[0], (), {}, True), "flip": (X, ((0, 1),), {}, True), "roll": (X, (1, 1), {}, True),
    "repeat_interleave": (X, (2,), {"dim": 0}, True), "tile": (X, ((2, 1),), {}, True),
    "swapaxes": (X, (0, 1), {}, True), "nonzero": (X, (), {}, False), "isnan": (X, (), {}, False),
    "isinf": (X, (), {}, False), "isfinite": (X, (), {}, False), "logical_not": (X, (), {}, False),
    "numel": (X, (), {}, False), "unique": (np.array([3.0, 1.0, 3.0]), (), {}, False),
    "sort": (X, (), {}, False), "argsort": (X, (), {}, False), "topk": (X, (2,), {}, False),
    "any": (X > 0, (), {}, False), "all": (X > 0, (1,), {}, False),
}
TWO = {   # name: (a, b, extra args, differentiable)
    "maximum": (X, X[::-1].copy(), (), True), "minimum": (X, X[::-1].copy(), (), True),
    "matmul": (X, X.T.copy(), (), True), "mm": (X, X.T.copy(), (), True),
    "bmm": (X[None], X.T[None].copy(), (), True), "outer": (X[0], X[1], (), True),
    "eq": (X, X.round(), (), False), "ne": (X, X.round(), (), False), "lt": (X, X.round(), (), False),
    "le": (X, X.round(), (), False), "gt": (X, X.round(), (), False), "ge": (X, X.round(), (), False),
    "logical_and": (X > 0, X < 1, (), False), "logical_or": (X > 0, X < 1, (), False),
    "isclose": (X, X + 1e-9, (), False), "cdist": (X, X[::-1].copy() + 0.1, (), True),
    "view_as": (X, X.T.copy(), (), True), "reshape_as": (X, X.T.copy(), (), True),
    "expand_as": (X[:1], X, (), True),
}


def _torch():
    return pytest.importorskip("torch")


def _pair(torch, a, grad):
    m = md.tensor(a, requires_grad=grad and a.dtype.kind == "f")
    t = torch.tensor(a, requires_grad=grad and a.dtype.kind == "f")
    return m, t


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [v for o in out for v in _flat(o)]
    if hasattr(out, "detach"):
        return [np.asarray(out.detach().numpy() if hasattr(out.detach(), "numpy") else out.detach())]
    return [np.asarray(out)]


def _compare(mo, to):
    for a, b in zip(_flat(mo), _flat(to), strict=True):
        np.testing.assert_allclose(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64), atol=1e-10)


def _first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


@pytest.mark.parametrize("name", sorted(CASES))
def test_function_and_method_agree_with_pytorch(name):
    torch = _torch()
    a, args, kwargs, grad = CASES[name]
    m, t = _pair(torch, a, grad)
    ref = getattr(torch, name)(t, *args, **kwargs)
    _compare(getattr(md, name)(m, *args, **kwargs), ref)
    _compare(getattr(m, name)(*args, **kwargs), getattr(t, name)(*args, **kwargs))
    if grad:
        w = np.linspace(0.5, 1.5, _first(ref).numel()).reshape(tuple(_first(ref).shape))
        (_first(getattr(md, name)(m, *args, **kwargs)) * md.tensor(w)).sum().backward()
        (_first(ref) * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), atol=1e-10)


@pytest.mark.parametrize("name", sorted(TWO))
def test_binary_function_and_method_agree_with_pytorch(name):
    torch = _torch()
    a, b, extra, grad = TWO[name]
    (ma, ta), (mb, tb) = _pair(torch, a, grad), _pair(torch, b, grad)
    method_only = name in ("view_as", "reshape_as", "expand_as")   # PyTorch has them as methods only
    ref = getattr(ta, name)(tb, *extra) if method_only else getattr(torch, name)(ta, tb, *extra)
    _compare(getattr(md, name)(ma, mb, *extra), ref)
    if name != "cdist":
        _compare(getattr(ma, name)(mb, *extra), getattr(ta, name)(tb, *extra))
    if grad:
        w = np.linspace(0.5, 1.5, ref.numel()).reshape(tuple(ref.shape))
        (getattr(md, name)(ma, mb, *extra) * md.tensor(w)).sum().backward()
        (ref * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(ma.grad.numpy(), ta.grad.numpy(), atol=1e-10)
        if not method_only:
            np.testing.assert_allclose(mb.grad.numpy(), tb.grad.numpy(), atol=1e-10)


def test_the_rest_of_the_list_against_pytorch():
    torch = _torch()
    m, t = _pair(torch, X, True)
    idx = [[0, 2], [1, 1]]
    checks = [
        (md.gather(m, 1, md.tensor(idx)), torch.gather(t, 1, torch.tensor(idx))),
        (m.index_select(1, md.tensor([2, 0])), t.index_select(1, torch.tensor([2, 0]))),
        (md.masked_select(m, md.tensor(X > 0)), torch.masked_select(t, torch.tensor(X > 0))),
        (md.einsum("ij,kj->ik", m, m), torch.einsum("ij,kj->ik", t, t)),
        (md.split(m, [1, 2], dim=1), torch.split(t, [1, 2], dim=1)), (m.chunk(2, 1), t.chunk(2, 1)),
        (md.unbind(m, 1), torch.unbind(t, 1)), (m.repeat(2, 2), t.repeat(2, 2)),
        (md.cat([m, m]), torch.cat([t, t])), (md.stack([m, m], 1), torch.stack([t, t], 1)),
        (md.where(m > 0, m, 0.0), torch.where(t > 0, t, 0.0)), (md.max(m, 1), torch.max(t, 1)),
        (m.min(0), t.min(0)), (md.meshgrid(md.arange(2), md.arange(3), indexing="xy"),
                               torch.meshgrid(torch.arange(2), torch.arange(3), indexing="xy")),
        (md.arange(1, 7, 2), torch.arange(1, 7, 2)), (md.linspace(0, 1, 5), torch.linspace(0, 1, 5)),
        (md.zeros_like(m), torch.zeros_like(t)), (md.ones_like(m), torch.ones_like(t)),
        (md.full_like(m, 2.0), torch.full_like(t, 2.0)), (md.empty_like(m).shape, torch.empty_like(t).shape),
        (m.mT, t.mT), (m.T, t.T), (m.new_ones(2), t.new_ones(2)), (m.new_full((2,), 3.0), t.new_full((2,), 3.0)),
        (m.new_tensor([1, 2]), t.new_tensor([1, 2])), (m.new_zeros(1, 2), t.new_zeros(1, 2)),
        (m.new_empty(2).shape, t.new_empty(2).shape), (m.std(axis=0), t.std(axis=0)),
    ]
    for mo, to in checks:
        _compare(mo, to)
    assert md.allclose(m, m + 1e-9) and md.equal(m, m.clone()) and not md.equal(m, m + 1)
    assert m.is_contiguous() and m.contiguous() is m and md.numel(m) == 6
    loss = (md.gather(m, 1, md.tensor(idx)).sum() + m.index_select(1, md.tensor([2, 2])).sum()
            + md.masked_select(m, md.tensor(X > 0)).sum() + md.einsum("ij,kj->ik", m, m).sum()
            + m.repeat(2, 2).sum() + sum(p.sum() * (i + 1) for i, p in enumerate(m.chunk(2, 1))))
    ref = (torch.gather(t, 1, torch.tensor(idx)).sum() + t.index_select(1, torch.tensor([2, 2])).sum()
           + torch.masked_select(t, torch.tensor(X > 0)).sum() + torch.einsum("ij,kj->ik", t, t).sum()
           + t.repeat(2, 2).sum() + sum(p.sum() * (i + 1) for i, p in enumerate(t.chunk(2, 1))))
    loss.backward()
    ref.backward()
    np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), atol=1e-10)


def test_random_functions_exist_at_both_levels():
    p = md.full((2, 3), 0.5)
    assert md.bernoulli(p).shape == p.bernoulli().shape == (2, 3)
    assert md.multinomial(p, 2).shape == p.multinomial(2).shape == (2, 2)
    assert md.normal(md.zeros(3), 1.0).shape == (3,)
    assert md.rand_like(p).shape == md.randn_like(p).shape == (2, 3)


NEW_OPS = {
    "sin": lambda x: md.sin(x), "cos": lambda x: md.cos(x), "tan": lambda x: md.tan(x),
    "log1p": lambda x: md.log1p(x * x), "expm1": lambda x: md.expm1(x), "erf": lambda x: md.erf(x),
    "prod": lambda x: md.prod(x, 1), "prod_all_with_zero": lambda x: md.prod(x * md.tensor([[1.0, 0, 1], [1, 1, 1]],
                                                                                            dtype=md.float64)),
    "cumsum": lambda x: x.cumsum(0), "cumprod": lambda x: x.cumprod(1),
    "cumprod_zero": lambda x: (x * md.tensor([1.0, 0, 1], dtype=md.float64)).cumprod(1),
    "logsumexp": lambda x: md.logsumexp(x, 1), "maximum": lambda x: md.maximum(x, x.flip(0)),
    "flip": lambda x: x.flip(1), "roll": lambda x: x.roll(1, 0), "tril": lambda x: x.tril(),
    "diag": lambda x: md.diag(x) * 1.0, "diag1d": lambda x: md.diag(x[0], 1),
    "gather": lambda x: x.gather(1, md.tensor([[0, 0], [2, 1]])),
    "index_select": lambda x: x.index_select(1, md.tensor([1, 1, 0])),
    "masked_select": lambda x: x.masked_select(md.tensor([True, False, True])),
    "repeat": lambda x: x.repeat(2, 1, 2), "repeat_interleave": lambda x: x.repeat_interleave(md.tensor([1, 3]), 0),
    "einsum": lambda x: md.einsum("ij,ik->jk", x, x), "einsum_sum_out": lambda x: md.einsum("ij->", x),
}


@pytest.mark.parametrize("name", sorted(NEW_OPS))
def test_new_ops_pass_gradcheck_in_float64(name):
    x = md.tensor(X, dtype=md.float64, requires_grad=True)
    assert gradcheck(NEW_OPS[name], (x,))


def test_factory_argument_errors_name_what_was_expected():
    """PyTorch's error types and wording, not NumPy's "low >= high" or "Maximum allowed size exceeded"."""
    with pytest.raises(RuntimeError, match="random_ expects 'from' to be less than 'to', but got from=5 >= to=2"):
        md.randint(5, 2, (3,))
    with pytest.raises(RuntimeError, match=r"uniform_ expects to return a \[from, to\) range, but found from=1 > to=0"):
        md.zeros(3).uniform_(1, 0)
    with pytest.raises(RuntimeError, match="normal_ expects std >= 0.0, but found std -1"):
        md.zeros(3).normal_(0, -1)
    for end in (float("inf"), float("nan")):
        with pytest.raises(RuntimeError, match=f"arange: unsupported range: 0 -> {end}"):
            md.arange(0, end)
    with pytest.raises(RuntimeError, match="arange: step must be nonzero"):
        md.arange(0, 5, 0)
    for fill in ("a", None, [1, 2]):
        with pytest.raises(TypeError, match=f"full\\(\\): argument 'fill_value' must be a number, got "
                                            f"{type(fill).__name__}"):
            md.full((2,), fill)
    assert md.full((2,), md.tensor(2.0)).tolist() == [2.0, 2.0]


def test_tensor_of_an_int_beyond_int64_says_so():
    for data in ([2 ** 70], 2 ** 70, [[1], [-2 ** 70]], [2 ** 63]):
        with pytest.raises(ValueError, match="does not fit in int64.*Overflow when unpacking long long"):
            md.tensor(data)
    assert md.tensor([-2 ** 63, 2 ** 63 - 1]).tolist() == [-2 ** 63, 2 ** 63 - 1]
    assert md.tensor([1.5, 2 ** 70]).dtype == md.float32   # float data, as in PyTorch
    assert md.tensor([2 ** 70], dtype=md.float64).item() == 2.0 ** 70
    with pytest.raises(TypeError, match="holding non-numbers"):
        md.tensor([1, None])


def test_broadcast_errors_name_the_op_and_both_shapes():
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError) as theirs:
        torch.allclose(torch.zeros(3), torch.zeros(2))
    with pytest.raises(RuntimeError, match=r"allclose: The size of tensor a \(3\) must match the size of tensor b "
                                           r"\(2\) at non-singleton dimension 0; got input of shape \[3\] and other "
                                           r"of shape \[2\]"):
        md.allclose(md.zeros(3), md.zeros(2))
    assert "must match the size of tensor b (2)" in str(theirs.value)
    with pytest.raises(RuntimeError, match=r"isclose: .*input of shape \[2, 3\] and other of shape \[4\]"):
        md.isclose(md.zeros(2, 3), md.zeros(4))
    with pytest.raises(RuntimeError, match=r"masked_select: The size of tensor a \(2\) must match the size of tensor "
                                           r"b \(3\) .*mask of shape \[2\] and input of shape \[3\]"):
        md.masked_select(md.zeros(3), md.zeros(2, dtype=md.bool))


@pytest.mark.parametrize("equation, shapes, message", [
    ("ij,jk->ik", [(2, 3), (4, 5)], r"subscript j has size 4 for operand 1 which does not broadcast with previously "
                                    r"seen size 3 \(equation 'ij,jk->ik', operand shapes \[\[2, 3\], \[4, 5\]\]\)"),
    ("ij->ijk", [(2, 3)], "output subscript k does not appear in the equation for any input operand"),
    ("ij->ii", [(2, 2)], "output subscript i appears more than once in the output"),
    ("i1->i", [(2, 1)], "invalid subscript '1', subscripts must be in"),
    ("ii->i", [(2, 3)], "subscript i is repeated for operand 0 but the sizes don't match, 3 != 2"),
    ("ijk->", [(2, 3)], r"the number of subscripts in the equation \(3\) does not match the number of dimensions \(2\) "
                        r"for operand 0 \(equation 'ijk->'"),
])
def test_einsum_subscript_errors_name_equation_and_shapes(equation, shapes, message):
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):
        torch.einsum(equation, *[torch.zeros(s) for s in shapes])
    with pytest.raises(RuntimeError, match=f"einsum\\(\\): {message}"):
        md.einsum(equation, *[md.zeros(*s) for s in shapes])


def test_einsum_broadcasts_a_size_one_subscript_as_pytorch():
    assert md.einsum("ij,jk->ik", md.ones(2, 1), md.ones(3, 4)).shape == (2, 4)
