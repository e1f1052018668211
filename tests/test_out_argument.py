"""The ``out=`` keyword of the module-level functions (``md.add(a, b, out=c)``): values against
NumPy, the write into ``out`` (same object, resized with PyTorch's warning, version bumped), the
dtypes ``out`` may have, the refusal under autograd and its use under no_grad, ``out`` aliasing
an input, the (values, indices) pairs, and every case against PyTorch where it is installed."""
import inspect
import warnings

import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F

rng = np.random.default_rng(0)
A = rng.standard_normal((3, 4)).astype(np.float32)
B = rng.standard_normal((3, 4)).astype(np.float32)
P = (rng.random((3, 4)) + 0.5).astype(np.float32)
I = rng.integers(1, 9, (3, 4)).astype(np.int64)
J = rng.integers(1, 9, (3, 4)).astype(np.int64)
M = rng.standard_normal((4, 2)).astype(np.float32)
V = rng.standard_normal(4).astype(np.float32)
W = rng.standard_normal(4).astype(np.float32)
A3 = rng.standard_normal((2, 3, 4)).astype(np.float32)
B3 = rng.standard_normal((2, 4, 5)).astype(np.float32)
MASK = A > 0
IDX = np.array([2, 0], np.int64)
GIDX = rng.integers(0, 4, (3, 2)).astype(np.int64)

UNARY = ("abs neg exp expm1 sigmoid tanh sin cos erf floor ceil trunc round sign reciprocal square exp2 "
         "logical_not").split()
CASES = [(n, (A,), {}) for n in UNARY] + [(n, (P,), {}) for n in ("log", "log2", "log10", "log1p", "sqrt", "rsqrt")] + [
    ("add", (A, B), {}), ("add", (A, B), {"alpha": 2}), ("add", (I, J), {}), ("add", (A, 1.5), {}),
    ("sub", (A, B), {"alpha": 3}), ("mul", (A, B), {}), ("mul", (I, 2), {}), ("div", (A, P), {}), ("div", (I, J), {}),
    ("div", (A, P), {"rounding_mode": "floor"}), ("div", (I, J), {"rounding_mode": "trunc"}), ("pow", (P, B), {}),
    ("pow", (P, 2.5), {}), ("pow", (I, 2), {}), ("subtract", (A, B), {}), ("multiply", (A, B), {}),
    ("divide", (A, P), {}), ("true_divide", (I, J), {}), ("floor_divide", (I, J), {}), ("remainder", (A, P), {}),
    ("fmod", (A, P), {}), ("atan2", (A, B), {}), ("maximum", (A, B), {}), ("minimum", (I, J), {}),
    ("clamp", (A,), {"min": -0.5, "max": 0.5}), ("clamp", (A,), {"min": -0.5}), ("clip", (A, -0.2, 0.3), {}),
    ("where", (MASK, A, B), {}), ("lerp", (A, B, 0.3), {}), ("addcmul", (A, B, P), {"value": 2}),
    ("addcdiv", (A, B, P), {"value": 0.5}), ("eq", (I, J), {}), ("ne", (A, B), {}), ("lt", (A, B), {}),
    ("le", (A, 0.0), {}), ("gt", (A, B), {}), ("ge", (A, B), {}), ("logical_and", (MASK, A < 0.5), {}),
    ("logical_or", (MASK, A < 0.5), {}), ("logical_xor", (A, B), {}),
    ("sum", (A,), {}), ("sum", (A, 0), {}), ("sum", (I, 1), {"keepdim": True}), ("sum", (A, 1), {"dtype": md.float64}),
    ("mean", (A, 1), {}), ("prod", (P, 1), {}), ("amax", (A, 1), {}), ("amin", (A, 0), {}), ("argmax", (A, 1), {}),
    ("argmin", (A,), {}), ("std", (A, 1), {}), ("var", (A, 0), {"correction": 0}), ("norm", (A,), {}),
    ("norm", (A, 2, 1), {}), ("cumsum", (A, 1), {}), ("cumprod", (P, 0), {}), ("logsumexp", (A, 1), {}),
    ("max", (A,), {}), ("min", (A,), {}), ("max", (A, B), {}),
    ("matmul", (A, M), {}), ("mm", (A, M), {}), ("bmm", (A3, B3), {}), ("addmm", (M[:3, :], A, M), {}),
    ("outer", (V, W), {}), ("dot", (V, W), {}),
    ("cat", ([A, B],), {}), ("cat", ([A, B], 1), {}), ("stack", ([A, B],), {}), ("index_select", (A, 1, IDX), {}),
    ("gather", (A, 1, GIDX), {}), ("masked_select", (A, MASK), {}), ("take", (A, IDX), {}),
    ("tril", (A,), {}), ("triu", (A, 1), {}),
]
PAIR_CASES = [
    ("max", (A, 1), {}), ("min", (A, 0), {"keepdim": True}), ("sort", (A,), {}), ("sort", (A, 0), {"descending": True}),
    ("topk", (A, 2), {}), ("kthvalue", (A, 2, 1), {}), ("median", (A, 1), {}), ("mode", (I, 1), {}),
    ("aminmax", (A,), {"dim": 1}), ("frexp", (A,), {}), ("cummax", (A, 1), {}), ("cummin", (A, 0), {}),
]
FACTORY_CASES = [
    ("zeros", (2, 3), {}), ("ones", ((2, 3),), {}), ("full", ((2, 3), 1.5), {}), ("arange", (5,), {}),
    ("arange", (1, 7, 2), {}), ("linspace", (-1, 1, 4), {}), ("linspace", (0, 1, 5), {}), ("eye", (3,), {}),
    ("empty", (2, 3), {}),
    ("rand", (2, 3), {}), ("randn", (2, 3), {}), ("randint", (0, 5, (2, 3)), {}), ("randperm", (5,), {}),
]


def _conv(lib, a):
    if isinstance(a, np.ndarray):
        return lib.tensor(a)
    if isinstance(a, list):
        return [_conv(lib, x) for x in a]
    return a


def _call(name, args, kw, **extra):
    return getattr(md, name)(*[_conv(md, a) for a in args], **kw, **extra)


# values and the write itself --------------------------------------------------------------------
@pytest.mark.parametrize("name, args, kw, ref", [
    ("add", (A, B), {"alpha": 2}, A + 2 * B),
    ("sub", (I, J), {}, I - J),
    ("div", (A, P), {"rounding_mode": "floor"}, np.floor(A / P)),
    ("exp", (A,), {}, np.exp(A)),
    ("clamp", (A,), {"min": -0.5, "max": 0.5}, np.clip(A, -0.5, 0.5)),
    ("where", (MASK, A, B), {}, np.where(MASK, A, B)),
    ("gt", (A, B), {}, A > B),
    ("sum", (A, 0), {}, A.sum(0)),
    ("cumsum", (A, 1), {}, np.cumsum(A, 1)),
    ("amax", (A, 1), {}, A.max(1)),
    ("logsumexp", (A, 1), {}, np.log(np.exp(A).sum(1))),
    ("matmul", (A, M), {}, A @ M),
    ("bmm", (A3, B3), {}, A3 @ B3),
    ("outer", (V, W), {}, np.outer(V, W)),
    ("cat", ([A, B], 1), {}, np.concatenate([A, B], 1)),
    ("stack", ([A, B],), {}, np.stack([A, B])),
    ("index_select", (A, 1, IDX), {}, A[:, IDX]),
    ("masked_select", (A, MASK), {}, A[MASK]),
])
def test_out_holds_the_result_and_is_returned(name, args, kw, ref):
    out = md.empty(0, dtype=md.bool if ref.dtype == bool else md.tensor(ref).dtype)
    version = out._version
    res = _call(name, args, kw, out=out)
    assert res is out and out._version > version
    assert out.shape == ref.shape
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-6)


def test_factories_fill_out_in_its_dtype():
    out = md.empty(0, dtype=md.int64)
    assert md.arange(5, out=out) is out and out.tolist() == [0, 1, 2, 3, 4]
    with pytest.warns(UserWarning, match=r"The number of elements in the out tensor of shape \[5\] is 5 which does "
                                         r"not match the computed number of elements 3"):
        md.arange(3, out=out)
    assert md.zeros(2, 3, out=out).dtype == md.int64 and out.shape == (2, 3) and not out.numpy().any()
    f = md.empty(0, dtype=md.float64)
    np.testing.assert_allclose(md.linspace(0, 1, 5, out=f).numpy(), np.linspace(0, 1, 5))
    assert f.dtype == md.float64
    assert md.full((2,), 1.5, out=f).tolist() == [1.5, 1.5]
    r = md.rand(3, 2, out=f)
    assert r is f and f.shape == (3, 2) and ((f.numpy() >= 0) & (f.numpy() < 1)).all()
    k = md.randint(0, 5, (4,), out=md.empty(0, dtype=md.int32))
    assert k.dtype == md.int32 and ((k.numpy() >= 0) & (k.numpy() < 5)).all()
    assert md.ones(2, out=md.empty(0), requires_grad=True).requires_grad


def test_factory_refuses_a_dtype_other_than_outs():
    with pytest.raises(RuntimeError, match=r"dtype Double does not match dtype of out parameter \(Float\)"):
        md.zeros(2, dtype=md.float64, out=md.empty(0))


def test_reductions_compute_in_outs_dtype():
    x = md.tensor([[0.6, 1.7], [2.5, -0.6]])
    assert md.sum(x, 0, out=md.empty(0, dtype=md.int64)).tolist() == [2, 1]   # sum of the int64 values
    out = md.empty(0, dtype=md.float64)
    md.mean(x, 0, out=out)
    np.testing.assert_array_equal(out.numpy(), x.numpy().astype(np.float64).mean(0))


def test_out_of_another_shape_is_resized_with_a_warning_when_it_had_elements():
    a, b = md.tensor(A), md.tensor(B)
    out = md.zeros(5)
    with pytest.warns(UserWarning, match=r"An output with one or more elements was resized since it had shape \[5\], "
                                         r"which does not match the required output shape \[3, 4\]"):
        md.add(a, b, out=out)
    assert out.shape == (3, 4)
    np.testing.assert_allclose(out.numpy(), A + B, rtol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        md.add(a, b, out=md.empty(0))            # an empty out: no warning
        md.add(a, b, out=out)                    # the right shape: none
        md.zeros(7, out=out)                     # factories resize quietly, as PyTorch's


def test_unsafe_cast_into_out_is_refused_and_safe_ones_are_made():
    a, b = md.tensor(A), md.tensor(B)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        md.add(a, b, out=md.empty(0, dtype=md.int64))
    with pytest.raises(RuntimeError, match="result type Long can't be cast to the desired output type Bool"):
        md.add(md.tensor(I), md.tensor(J), out=md.empty(0, dtype=md.bool))
    with pytest.raises(TypeError, match="can't be cast to the desired output type Long"):
        md.cat([a, b], out=md.empty(0, dtype=md.int64))
    d = md.add(a, b, out=md.empty(0, dtype=md.float64))                       # float32 -> float64
    assert d.dtype == md.float64
    np.testing.assert_allclose(d.numpy(), (A + B).astype(np.float64), rtol=1e-6)
    f = md.add(md.tensor(I), md.tensor(J), out=md.empty(0))                   # int64 -> float32
    np.testing.assert_array_equal(f.numpy(), (I + J).astype(np.float32))
    assert md.gt(a, b, out=md.empty(0, dtype=md.int32)).tolist() == (A > B).astype(np.int32).tolist()


def test_ops_that_keep_their_dtype_want_it_exactly():
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype float, but got double instead"):
        md.matmul(md.tensor(A), md.tensor(M), out=md.empty(0, dtype=md.float64))
    with pytest.raises(RuntimeError, match="to have dtype long int, but got int instead"):
        md.argmax(md.tensor(A), 1, out=md.empty(0, dtype=md.int32))


def test_autograd_refuses_out_and_no_grad_allows_it():
    a = md.tensor(A, requires_grad=True)
    msg = r"add\(\): functions with out=\.\.\. arguments don't support automatic differentiation"
    with pytest.raises(RuntimeError, match=msg):
        md.add(a, md.tensor(B), out=md.empty(0))
    with pytest.raises(RuntimeError, match=msg):
        md.add(md.tensor(A), md.tensor(B), out=md.empty(0, requires_grad=True))
    with pytest.raises(RuntimeError, match="cat"):
        md.cat([md.tensor(B), a], out=md.empty(0))
    with pytest.raises(RuntimeError, match="ones"):
        md.ones(3, out=md.zeros(3, requires_grad=True))
    with md.no_grad():
        out = md.add(a, md.tensor(B), out=md.empty(0))
        leaf = md.zeros(2, requires_grad=True)
        with pytest.warns(UserWarning, match="was resized"):
            md.add(a, md.tensor(B), out=leaf)    # a leaf that requires grad, resized and written under no_grad
    assert not out.requires_grad and out.grad_fn is None
    np.testing.assert_allclose(out.numpy(), A + B, rtol=1e-6)
    assert leaf.requires_grad and leaf.is_leaf and leaf.shape == (3, 4)


def test_out_may_be_an_input():
    a, b = md.tensor(A), md.tensor(B)
    assert md.add(a, b, out=a) is a
    np.testing.assert_allclose(a.numpy(), A + B, rtol=1e-6)
    m = md.tensor(A[:, :3].copy())
    md.matmul(m, m, out=m)
    np.testing.assert_allclose(m.numpy(), A[:, :3] @ A[:, :3], rtol=1e-5)
    c = md.tensor(A)
    with pytest.warns(UserWarning, match="was resized"):
        md.cat([c, b], out=c)
    np.testing.assert_allclose(c.numpy(), np.concatenate([A, B]), rtol=1e-6)


def test_out_that_is_a_view_writes_through():
    base = md.zeros(2, 3, 4)
    md.add(md.tensor(A), md.tensor(B), out=base[1])
    np.testing.assert_allclose(base.numpy()[1], A + B, rtol=1e-6)
    assert not base.numpy()[0].any()


def test_pairs_are_written_into_a_tuple_list_or_the_named_tuple():
    a = md.tensor(A)
    v, i = md.empty(0), md.empty(0, dtype=md.int64)
    r = md.max(a, 1, out=(v, i))
    assert r.values is v and r.indices is i and type(r) is type(md.max(a, 1))
    np.testing.assert_array_equal(v.numpy(), A.max(1))
    np.testing.assert_array_equal(i.numpy(), A.argmax(1))
    with pytest.warns(UserWarning, match=r"had shape \[3\], which does not match the required output shape \[3, 4\]"):
        r2 = md.sort(a, out=[v, i])
    assert r2.values is v and v.shape == (3, 4)
    np.testing.assert_array_equal(v.numpy(), np.sort(A, -1))
    np.testing.assert_array_equal(i.numpy(), np.argsort(A, -1))
    with pytest.warns(UserWarning, match="was resized"):
        r3 = md.topk(a, 2, out=r2)                            # a named tuple from an earlier call
    np.testing.assert_array_equal(r3.values.numpy(), -np.sort(-A, -1)[:, :2])
    with pytest.raises(TypeError, match="tuple of Tensors"):
        md.sort(a, out=v)
    with pytest.raises(TypeError, match="expected tuple of 2 elements but got 3"):
        md.max(a, 1, out=(v, i, v))
    with pytest.raises(TypeError, match="must be Tensor, not tuple"):
        md.add(a, a, out=(v,))
    with pytest.raises(RuntimeError, match="dtype long int, but got int"):
        md.sort(a, out=(md.empty(0), md.empty(0, dtype=md.int32)))


def test_bad_out_and_functions_without_out():
    a = md.tensor(A)
    with pytest.raises(TypeError, match="argument 'out' must be Tensor, not int"):
        md.add(a, a, out=3)
    with pytest.raises(TypeError):
        md.median(a, out=md.empty(0))             # PyTorch: median takes out= only with dim
    with pytest.raises(TypeError):
        md.var_mean(a, 1, out=(md.empty(0), md.empty(0)))
    with pytest.raises(TypeError):
        a.add(a, out=md.empty(0))                 # Tensor methods take no out
    with pytest.raises(TypeError):
        F.relu(a, out=md.empty(0))


def test_out_on_another_device_is_refused():
    if not md.cuda.is_available():
        pytest.skip("no cuda device (nor its simulator)")
    with pytest.raises(RuntimeError, match="Expected out tensor to have device cpu, but got cuda"):
        md.add(md.tensor(A), md.tensor(B), out=md.empty(0, device="cuda"))
    out = md.zeros(3, device="cuda")
    with pytest.warns(UserWarning, match="was resized"):
        md.add(md.tensor(A, device="cuda"), md.tensor(B, device="cuda"), out=out)
    assert out.device.type == "cuda" and out.shape == (3, 4)
    np.testing.assert_allclose(out.cpu().numpy(), A + B, rtol=1e-6)


# against PyTorch ----------------------------------------------------------------------------------
_OUT_DTYPES = ("same", "float64", "float32", "int64", "bool")


def _outcome(lib, name, args, kw, out_dtype, pair):
    targs = [_conv(lib, a) for a in args]
    kw = {k: (getattr(lib, v.name) if isinstance(v, md.dtype) else v) for k, v in kw.items()}
    ref = getattr(lib, name)(*targs, **kw)
    first = ref[0] if pair else ref
    dt = first.dtype if out_dtype == "same" else getattr(lib, out_dtype)
    out = (lib.zeros(1, dtype=dt), lib.zeros(1, dtype=ref[1].dtype)) if pair else lib.zeros(1, dtype=dt)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            res = getattr(lib, name)(*targs, **kw, out=out)
        except (RuntimeError, TypeError, NotImplementedError) as e:
            return type(e), None
    assert any("was resized" in str(w.message) for w in caught)
    written = [r.detach().numpy() for r in res] if pair else [res.numpy()]
    return None, written


@pytest.mark.parametrize("out_dtype", _OUT_DTYPES)
@pytest.mark.parametrize("case", CASES + PAIR_CASES, ids=lambda c: c[0] + "-" + "-".join(map(str, c[2])))
def test_against_torch(case, out_dtype):
    torch = pytest.importorskip("torch")
    name, args, kw = case
    assert "out" in inspect.signature(getattr(md, name)).parameters
    pair = any(case is c for c in PAIR_CASES)
    err_t, got_t = _outcome(torch, name, args, kw, out_dtype, pair)
    err_m, got_m = _outcome(md, name, args, kw, out_dtype, pair)
    if err_t is not None:
        assert err_m is not None, f"torch raised {err_t.__name__}, minidl wrote the result"
        if err_t is not NotImplementedError:
            assert err_m is err_t
        return
    assert err_m is None, f"minidl raised {err_m}"
    for t, m in zip(got_t, got_m):
        assert t.dtype == m.dtype and t.shape == m.shape
        np.testing.assert_allclose(m.astype(np.float64), t.astype(np.float64), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("out_dtype", ("float32", "float64", "int64", "int32"))
@pytest.mark.parametrize("case", FACTORY_CASES, ids=lambda c: c[0] + str(c[1]))
def test_factories_against_torch(case, out_dtype):
    torch = pytest.importorskip("torch")
    name, args, kw = case
    assert "out" in inspect.signature(getattr(md, name)).parameters
    outcomes = []
    for lib in (torch, md):
        out = lib.ones(4, dtype=getattr(lib, out_dtype))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = getattr(lib, name)(*args, **kw, out=out)
            outcomes.append((res is out, res.numpy().dtype, tuple(res.shape), res.numpy()))
        except (RuntimeError, TypeError, NotImplementedError, ValueError):
            outcomes.append(None)
    t, m = outcomes
    if t is None:
        assert m is None
        return
    assert m is not None and m[:3] == t[:3]
    if name not in ("empty", "rand", "randn", "randint", "randperm"):
        np.testing.assert_allclose(m[3].astype(np.float64), t[3].astype(np.float64), rtol=1e-6)


def test_resize_warning_and_autograd_message_match_torch():
    torch = pytest.importorskip("torch")
    messages = []
    for lib in (torch, md):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lib.add(lib.ones(2, 3), lib.ones(2, 3), out=lib.zeros(3))
        messages.append(str(caught[0].message).split(" (Triggered internally")[0])
        with pytest.raises(RuntimeError) as info:
            lib.mul(lib.ones(2, requires_grad=True), 2.0, out=lib.zeros(2))
        messages.append(str(info.value))
    assert messages[:2] == messages[2:]
