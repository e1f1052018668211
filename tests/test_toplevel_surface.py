"""PyTorch's top-level functions that are thin forms of Tensor methods (torch.abs_...), the window
functions, segment_reduce, the low-rank SVD/PCA, the ``*_copy`` view forms, DLPack and the process
settings. (The forms of nn.functional: test_toplevel_nn_ops.py.)"""
import warnings

import numpy as np
import pytest

import minidl as md
from minidl._namespace_toplevel import INPLACE_METHODS, MODULE_ONLY
from minidl.autograd import gradcheck

rng = np.random.default_rng(0)


def _t(a, grad=False, dtype=md.float64):
    return md.tensor(np.asarray(a), dtype=dtype, requires_grad=grad)


def _close(a, b, **kw):
    np.testing.assert_allclose(np.asarray(a.detach().numpy() if isinstance(a, md.Tensor) else a),
                               np.asarray(b.detach().numpy() if hasattr(b, "detach") else b), **kw)


def test_every_name_is_at_the_top_level():
    for name in list(MODULE_ONLY) + ["as_strided_"]:
        assert callable(getattr(md, name)), name
    assert hasattr(md.Tensor, "as_strided_") and hasattr(md.Tensor, "__dlpack__")


# --- in-place forms ----------------------------------------------------------------------------------------
INPLACE_ARGS = {"clamp_": (-0.2, 0.3), "clip_": (-0.2, 0.3), "clamp_max_": (0.1,), "clamp_min_": (0.1,),
                "fill_": (2.5,), "ldexp_": (None,), "xlogy_": (None,), "gcd_": (None,), "lcm_": (None,),
                "addmv_": ("mat", "vec"), "nan_to_num_": (0.0,), "logit_": (1e-3,)}
_INTEGER = ("gcd_", "lcm_")


def _inplace_inputs(name, m):
    if name in _INTEGER:
        base = m.tensor([4, 6, 9, 12])
    else:
        base = m.tensor([0.1, 0.4, 0.7, 0.9], dtype=m.float64)
    args = []
    for a in INPLACE_ARGS.get(name, ()):
        if a is None:
            args.append(m.tensor([2, 3, 4, 6]) if name in _INTEGER or name == "ldexp_"
                        else m.tensor([0.5, 1.0, 2.0, 3.0], dtype=m.float64))
        elif a == "mat":
            args.append(m.tensor(np.arange(12.0).reshape(4, 3) / 10, dtype=m.float64))
        elif a == "vec":
            args.append(m.tensor([0.1, -0.2, 0.3], dtype=m.float64))
        else:
            args.append(a)
    return base, args


@pytest.mark.parametrize("name", INPLACE_METHODS)
def test_inplace_form_is_the_method(name):
    t, args = _inplace_inputs(name, md)
    expected = getattr(t.clone(), name)(*args)
    assert getattr(md, name)(t, *args) is t
    _close(t, expected)


@pytest.mark.parametrize("name", INPLACE_METHODS)
def test_inplace_form_matches_torch(name):
    torch = pytest.importorskip("torch")
    ours, args = _inplace_inputs(name, md)
    theirs, targs = _inplace_inputs(name, torch)
    getattr(md, name)(ours, *args)
    getattr(torch, name)(theirs, *targs)
    _close(ours, theirs, rtol=1e-12)


def test_inplace_forms_record_gradients_and_refuse_leaves():
    x = _t([0.2, 0.5], grad=True)
    y = x * 1
    md.sin_(y)
    y.sum().backward()
    _close(x.grad, np.cos([0.2, 0.5]))
    with pytest.raises(RuntimeError, match="leaf"):
        md.exp_(_t([1.0], grad=True))
    d = x * 2
    assert md.detach_(d) is d and not d.requires_grad


# --- windows ----------------------------------------------------------------------------------------------
WINDOWS = {"hann_window": np.hanning, "hamming_window": np.hamming, "blackman_window": np.blackman,
           "bartlett_window": np.bartlett, "kaiser_window": lambda n: np.kaiser(n, 12.0)}


@pytest.mark.parametrize("name", sorted(WINDOWS))
def test_window_values(name):
    fn = getattr(md, name)
    for n in (0, 1, 2, 5, 16):
        _close(fn(n, False, dtype=md.float64), WINDOWS[name](n), atol=1e-12)
        if n > 1:   # periodic: one longer, cut (a window of one sample is [1] either way)
            _close(fn(n, dtype=md.float64), WINDOWS[name](n + 1)[:n], atol=1e-12)
    assert fn(1).tolist() == [1.0] and fn(0).shape == (0,)
    w = fn(8, requires_grad=True)
    assert w.dtype == md.float32 and w.requires_grad and w.is_leaf and w.shape == (8,)
    assert fn(4, dtype=md.float16).dtype == md.float16
    with pytest.raises(RuntimeError, match="floating point"):
        fn(4, dtype=md.int64)
    with pytest.raises(RuntimeError, match="non-negative"):
        fn(-1)
    with pytest.raises(TypeError, match="window_length"):
        fn(4.0)


def test_window_parameters():
    _close(md.hamming_window(6, False, 0.6, 0.4, dtype=md.float64), 0.6 - 0.4 * np.cos(2 * np.pi * np.arange(6) / 5))
    _close(md.kaiser_window(7, False, 5.0, dtype=md.float64), np.kaiser(7, 5.0), atol=1e-12)


@pytest.mark.parametrize("name", sorted(WINDOWS))
def test_windows_match_torch(name):
    torch = pytest.importorskip("torch")
    for n in (1, 2, 7, 64):
        for periodic in (True, False):
            for dt, tdt, tol in ((md.float64, torch.float64, 1e-12), (md.float32, torch.float32, 1e-6)):
                ours = getattr(md, name)(n, periodic, dtype=dt)
                theirs = getattr(torch, name)(n, periodic, dtype=tdt)
                _close(ours, theirs, atol=tol)
    if name in ("hamming_window", "kaiser_window"):
        _close(getattr(md, name)(9, True, 0.3, dtype=md.float64), getattr(torch, name)(9, True, 0.3,
                                                                                       dtype=torch.float64))


# --- segment_reduce ---------------------------------------------------------------------------------------
SEG_DATA = np.array([1.0, 5.0, 5.0, 2.0, 3.0, 7.0])
SEG_LENGTHS = np.array([3, 0, 2, 1])


def _segment_reference(data, lengths, reduce, initial):
    out, start = [], 0
    for n in lengths:
        seg = data[start:start + n]
        start += n
        extra = [] if initial is None else [initial]
        if reduce == "sum":
            out.append(seg.sum() + (initial or 0))
        elif reduce == "mean":
            out.append((seg.sum() + (initial or 0)) / n if n else (np.nan if initial is None else initial))
        elif reduce == "prod":
            out.append(seg.prod() * (1 if initial is None else initial))
        elif reduce == "max":
            out.append(max(list(seg) + extra) if n or extra else -np.inf)
        else:
            out.append(min(list(seg) + extra) if n or extra else np.inf)
    return np.array(out)


@pytest.mark.parametrize("reduce", ["sum", "mean", "prod", "max", "min"])
@pytest.mark.parametrize("initial", [None, 4.0])
def test_segment_reduce_values_and_gradients(reduce, initial):
    out = md.segment_reduce(_t(SEG_DATA), reduce, lengths=md.tensor(SEG_LENGTHS), initial=initial)
    _close(out, _segment_reference(SEG_DATA, SEG_LENGTHS, reduce, initial))
    offsets = md.tensor(np.concatenate([[0], np.cumsum(SEG_LENGTHS)]))
    _close(md.segment_reduce(_t(SEG_DATA), reduce, offsets=offsets, initial=initial), out)
    x = _t(rng.standard_normal(6), grad=True)   # distinct values: no ties, so finite differences apply
    assert gradcheck(lambda d: md.segment_reduce(d, reduce, lengths=md.tensor([3, 2, 1]), initial=initial), (x,))
    x2 = _t(rng.standard_normal((2, 5, 3)), grad=True)
    lengths = md.tensor([[2, 3], [5, 0]])
    f = (lambda d: md.segment_reduce(d, reduce, lengths=lengths, axis=1, initial=initial).nan_to_num(0, 0, 0))
    assert gradcheck(f, (x2,))


def test_segment_reduce_ties_share_the_gradient_and_errors():
    x = _t([1.0, 5.0, 5.0, 2.0], grad=True)
    md.segment_reduce(x, "max", lengths=md.tensor([3, 1])).sum().backward()
    _close(x.grad, [0, 0.5, 0.5, 1])
    with pytest.raises(RuntimeError, match="indices based reduction"):
        md.segment_reduce(x, "sum", indices=md.tensor([0, 0, 1, 1]))
    with pytest.raises(RuntimeError, match="sum to"):
        md.segment_reduce(x, "sum", lengths=md.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="reduce argument"):
        md.segment_reduce(x, "median", lengths=md.tensor([4]))
    with pytest.raises(RuntimeError, match="last dimension of lengths"):
        md.segment_reduce(_t(np.ones((2, 4))), "sum", lengths=md.tensor([2, 2]), axis=1)


@pytest.mark.parametrize("reduce", ["sum", "mean", "prod", "max", "min"])
def test_segment_reduce_matches_torch(reduce):
    torch = pytest.importorskip("torch")
    data = rng.standard_normal((2, 7, 3))
    lengths = np.array([[2, 0, 5], [4, 3, 0]])
    for initial in (None, 0.5):
        ours = _t(data, grad=True)
        theirs = torch.tensor(data, requires_grad=True)
        a = md.segment_reduce(ours, reduce, lengths=md.tensor(lengths), axis=1, initial=initial)
        b = torch.segment_reduce(theirs, reduce, lengths=torch.tensor(lengths), axis=1, initial=initial)
        _close(a, b, rtol=1e-12, equal_nan=True)
        g = np.where(np.isfinite(b.detach().numpy()), rng.standard_normal(b.shape), 0)
        a.backward(md.tensor(g))
        b.backward(torch.tensor(g))
        _close(ours.grad, theirs.grad, rtol=1e-10, atol=1e-12)


# --- low-rank SVD and PCA ---------------------------------------------------------------------------------
def test_svd_lowrank_recovers_a_low_rank_matrix():
    md.manual_seed(0)
    a = rng.standard_normal((20, 3)) @ rng.standard_normal((3, 12))
    for mat in (a, a.T):
        U, S, V = md.svd_lowrank(_t(mat), q=5)
        assert U.shape == (mat.shape[0], 5) and S.shape == (5,) and V.shape == (mat.shape[1], 5)
        _close((U * S) @ V.mT, mat, atol=1e-10)
        _close(S[:3], np.linalg.svd(mat)[1][:3], rtol=1e-10)
        _close(U.mT @ U, np.eye(5), atol=1e-10)
    M = np.ones((20, 12))
    U, S, V = md.svd_lowrank(_t(a + M), q=4, M=_t(M))
    _close((U * S) @ V.mT, a, atol=1e-9)
    x = _t(a, grad=True)
    md.svd_lowrank(x, q=3)[1].sum().backward()      # d(sum sigma)/dA = U V^T for the exact rank
    u, s, vt = np.linalg.svd(a)
    _close(x.grad, u[:, :3] @ vt[:3], atol=1e-6)


def test_pca_lowrank_centres():
    md.manual_seed(1)
    a = rng.standard_normal((30, 2)) @ rng.standard_normal((2, 6)) + 5.0
    U, S, V = md.pca_lowrank(_t(a), q=3)
    centred = a - a.mean(0)
    _close(S[:2], np.linalg.svd(centred)[1][:2], rtol=1e-9)
    _close((U * S) @ V.mT, centred, atol=1e-9)
    assert md.pca_lowrank(_t(a)).__len__() == 3 and md.pca_lowrank(_t(a))[1].shape == (6,)
    with pytest.raises(ValueError, match="q"):
        md.pca_lowrank(_t(a), q=7)
    with pytest.raises(ValueError, match="niter"):
        md.pca_lowrank(_t(a), niter=-1)


def test_lowrank_matches_torch():
    torch = pytest.importorskip("torch")
    a = rng.standard_normal((15, 4)) @ rng.standard_normal((4, 9))
    _close(md.svd_lowrank(_t(a), 6)[1][:4], torch.svd_lowrank(torch.tensor(a), 6)[1][:4], rtol=1e-9)
    _close(md.pca_lowrank(_t(a), 4, True)[1], torch.pca_lowrank(torch.tensor(a), 4, True)[1], rtol=1e-9)


# --- tensor functions -------------------------------------------------------------------------------------
def test_unravel_index():
    rows, cols = md.unravel_index(md.tensor([[0, 5], [7, 11]]), (3, 4))
    r, c = np.unravel_index([[0, 5], [7, 11]], (3, 4))
    assert np.array_equal(rows.numpy(), r) and np.array_equal(cols.numpy(), c) and rows.dtype == md.int64
    assert [t.tolist() for t in md.unravel_index(md.tensor(5), 10)] == [5]
    with pytest.raises(TypeError, match="integer dtype"):
        md.unravel_index(md.tensor([1.0]), (2, 3))
    with pytest.raises(ValueError, match="negative"):
        md.unravel_index(md.tensor([1]), (2, -3))
    torch = pytest.importorskip("torch")
    for idx in ([-1, 5, 6, -7], [[1234], [5678]]):
        for shape in ((2, 3), (10, 10, 10, 10), 7):
            ours, theirs = md.unravel_index(md.tensor(idx), shape), torch.unravel_index(torch.tensor(idx), shape)
            assert [t.tolist() for t in ours] == [t.tolist() for t in theirs]


def test_small_tensor_functions():
    s = md.scalar_tensor(3)
    assert s.shape == () and s.dtype == md.float32 and s.item() == 3.0
    assert md.scalar_tensor(2, dtype=md.int64, requires_grad=False).dtype == md.int64
    _close(md.rsub(_t([1.0, 2.0]), 5, alpha=2), [3.0, 1.0])
    assert md.rsub(md.tensor([1, 2]), md.tensor([3, 3])).tolist() == [2, 1]
    assert md.is_signed(md.tensor([1])) and not md.is_signed(md.tensor([1], dtype=md.uint8))
    assert md.get_device(md.ones(1)) == -1
    x = _t([1.0, 2.0, 3.0], grad=True)
    v = _t(3.0, grad=True)
    out = md.fill(x, v)
    out.sum().backward()
    assert out.tolist() == [3.0] * 3 and x.grad.tolist() == [0.0] * 3 and v.grad.item() == 3.0
    assert md.fill(md.tensor([1, 2]), 2.7).tolist() == [2, 2]
    with pytest.raises(RuntimeError, match="0-dimension"):
        md.fill(x, md.ones(2))
    a = rng.standard_normal((3, 4, 5))
    _close(md.frobenius_norm(_t(a), [0, 2]), np.sqrt((a ** 2).sum((0, 2))))
    _close(md.frobenius_norm(_t(a), 1, True), np.sqrt((a ** 2).sum(1, keepdims=True)))
    with pytest.raises(RuntimeError, match="at most 2"):
        md.frobenius_norm(_t(a), [0, 1, 2])
    _close(md.nuclear_norm(_t(a[0])), np.linalg.svd(a[0])[1].sum())
    _close(md.nuclear_norm(_t(a[0]), True), [[np.linalg.svd(a[0])[1].sum()]])
    _close(md.nuclear_norm(_t(a), [1, 2]), np.linalg.svd(a)[1].sum(-1))
    with pytest.raises(RuntimeError, match="2 dimensions"):
        md.nuclear_norm(_t(a))
    parts = md.split_with_sizes(_t(a), [1, 2], 0)
    assert [p.shape[0] for p in parts] == [1, 2]
    e = md.empty_permuted((2, 3, 4), (2, 0, 1))
    assert e.shape == (2, 3, 4) and e.stride() == (3, 1, 6) and e.dtype == md.float32
    with pytest.raises(RuntimeError, match="permutation"):
        md.empty_permuted((2, 3), (0, 0))


def test_small_tensor_functions_match_torch():
    torch = pytest.importorskip("torch")
    a = rng.standard_normal((3, 4))
    ours, theirs = _t(a, grad=True), torch.tensor(a, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pairs = [(md.frobenius_norm(ours, [0, 1]), torch.frobenius_norm(theirs, [0, 1])),
                 (md.nuclear_norm(ours), torch.nuclear_norm(theirs)),
                 (md.rsub(ours, 2.0, alpha=3).sum(), torch.rsub(theirs, 2.0, alpha=3).sum())]
    for x, y in pairs:
        _close(x, y, rtol=1e-10)
        ours.grad = None
        theirs.grad = None
        x.backward()
        y.backward()
        _close(ours.grad, theirs.grad, rtol=1e-8)
    assert md.empty_permuted((2, 3, 4), (1, 2, 0)).stride() == torch.empty_permuted((2, 3, 4), (1, 2, 0)).stride()
    assert md.scalar_tensor(True).dtype == md.float32 and torch.scalar_tensor(True).dtype == torch.float32


def test_histogramdd():
    pts = rng.uniform(0, 1, (40, 2))
    w = rng.uniform(0, 1, 40)
    hist, edges = md.histogramdd(_t(pts), [3, 4], range=[0.0, 1.0, 0.0, 1.0], weight=_t(w), density=True)
    h, e = np.histogramdd(pts, [3, 4], range=[(0, 1), (0, 1)], weights=w, density=True)
    _close(hist, h)
    for a, b in zip(edges, e):
        _close(a, b)
    hist2 = md.histogramdd(_t(pts), [md.tensor([0.0, 0.5, 1.0], dtype=md.float64), md.tensor([0.0, 1.0],
                                                                                              dtype=md.float64)])
    assert hist2.hist.sum().item() == 40 and hist2.hist.shape == (2, 1)
    with pytest.raises(RuntimeError, match="floating point"):
        md.histogramdd(md.tensor([[1, 2]]), 2)
    with pytest.raises(RuntimeError, match="bin sequences"):
        md.histogramdd(_t(pts), [2, 2, 2])
    torch = pytest.importorskip("torch")
    ours = md.histogramdd(_t(pts), 3)
    theirs = torch.histogramdd(torch.tensor(pts), 3)
    _close(ours.hist, theirs.hist)
    for a, b in zip(ours.bin_edges, theirs.bin_edges):
        _close(a, b, rtol=1e-12)


COPY_CASES = {
    "view_copy": ([6, 4],), "permute_copy": ([2, 0, 1],), "transpose_copy": (0, 2), "squeeze_copy": (),
    "unsqueeze_copy": (1,), "select_copy": (1, 2), "narrow_copy": (2, 1, 2), "diagonal_copy": (0, 1, 2),
    "detach_copy": (), "unfold_copy": (2, 2, 1), "as_strided_copy": ([2, 2], [1, 2], 1), "alias_copy": (),
    "unbind_copy": (1,), "split_copy": (2, 2), "split_with_sizes_copy": ([1, 3], 2), "expand_copy": ([2, 2, 3, 4],),
    "slice_copy": (2, 1, 4, 2),
}


@pytest.mark.parametrize("name", sorted(COPY_CASES))
def test_copy_forms_own_their_memory(name):
    x = _t(rng.standard_normal((2, 3, 4)), grad=True)
    out = getattr(md, name)(x, *COPY_CASES[name])
    pieces = out if isinstance(out, tuple) else (out,)
    for p in pieces:
        assert p.is_contiguous()
        before = x.detach().numpy().copy()
        with md.no_grad():
            p.add_(1.0)
        assert np.array_equal(x.detach().numpy(), before)   # no memory shared with x
    torch = pytest.importorskip("torch")
    xt = torch.tensor(x.detach().numpy(), requires_grad=True)
    ref = getattr(torch, name)(xt, *COPY_CASES[name])
    ours = getattr(md, name)(x, *COPY_CASES[name])
    ref_pieces, our_pieces = (ref, ours) if isinstance(ref, tuple) else ((ref,), (ours,))
    assert len(ref_pieces) == len(our_pieces)
    for a, b in zip(our_pieces, ref_pieces):
        _close(a, b)
    if name != "detach_copy":
        sum(p.sum() for p in our_pieces).backward()
        sum(p.sum() for p in ref_pieces).backward()
        _close(x.grad, xt.grad)
    else:
        assert not ours.requires_grad


def test_as_strided_inplace():
    x = md.arange(6.0)
    assert md.as_strided_(x, (2, 2), (1, 2)) is x
    assert x.tolist() == [[0.0, 2.0], [1.0, 3.0]]
    y = md.arange(6.0).as_strided_((3,), (2,), 1)
    assert y.tolist() == [1.0, 3.0, 5.0]


# --- interchange and process settings ---------------------------------------------------------------------
def test_typename_and_is_storage():
    assert md.typename(md.ones(1)) == "minidl.FloatTensor"
    assert md.typename(md.nn.Linear) == "minidl.nn.modules.linear.Linear" or md.typename(md.nn.Linear).endswith(
        ".Linear")
    assert md.typename(3) == "int" and md.typename(len) == "len"
    assert md.is_storage(md.ones(1)) is False
    assert md.is_storage(md.ones(1).untyped_storage()) is True
    assert md.set_flush_denormal(True) is False and md.set_flush_denormal(False) is True
    before = md.is_warn_always_enabled()
    md.set_warn_always(True)
    assert md.is_warn_always_enabled() is True
    md.set_warn_always(before)


def test_dlpack_shares_memory():
    t = md.arange(4.0)
    back = md.from_dlpack(md.to_dlpack(t))
    back.add_(1.0)
    assert t.tolist() == [1.0, 2.0, 3.0, 4.0]
    a = np.arange(3, dtype=np.int32)
    v = md.from_dlpack(a)
    a[0] = 7
    assert v.tolist() == [7, 1, 2] and v.dtype == md.int32
    n = np.from_dlpack(t)        # minidl tensors speak the protocol
    n[1] = -1
    assert t[1].item() == -1
    with pytest.raises(BufferError, match="require gradient"):
        md.ones(2, requires_grad=True).__dlpack__()
    with pytest.raises(TypeError, match="__dlpack__"):
        md.from_dlpack([1, 2])
    assert md.from_dlpack(np.arange(3.0), copy=True).tolist() == [0.0, 1.0, 2.0]


def test_dlpack_with_torch():
    torch = pytest.importorskip("torch")
    src = torch.arange(5.0)
    ours = md.from_dlpack(src)
    src[0] = 9
    assert ours.tolist() == [9.0, 1.0, 2.0, 3.0, 4.0]
    mine = md.arange(3.0)
    theirs = torch.from_dlpack(mine)
    theirs[2] = -5
    assert mine.tolist() == [0.0, 1.0, -5.0]
    assert md.from_dlpack(torch.utils.dlpack.to_dlpack(torch.ones(2))).tolist() == [1.0, 1.0]


def test_frombuffer():
    buf = bytearray(np.arange(4, dtype=np.float32).tobytes())
    t = md.frombuffer(buf, dtype=md.float32)
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
    t[0] = 5.0
    assert np.frombuffer(buf, np.float32)[0] == 5.0   # the same memory
    assert md.frombuffer(buf, dtype=md.float32, count=2, offset=4).tolist() == [1.0, 2.0]
    assert md.frombuffer(b"\x01\x02", dtype=md.uint8, requires_grad=False).tolist() == [1, 2]
    for kwargs, match in ((dict(offset=100), "offset"), (dict(count=10), "requested buffer length"),
                          (dict(offset=1), "multiple of element size"), (dict(count=0), "must not be 0")):
        with pytest.raises(ValueError, match=match):
            md.frombuffer(bytearray(16), dtype=md.float32, **kwargs)


def test_frombuffer_matches_torch():
    torch = pytest.importorskip("torch")
    raw = bytearray(np.arange(6, dtype=np.int16).tobytes())
    assert md.frombuffer(raw, dtype=md.int16, count=3, offset=2).tolist() == \
        torch.frombuffer(raw, dtype=torch.int16, count=3, offset=2).tolist()


def test_autocast_accessors():
    from minidl import amp
    with pytest.deprecated_call():
        assert md.get_autocast_cpu_dtype() == amp.get_autocast_dtype("cpu") == md.bfloat16
    with pytest.deprecated_call():
        assert md.get_autocast_gpu_dtype() == md.float16
    try:
        with pytest.deprecated_call():
            md.set_autocast_cpu_dtype(md.float16)
        assert amp.get_autocast_dtype("cpu") == md.float16
        with pytest.deprecated_call():
            md.set_autocast_gpu_dtype(md.bfloat16)
        assert amp.get_autocast_dtype("cuda") == md.bfloat16
        with pytest.deprecated_call():
            md.set_autocast_cpu_enabled(True)
        assert amp.is_autocast_enabled("cpu")
        with pytest.deprecated_call():
            assert md.is_autocast_cpu_enabled() is True
    finally:
        amp.set_autocast_enabled("cpu", False)
        amp.set_autocast_dtype("cpu", md.bfloat16)
        amp.set_autocast_dtype("cuda", md.float16)
    with pytest.deprecated_call():
        assert md.is_autocast_cpu_enabled() is False


def test_set_default_tensor_type():
    try:
        with pytest.warns(UserWarning, match="deprecated"):
            md.set_default_tensor_type(md.DoubleTensor)
        assert md.get_default_dtype() == md.float64 and md.ones(1).dtype == md.float64
        with pytest.warns(UserWarning):
            md.set_default_tensor_type("torch.FloatTensor")
        assert md.get_default_dtype() == md.float32
        with pytest.warns(UserWarning), pytest.raises(TypeError, match="floating-point"):
            md.set_default_tensor_type(md.LongTensor)
        with pytest.warns(UserWarning), pytest.raises(NotImplementedError, match="CPU"):
            md.set_default_tensor_type("torch.cuda.FloatTensor")
        with pytest.warns(UserWarning), pytest.raises(TypeError, match="invalid type"):
            md.set_default_tensor_type("torch.Nothing")
    finally:
        md.set_default_dtype(md.float32)
