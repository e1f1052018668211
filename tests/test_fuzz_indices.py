"""Fuzzing every op that takes indices, dims or sizes: embedding, indexing, reshape, the dim
arguments (squeeze, unsqueeze, transpose, permute, flatten, reductions, softmax, cat, stack),
pooling and convolution geometry, loss targets and the factories' sizes.

Hypothesis draws in-range, out-of-range, negative, empty and huge values. Each op must give
the answer of a NumPy reference written here from the definition (PyTorch's semantics,
gradients included where the op has one) or, exactly when PyTorch refuses the arguments, a
clean IndexError / ValueError / RuntimeError / TypeError: never a crash, a Numba error or a
MemoryError. Huge sizes are drawn only beyond what any machine holds (2**40 elements and
more), so they must be refused before anything is allocated; the sizes that are accepted stay
tiny, so each example costs microseconds.

Profiles (registered in conftest.py): "ci", the default, runs a dozen examples per test (the
file takes seconds); a deeper search on demand:

    MINIDL_FUZZ=long pytest tests/test_fuzz_indices.py          # or --hypothesis-profile=long
"""
import math

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minidl as md
import minidl.nn.functional as F
from minidl.tensor.allocation import physical_memory

CLEAN = (IndexError, ValueError, RuntimeError, TypeError)
HUGE = st.sampled_from([2 ** 40, 10 ** 12, 2 ** 62, 2 ** 63 - 1, 2 ** 63, 10 ** 20, 2 ** 80])


def ints(lo, hi):
    """Integers mostly in [lo, hi], sometimes just outside, negative or huge (either sign)."""
    hi = max(lo, hi)   # an empty range (an axis of size 0) has no valid value: lo then is one just outside
    return st.one_of(st.integers(lo, hi), st.integers(lo - 3, hi + 3), st.integers(-3, -1), HUGE,
                     HUGE.map(lambda v: -v))


def agree(run, reference, compare):
    """``run()`` (minidl) gives ``reference()``'s answer, checked by ``compare(got, want)``, or
    raises a clean error exactly when the reference does (PyTorch refuses the arguments)."""
    try:
        want = reference()
    except CLEAN:
        with pytest.raises(CLEAN):
            run()
        return
    compare(run(), want)


def same(got, want):
    assert got == want


def _fits(shape, itemsize):
    """Refuse what PyTorch refuses (a negative size, more bytes than the machine has) and what
    NumPy cannot represent (a dim whose byte length overflows int64, even with no element)."""
    if any(n < 0 for n in shape):
        raise RuntimeError("Trying to create tensor with negative dimension")
    if math.prod(n for n in shape if n) * itemsize >= 2 ** 63:
        raise RuntimeError("shape too large")
    if math.prod(shape) * itemsize > (physical_memory() or 2 ** 48):
        raise RuntimeError("can't allocate memory")


def _int64(*values):
    """Sizes and geometry beyond int64 are refused, as PyTorch ("Overflow when unpacking long long")."""
    if not all(-2 ** 63 <= v < 2 ** 63 for v in values):
        raise ValueError("Overflow when unpacking long long")


def leaf(a):
    return md.tensor(a, requires_grad=True)


def distinct(shape, seed=0):
    """float64 values, all different (so a max has one argmax), of ``shape``."""
    n = math.prod(shape)
    return np.random.default_rng(seed).permutation(np.arange(n, dtype=np.float64)).reshape(shape) / max(n, 1)


small_shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4)


# embedding ------------------------------------------------------------------------------------------------

@given(V=st.integers(1, 5), D=st.integers(1, 3), shape=hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3),
       data=st.data(), dtype=st.sampled_from([np.int64, np.int32]), padding_idx=st.none() | ints(-5, 5))
def test_embedding(V, D, shape, data, dtype, padding_idx):
    info = np.iinfo(dtype)
    values = ints(0, V - 1).filter(lambda v: info.min <= v <= info.max)
    idx = np.array(data.draw(st.lists(values, min_size=math.prod(shape), max_size=math.prod(shape))),
                   dtype=dtype).reshape(shape)
    w = distinct((V, D))
    g = distinct(shape + (D,), seed=1)

    def run():
        weight = leaf(w)
        out = F.embedding(idx, weight, padding_idx)
        out.backward(md.tensor(g))
        return out.detach().numpy(), weight.grad.numpy()

    def reference():
        if idx.size and (idx.min() < 0 or idx.max() >= V):
            raise IndexError("index out of range in self")   # negative indices too: they do not wrap
        if padding_idx is not None and not -V <= padding_idx < V:
            raise ValueError("padding_idx must be within num_embeddings")
        gw = np.zeros((V, D))
        np.add.at(gw, idx.reshape(-1), g.reshape(-1, D))
        if padding_idx is not None:
            gw[padding_idx] = 0
        return w[idx], gw

    def compare(got, want):
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
    agree(run, reference, compare)


# indexing -------------------------------------------------------------------------------------------------

@st.composite
def index_items(draw, shape):
    """An index for an array of ``shape``: ints, slices (any start/stop, step 0 included),
    None, Ellipsis, integer arrays (any values) or bool masks (of a matching or wrong shape)."""
    n_items = draw(st.integers(1, len(shape) + 1))
    items = []
    for k in range(n_items):
        size = shape[k] if k < len(shape) else 1
        kind = draw(st.sampled_from(["int", "slice", "none", "ellipsis", "int_array", "bool_mask"]))
        if kind == "int":
            items.append(draw(ints(-size, size - 1)))
        elif kind == "slice":
            bound = st.none() | ints(-size - 1, size + 1)
            items.append(slice(draw(bound), draw(bound), draw(st.none() | ints(-2, 2))))
        elif kind == "none":
            items.append(None)
        elif kind == "ellipsis":
            items.append(Ellipsis)
        elif kind == "int_array":
            values = ints(-size, size - 1).filter(lambda v: -2 ** 63 <= v < 2 ** 63)
            items.append(np.array(draw(st.lists(values, min_size=0, max_size=3)), dtype=np.int64))
        else:
            mshape = tuple(shape[k:k + draw(st.integers(1, 2))]) if k < len(shape) else (1,)
            if draw(st.booleans()):
                mshape = tuple(n + 1 for n in mshape)   # a mask that does not fit
            items.append(draw(hnp.arrays(np.bool_, mshape)))
    return items[0] if len(items) == 1 and draw(st.booleans()) else tuple(items)


def numpy_reads_it_as_pytorch(index):
    """Does NumPy place the result's dims as PyTorch does? NumPy counts an int among the index
    arrays, PyTorch applies the ints first (minidl follows it: ops/indexing.split_index). So an int
    and an array apart, with a slice, None or Ellipsis between them, give the same values in
    another order of dims: x[0, None, [1, 2]] of a (3, 4, 5) array is (2, 1, 5) in NumPy,
    (1, 2, 5) in PyTorch."""
    items = index if isinstance(index, tuple) else (index,)
    advanced = [k for k, i in enumerate(items) if isinstance(i, (int, np.ndarray))]
    mixed = any(isinstance(items[k], int) for k in advanced) and any(isinstance(items[k], np.ndarray) for k in advanced)
    return not mixed or advanced == list(range(advanced[0], advanced[-1] + 1))


@given(shape=small_shapes, data=st.data(), as_tensor=st.booleans())
def test_getitem(shape, data, as_tensor):
    index = data.draw(index_items(shape))
    assume(numpy_reads_it_as_pytorch(index))
    x = distinct(shape)

    def wrap(i):
        return md.tensor(i) if as_tensor and isinstance(i, np.ndarray) else i
    given_index = tuple(wrap(i) for i in index) if isinstance(index, tuple) else wrap(index)

    def run():
        t = leaf(x)
        out = t[given_index]
        out.backward(md.tensor(distinct(out.shape, seed=1)))
        return out.detach().numpy(), t.grad.numpy()

    def reference():
        for i in index if isinstance(index, tuple) else (index,):
            if isinstance(i, int) and not -2 ** 63 <= i < 2 ** 63:
                raise IndexError("index out of bounds (beyond 64 bits)")
        out = x[index]   # NumPy's indexing is PyTorch's here (it raises IndexError where PyTorch does)
        gx = np.zeros(shape)
        np.add.at(gx, index, distinct(out.shape, seed=1))
        return out, gx

    def compare(got, want):
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
    agree(run, reference, compare)


# shapes and dims ------------------------------------------------------------------------------------------

@given(shape=small_shapes, target=st.lists(ints(-1, 5), min_size=0, max_size=4))
def test_reshape(shape, target):
    x = distinct(shape)

    def reference():
        if target.count(-1) > 1 or any(n < -1 for n in target):
            raise RuntimeError("only one dimension can be inferred / invalid shape dimension")
        return x.reshape(target)
    agree(lambda: md.tensor(x).reshape(*target).numpy(), reference, np.testing.assert_array_equal)
    agree(lambda: md.tensor(x).view(target).numpy(), reference, np.testing.assert_array_equal)


def _in_range(d, n):
    if not -n <= d < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
    return d % n


@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3), d0=ints(-3, 3), d1=ints(-3, 3),
       op=st.sampled_from(["unsqueeze", "squeeze", "transpose", "flatten", "permute"]))
def test_dim_arguments_of_shape_ops(shape, d0, d1, op):
    x = distinct(shape)
    nd = max(len(shape), 1)   # a 0-d tensor takes dims 0 and -1, as PyTorch

    def reference():
        if op == "unsqueeze":
            return np.expand_dims(x, _in_range(d0, len(shape) + 1))
        if op == "squeeze":   # a dim of size other than 1 is left alone
            a = _in_range(d0, nd)
            return x.reshape(tuple(n for i, n in enumerate(shape) if not (i == a and n == 1)))
        if op == "transpose":
            a, b = _in_range(d0, nd), _in_range(d1, nd)
            return np.swapaxes(x, a, b) if x.ndim else x
        if op == "flatten":
            a, b = _in_range(d0, nd), _in_range(d1, nd)
            if a > b:
                raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
            return x.reshape(shape[:a] + (math.prod(shape[a:b + 1]),) + shape[b + 1:]) if x.ndim else x.reshape(1)
        dims = (d0, d1)[:len(shape)] + tuple(range(2, len(shape)))
        axes = [_in_range(d, nd) for d in dims]
        if len(dims) != len(shape) or sorted(axes) != list(range(len(shape))):
            raise RuntimeError("permute(): dims must be a permutation of the tensor's dims")
        return np.transpose(x, axes)

    def run():
        t = leaf(x)
        args = {"unsqueeze": (d0,), "squeeze": (d0,), "transpose": (d0, d1), "flatten": (d0, d1),
                "permute": (d0, d1)[:len(shape)] + tuple(range(2, len(shape)))}[op]
        out = getattr(t, op)(*args)
        out.backward(md.tensor(distinct(out.shape, seed=1)))
        np.testing.assert_allclose(t.grad.numpy().sum(), distinct(out.shape, seed=1).sum())   # a rearrangement
        return out.detach().numpy()
    agree(run, reference, np.testing.assert_array_equal)


@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3), dim=ints(-3, 3),
       op=st.sampled_from(["sum", "mean", "max", "argmax", "softmax", "log_softmax", "cat", "stack"]))
def test_dim_arguments_of_reductions_and_joins(shape, dim, op):
    x = distinct(shape)
    nd = max(len(shape), 1)

    def reference():
        if op == "stack":
            return np.stack([x, x], _in_range(dim, len(shape) + 1))
        a = _in_range(dim, nd)
        if op == "cat":
            if x.ndim == 0:
                raise RuntimeError("zero-dimensional tensor cannot be concatenated")
            return np.concatenate([x, x], a)
        if x.ndim == 0:
            return {"argmax": np.array(0), "softmax": np.array(1.0), "log_softmax": np.array(0.0)}.get(op, x)
        if op in ("softmax", "log_softmax"):
            e = np.exp(x - x.max(a, keepdims=True))
            p = e / e.sum(a, keepdims=True)
            return p if op == "softmax" else np.log(p)
        return getattr(np, op)(x, a)

    def run():
        t = md.tensor(x)
        if op in ("cat", "stack"):
            out = getattr(md, op)([t, t], dim)
        else:
            out = getattr(t, op)(dim)
        return (out[0] if isinstance(out, tuple) else out).numpy()
    agree(run, reference, lambda got, want: np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12))


# pooling and convolution geometry ---------------------------------------------------------------------------

def pool_output_size(n, k, s, p, d, ceil_mode):
    """PyTorch's pooling_output_shape; the last window of ceil mode starts inside the input
    or its left padding."""
    out = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _on_grid(r, start, d, k):
    """Is position r one of start, start + d, ..., start + (k - 1) d? (k may be huge.)"""
    return r >= start and (r - start) % d == 0 and (r - start) // d < k


def pool_reference(x, g, k, s, p, d, ceil_mode, mode, count_include_pad=True):
    """(out, dL/dx for the cotangent g, indices) by loops over the windows, from the definition.
    The index of a max is its flat position h*W + w in the plane; -1 for a dilated window that
    steps over the whole input (it holds padding only: its max is -inf)."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = k, s, p, d
    _int64(kh, kw, sh, sw, ph, pw, dh, dw)
    if min(kh, kw, sh, sw, dh, dw) < 1 or min(ph, pw) < 0:
        raise ValueError("kernel_size, stride, dilation must be positive and padding non-negative")
    if 2 * ph > dh * (kh - 1) + 1 or 2 * pw > dw * (kw - 1) + 1:
        raise RuntimeError("pad should be at most half of effective kernel size")
    N, C, H, W = x.shape
    _fits((N, C, H + 2 * ph, W + 2 * pw), 8)   # the padded input
    OH, OW = pool_output_size(H, kh, sh, ph, dh, ceil_mode), pool_output_size(W, kw, sw, pw, dw, ceil_mode)
    if OH < 1 or OW < 1:
        raise RuntimeError("Output size is too small")
    assert g is None or g.shape == (N, C, OH, OW)
    out, dx, idx = np.zeros((N, C, OH, OW)), np.zeros(x.shape), np.full((N, C, OH, OW), -1)
    for n, ch, oh, ow in np.ndindex(out.shape):   # (nothing to loop over for an empty batch)
        rows = [r for r in range(H) if _on_grid(r, oh * sh - ph, dh, kh)]
        cols = [c for c in range(W) if _on_grid(c, ow * sw - pw, dw, kw)]
        inside = [(r, c) for r in rows for c in cols]
        vals = [x[n, ch, r, c] for r, c in inside]
        if mode == "max":
            out[n, ch, oh, ow] = max(vals, default=-np.inf)
            if vals:
                r, c = inside[int(np.argmax(vals))]
                idx[n, ch, oh, ow] = r * W + c
                if g is not None:
                    dx[n, ch, r, c] += g[n, ch, oh, ow]
        else:
            h0, w0 = oh * sh - ph, ow * sw - pw
            div = ((min(h0 + kh, H + ph) - h0) * (min(w0 + kw, W + pw) - w0) if count_include_pad
                   else len(inside))
            out[n, ch, oh, ow] = sum(vals) / div if vals else 0.0
            for r, c in inside if g is not None else ():
                dx[n, ch, r, c] += g[n, ch, oh, ow] / div
    return out, dx, idx


def geometry(lo, hi):
    """A size argument as an int or a pair, mostly small, sometimes zero, negative or huge."""
    one = st.one_of(st.integers(lo, hi), st.integers(-1, 0), HUGE)
    return st.one_of(one, st.tuples(one, one))


def _pair(v):
    return (v, v) if isinstance(v, int) else v


@given(shape=st.tuples(st.integers(0, 2), st.integers(1, 2), st.integers(1, 5), st.integers(1, 5)),
       kernel=geometry(1, 4), stride=st.none() | geometry(1, 3), padding=geometry(0, 2), dilation=geometry(1, 2),
       ceil_mode=st.booleans(), mode=st.sampled_from(["max", "avg"]), unbatched=st.booleans())
def test_pooling_geometry(shape, kernel, stride, padding, dilation, ceil_mode, mode, unbatched):
    if unbatched:
        shape = (1,) + shape[1:]
    x = distinct(shape)
    if mode == "avg":
        dilation = 1

    def reference():
        k = _pair(kernel)
        out, _, idx = pool_reference(x, None, k, k if stride is None else _pair(stride), _pair(padding),
                                     _pair(dilation), ceil_mode, mode)
        return out, (idx if mode == "max" else None)

    def run():
        t = leaf(x[0] if unbatched else x)
        idx = None
        if mode == "max":
            out, idx = F.max_pool2d(t, kernel, stride, padding, dilation, ceil_mode, return_indices=True)
        else:
            out = F.avg_pool2d(t, kernel, stride, padding, ceil_mode)
        g = distinct(out.shape, seed=1)
        out.backward(md.tensor(g))
        k = _pair(kernel)
        batched = (lambda a: a[None]) if unbatched else (lambda a: a)
        _, dx, _ = pool_reference(x, batched(g), k, k if stride is None else _pair(stride), _pair(padding),
                                  _pair(dilation), ceil_mode, mode)
        np.testing.assert_allclose(batched(t.grad.numpy()), dx, rtol=1e-10, atol=1e-12)
        return batched(out.detach().numpy()), (None if idx is None else batched(idx.detach().numpy()))

    def compare(got, want):
        np.testing.assert_allclose(got[0], want[0], rtol=1e-10, atol=1e-12)
        if want[1] is not None:
            np.testing.assert_array_equal(got[1], want[1])
    agree(run, reference, compare)


def conv_reference(x, w, b, g, stride, padding, dilation):
    """(out, dx, dw) of a cross-correlation by loops, from the definition."""
    (sh, sw), (dh, dw_) = stride, dilation
    _int64(sh, sw, dh, dw_, *(() if isinstance(padding, str) else padding))
    if min(sh, sw, dh, dw_) < 1:
        raise RuntimeError("stride and dilation must be positive")
    if padding == "same":
        if (sh, sw) != (1, 1):
            raise ValueError("padding='same' is not supported for strided convolutions")
        tot = (dh * (w.shape[2] - 1), dw_ * (w.shape[3] - 1))
        (ph, pw), extra = (tot[0] // 2, tot[1] // 2), (tot[0] % 2, tot[1] % 2)
    else:
        (ph, pw), extra = ((0, 0) if padding == "valid" else padding), (0, 0)
    if min(ph, pw) < 0:
        raise RuntimeError("negative padding is not supported")
    N, C, H, W = x.shape
    O, _, kh, kw = w.shape
    Hp, Wp = H + 2 * ph + extra[0], W + 2 * pw + extra[1]
    if Hp < dh * (kh - 1) + 1 or Wp < dw_ * (kw - 1) + 1:
        raise RuntimeError("kernel size can't be greater than actual input size")
    OH, OW = (Hp - dh * (kh - 1) - 1) // sh + 1, (Wp - dw_ * (kw - 1) - 1) // sw + 1
    for shape in ((N, C, Hp, Wp), (N, O, OH, OW), (1, OH, OW, C * kh * kw)):   # what im2col allocates
        _fits(shape, 8)
    out = np.zeros((N, O, OH, OW)) + (0 if b is None else b.reshape(1, O, 1, 1))
    dx, dwt = np.zeros(x.shape), np.zeros(w.shape)
    for oh in range(OH):
        for ow in range(OW):
            for i in range(kh):
                for j in range(kw):
                    r, c = oh * sh + i * dh - ph, ow * sw + j * dw_ - pw
                    if 0 <= r < H and 0 <= c < W:
                        out[:, :, oh, ow] += x[:, :, r, c] @ w[:, :, i, j].T
                        if g is not None:
                            dx[:, :, r, c] += g[:, :, oh, ow] @ w[:, :, i, j]
                            dwt[:, :, i, j] += g[:, :, oh, ow].T @ x[:, :, r, c]
    return out, dx, dwt


@given(shape=st.tuples(st.integers(0, 2), st.integers(1, 2), st.integers(1, 5), st.integers(1, 5)),
       wshape=st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(1, 3)), stride=geometry(1, 3),
       padding=st.one_of(geometry(0, 2), st.sampled_from(["same", "valid"])), dilation=geometry(1, 2),
       bias=st.booleans())
def test_conv2d_geometry(shape, wshape, stride, padding, dilation, bias):
    x = distinct(shape)
    w = distinct((wshape[0], shape[1]) + wshape[1:], seed=2)
    b = distinct((wshape[0],), seed=3) if bias else None
    args = (_pair(stride), padding if isinstance(padding, str) else _pair(padding), _pair(dilation))

    def run():
        tx, tw = leaf(x), leaf(w)
        out = F.conv2d(tx, tw, None if b is None else md.tensor(b), stride, padding, dilation)
        g = distinct(out.shape, seed=1)
        out.backward(md.tensor(g))
        _, dx, dw = conv_reference(x, w, b, g, *args)
        np.testing.assert_allclose(tx.grad.numpy(), dx, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(tw.grad.numpy(), dw, rtol=1e-10, atol=1e-12)
        return out.detach().numpy()
    agree(run, lambda: conv_reference(x, w, b, None, *args)[0],
          lambda got, want: np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12))


# loss targets ---------------------------------------------------------------------------------------------

@given(N=st.integers(0, 3), C=st.integers(1, 4), spatial=st.sampled_from([(), (2,)]), data=st.data(),
       ignore_index=st.sampled_from([-100, 0, 1]) | ints(-1, 4), reduction=st.sampled_from(["mean", "sum", "none"]),
       loss=st.sampled_from(["cross_entropy", "nll_loss"]))
def test_loss_targets(N, C, spatial, data, ignore_index, reduction, loss):
    tshape = (N,) + spatial
    values = st.one_of(st.integers(0, C - 1), st.just(ignore_index), ints(0, C - 1)).filter(
        lambda v: -2 ** 63 <= v < 2 ** 63)
    t = np.array(data.draw(st.lists(values, min_size=math.prod(tshape), max_size=math.prod(tshape))),
                 dtype=np.int64).reshape(tshape)
    x = distinct((N, C) + spatial)

    def reference():
        valid = t != ignore_index
        if np.any(valid & ((t < 0) | (t >= C))):
            raise IndexError("Target is out of bounds")
        xc = np.moveaxis(x, 1, -1)   # classes last
        logp = xc - np.log(np.exp(xc).sum(-1, keepdims=True)) if loss == "cross_entropy" else xc
        tv = np.where(valid, t, 0)
        picked = np.take_along_axis(logp, tv[..., None], -1)[..., 0]
        per = np.where(valid, -picked, 0.0)
        count = valid.sum()
        with np.errstate(invalid="ignore", divide="ignore"):
            value = {"none": per, "sum": per.sum(), "mean": per.sum() / count}[reduction]
        # gradient of sum(value): (softmax - onehot) (or -onehot) on valid elements, 0 on ignored ones
        onehot = np.zeros_like(xc)
        np.put_along_axis(onehot, tv[..., None], 1.0, -1)
        p = np.exp(logp) if loss == "cross_entropy" else 0.0
        scale = 1.0 / count if reduction == "mean" and count else 1.0
        grad = np.where(valid[..., None], (p - onehot) * scale, 0.0)
        return value, np.moveaxis(grad, -1, 1)

    def run():
        tx = leaf(x)
        y = getattr(F, loss)(tx, t, ignore_index=ignore_index, reduction=reduction)
        with np.errstate(invalid="ignore", divide="ignore"):
            y.sum().backward()
        return y.detach().numpy(), tx.grad.numpy()

    def compare(got, want):
        np.testing.assert_allclose(got[0], want[0], rtol=1e-10, atol=1e-12, equal_nan=True)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-10, atol=1e-12)
    agree(run, reference, compare)


# factories ------------------------------------------------------------------------------------------------

def sizes(max_dims=3):
    return st.lists(st.one_of(st.integers(0, 4), st.integers(-3, -1), HUGE), min_size=0, max_size=max_dims)


@given(size=sizes(), op=st.sampled_from(["zeros", "ones", "empty", "randn", "rand", "full", "randint"]),
       dtype=st.sampled_from([None, md.float64, md.float16]))
def test_factory_sizes(size, op, dtype):
    drawn = op in ("randn", "rand", "randint")   # drawn as 64-bit values, then cast

    def reference():
        _fits(size, 8 if drawn else np.dtype(dtype or md.float32).itemsize)
        return tuple(size)

    def run():
        if op == "full":
            t = md.full(size, 2.0, dtype=dtype)
        elif op == "randint":
            t = md.randint(0, 3, size)
        else:
            t = getattr(md, op)(*size, dtype=dtype)
        if op in ("zeros", "empty", "ones", "full"):
            np.testing.assert_array_equal(t.numpy(), {"zeros": 0, "empty": 0, "ones": 1, "full": 2}[op])
        return t.shape
    agree(run, reference, same)


@given(start=ints(-3, 3), end=st.none() | ints(-3, 6), step=ints(-2, 3), as_float=st.booleans())
def test_arange_sizes(start, end, step, as_float):
    """Step 0 and a range the step cannot reach raise (PyTorch); a huge range is refused."""
    lo, hi = (0, start) if end is None else (start, end)
    if as_float:
        lo, hi, step = lo + 0.5, hi + 0.25, step / 2 if abs(step) < 2 ** 62 else float(step)

    def reference():
        if step == 0 or (hi - lo) * step < 0:
            raise RuntimeError("step must be nonzero / upper bound and larger bound inconsistent with step sign")
        if not as_float and not all(-2 ** 63 <= v < 2 ** 63 for v in (lo, hi, step)):
            raise RuntimeError("value cannot be converted to type int64_t without overflow")
        length = math.ceil((hi - lo) / step)
        assume(length <= 1000 or length * 8 > (physical_memory() or 2 ** 48))   # cheap, or refused
        _fits((length,), 8)
        return np.arange(lo, hi, step).astype(np.float32 if as_float else np.int64)   # float32 by default
    run = (lambda: md.arange(lo, hi, step).numpy()) if end is not None or as_float else (
        lambda: md.arange(start, step=step).numpy())
    agree(run, reference, lambda got, want: np.testing.assert_allclose(got, want, rtol=1e-12))


@given(n=st.one_of(st.integers(0, 4), st.integers(-3, -1), HUGE), m=st.none() | st.integers(-2, 4) | HUGE,
       op=st.sampled_from(["eye", "randperm", "linspace"]))
def test_sizes_of_eye_randperm_linspace(n, m, op):
    def reference():
        if op == "eye":
            _fits((n, n if m is None else m), 4)
            return np.eye(n, m)
        _fits((n,), 8)
        return np.linspace(0, 1, n) if op == "linspace" else np.arange(n)

    def run():
        if op == "eye":
            return md.eye(n, m).numpy()
        if op == "linspace":
            return md.linspace(0, 1, n).numpy()
        return np.sort(md.randperm(n).numpy())
    agree(run, reference, lambda got, want: np.testing.assert_allclose(got, want, rtol=1e-6))
