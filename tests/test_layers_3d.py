"""The 3-D layers: conv3d / conv_transpose3d, max / avg / adaptive pooling in 3-D, InstanceNorm3d
and the lazy InstanceNorms. Direct NumPy loops written from the definitions (tiny shapes) as
references, gradcheck in float64 through OpSpec, bad input, and PyTorch as the oracle for
values, gradients, indices and modules with copied weights."""
import itertools
import re

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.testing import OpSpec, check_forward, check_gradcheck, forward_cases, spec_id


def _triple(v):
    return (v,) * 3 if isinstance(v, int) else tuple(v)


# NumPy references: loops over output positions ---------------------------------------------

def conv3d_loop(x, w, b=None, stride=1, pads=((0, 0),) * 3, dilation=1, groups=1):
    """out[n, o, od, oh, ow] = b[o] + sum over the window of W[o] * x (pads: (before, after) per axis)."""
    s, d = _triple(stride), _triple(dilation)
    xp = np.pad(x, ((0, 0), (0, 0)) + tuple(pads))
    N, C = x.shape[:2]
    O, Cg, *k = w.shape
    out = [(n - dd * (kk - 1) - 1) // ss + 1 for n, kk, ss, dd in zip(xp.shape[2:], k, s, d)]
    y = np.zeros((N, O, *out))
    for n, o, od, oh, ow in itertools.product(range(N), range(O), *map(range, out)):
        g = o // (O // groups)
        window = tuple(slice(o_ * s_, o_ * s_ + d_ * (k_ - 1) + 1, d_) for o_, s_, d_, k_ in zip((od, oh, ow), s, d, k))
        patch = xp[(n, slice(g * Cg, (g + 1) * Cg)) + window]
        y[n, o, od, oh, ow] = (patch * w[o]).sum() + (0 if b is None else b[o])
    return y


def conv_transpose3d_loop(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Each input voxel stamps its scaled kernel into the output at stride s; p is cropped."""
    s, p, op, d = _triple(stride), _triple(padding), _triple(output_padding), _triple(dilation)
    N, Cin = x.shape[:2]
    _, Cog, *k = w.shape
    out = [(n - 1) * ss - 2 * pp + dd * (kk - 1) + oo + 1 for n, ss, pp, dd, kk, oo in zip(x.shape[2:], s, p, d, k, op)]
    full = np.zeros((N, Cog * groups) + tuple(o + 2 * pp for o, pp in zip(out, p)))
    for n, c, i0, i1, i2 in itertools.product(range(N), range(Cin), *map(range, x.shape[2:])):
        g = c // (Cin // groups)
        for a, i, j in itertools.product(*map(range, k)):
            full[n, g * Cog:(g + 1) * Cog, i0 * s[0] + a * d[0], i1 * s[1] + i * d[1], i2 * s[2] + j * d[2]] += \
                x[n, c, i0, i1, i2] * w[c, :, a, i, j]
    y = full[:, :, p[0]:p[0] + out[0], p[1]:p[1] + out[1], p[2]:p[2] + out[2]]
    return y + (0 if b is None else b.reshape(1, -1, 1, 1, 1))


def _out_size(n, k, s, p, d, ceil_mode):
    o = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    return o - 1 if ceil_mode and (o - 1) * s >= n + p else o


def max_pool3d_loop(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """(values, flat indices): over each window's voxels inside the input, in window order, a value
    is taken when it is larger or NaN (PyTorch's rule); the index starts at the first voxel inside."""
    k, p, d = _triple(kernel_size), _triple(padding), _triple(dilation)
    s = k if stride is None else _triple(stride)
    N, C, *size = x.shape
    out = [_out_size(n, kk, ss, pp, dd, ceil_mode) for n, kk, ss, pp, dd in zip(size, k, s, p, d)]
    y, idx = np.full((N, C, *out), -np.inf), np.full((N, C, *out), -1, np.int64)
    for n, c, *o in itertools.product(range(N), range(C), *map(range, out)):
        for off in itertools.product(*map(range, k)):
            pos = [oo * ss - pp + ff * dd for oo, ss, pp, ff, dd in zip(o, s, p, off, d)]
            if not all(0 <= q < m for q, m in zip(pos, size)):
                continue
            v, flat = x[(n, c, *pos)], (pos[0] * size[1] + pos[1]) * size[2] + pos[2]
            if idx[(n, c, *o)] < 0:
                idx[(n, c, *o)] = flat
            if v > y[(n, c, *o)] or np.isnan(v):
                y[(n, c, *o)], idx[(n, c, *o)] = v, flat
    return y, idx


def avg_pool3d_loop(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                    divisor_override=None):
    k, p = _triple(kernel_size), _triple(padding)
    s = k if stride is None else _triple(stride)
    N, C, *size = x.shape
    out = [_out_size(n, kk, ss, pp, 1, ceil_mode) for n, kk, ss, pp in zip(size, k, s, p)]
    y = np.zeros((N, C, *out))
    for o in itertools.product(*map(range, out)):
        lo = [oo * ss - pp for oo, ss, pp in zip(o, s, p)]
        hi = [min(l_ + kk, m + pp) for l_, kk, m, pp in zip(lo, k, size, p)]
        padded = np.prod([h - l_ for l_, h in zip(lo, hi)])
        lo, hi = [max(l_, 0) for l_ in lo], [min(h, m) for h, m in zip(hi, size)]
        inside = np.prod([h - l_ for l_, h in zip(lo, hi)])
        total = x[:, :, lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]].sum(axis=(2, 3, 4))
        y[(slice(None), slice(None)) + o] = total / (divisor_override or (padded if count_include_pad else inside))
    return y


def _bins(n, o):
    return [(i * n // o, -(-(i + 1) * n // o)) for i in range(o)]


def adaptive_pool3d_loop(x, output_size, reduce):
    """reduce(box of shape (N, C, bd, bh, bw)) for each box of adaptive bins."""
    size = x.shape[2:]
    out = [n if o is None else o for n, o in zip(size, _triple(output_size))]
    cells = {}
    for (a, (d0, d1)), (i, (h0, h1)), (j, (w0, w1)) in itertools.product(
            *(enumerate(_bins(n, o)) for n, o in zip(size, out))):
        cells[a, i, j] = reduce(x[:, :, d0:d1, h0:h1, w0:w1], (d0, h0, w0))
    return cells, out


def adaptive_avg_pool3d_loop(x, output_size):
    cells, out = adaptive_pool3d_loop(x, output_size, lambda box, _: box.mean(axis=(2, 3, 4)))
    y = np.zeros(x.shape[:2] + tuple(out))
    for key, v in cells.items():
        y[(slice(None), slice(None)) + key] = v
    return y


def adaptive_max_pool3d_loop(x, output_size):
    D, H, W = x.shape[2:]

    def reduce(box, start):
        vals, idxs = np.full(box.shape[:2], -np.inf), np.full(box.shape[:2], -1, np.int64)
        for n, c in itertools.product(*map(range, box.shape[:2])):
            for off in itertools.product(*map(range, box.shape[2:])):
                v = box[(n, c) + off]
                pos = [s0 + f for s0, f in zip(start, off)]
                if idxs[n, c] < 0 or v > vals[n, c] or np.isnan(v):
                    vals[n, c], idxs[n, c] = v, (pos[0] * H + pos[1]) * W + pos[2]
        return vals, idxs

    cells, out = adaptive_pool3d_loop(x, output_size, reduce)
    y, idx = np.zeros(x.shape[:2] + tuple(out)), np.zeros(x.shape[:2] + tuple(out), np.int64)
    for key, (v, i) in cells.items():
        y[(slice(None), slice(None)) + key], idx[(slice(None), slice(None)) + key] = v, i
    return y, idx


def _unbatched(ref):
    return lambda x, *rest: ref(x[None], *rest)[0]


# OpSpecs: forward against the loops in float32/float64, gradcheck in float64 ----------------

def _normal(*shapes):
    return lambda rng: tuple(rng.standard_normal(s) for s in shapes)


SPECS = [
    OpSpec("conv3d", lambda x, w, b: F.conv3d(x, w, b), lambda x, w, b: conv3d_loop(x, w, b),
           _normal((2, 2, 3, 4, 3), (3, 2, 2, 2, 2), (3,))),
    OpSpec("conv3d_strided_padded_dilated_grouped",
           lambda x, w, b: F.conv3d(x, w, b, (2, 1, 2), (1, 0, 1), (1, 2, 1), 2),
           lambda x, w, b: conv3d_loop(x, w, b, (2, 1, 2), ((1, 1), (0, 0), (1, 1)), (1, 2, 1), 2),
           _normal((1, 4, 5, 5, 4), (4, 2, 2, 2, 3), (4,))),
    OpSpec("conv3d_same_odd_padding", lambda x, w: F.conv3d(x, w, padding="same", dilation=(1, 1, 3)),
           lambda x, w: conv3d_loop(x, w, pads=((0, 1), (1, 1), (1, 2)), dilation=(1, 1, 3)),   # totals 1, 2, 3
           _normal((1, 2, 3, 4, 5), (2, 2, 2, 3, 2))),
    OpSpec("conv3d_valid_unbatched", lambda x, w: F.conv3d(x, w, padding="valid"), _unbatched(conv3d_loop),
           _normal((2, 3, 4, 3), (3, 2, 2, 3, 2))),
    OpSpec("conv_transpose3d", lambda x, w, b: F.conv_transpose3d(x, w, b),
           lambda x, w, b: conv_transpose3d_loop(x, w, b), _normal((2, 2, 2, 3, 2), (2, 3, 2, 2, 2), (3,))),
    OpSpec("conv_transpose3d_strided_grouped",
           lambda x, w, b: F.conv_transpose3d(x, w, b, (2, 1, 2), (1, 0, 0), (1, 0, 1), 2, (1, 2, 1)),
           lambda x, w, b: conv_transpose3d_loop(x, w, b, (2, 1, 2), (1, 0, 0), (1, 0, 1), 2, (1, 2, 1)),
           _normal((1, 4, 2, 3, 2), (4, 1, 2, 3, 2), (2,))),
    OpSpec("conv_transpose3d_unbatched", lambda x, w: F.conv_transpose3d(x, w, stride=2),
           _unbatched(lambda x, w: conv_transpose3d_loop(x, w, stride=2)), _normal((2, 2, 2, 3), (2, 2, 2, 1, 2))),
    OpSpec("max_pool3d", lambda x: F.max_pool3d(x, 2), lambda x: max_pool3d_loop(x, 2)[0], _normal((2, 2, 4, 4, 5))),
    OpSpec("max_pool3d_padded_dilated_ceil",
           lambda x: F.max_pool3d(x, (3, 2, 2), (2, 1, 2), (1, 0, 1), (1, 2, 1), ceil_mode=True),
           lambda x: max_pool3d_loop(x, (3, 2, 2), (2, 1, 2), (1, 0, 1), (1, 2, 1), True)[0],
           _normal((1, 2, 5, 5, 4))),
    OpSpec("max_pool3d_unbatched", lambda x: F.max_pool3d(x, 2, 1), _unbatched(lambda x: max_pool3d_loop(x, 2, 1)[0]),
           _normal((2, 3, 3, 4))),
    OpSpec("avg_pool3d", lambda x: F.avg_pool3d(x, 2), lambda x: avg_pool3d_loop(x, 2), _normal((2, 2, 4, 4, 5))),
    OpSpec("avg_pool3d_padded_ceil_exclude_pad",
           lambda x: F.avg_pool3d(x, (3, 2, 3), (2, 1, 2), (1, 1, 1), ceil_mode=True, count_include_pad=False),
           lambda x: avg_pool3d_loop(x, (3, 2, 3), (2, 1, 2), (1, 1, 1), True, False), _normal((1, 2, 5, 4, 4))),
    OpSpec("avg_pool3d_divisor_override_unbatched", lambda x: F.avg_pool3d(x, 2, 1, 1, divisor_override=3),
           _unbatched(lambda x: avg_pool3d_loop(x, 2, 1, 1, divisor_override=3)), _normal((2, 3, 2, 3))),
    OpSpec("adaptive_avg_pool3d", lambda x: F.adaptive_avg_pool3d(x, (2, 3, None)),
           lambda x: adaptive_avg_pool3d_loop(x, (2, 3, None)), _normal((1, 2, 5, 4, 3))),
    OpSpec("adaptive_avg_pool3d_unbatched", lambda x: F.adaptive_avg_pool3d(x, 2),
           _unbatched(lambda x: adaptive_avg_pool3d_loop(x, 2)), _normal((2, 3, 4, 5))),
    OpSpec("adaptive_max_pool3d", lambda x: F.adaptive_max_pool3d(x, (3, 2, 2)),
           lambda x: adaptive_max_pool3d_loop(x, (3, 2, 2))[0], _normal((2, 2, 5, 4, 3))),
    OpSpec("adaptive_max_pool3d_unbatched", lambda x: F.adaptive_max_pool3d(x, 2),
           _unbatched(lambda x: adaptive_max_pool3d_loop(x, 2)[0]), _normal((2, 3, 4, 3))),
]


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward_matches_the_loops(spec, dtype, device):
    check_forward(spec, dtype, device)


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck(spec):
    assert check_gradcheck(spec)


def test_max_pool3d_indices_match_the_loop_with_ties_and_nans():
    x = np.round(np.random.default_rng(1).standard_normal((2, 2, 4, 5, 4)))   # many ties
    x[0, 0, 1, 1, 1] = x[0, 0, 1, 2, 1] = np.nan
    x[1, 1, :2, :2, :2] = -np.inf
    y, idx = F.max_pool3d(md.tensor(x), (2, 3, 2), (1, 2, 2), (1, 1, 0), ceil_mode=True, return_indices=True)
    ry, ridx = max_pool3d_loop(x, (2, 3, 2), (1, 2, 2), (1, 1, 0), ceil_mode=True)
    np.testing.assert_array_equal(y.numpy(), ry)
    np.testing.assert_array_equal(idx.numpy(), ridx)
    assert idx.dtype == md.int64


def test_max_pool3d_gradient_goes_to_the_argmax_only():
    x = md.tensor(np.random.default_rng(2).standard_normal((1, 1, 3, 4, 4)), requires_grad=True)
    y, idx = F.max_pool3d(x, 2, 1, return_indices=True)
    y.sum().backward()
    expect = np.bincount(idx.numpy().ravel(), minlength=48).reshape(3, 4, 4)
    np.testing.assert_array_equal(x.grad.numpy()[0, 0], expect)


def test_adaptive_max_pool3d_indices_match_the_loop():
    x = np.round(np.random.default_rng(3).standard_normal((2, 2, 5, 4, 3)))
    x[0, 1, 0, 0, 0] = np.nan
    y, idx = F.adaptive_max_pool3d(md.tensor(x), (3, 2, 2), return_indices=True)
    ry, ridx = adaptive_max_pool3d_loop(x, (3, 2, 2))
    np.testing.assert_array_equal(y.numpy(), ry)
    np.testing.assert_array_equal(idx.numpy(), ridx)


@pytest.mark.parametrize("need", [(True, False, False), (False, True, False), (False, False, True)])
def test_conv3d_computes_only_the_wanted_gradients(need):
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal(s) for s in ((1, 4, 3, 4, 3), (2, 2, 2, 2, 2), (2,))]
    full = [md.tensor(a, requires_grad=True) for a in arrays]
    F.conv3d(*full, padding=1, groups=2).square().sum().backward()
    part = [md.tensor(a, requires_grad=r) for a, r in zip(arrays, need)]
    F.conv3d(*part, padding=1, groups=2).square().sum().backward()
    for t, f, r in zip(part, full, need):
        if r:
            np.testing.assert_allclose(t.grad.numpy(), f.grad.numpy(), rtol=1e-12, atol=1e-12)
        else:
            assert t.grad is None


def test_float16_inputs_keep_their_dtype():
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((1, 2, 3, 4, 3)), rng.standard_normal((2, 2, 2, 2, 2))
    y = F.conv3d(md.tensor(x).half(), md.tensor(w).half())
    assert y.dtype == md.float16
    np.testing.assert_allclose(y.float().numpy(), conv3d_loop(x.astype(np.float16), w.astype(np.float16)),
                               atol=2e-2, rtol=1e-2)
    for op in (lambda t: F.avg_pool3d(t, 2), lambda t: F.max_pool3d(t, 2), lambda t: F.adaptive_avg_pool3d(t, 2)):
        assert op(md.tensor(x).half()).dtype == md.float16


def test_empty_batch():
    x = md.zeros(0, 2, 3, 3, 3, requires_grad=True)
    assert F.conv3d(x, md.zeros(4, 2, 2, 2, 2)).shape == (0, 4, 2, 2, 2)
    assert F.max_pool3d(x, 2).shape == (0, 2, 1, 1, 1)
    assert F.conv_transpose3d(x, md.zeros(2, 3, 2, 2, 2)).shape == (0, 3, 4, 4, 4)


# bad input ----------------------------------------------------------------------------------

def _t(*shape):
    return md.zeros(*shape)


BAD = [
    ("conv3d 3-D input", lambda: F.conv3d(_t(2, 4, 4), _t(2, 2, 2, 2, 2)), RuntimeError, "4D (unbatched) or 5D"),
    ("conv3d 4-D weight", lambda: F.conv3d(_t(1, 2, 4, 4, 4), _t(2, 2, 2, 2)), RuntimeError, "5-D weight"),
    ("conv3d channels", lambda: F.conv3d(_t(1, 3, 4, 4, 4), _t(2, 2, 2, 2, 2)), RuntimeError, "to have 2 channels"),
    ("conv3d groups 0", lambda: F.conv3d(_t(1, 2, 4, 4, 4), _t(2, 2, 2, 2, 2), groups=0), RuntimeError, "groups"),
    ("conv3d out % groups", lambda: F.conv3d(_t(1, 4, 4, 4, 4), _t(3, 2, 2, 2, 2), groups=2), RuntimeError,
     "divisible"),
    ("conv3d bias", lambda: F.conv3d(_t(1, 2, 4, 4, 4), _t(2, 2, 2, 2, 2), _t(3)), RuntimeError, "bias"),
    ("conv3d stride pair", lambda: F.conv3d(_t(1, 2, 4, 4, 4), _t(2, 2, 2, 2, 2), stride=(1, 2)), RuntimeError,
     "3 ints"),
    ("conv3d float stride", lambda: F.conv3d(_t(1, 2, 4, 4, 4), _t(2, 2, 2, 2, 2), stride=1.5), TypeError, "stride"),
    ("conv3d stride 0", lambda: F.conv3d(_t(1, 2, 4, 4, 4), _t(2, 2, 2, 2, 2), stride=0), RuntimeError,
     "non-positive stride"),
    ("conv3d padding string", lambda: F.conv3d(_t(1, 2, 4, 4, 4), _t(2, 2, 2, 2, 2), padding="full"), RuntimeError,
     "Invalid padding string"),
    ("conv3d same strided", lambda: F.conv3d(_t(1, 2, 4, 4, 4), _t(2, 2, 2, 2, 2), padding="same", stride=2),
     RuntimeError, "strided"),
    ("conv3d negative padding", lambda: F.conv3d(_t(1, 2, 4, 4, 4), _t(2, 2, 2, 2, 2), padding=-1), RuntimeError,
     "negative padding"),
    ("conv3d kernel too big", lambda: F.conv3d(_t(1, 2, 1, 4, 4), _t(2, 2, 2, 2, 2)), RuntimeError,
     "greater than the actual input"),
    ("conv3d dtypes", lambda: F.conv3d(_t(1, 2, 4, 4, 4).double(), _t(2, 2, 2, 2, 2)), RuntimeError, "float"),
    ("conv_transpose3d 3-D input", lambda: F.conv_transpose3d(_t(2, 4, 4), _t(2, 2, 2, 2, 2)), RuntimeError,
     "4D (unbatched) or 5D"),
    ("conv_transpose3d channels", lambda: F.conv_transpose3d(_t(1, 3, 4, 4, 4), _t(2, 2, 2, 2, 2)), RuntimeError,
     "to have 2 channels"),
    ("conv_transpose3d output_padding", lambda: F.conv_transpose3d(_t(1, 2, 2, 2, 2), _t(2, 2, 2, 2, 2),
                                                                   output_padding=1), RuntimeError, "output padding"),
    ("max_pool3d 3-D input", lambda: F.max_pool3d(_t(2, 4, 4), 2), RuntimeError, "4-D (C, D, H, W)"),
    ("max_pool3d padding", lambda: F.max_pool3d(_t(1, 1, 4, 4, 4), 2, padding=2), RuntimeError, "half"),
    ("max_pool3d output too small", lambda: F.max_pool3d(_t(1, 1, 1, 4, 4), 2), RuntimeError, "too small"),
    ("max_pool3d kernel 0", lambda: F.max_pool3d(_t(1, 1, 4, 4, 4), 0), RuntimeError, "kernel_size"),
    ("max_pool3d no channels", lambda: F.max_pool3d(_t(1, 0, 4, 4, 4), 2), RuntimeError, "positive length"),
    ("max_pool3d kernel pair", lambda: F.max_pool3d(_t(1, 1, 4, 4, 4), (2, 2)), RuntimeError, "3 ints"),
    ("avg_pool3d divisor 0", lambda: F.avg_pool3d(_t(1, 1, 4, 4, 4), 2, divisor_override=0), RuntimeError, "divisor"),
    ("avg_pool3d 3-D input", lambda: F.avg_pool3d(_t(2, 4, 4), 2), RuntimeError, "4-D (C, D, H, W)"),
    ("adaptive_avg_pool3d pair", lambda: F.adaptive_avg_pool3d(_t(1, 1, 4, 4, 4), (2, 2)), RuntimeError, "3 elements"),
    ("adaptive_avg_pool3d negative", lambda: F.adaptive_avg_pool3d(_t(1, 1, 4, 4, 4), -1), RuntimeError,
     "non-negative"),
    ("adaptive_avg_pool3d empty", lambda: F.adaptive_avg_pool3d(_t(1, 1, 0, 4, 4), 2), RuntimeError, "non-zero"),
    ("adaptive_max_pool3d 3-D input", lambda: F.adaptive_max_pool3d(_t(2, 4, 4), 2), RuntimeError, "4D or 5D"),
    ("adaptive_max_pool3d empty", lambda: F.adaptive_max_pool3d(_t(1, 1, 0, 4, 4), 2), RuntimeError, "non-zero"),
    ("Conv3d same strided", lambda: nn.Conv3d(2, 2, 3, stride=2, padding="same"), ValueError, "strided"),
    ("InstanceNorm3d 3-D input", lambda: nn.InstanceNorm3d(2)(_t(2, 4, 4)), ValueError, "4D (unbatched) or 5D"),
    ("LazyInstanceNorm3d 3-D input", lambda: nn.LazyInstanceNorm3d()(_t(2, 4, 4)), ValueError, "num_features"),
]


@pytest.mark.parametrize("call,error,match", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input(call, error, match):
    with pytest.raises(error, match=re.escape(match)):
        call()


# modules ------------------------------------------------------------------------------------

def test_modules_shapes_and_parameters():
    conv = nn.Conv3d(4, 6, (3, 2, 1), stride=2, padding=1, groups=2, bias=False)
    assert conv.weight.shape == (6, 2, 3, 2, 1) and conv.bias is None
    assert float(np.abs(conv.weight.detach().numpy()).max()) <= 1 / np.sqrt(2 * 3 * 2)   # U(+-1/sqrt(fan_in))
    assert conv(md.zeros(1, 4, 5, 5, 5)).shape == (1, 6, 3, 3, 4)
    assert nn.Conv3d(2, 3, 3, padding="same")(md.zeros(2, 4, 5, 6)).shape == (3, 4, 5, 6)
    up = nn.ConvTranspose3d(4, 6, 3, stride=2, padding=1, groups=2)
    assert up.weight.shape == (4, 3, 3, 3, 3)
    assert up(md.zeros(1, 4, 3, 3, 3), output_size=(6, 5, 6)).shape == (1, 6, 6, 5, 6)
    assert nn.MaxPool3d(2, return_indices=True)(md.zeros(1, 2, 4, 4, 4))[1].shape == (1, 2, 2, 2, 2)
    assert nn.AvgPool3d(3, 1, 1)(md.zeros(2, 4, 4, 4)).shape == (2, 4, 4, 4)
    assert nn.AdaptiveAvgPool3d((1, None, 2))(md.zeros(1, 2, 4, 5, 6)).shape == (1, 2, 1, 5, 2)
    assert nn.AdaptiveMaxPool3d(2, return_indices=True)(md.zeros(1, 2, 4, 5, 6))[1].shape == (1, 2, 2, 2, 2)


def test_instance_norm3d_normalizes_each_instance():
    x = np.random.default_rng(6).standard_normal((2, 3, 3, 4, 5)) * 3 + 1
    y = nn.InstanceNorm3d(3)(md.tensor(x)).numpy()
    mean, var = x.mean(axis=(2, 3, 4), keepdims=True), x.var(axis=(2, 3, 4), keepdims=True)
    np.testing.assert_allclose(y, (x - mean) / np.sqrt(var + 1e-5), rtol=1e-10, atol=1e-10)
    assert nn.InstanceNorm3d(3)(md.tensor(x[0])).shape == (3, 3, 4, 5)


@pytest.mark.parametrize("cls,real,shape", [("LazyInstanceNorm1d", "InstanceNorm1d", (2, 3, 5)),
                                            ("LazyInstanceNorm2d", "InstanceNorm2d", (2, 3, 4, 5)),
                                            ("LazyInstanceNorm3d", "InstanceNorm3d", (2, 3, 2, 3, 4)),
                                            ("LazyInstanceNorm3d", "InstanceNorm3d", (3, 2, 3, 4))])
def test_lazy_instance_norm_becomes_the_real_layer(cls, real, shape):
    m = getattr(nn, cls)()
    params = list(m.parameters())
    y = m(md.randn(*shape))
    assert type(m) is getattr(nn, real) and m.num_features == 3 and y.shape == shape
    assert m.affine and m.track_running_stats and m.running_mean.shape == (3,)   # PyTorch's lazy defaults
    assert params[0] is m.weight and m.weight.shape == (3,)   # an optimizer made before the forward holds them
    plain = getattr(nn, cls)(affine=False, track_running_stats=False)
    plain(md.randn(*shape))
    assert plain.weight is None and plain.running_mean is None and plain.num_features == 3


# PyTorch as the oracle --------------------------------------------------------------------

def _torch():
    return pytest.importorskip("torch")


def _compare(ours, theirs, arrays, nan=False):
    """Values and gradients (for a random cotangent) of ours(*Tensors) and theirs(*torch tensors)."""
    torch = _torch()
    a = [md.tensor(v, requires_grad=True) for v in arrays]
    b = [torch.tensor(v, requires_grad=True) for v in arrays]
    y, ty = ours(*a), theirs(*b)
    if isinstance(y, tuple):
        np.testing.assert_array_equal(y[1].numpy(), ty[1].numpy())
        y, ty = y[0], ty[0]
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-10)
    g = np.random.default_rng(7).standard_normal(tuple(y.shape))
    (y * md.tensor(g)).sum().backward()
    (ty * torch.tensor(g)).sum().backward()
    for t, tt in zip(a, b):
        np.testing.assert_allclose(t.grad.numpy(), tt.grad.numpy(), rtol=1e-10, atol=1e-10)


CONV_CASES = [  # x shape, w shape, bias, kwargs
    ((2, 4, 5, 6, 5), (6, 2, 3, 2, 3), True, dict(stride=(1, 2, 1), padding=(1, 0, 2), dilation=(2, 1, 1), groups=2)),
    ((4, 5, 6, 5), (3, 4, 2, 3, 2), True, dict(padding="same", dilation=(1, 2, 1))),
    ((1, 3, 4, 5, 4), (2, 3, 2, 2, 2), False, dict(padding="valid", stride=2)),
]


@pytest.mark.parametrize("xs,ws,bias,kw", CONV_CASES)
@pytest.mark.filterwarnings("ignore:Using padding='same'")
def test_conv3d_matches_torch(xs, ws, bias, kw):
    torch = _torch()
    rng = np.random.default_rng(8)
    arrays = [rng.standard_normal(xs), rng.standard_normal(ws)] + ([rng.standard_normal(ws[0])] if bias else [])
    _compare(lambda *t: F.conv3d(*t, **kw), lambda *t: torch.nn.functional.conv3d(*t, **kw), arrays)


TRANSPOSE_CASES = [
    ((2, 4, 3, 4, 3), (4, 3, 3, 2, 3), True,
     dict(stride=(2, 1, 3), padding=(1, 0, 1), output_padding=(1, 0, 2), groups=2, dilation=(1, 2, 1))),
    ((4, 3, 4, 3), (4, 2, 3, 2, 3), False, dict()),
]


@pytest.mark.parametrize("xs,ws,bias,kw", TRANSPOSE_CASES)
def test_conv_transpose3d_matches_torch(xs, ws, bias, kw):
    torch = _torch()
    rng = np.random.default_rng(9)
    arrays = [rng.standard_normal(xs), rng.standard_normal(ws)] + ([rng.standard_normal(ws[1] * kw.get("groups", 1))]
                                                                   if bias else [])
    _compare(lambda *t: F.conv_transpose3d(*t, **kw), lambda *t: torch.nn.functional.conv_transpose3d(*t, **kw), arrays)


POOL_CASES = [  # op name, input shape, args, kwargs, input kind
    ("max_pool3d", (2, 3, 5, 6, 7), ((3, 2, 3), (2, 1, 2), (1, 1, 1), (1, 2, 1), True, True), {}, "ties"),
    ("max_pool3d", (3, 5, 6, 7), (3, 2, 1), dict(return_indices=True), "nan"),
    ("max_pool3d", (1, 2, 4, 4, 4), (3, 3, 1), dict(dilation=3, ceil_mode=True, return_indices=True), "normal"),
    ("avg_pool3d", (2, 3, 5, 6, 7), ((3, 2, 3), (2, 1, 2), (1, 1, 1), True, False), {}, "normal"),
    ("avg_pool3d", (2, 3, 5, 6, 7), (3, 2, 1, False, True, 5), {}, "normal"),
    ("adaptive_avg_pool3d", (2, 3, 5, 6, 7), ((3, 4, None),), {}, "normal"),
    ("adaptive_max_pool3d", (2, 3, 5, 6, 7), ((3, 4, 5), True), {}, "ties"),
    ("adaptive_max_pool3d", (3, 5, 6, 7), ((2, 3, 9), True), {}, "nan"),
]


@pytest.mark.parametrize("op,shape,args,kw,kind", POOL_CASES)
def test_pooling_matches_torch(op, shape, args, kw, kind):
    torch = _torch()
    x = np.random.default_rng(10).standard_normal(shape)
    if kind == "ties":
        x = np.round(x)
    if kind == "nan":   # NaN values and gradients compare as NaN: compare indices, then the rest without them
        x.flat[::7] = np.nan
        y, idx = getattr(F, op)(md.tensor(x), *args, **kw)
        ty, tidx = getattr(torch.nn.functional, op)(torch.tensor(x), *args, **kw)
        np.testing.assert_array_equal(idx.numpy(), tidx.numpy())
        np.testing.assert_array_equal(y.numpy(), ty.numpy())
        return
    _compare(lambda t: getattr(F, op)(t, *args, **kw), lambda t: getattr(torch.nn.functional, op)(t, *args, **kw),
             [x])


def test_modules_with_copied_weights_match_torch():
    torch = _torch()
    rng = np.random.default_rng(11)
    ours = nn.Sequential(nn.Conv3d(2, 4, 3, padding=1), nn.InstanceNorm3d(4, affine=True, track_running_stats=True),
                         nn.ReLU(), nn.MaxPool3d(2), nn.ConvTranspose3d(4, 2, 2, stride=2, groups=2),
                         nn.AvgPool3d(3, 1, 1), nn.AdaptiveMaxPool3d((2, 1, 3)), nn.AdaptiveAvgPool3d(1)).double()
    theirs = torch.nn.Sequential(torch.nn.Conv3d(2, 4, 3, padding=1),
                                 torch.nn.InstanceNorm3d(4, affine=True, track_running_stats=True),
                                 torch.nn.ReLU(), torch.nn.MaxPool3d(2), torch.nn.ConvTranspose3d(4, 2, 2, stride=2,
                                                                                                  groups=2),
                                 torch.nn.AvgPool3d(3, 1, 1), torch.nn.AdaptiveMaxPool3d((2, 1, 3)),
                                 torch.nn.AdaptiveAvgPool3d(1)).double()
    for (name, p), (tname, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert name == tname and tuple(p.shape) == tuple(tp.shape)
        v = rng.standard_normal(tuple(p.shape))
        with torch.no_grad(), md.no_grad():
            p.copy_(md.tensor(v))
            tp.copy_(torch.tensor(v))
    x = rng.standard_normal((2, 2, 4, 6, 6))
    y, ty = ours(md.tensor(x)), theirs(torch.tensor(x))
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-9, atol=1e-10)
    y.sum().backward()
    ty.sum().backward()
    for (name, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-8, atol=1e-10, err_msg=name)
    np.testing.assert_allclose(ours[1].running_var.numpy(), theirs[1].running_var.numpy(), rtol=1e-10)
    ours.eval(), theirs.eval()
    np.testing.assert_allclose(ours(md.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy(), rtol=1e-9,
                               atol=1e-10)


def test_lazy_instance_norm_matches_torch():
    torch = _torch()
    x = np.random.default_rng(12).standard_normal((2, 3, 2, 3, 4)).astype(np.float32)
    ours, theirs = nn.LazyInstanceNorm3d(), torch.nn.LazyInstanceNorm3d()
    np.testing.assert_allclose(ours(md.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(ours.running_mean.numpy(), theirs.running_mean.numpy(), atol=1e-6)


def test_reprs_match_torch():
    torch = _torch()
    for name, args, kw in [("Conv3d", (2, 4, 3), dict(padding=1, groups=2)),
                           ("ConvTranspose3d", (2, 4, 3), dict(stride=2, output_padding=1)),
                           ("MaxPool3d", (2,), {}), ("AvgPool3d", (3, 2, 1), {}),
                           ("AdaptiveAvgPool3d", ((1, 2, 3),), {}), ("AdaptiveMaxPool3d", (2,), {})]:
        assert repr(getattr(nn, name)(*args, **kw)) == repr(getattr(torch.nn, name)(*args, **kw))


def test_conv3d_runs_in_low_precision_under_autocast():
    conv = md.nn.Conv3d(2, 3, 3)
    with md.autocast("cpu", dtype=md.bfloat16):
        y = conv(md.randn(1, 2, 5, 5, 5))
    assert y.dtype == md.bfloat16
    y.float().sum().backward()
    assert conv.weight.grad.dtype == md.float32
