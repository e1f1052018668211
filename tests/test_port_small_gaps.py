"""Small places where minidl differed from PyTorch: L-BFGS's scalars in the parameters' dtype (so a
float32 run follows PyTorch's path), tensors that share memory still sharing it after md.load onto
a device, indexed writes whose operand shares the written tensor's memory, and the dtypes autocast
gives the linear-algebra functions on the CPU."""
import os

import numpy as np
import pytest

import minidl as md
import minidl.optim as optim
from minidl import backends
from minidl.autograd import gradcheck

OVERLAP = "some elements of the input tensor and the written-to tensor refer to a single memory location"


# L-BFGS ------------------------------------------------------------------------------------------------
def _rosenbrock(x):
    """The 2-D Rosenbrock function and its gradient in float32, computed here (so both libraries see
    the very same values and only the optimizers' own arithmetic can differ)."""
    a, b = x[1] - x[0] ** 2, 1 - x[0]
    loss = np.float32(100 * a * a + b * b)
    return loss, np.array([-400 * a * x[0] - 2 * b, 200 * a], dtype=np.float32)


def _lbfgs_path(lib, x0, steps, **kw):
    x = lib.tensor(np.array(x0, dtype=np.float32), requires_grad=True)
    opt = lib.optim.LBFGS([x], **kw)

    def closure():
        opt.zero_grad()
        loss, g = _rosenbrock(x.detach().numpy())
        x.grad = lib.tensor(g)
        return lib.tensor(loss)
    path = []
    for _ in range(steps):
        opt.step(closure)
        path.append(x.detach().numpy().copy())
    return np.array(path), opt.state[x]


_LBFGS_RUNS = [
    ([-1.2, 1.0], dict(lr=0.2, max_iter=5, history_size=4, line_search_fn=None)),
    ([-0.5, 1.5], dict(lr=1, max_iter=5, history_size=4, line_search_fn="strong_wolfe")),
]


def _kind(v):
    if hasattr(v, "dtype") and hasattr(v, "shape"):
        return ("tensor", str(v.dtype).split(".")[-1], tuple(v.shape))
    return type(v).__name__


@pytest.mark.parametrize("x0,kw", _LBFGS_RUNS, ids=["fixed_step", "strong_wolfe"])
def test_lbfgs_float32_nonconvex_run_follows_torch(x0, kw):
    torch = pytest.importorskip("torch")
    ours, state = _lbfgs_path(md, x0, 60, **kw)
    theirs, tstate = _lbfgs_path(torch, x0, 60, **kw)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6)
    assert sorted(state) == sorted(tstate)
    for key in tstate:
        if isinstance(tstate[key], list):
            assert [_kind(v) for v in state[key]] == [_kind(v) for v in tstate[key]], key
        else:
            assert _kind(state[key]) == _kind(tstate[key]), key


def test_lbfgs_two_float32_iterations_equal_a_numpy_reference():
    """Two fixed-step iterations by hand in float32: the scalars (t, y.s, y.y, the two-loop
    coefficients) rounded to float32 where PyTorch keeps 0-d float32 tensors, each x += alpha d
    rounded once (PyTorch's add_ is a fused multiply-add)."""
    f32 = np.float32

    def axpy(x, v, alpha):   # x + alpha v, rounded once
        return (x.astype(np.float64) + v.astype(np.float64) * float(f32(alpha))).astype(np.float32)
    lr = 0.05
    x = np.array([-1.2, 1.0], dtype=np.float32)
    _, g = _rosenbrock(x)
    d = -g
    t = min(1.0, f32(1.0) / np.abs(g).sum()) * lr
    x = axpy(x, d, t)
    _, g2 = _rosenbrock(x)
    y, s = g2 - g, d * f32(t)
    ys = f32(y.dot(s))
    ro, h = f32(1.0) / ys, ys / f32(y.dot(y))
    al = f32(s.dot(-g2)) * ro
    q = axpy(-g2, y, -al)
    r = q * h
    be = f32(y.dot(r)) * ro
    d2 = axpy(r, s, al - be)
    expected = axpy(x, d2, lr)
    got, state = _lbfgs_path(md, [-1.2, 1.0], 1, lr=lr, max_iter=2, max_eval=5, history_size=3)
    np.testing.assert_array_equal(got[-1], expected)
    assert state["H_diag"].item() == h and state["ro"][0].item() == ro


def test_lbfgs_state_holds_pytorchs_types():
    _, state = _lbfgs_path(md, [-1.2, 1.0], 1, lr=0.1, max_iter=1, history_size=3)
    # after the first iteration: t = min(1, 1 / sum|g|) * lr, a 0-d tensor; H_diag the Python int 1
    assert isinstance(state["t"], md.Tensor) and state["t"].dtype == md.float32 and state["t"].ndim == 0
    assert state["H_diag"] == 1 and type(state["H_diag"]) is int and "al" not in state
    _, state = _lbfgs_path(md, [-1.2, 1.0], 3, lr=0.1, max_iter=1, history_size=3)
    assert type(state["t"]) is float and state["t"] == 0.1            # t = lr afterwards
    for v in [state["H_diag"], *state["ro"]]:
        assert isinstance(v, md.Tensor) and v.dtype == md.float32 and v.ndim == 0
    assert len(state["al"]) == 3 and state["al"][-1] is None and state["al"][0].dtype == md.float32
    assert type(state["prev_loss"]) is float and type(state["n_iter"]) is int and type(state["func_evals"]) is int
    assert state["d"].dtype == md.float32 and state["prev_flat_grad"].dtype == md.float32


def test_lbfgs_loaded_scalars_keep_their_kind_and_take_the_parameters_dtype():
    w = md.tensor(np.array([-1.2, 1.0], dtype=np.float32), requires_grad=True)
    opt = optim.LBFGS([w])
    sd = {"state": {0: {"func_evals": 3, "n_iter": 3, "t": np.array(0.5), "H_diag": 1, "prev_loss": 2.0,
                        "ro": [md.tensor(2.0, dtype=md.float64)], "al": [None, md.tensor(1.0)],
                        "d": np.zeros(2), "prev_flat_grad": np.zeros(2, np.float32),
                        "old_dirs": [np.ones(2, np.float32)], "old_stps": [np.ones(2, np.float32)]}},
          "param_groups": [dict(opt.param_groups[0], params=[0])]}
    opt.load_state_dict(sd)
    state = opt.state[w]
    assert isinstance(state["t"], md.Tensor) and state["t"].dtype == md.float32 and state["t"].item() == 0.5
    assert state["ro"][0].dtype == md.float32 and state["al"][0] is None and type(state["H_diag"]) is int
    bad = dict(sd, state={0: dict(sd["state"][0], t=np.zeros(2))})
    with pytest.raises(ValueError, match="'t': expected a number or a 0-d tensor"):
        opt.load_state_dict(bad)


# md.load onto a device keeps shared memory --------------------------------------------------------
def test_load_to_cuda_keeps_tensors_sharing_memory(tmp_path):
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        pytest.skip("runs under NUMBA_ENABLE_CUDASIM=1 (tests/conftest.py sets it)")
    try:
        backends.get("cuda")
    except RuntimeError as exc:
        pytest.skip(f"cuda device unavailable: {exc}")
    base = md.arange(6.0)
    path = str(tmp_path / "shared.pt")
    md.save({"a": base, "b": base[2:5], "c": base.reshape(2, 3).t(), "d": md.ones(2)}, path)
    for where in ("cuda", md.device("cuda"), {"cpu": "cuda"}, lambda storage, location: storage.cuda()):
        out = md.load(path, map_location=where)
        assert all(t.device.type == "cuda" for t in out.values())
        out["b"].add_(100)
        expected = np.arange(6.0)
        expected[2:5] += 100
        np.testing.assert_array_equal(out["a"].cpu().numpy(), expected)
        np.testing.assert_array_equal(out["c"].cpu().numpy(), expected.reshape(2, 3).T)
        np.testing.assert_array_equal(out["d"].cpu().numpy(), np.ones(2))


# indexed writes over the written tensor's memory ------------------------------------------------------
def _mask(lib, *positions):
    return lib.tensor([i in positions for i in range(6)])


_REFUSED = {
    "mask_setitem": lambda lib, x: x.__setitem__(_mask(lib, 2, 3), x[:2]),
    "mask_setitem_same_elements": lambda lib, x: x.__setitem__(_mask(lib, 0, 1), x[:2]),
    "int_setitem": lambda lib, x: x.__setitem__(lib.tensor([2, 3]), x[:2]),
    "int_setitem_same_elements": lambda lib, x: x.__setitem__(lib.tensor([2, 3]), x[2:4]),
    "int_setitem_one_element": lambda lib, x: x.__setitem__(lib.tensor([2, 3]), x[0]),
    "int_setitem_whole": lambda lib, x: x.__setitem__(lib.arange(6), x),
    "index_put_": lambda lib, x: x.index_put_((lib.tensor([2, 3]),), x[:2]),
    "index_put_accumulate": lambda lib, x: x.index_put_((_mask(lib, 4, 5),), x[1], accumulate=True),
    "index_copy_": lambda lib, x: x.index_copy_(0, lib.tensor([2, 3]), x[:2]),
    "index_copy_whole": lambda lib, x: x.index_copy_(0, lib.arange(6), x),
    "index_add_whole": lambda lib, x: x.index_add_(0, lib.arange(6), x),
    "scatter_whole": lambda lib, x: x.scatter_(0, lib.arange(6), x),
    "put_whole": lambda lib, x: x.put_(lib.arange(6), x),
}

_ALLOWED = {   # name: (write, the result NumPy computes)
    "mask_setitem_one_value": (lambda lib, x: x.__setitem__(_mask(lib, 4, 5), x[1]), [0, 1, 2, 3, 1, 1]),
    "index_put_one_value": (lambda lib, x: x.index_put_((_mask(lib, 4, 5),), x[1:2]), [0, 1, 2, 3, 1, 1]),
    "strided_value": (lambda lib, x: x.__setitem__(lib.tensor([2, 3]), x[::3]), [0, 1, 0, 3, 4, 5]),
    "strided_index_copy_": (lambda lib, x: x.index_copy_(0, lib.tensor([0, 1]), x[::3]), [0, 3, 2, 3, 4, 5]),
    "index_fill_": (lambda lib, x: x.index_fill_(0, lib.tensor([0, 1]), x[3]), [3, 3, 2, 3, 4, 5]),
    "basic_setitem_broadcast": (lambda lib, x: x.__setitem__(slice(0, 2), x[1]), [1, 1, 2, 3, 4, 5]),
    # masked_scatter_ reads a contiguous source as it writes: position 1 takes element 0, position 2
    # element 1, which now holds 0, and so on
    "masked_scatter_chain": (lambda lib, x: x.masked_scatter_(_mask(lib, 1, 2, 3, 4, 5), x), [0, 0, 0, 0, 0, 0]),
    "masked_scatter_ahead": (lambda lib, x: x.masked_scatter_(_mask(lib, 0, 1, 2, 3, 4), x[1:]), [1, 2, 3, 4, 5, 5]),
    "masked_scatter_apart": (lambda lib, x: x.masked_scatter_(_mask(lib, 2, 3), x[:2]), [0, 1, 0, 1, 4, 5]),
    "masked_scatter_strided": (lambda lib, x: x.masked_scatter_(_mask(lib, 1, 2, 3, 4, 5), x.reshape(3, 2)[:, 0]
                                                                .repeat(2)), [0, 0, 2, 4, 0, 2]),
}


@pytest.mark.parametrize("name", list(_REFUSED))
def test_indexed_write_over_its_own_memory_is_refused(name):
    x = md.arange(6.0)
    with pytest.raises(RuntimeError, match=OVERLAP):
        _REFUSED[name](md, x)
    np.testing.assert_array_equal(x.numpy(), np.arange(6.0))


@pytest.mark.parametrize("name", list(_ALLOWED))
def test_indexed_write_pytorch_allows(name):
    write, expected = _ALLOWED[name]
    x = md.arange(6.0)
    write(md, x)
    np.testing.assert_array_equal(x.numpy(), np.array(expected, dtype=np.float32))


def test_masked_scatter_reads_a_transposed_self_in_its_logical_order():
    x = md.arange(6.0).reshape(2, 3)
    mask = md.tensor([[False, True, True], [True, True, True]])
    x.t().masked_scatter_(mask.t(), x.reshape(-1))
    np.testing.assert_array_equal(x.numpy(), [[0, 1, 0], [0, 2, 2]])


@pytest.mark.parametrize("name", list(_REFUSED) + list(_ALLOWED))
def test_indexed_writes_over_own_memory_as_torch(name):
    torch = pytest.importorskip("torch")
    write = _REFUSED.get(name) or _ALLOWED[name][0]
    outcomes = []
    for lib in (md, torch):
        x = lib.arange(6.0)
        try:
            write(lib, x)
            outcomes.append(x.tolist())
        except RuntimeError as exc:
            assert OVERLAP in str(exc)
            outcomes.append("refused")
    assert outcomes[0] == outcomes[1]


# autocast on the CPU: the linear-algebra functions' dtypes ---------------------------------------------
def _square(n=4, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n))
    return (a @ a.T + n * np.eye(n)).astype(np.float32)


_A, _V, _B = _square(), np.arange(1.0, 5.0, dtype=np.float32), np.ones((4, 3), np.float32)
_AUTOCAST_DTYPES = {   # name: (call, the output dtype under autocast(bfloat16), as PyTorch's)
    "pinverse": (lambda lib, t: lib.pinverse(t(_A)), "float32"),
    "pinverse_of_bfloat16": (lambda lib, t: lib.pinverse(t(_A).to(lib.bfloat16)), "float32"),
    "linalg.pinv": (lambda lib, t: lib.linalg.pinv(t(_A)), "bfloat16"),
    "linalg.pinv_hermitian": (lambda lib, t: lib.linalg.pinv(t(_A), hermitian=True), "bfloat16"),
    "inner_matrices": (lambda lib, t: lib.inner(t(_A), t(_A)), "bfloat16"),
    "inner_vectors": (lambda lib, t: lib.inner(t(_V), t(_V)), "float32"),
    "tensordot_full": (lambda lib, t: lib.tensordot(t(_A), t(_A), dims=2), "float32"),
    "tensordot_matrix": (lambda lib, t: lib.tensordot(t(_A), t(_A), dims=1), "bfloat16"),
    "linalg.vecdot": (lambda lib, t: lib.linalg.vecdot(t(_A), t(_A)), "bfloat16"),
    "linalg.vecdot_mixed": (lambda lib, t: lib.linalg.vecdot(t(_A).to(lib.bfloat16), t(_A)), "bfloat16"),
    "trace_of_bfloat16": (lambda lib, t: lib.trace(t(_A).to(lib.bfloat16)), "float32"),
    "cdist_of_bfloat16": (lambda lib, t: lib.cdist(t(_A).to(lib.bfloat16), t(_A).to(lib.bfloat16)), "float32"),
    "cholesky_solve_mixed": (lambda lib, t: lib.cholesky_solve(t(_B).to(lib.bfloat16),
                                                               lib.linalg.cholesky(t(_A))), "float32"),
    "triangular_solve_mixed": (lambda lib, t: lib.triangular_solve(t(_B).to(lib.bfloat16),
                                                                   lib.linalg.cholesky(t(_A)), upper=False)[0],
                               "float32"),
    "householder_product_of_bfloat16": (lambda lib, t: lib.linalg.householder_product(
        t(_A).to(lib.bfloat16), t(_V[:3]).to(lib.bfloat16)), "float32"),
    "geqrf_of_bfloat16": (lambda lib, t: lib.geqrf(t(_A).to(lib.bfloat16))[0], "float32"),
    "matrix_rank_of_bfloat16": (lambda lib, t: lib.linalg.matrix_rank(t(_A).to(lib.bfloat16)), "int64"),
    "dot": (lambda lib, t: lib.dot(t(_V), t(_V)), "float32"),
    "mv": (lambda lib, t: lib.mv(t(_A), t(_V)), "float32"),
    "matmul": (lambda lib, t: lib.matmul(t(_A), t(_A)), "bfloat16"),
    "linalg.inv_of_bfloat16": (lambda lib, t: lib.linalg.inv(t(_A).to(lib.bfloat16)), "float32"),
}


def _dtype_name(t):
    return str(t.dtype).split(".")[-1]


@pytest.mark.parametrize("name", list(_AUTOCAST_DTYPES))
def test_autocast_dtype_of_linalg_functions(name):
    call, expected = _AUTOCAST_DTYPES[name]
    with md.autocast("cpu", dtype=md.bfloat16):
        out = call(md, md.tensor)
    assert _dtype_name(out) == expected


@pytest.mark.parametrize("name", list(_AUTOCAST_DTYPES))
def test_autocast_dtype_of_linalg_functions_as_torch(name):
    torch = pytest.importorskip("torch")
    call, _ = _AUTOCAST_DTYPES[name]
    outs = []
    for lib in (md, torch):
        with lib.autocast("cpu", dtype=lib.bfloat16):
            outs.append(call(lib, lib.tensor))
    assert _dtype_name(outs[0]) == _dtype_name(outs[1])
    np.testing.assert_allclose(outs[0].float().numpy(), outs[1].float().numpy(), rtol=2e-2, atol=2e-2)


def test_autocast_pinv_values_and_gradient():
    """linalg.pinv under autocast is PyTorch's composition: svd in float32, the last product a
    lowered matmul; the plain float32 pseudo-inverse rounded to bfloat16 is within that rounding."""
    a = md.tensor(_A, requires_grad=True)
    with md.autocast("cpu", dtype=md.bfloat16):
        p = md.linalg.pinv(a)
        q = md.pinverse(a)
    np.testing.assert_allclose(p.float().detach().numpy(), np.linalg.pinv(_A), rtol=3e-2, atol=3e-3)
    np.testing.assert_allclose(q.detach().numpy(), np.linalg.pinv(_A), rtol=1e-5, atol=1e-6)
    p.float().sum().backward()
    assert a.grad.dtype == md.float32 and np.isfinite(a.grad.numpy()).all()
    rng = np.random.default_rng(1)
    a64 = md.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    with md.autocast("cpu", dtype=md.bfloat16):   # float64 is never cast: the composition in float64
        gradcheck(lambda t: md.linalg.pinv(t), (a64,))


def test_inner_and_tensordot_refuse_mixed_dtypes():
    with pytest.raises(RuntimeError, match="both inputs should have same dtype"):
        md.inner(md.tensor(_V), md.tensor(_V).double())
    with pytest.raises(RuntimeError, match="both inputs should have same dtype"):
        md.tensordot(md.tensor(_A), md.tensor(_A).to(md.bfloat16), dims=1)
    np.testing.assert_allclose(md.inner(md.tensor(_V), md.tensor(_V)).item(), float(_V @ _V))


def test_matrix_norm_of_low_precision_by_singular_values_is_refused_under_autocast():
    with md.autocast("cpu", dtype=md.bfloat16):
        with pytest.raises(RuntimeError, match="linalg.matrix_norm: Low precision dtypes not supported"):
            md.linalg.matrix_norm(md.tensor(_A).to(md.bfloat16), 2)
