"""Shape-level layers: pad (and the padding modules), interpolate / Upsample, pixel_shuffle,
one_hot, normalize, Unflatten and channel dropout. NumPy references and gradcheck through
OpSpec; PyTorch as the oracle for values, gradients and reprs; bad input."""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.testing import OpSpec, check_forward, check_gradcheck, forward_cases, spec_id


def _bilinear_ref(x, out_h, out_w):
    """Bilinear resize (align_corners=False) written pixel by pixel from the half-pixel rule."""
    n, c, h, w = x.shape
    y = np.zeros((n, c, out_h, out_w))
    for i in range(out_h):
        for j in range(out_w):
            sy, sx = max((i + 0.5) * h / out_h - 0.5, 0), max((j + 0.5) * w / out_w - 0.5, 0)
            y0, x0 = min(int(sy), h - 1), min(int(sx), w - 1)
            y1, x1 = min(y0 + 1, h - 1), min(x0 + 1, w - 1)
            ly, lx = sy - y0, sx - x0
            y[..., i, j] = ((1 - ly) * ((1 - lx) * x[..., y0, x0] + lx * x[..., y0, x1])
                            + ly * ((1 - lx) * x[..., y1, x0] + lx * x[..., y1, x1]))
    return y


def _shuffle_ref(x, r):
    n, c, h, w = x.shape
    y = np.zeros((n, c // (r * r), h * r, w * r))
    for ch in range(c // (r * r)):
        for i in range(r):
            for j in range(r):
                y[:, ch, i::r, j::r] = x[:, ch * r * r + i * r + j]
    return y


SPECS = [
    OpSpec("pad_constant", lambda x: F.pad(x, (1, 2, 0, 1), value=0.5),
           lambda x: np.pad(x, ((0, 0), (0, 1), (1, 2)), constant_values=0.5),
           lambda r: (r.standard_normal((2, 3, 4)),)),
    OpSpec("pad_constant_crop", lambda x: F.pad(x, (-1, 2)), lambda x: np.pad(x[..., 1:], ((0, 0), (0, 2))),
           lambda r: (r.standard_normal((2, 4)),)),
    OpSpec("pad_reflect", lambda x: F.pad(x, (2, 1, 1, 2), mode="reflect"),
           lambda x: np.pad(x, ((0, 0), (0, 0), (1, 2), (2, 1)), mode="reflect"),
           lambda r: (r.standard_normal((1, 2, 3, 4)),)),
    OpSpec("pad_replicate", lambda x: F.pad(x, (3, 1), mode="replicate"),
           lambda x: np.pad(x, ((0, 0), (0, 0), (3, 1)), mode="edge"), lambda r: (r.standard_normal((2, 2, 3)),)),
    OpSpec("pad_circular", lambda x: F.pad(x, (2, 1), mode="circular"),
           lambda x: np.pad(x, ((0, 0), (0, 0), (2, 1)), mode="wrap"), lambda r: (r.standard_normal((2, 2, 3)),)),
    OpSpec("interpolate_nearest_x2", lambda x: F.interpolate(x, scale_factor=2),
           lambda x: x.repeat(2, axis=2).repeat(2, axis=3), lambda r: (r.standard_normal((1, 2, 2, 3)),)),
    OpSpec("interpolate_bilinear", lambda x: F.interpolate(x, size=(5, 2), mode="bilinear"),
           lambda x: _bilinear_ref(x, 5, 2), lambda r: (r.standard_normal((1, 2, 3, 4)),)),
    OpSpec("interpolate_linear_align_corners", lambda x: F.interpolate(x, size=5, mode="linear", align_corners=True),
           lambda x: np.stack([np.stack([np.interp(np.linspace(0, 2, 5), np.arange(3), row) for row in s]) for s in x]),
           lambda r: (r.standard_normal((2, 2, 3)),)),
    OpSpec("pixel_shuffle", lambda x: F.pixel_shuffle(x, 2), lambda x: _shuffle_ref(x, 2),
           lambda r: (r.standard_normal((1, 8, 2, 3)),)),
    OpSpec("pixel_unshuffle", lambda x: F.pixel_unshuffle(F.pixel_shuffle(x, 2), 2), lambda x: x,
           lambda r: (r.standard_normal((1, 8, 2, 3)),)),
    OpSpec("normalize_p2", lambda x: F.normalize(x), lambda x: x / np.linalg.norm(x, axis=1, keepdims=True),
           lambda r: (r.standard_normal((3, 4)),)),
    OpSpec("normalize_p1_dim0", lambda x: F.normalize(x, p=1, dim=0),
           lambda x: x / np.abs(x).sum(axis=0, keepdims=True), lambda r: (r.standard_normal((3, 4)),)),
]


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward_matches_numpy_reference(spec, dtype, device):
    check_forward(spec, dtype, device)


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck(spec):
    assert check_gradcheck(spec)


def _against_torch(fn, tfn, x, **kw):
    torch = pytest.importorskip("torch")
    a, b = md.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y, ty = fn(a, **kw), tfn(b, **kw)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-14)
    v = np.random.default_rng(1).standard_normal(y.shape)
    y.backward(md.tensor(v))
    ty.backward(torch.tensor(v))
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12, atol=1e-14)


PADS = [((1, 2), "constant", 1.5), ((-1, 2, 1, -1), "constant", None), ((2, 3), "reflect", None),
        ((1, 2, 2, 1), "reflect", None), ((1, 2, 3, 1), "replicate", None), ((1, 1, 1, 1, 1, 1), "replicate", None),
        ((2, 1), "circular", None), ((1, 1, 2, 0), "circular", None)]


@pytest.mark.parametrize("pad,mode,value", PADS)
def test_pad_matches_torch(pad, mode, value):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).standard_normal((1, 2, 3, 4) if len(pad) > 2 else (2, 3, 4))
    kw = {"mode": mode} if value is None else {"mode": mode, "value": value}
    _against_torch(lambda t, **k: F.pad(t, pad, **k), lambda t, **k: torch.nn.functional.pad(t, pad, **k), x, **kw)


INTERP = [dict(size=(7, 3)), dict(scale_factor=2), dict(scale_factor=1.7), dict(scale_factor=(0.5, 2.5)),
          dict(size=(4, 7), mode="nearest-exact"), dict(size=(3, 9), mode="bilinear"),
          dict(size=(3, 9), mode="bilinear", align_corners=True),
          dict(size=(1, 1), mode="bilinear", align_corners=True),
          dict(scale_factor=1.7, mode="bilinear", recompute_scale_factor=True), dict(scale_factor=0.6, mode="bilinear")]


@pytest.mark.parametrize("kw", INTERP, ids=[str(k) for k in INTERP])
def test_interpolate_matches_torch(kw):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).standard_normal((2, 3, 5, 4))
    _against_torch(F.interpolate, torch.nn.functional.interpolate, x, **kw)


def test_interpolate_linear_and_trilinear_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    _against_torch(F.interpolate, torch.nn.functional.interpolate, rng.standard_normal((1, 2, 5)), size=8,
                   mode="linear")
    _against_torch(F.interpolate, torch.nn.functional.interpolate, rng.standard_normal((1, 1, 2, 3, 2)),
                   scale_factor=2, mode="trilinear")


@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, 0), (3.0, -1), (float("inf"), 1)])
def test_normalize_matches_torch_including_zero_rows(p, dim):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).standard_normal((3, 4))
    x[1] = 0.0
    _against_torch(F.normalize, torch.nn.functional.normalize, x, p=p, dim=dim)


def test_one_hot_matches_torch():
    torch = pytest.importorskip("torch")
    idx = np.array([[0, 2], [1, 3]])
    np.testing.assert_array_equal(F.one_hot(md.tensor(idx)).numpy(), torch.nn.functional.one_hot(torch.tensor(idx)))
    out = F.one_hot(md.tensor(idx), num_classes=5)
    assert out.dtype == np.int64 and out.shape == (2, 2, 5)
    assert F.one_hot(md.tensor(np.zeros(0, np.int64)), 3).shape == (0, 3)


MODULES = [("ZeroPad2d", (1,)), ("ZeroPad2d", ((1, 2, 0, 1),)), ("ConstantPad1d", (2, 3.5)),
           ("ReflectionPad2d", (1,)), ("ReplicationPad1d", ((2, 1),)), ("Upsample", ()), ("Unflatten", ()),
           ("PixelShuffle", (2,)), ("PixelUnshuffle", (2,))]


@pytest.mark.parametrize("name,args", MODULES, ids=[f"{n}{a}" for n, a in MODULES])
def test_modules_match_torch_output_and_repr(name, args):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).standard_normal((2, 4, 4, 6))
    if name == "Upsample":
        ours, theirs = nn.Upsample(scale_factor=2, mode="bilinear"), torch.nn.Upsample(scale_factor=2, mode="bilinear")
    elif name == "Unflatten":
        ours, theirs = nn.Unflatten(1, (2, -1)), torch.nn.Unflatten(1, (2, -1))
    else:
        ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    if name == "ReplicationPad1d" or name == "ConstantPad1d":
        x = x[0]
    assert repr(ours) == repr(theirs)
    np.testing.assert_allclose(ours(md.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy(), rtol=1e-12)


def test_channel_dropout_zeroes_whole_channels_and_scales_the_rest():
    md.manual_seed(0)
    x = md.ones(8, 6, 3, 3, requires_grad=True)
    y = nn.Dropout2d(p=0.5)(x)
    per_channel = y.detach().numpy().reshape(8, 6, 9)
    assert set(np.unique(per_channel)) <= {0.0, 2.0}
    assert (per_channel.min(axis=2) == per_channel.max(axis=2)).all()       # a channel drops as a whole
    assert 0 < (per_channel[..., 0] == 0).sum() < 48
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), y.detach().numpy())                 # dy/dx = the mask
    m = nn.Dropout1d(0.3).eval()
    z = md.ones(2, 3, 4)
    assert m(z) is z
    assert repr(nn.Dropout1d(0.2)) == "Dropout1d(p=0.2, inplace=False)"


@pytest.mark.parametrize("call,exc,match", [
    (lambda: F.pad(md.zeros(1, 1, 3), (1,)), RuntimeError, "Padding length must be divisible by 2"),
    (lambda: F.pad(md.zeros(2, 2), (1.5, 1)), TypeError,
     r"pad\(\): argument 'pad' must be a tuple of ints, but found element of type float \(1.5\) at pos 0"),
    (lambda: F.pad(md.zeros(1, 3), (1, 1, 1, 1, 1, 1)), RuntimeError, "padding length 6 and input of dimension 2"),
    (lambda: F.pad(md.zeros(1, 1, 3), (3, 3), mode="reflect"), RuntimeError,
     r"should be less than the corresponding input dimension, but got: padding \(3, 3\) at dimension 2"),
    (lambda: F.pad(md.zeros(1, 1, 3), (1, 1), mode="foo"), NotImplementedError, "Unrecognised padding mode foo"),
    (lambda: F.pad(md.zeros(3), (1, 1), mode="reflect"), NotImplementedError, "not supported for 1D input"),
    (lambda: F.pad(md.zeros(1, 1, 3), (1, 1), mode="reflect", value=2.0), RuntimeError, "doesn't take in value"),
    (lambda: F.interpolate(md.zeros(1, 1, 3), scale_factor=2, mode="bilinear"), NotImplementedError,
     "Got 3D input, but bilinear mode needs 4D input"),
    (lambda: F.interpolate(md.zeros(1, 1, 3), size=4, scale_factor=2), ValueError, "only one of size or scale_factor"),
    (lambda: F.interpolate(md.zeros(1, 1, 3)), ValueError, "either size or scale_factor"),
    (lambda: F.interpolate(md.zeros(1, 1, 3), size=(4, 4)), ValueError, "same number of spatial dimensions"),
    (lambda: F.interpolate(md.zeros(1, 1, 3), size=4, align_corners=True), ValueError, "align_corners option"),
    (lambda: F.interpolate(md.zeros(1, 1, 3), size=4, mode="bicubic"), NotImplementedError, "'bicubic'"),
    (lambda: F.one_hot(md.tensor([1.0])), RuntimeError, "LongTensor.*got dtype.*float32"),
    (lambda: F.one_hot(md.tensor([-1])), RuntimeError, "must be non-negative, got -1"),
    (lambda: F.one_hot(md.tensor([3]), 3), RuntimeError, r"smaller than num_classes \(3\), got 3"),
    (lambda: F.one_hot(md.tensor(np.zeros(0, np.int64))), RuntimeError, "infer total number of classes"),
    (lambda: F.normalize(md.zeros(2, 3), dim=2), IndexError, r"range of \[-2, 1\], but got 2"),
    (lambda: F.pixel_shuffle(md.zeros(1, 3, 2, 2), 2), RuntimeError, "input.size.-3.=3 is not divisible by 4"),
    (lambda: F.pixel_shuffle(md.zeros(3, 2), 2), RuntimeError, "at least 3 dimensions.*with 2 dimension"),
    (lambda: nn.Unflatten(1, (2, 3))(md.zeros(2, 5)), RuntimeError, r"sizes \[2, 3\] don't multiply up to .* \(5\)"),
    (lambda: F.dropout1d(md.zeros(2, 3, 4, 5)), RuntimeError, "Expected 2D or 3D input, but received a 4D input"),
    (lambda: F.dropout2d(md.zeros(3)), RuntimeError, "Feature dropout requires at least 2 dimensions"),
    (lambda: F.dropout1d(md.zeros(2, 3), p=1.5), ValueError, "between 0 and 1, but got 1.5"),
])
def test_bad_input_raises_torch_exception_type_naming_expected_and_got(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_padding_an_empty_axis_fills_it_with_the_value():
    y = F.pad(md.zeros(2, 0), (1, 1), value=3.0)
    np.testing.assert_array_equal(y.numpy(), np.full((2, 2), 3.0))
    y = F.pad(md.tensor([[np.inf, 1.0]]), (1, 0))          # a constant border never reads the input
    assert y.numpy()[0, 0] == 0.0


@pytest.mark.parametrize("call", [lambda: F.pad(md.zeros(2, 2), (10 ** 12, 0)),
                                  lambda: F.interpolate(md.zeros(1, 1, 2, 2), scale_factor=10 ** 7),
                                  lambda: F.one_hot(md.tensor([10 ** 12]))], ids=["pad", "interpolate", "one_hot"])
def test_outputs_too_large_for_memory_raise_before_allocating(call):
    with pytest.raises(RuntimeError, match="can't allocate memory"):
        call()
