"""The tensor functions written as their own ops (elementwise math, cumulative products and sums,
rearrangements, gathers and scatters, einsum, selections): each declared once as an OpSpec, so
its forward is checked against a NumPy reference in float32 and float64 and its backward by
gradcheck in float64."""
import math

import numpy as np
import pytest

import minidl as md
from minidl.testing import OpSpec, check_forward, check_gradcheck, forward_cases, spec_id

IDX = np.array([[0, 0], [2, 1]])
MASK = np.array([True, False, True])
ZEROS_AT = np.array([[1.0, 0, 1], [1, 1, 1]])
_erf = np.vectorize(math.erf)


def _scatter_add(x, index, src):
    out = x.copy()
    rows = np.arange(index.shape[0])[:, None].repeat(index.shape[1], 1)
    np.add.at(out, (rows, index), src[:, :index.shape[1]])
    return out


def _index_add(x, src):
    out = x.copy()
    np.add.at(out, (slice(None), [2, 0, 2]), src)
    return out


def one(name, op, reference, shape=(2, 3), **kw):
    return OpSpec(name, op, reference, lambda rng: (rng.standard_normal(shape),), **kw)


SPECS = [
    one("sin", md.sin, np.sin), one("cos", md.cos, np.cos), one("tan", md.tan, np.tan),
    one("log1p", lambda x: md.log1p(x * x), lambda x: np.log1p(x * x)),
    one("expm1", md.expm1, np.expm1), one("erf", md.erf, _erf),
    one("prod", lambda x: md.prod(x, 1), lambda x: np.prod(x, 1)),
    one("prod_with_a_zero", lambda x: md.prod(x * md.tensor(ZEROS_AT, dtype=x.dtype)),
        lambda x: np.prod(x * ZEROS_AT)),
    one("cumsum", lambda x: x.cumsum(0), lambda x: np.cumsum(x, 0)),
    one("cumprod", lambda x: x.cumprod(1), lambda x: np.cumprod(x, 1)),
    one("logsumexp", lambda x: md.logsumexp(x, 1), lambda x: np.log(np.exp(x).sum(1))),
    one("maximum", lambda x: md.maximum(x, x.flip(0)), lambda x: np.maximum(x, x[::-1])),
    one("flip", lambda x: x.flip(1), lambda x: x[:, ::-1]),
    one("roll", lambda x: x.roll(1, 0), lambda x: np.roll(x, 1, 0)),
    one("tril", lambda x: x.tril(), np.tril), one("triu_1", lambda x: x.triu(1), lambda x: np.triu(x, 1)),
    one("diag", md.diag, np.diag), one("diag_of_a_vector", lambda x: md.diag(x, 1), lambda x: np.diag(x, 1),
                                       shape=(3,)),
    one("gather", lambda x: x.gather(1, md.tensor(IDX)), lambda x: np.take_along_axis(x, IDX, 1)),
    one("index_select", lambda x: x.index_select(1, md.tensor([1, 1, 0])), lambda x: x[:, [1, 1, 0]]),
    one("masked_select", lambda x: x.masked_select(md.tensor(MASK)), lambda x: x[np.broadcast_to(MASK, x.shape)]),
    one("repeat", lambda x: x.repeat(2, 1, 2), lambda x: np.tile(x, (2, 1, 2))),
    one("repeat_interleave", lambda x: x.repeat_interleave(md.tensor([1, 3]), 0),
        lambda x: np.repeat(x, [1, 3], axis=0)),
    one("einsum", lambda x: md.einsum("ij,ik->jk", x, x), lambda x: np.einsum("ij,ik->jk", x, x)),
    one("sort_values", lambda x: x.sort(1).values, lambda x: np.sort(x, 1)),
    one("topk_values", lambda x: x.topk(2, 1).values, lambda x: -np.sort(-x, 1)[:, :2]),
    one("kthvalue_values", lambda x: x.kthvalue(2, 1).values, lambda x: np.sort(x, 1)[:, 1]),
    one("median_values", lambda x: x.median(1).values, lambda x: np.sort(x, 1)[:, 1]),
    OpSpec("scatter_add", lambda x, s: x.scatter_add(1, md.tensor(IDX), s), lambda x, s: _scatter_add(x, IDX, s),
           lambda rng: (rng.standard_normal((2, 3)), rng.standard_normal((2, 3)))),
    OpSpec("index_add", lambda x, s: x.index_add(1, md.tensor([2, 0, 2]), s), _index_add,
           lambda rng: (rng.standard_normal((2, 3)), rng.standard_normal((2, 3)))),
]


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward_matches_numpy_reference(spec, dtype, device):
    check_forward(spec, dtype, device)


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck(spec):
    assert check_gradcheck(spec)
