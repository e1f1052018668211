"""Fuzzing the selection ops that take indices, counts or sizes: gather, index_select, topk,
kthvalue, split, chunk and one_hot, as test_fuzz_indices.py does for the others (same
helpers, same profiles: MINIDL_FUZZ=long for a deeper search). Each gives the answer of a
NumPy reference written from PyTorch's definition, gradients included, or a clean error
exactly where PyTorch refuses the arguments."""
import math

import numpy as np
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minidl as md
import minidl.nn.functional as F
from test_fuzz_indices import _in_range, _int64, agree, distinct, ints, leaf, physical_memory

shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4)


def index_values(n, count, draw):
    values = ints(0, n - 1).filter(lambda v: -2 ** 63 <= v < 2 ** 63)
    return np.array(draw(st.lists(values, min_size=count, max_size=count)), dtype=np.int64)


def _close(got, want):
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


@given(shape=shapes, dim=ints(-3, 2), data=st.data())
def test_gather(shape, dim, data):
    x = distinct(shape)
    ishape = tuple(data.draw(st.integers(0, n + 1)) for n in shape)   # may exceed x's shape
    axis_len = shape[dim % len(shape)] if -len(shape) <= dim < len(shape) else 1
    index = index_values(axis_len, math.prod(ishape), data.draw).reshape(ishape)

    def reference():
        a = _in_range(dim, len(shape))
        if any(ishape[d] > shape[d] for d in range(len(shape)) if d != a):
            raise RuntimeError("Size does not match at a dimension other than dim")
        if index.size and (index.min() < 0 or index.max() >= shape[a]):
            raise RuntimeError("index is out of bounds")   # PyTorch: no negative index either
        coords = list(np.indices(ishape, sparse=True))
        coords[a] = index
        g = distinct(ishape, seed=1)
        gx = np.zeros(shape)
        np.add.at(gx, tuple(coords), g)
        return x[tuple(coords)], gx

    def run():
        t = leaf(x)
        out = md.gather(t, dim, md.tensor(index))
        out.backward(md.tensor(distinct(ishape, seed=1)))
        return out.detach().numpy(), t.grad.numpy()
    agree(run, reference, _close)


@given(shape=shapes, dim=ints(-3, 2), data=st.data())
def test_index_select(shape, dim, data):
    x = distinct(shape)
    axis_len = shape[dim % len(shape)] if -len(shape) <= dim < len(shape) else 1
    index = index_values(axis_len, data.draw(st.integers(0, 4)), data.draw)

    def reference():
        a = _in_range(dim, len(shape))
        if index.size and (index.min() < 0 or index.max() >= shape[a]):
            raise RuntimeError("INDICES element is out of DATA bounds")
        out = np.take(x, index, axis=a)
        gx = np.zeros(shape)
        np.add.at(np.moveaxis(gx, a, 0), index, np.moveaxis(distinct(out.shape, seed=1), a, 0))
        return out, gx

    def run():
        t = leaf(x)
        out = md.index_select(t, dim, md.tensor(index))
        out.backward(md.tensor(distinct(out.shape, seed=1)))
        return out.detach().numpy(), t.grad.numpy()
    agree(run, reference, _close)


@given(shape=shapes, dim=ints(-3, 2), k=ints(0, 4), largest=st.booleans(), op=st.sampled_from(["topk", "kthvalue"]))
def test_topk_and_kthvalue(shape, dim, k, largest, op):
    x = distinct(shape)

    def reference():
        a = _in_range(dim, len(shape))
        _int64(k)
        lo = 1 if op == "kthvalue" else 0
        if not lo <= k <= shape[a] or (op == "kthvalue" and shape[a] == 0):
            raise RuntimeError("selected index k out of range")
        order = np.argsort(-x if (largest and op == "topk") else x, axis=a, kind="stable")
        if op == "kthvalue":
            idx = np.take(order, [k - 1], axis=a)
            return np.take_along_axis(x, idx, a).squeeze(a), idx.squeeze(a)
        idx = np.take(order, np.arange(k), axis=a)
        return np.take_along_axis(x, idx, a), idx

    def run():
        t = leaf(x)
        r = t.topk(k, dim, largest) if op == "topk" else t.kthvalue(k, dim)
        r.values.backward(md.tensor(np.ones(r.values.shape)))
        assert t.grad.numpy().sum() == r.values.numel()   # one gradient per selected element
        return r.values.detach().numpy(), r.indices.detach().numpy()
    agree(run, reference, _close)


@given(shape=shapes, dim=ints(-3, 2), size=st.one_of(ints(0, 4), st.lists(ints(0, 4), max_size=4)),
       op=st.sampled_from(["split", "chunk"]))
def test_split_and_chunk(shape, dim, size, op):
    x = distinct(shape)

    def reference():
        a = _in_range(dim, len(shape))
        n = shape[a]
        if op == "chunk":
            if isinstance(size, list) or size <= 0:
                raise RuntimeError("chunk expects `chunks` to be greater than 0")
            assume(n or size <= 100 or size * 8 > (physical_memory() or 2 ** 48))   # cheap, or refused
            if n == 0:
                if size * 8 > (physical_memory() or 2 ** 48):
                    raise RuntimeError("can't allocate memory")
                return [x] * size
            sizes = [min(-(-n // size), n - i) for i in range(0, n, -(-n // size))]
        elif isinstance(size, list):
            if any(s < 0 for s in size) or sum(size) != n:
                raise RuntimeError("split_with_sizes expects non-negative split_sizes that sum to the dim's size")
            sizes = size
        else:
            if size < 0 or (size == 0 and n):
                raise RuntimeError("split expects split_size be non-negative (0 only for an empty dim)")
            sizes = [min(size, n - i) for i in range(0, n, size)] if n else [0]
        return np.split(x, np.cumsum(sizes)[:-1], axis=a) if sizes else []   # no sizes, no pieces

    def run():
        return [t.numpy() for t in getattr(md.tensor(x), op)(size, dim)]

    def compare(got, want):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    agree(run, reference, compare)


@given(shape=hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3), data=st.data(),
       num_classes=st.one_of(st.just(-1), ints(0, 5)))
def test_one_hot(shape, data, num_classes):
    t = index_values(5, math.prod(shape), data.draw).reshape(shape)

    def reference():
        _int64(num_classes)
        if num_classes < -1:
            raise RuntimeError("num_classes must be -1 or non-negative")
        if t.size and t.min() < 0:
            raise RuntimeError("Class values must be non-negative.")
        if num_classes == -1:
            if not t.size:
                raise RuntimeError("Can not infer total number of classes from empty tensor.")
            c = int(t.max()) + 1
        else:
            c = num_classes
        if t.size and t.max() >= c:
            raise RuntimeError("Class values must be smaller than num_classes.")
        if t.size * c * 8 > (physical_memory() or 2 ** 48) or (not t.size and c * 8 >= 2 ** 63):
            raise RuntimeError("can't allocate memory")
        return (np.arange(c) == t[..., None]).astype(np.int64) if t.size else np.zeros(shape + (c,), np.int64)

    agree(lambda: F.one_hot(md.tensor(t), num_classes).numpy(), reference, np.testing.assert_array_equal)
