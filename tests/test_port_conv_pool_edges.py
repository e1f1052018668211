"""Convolution, pooling and resampling at their edges, as PyTorch: the conv layers' padding_mode
(reflect, replicate, circular, also with tuple and 'same' paddings), the error types of bad
convolution options, 3-D max pooling of integers and of an empty batch, antialiased
interpolation (bilinear, bicubic, lanczos) and bicubic grid_sample. Values against NumPy
references written here, gradients by finite differences, and against torch where it is
installed."""
import math

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.autograd import gradcheck
from minidl.testing import OpSpec, check_forward, check_gradcheck, forward_cases, spec_id


def t64(a, grad=False):
    return md.tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


# padding_mode ------------------------------------------------------------------------------

_NP_MODE = {"reflect": "reflect", "replicate": "edge", "circular": "wrap", "zeros": "constant"}


def _conv_reference(x, w, b, pads, mode, dilation):
    """Stride-1 convolution of x (N, C, *S) padded by ``pads`` ((before, after) per spatial dim)
    in NumPy's mode for ``mode``, weight (O, C, *K), dilation per dim."""
    xp = np.pad(x, ((0, 0), (0, 0)) + tuple(pads), mode=_NP_MODE[mode])
    K = w.shape[2:]
    out_sp = tuple(xp.shape[2 + i] - dilation[i] * (K[i] - 1) for i in range(len(K)))
    out = np.zeros((x.shape[0], w.shape[0]) + out_sp)
    for k in np.ndindex(*K):
        win = xp[(slice(None), slice(None)) + tuple(slice(k[i] * dilation[i], k[i] * dilation[i] + out_sp[i])
                                                    for i in range(len(K)))]
        out += np.einsum("nc...,oc->no...", win, w[(slice(None), slice(None)) + k])
    return out + b.reshape((1, -1) + (1,) * len(K))


_LAYERS = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}
_PAD_CASES = [  # dims, padding, kernel, dilation
    (1, 2, (3,), (1,)),
    (2, (1, 2), (3, 2), (1, 1)),
    (2, "same", (2, 4), (1, 2)),      # even kernels: the odd one of each total after, as PyTorch
    (3, (1, 0, 2), (2, 1, 3), (1, 1, 1)),
    (3, "same", (2, 3, 2), (2, 1, 1)),
]


def _pad_spec(mode, dims, padding, kernel, dilation):
    layer = _LAYERS[dims](2, 3, kernel, padding=padding, dilation=dilation, padding_mode=mode, dtype=md.float64)
    if padding == "same":
        tot = [d * (k - 1) for k, d in zip(kernel, dilation)]
        pads = [(t // 2, t - t // 2) for t in tot]
    else:
        pads = [(p, p) for p in ((padding,) * dims if isinstance(padding, int) else padding)]
    spatial = (5, 6, 4)[:dims]
    return OpSpec(
        name=f"conv{dims}d-{mode}-{padding}",
        op=lambda x, w, b: layer._conv_forward(x, w, b),
        reference=lambda x, w, b: _conv_reference(x, w, b, pads, mode, dilation),
        inputs=lambda rng: (rng.standard_normal((2, 2) + spatial), rng.standard_normal((3, 2) + tuple(kernel)),
                            rng.standard_normal(3)),
    )


PAD_SPECS = [_pad_spec(mode, *case) for mode in ("reflect", "replicate", "circular") for case in _PAD_CASES]


@pytest.mark.parametrize("spec,dtype,device", forward_cases(PAD_SPECS))
def test_padding_mode_forward(spec, dtype, device):
    check_forward(spec, dtype, device)


@pytest.mark.parametrize("spec", PAD_SPECS[:5] + PAD_SPECS[-3:], ids=spec_id)
def test_padding_mode_gradcheck(spec):
    assert check_gradcheck(spec)


def test_padding_mode_module_forward_unbatched_and_repr():
    conv = nn.Conv2d(2, 3, 3, padding=1, padding_mode="circular", dtype=md.float64)
    x = np.random.default_rng(0).standard_normal((2, 4, 5))
    want = _conv_reference(x[None], conv.weight.detach().numpy(), conv.bias.detach().numpy(), [(1, 1), (1, 1)],
                           "circular", (1, 1))[0]
    np.testing.assert_allclose(conv(t64(x)).detach().numpy(), want, atol=1e-12)
    assert conv._reversed_padding_repeated_twice == [1, 1, 1, 1]
    assert repr(conv) == "Conv2d(2, 3, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), padding_mode=circular)"
    conv1 = nn.Conv1d(1, 1, 4, padding="same", padding_mode="reflect")
    assert repr(conv1).endswith("padding=same, padding_mode=reflect)")
    assert nn.Conv3d(1, 1, (2, 3, 4), padding="same", dilation=(1, 2, 1),
                     padding_mode="replicate")._reversed_padding_repeated_twice == [1, 2, 2, 2, 0, 1]


def test_padding_mode_errors():
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv2d(1, 1, 3, padding_mode="foo")
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv1d(1, 1, 3, padding_mode="reflection")
    for cls in (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d):
        with pytest.raises(ValueError, match='Only "zeros" padding mode'):
            cls(1, 1, 3, padding_mode="reflect")
        with pytest.raises(TypeError, match="padding"):
            cls(1, 1, 3, padding="same")
    # reflect padding needs the input longer than the padding, as F.pad
    with pytest.raises(RuntimeError, match="Padding size should be less than"):
        nn.Conv2d(1, 1, 3, padding=3, padding_mode="reflect")(md.zeros(1, 1, 3, 3))


# convolution errors: RuntimeError, as PyTorch (ValueError too, as before) ----------------------

@pytest.mark.parametrize("call", [
    lambda: F.conv2d(md.zeros(1, 3, 5, 5), md.zeros(4, 1, 3, 3), groups=3),
    lambda: F.conv1d(md.zeros(1, 4, 5), md.zeros(3, 2, 3), groups=2),
    lambda: F.conv2d(md.zeros(1, 1, 5, 5), md.zeros(1, 1, 2, 2), stride=2, padding="same"),
    lambda: F.conv1d(md.zeros(1, 1, 5), md.zeros(1, 1, 2), stride=2, padding="same"),
    lambda: F.conv1d(md.zeros(1, 1, 5), md.zeros(1, 1, 2), padding="full"),
    lambda: F.conv2d(md.zeros(1, 1, 5, 5), md.zeros(1, 1, 2, 2), padding="full"),
    lambda: F.conv2d(md.zeros(1, 1, 5, 5), md.zeros(1, 1, 2, 2), padding=-1),
    lambda: F.conv2d(md.zeros(1, 1, 5, 5), md.zeros(1, 1, 2, 2), stride=0),
    lambda: F.conv2d(md.zeros(1, 2, 3, 3), md.zeros(3, 2, 5, 5)),
    lambda: F.conv2d(md.zeros(3, 3), md.zeros(1, 1, 2, 2)),
])
def test_conv_errors_are_runtime_errors(call):
    with pytest.raises(RuntimeError) as info:
        call()
    assert isinstance(info.value, ValueError)


def test_conv1d_same_stride_error_names_conv1d():
    with pytest.raises(RuntimeError, match="conv1d: padding='same' is not supported for strided"):
        F.conv1d(md.zeros(1, 1, 5), md.zeros(1, 1, 2), stride=2, padding="same")


# 3-D pooling edges -------------------------------------------------------------------------

def test_max_pool3d_integers_with_padding():
    x = np.arange(2 * 2 * 5 * 5 * 5).reshape(2, 2, 5, 5, 5) % 17 - 20
    y, idx = F.max_pool3d(md.tensor(x), 3, 2, 1, ceil_mode=True, return_indices=True)
    assert y.dtype == md.int64
    xp = np.pad(x, ((0, 0), (0, 0)) + ((1, 1),) * 3, constant_values=np.iinfo(np.int64).min)
    want = np.zeros((2, 2, 3, 3, 3), dtype=np.int64)
    for a, i, j in np.ndindex(3, 3, 3):
        want[:, :, a, i, j] = xp[:, :, 2 * a:2 * a + 3, 2 * i:2 * i + 3, 2 * j:2 * j + 3].max(axis=(2, 3, 4))
    np.testing.assert_array_equal(y.numpy(), want)
    np.testing.assert_array_equal(np.take_along_axis(x.reshape(2, 2, -1), idx.numpy().reshape(2, 2, -1), 2),
                                  want.reshape(2, 2, -1))


def test_adaptive_max_pool3d_empty_batch():
    x = md.zeros(0, 2, 5, 4, 3, dtype=md.float64, requires_grad=True)
    y, idx = F.adaptive_max_pool3d(x, 2, return_indices=True)
    assert y.shape == (0, 2, 2, 2, 2) and idx.shape == (0, 2, 2, 2, 2)
    y.sum().backward()
    assert x.grad.shape == x.shape


# antialiased interpolation -----------------------------------------------------------------

def _aa_filter(mode, d):
    d = abs(d)
    if mode == "bilinear":
        return max(1.0 - d, 0.0)
    if mode == "bicubic":
        a = -0.5
        if d < 1:
            return (a + 2) * d ** 3 - (a + 3) * d ** 2 + 1
        return a * d ** 3 - 5 * a * d ** 2 + 8 * a * d - 4 * a if d < 2 else 0.0
    return float(np.sinc(d) * np.sinc(d / 3)) if d < 3 else 0.0


def _aa_matrix(n, m, mode, scale):
    """(m, n): row j holds output j's normalised filter weights over the input (PIL's resampling)."""
    half = {"bilinear": 1, "bicubic": 2, "lanczos": 3}[mode]
    stretch = max(scale, 1.0)
    support = half * stretch
    M = np.zeros((m, n))
    for j in range(m):
        c = scale * (j + 0.5)
        lo, hi = max(int(c - support + 0.5), 0), min(int(c + support + 0.5), n)
        for i in range(lo, hi):
            M[j, i] = _aa_filter(mode, (i - c + 0.5) / stretch)
        if M[j].sum():
            M[j] /= M[j].sum()
    return M


def _aa_reference(x, size, mode, align_corners=False):
    (n, p), (m, q) = x.shape[2:], size
    scale = (lambda a, b: ((a - 1) / (b - 1) if b > 1 else 0.0) if align_corners else a / b)
    A, B = _aa_matrix(n, m, mode, scale(n, m)), _aa_matrix(p, q, mode, scale(p, q))
    return np.einsum("jh,nchw,kw->ncjk", A, x, B)


_AA_CASES = [("bilinear", (4, 3), False), ("bilinear", (3, 7), True), ("bicubic", (5, 2), False),
             ("bicubic", (2, 4), True), ("lanczos", (4, 3), False), ("lanczos", (13, 5), False)]
AA_SPECS = [OpSpec(name=f"antialias-{mode}-{size}-{ac}",
                   op=lambda x, mode=mode, size=size, ac=ac: F.interpolate(x, size=size, mode=mode, antialias=True,
                                                                           align_corners=ac),
                   reference=lambda x, mode=mode, size=size, ac=ac: _aa_reference(x, size, mode, ac),
                   inputs=lambda rng: (rng.standard_normal((2, 2, 11, 6)),))
            for mode, size, ac in _AA_CASES]


@pytest.mark.parametrize("spec,dtype,device", forward_cases(AA_SPECS))
def test_antialias_forward(spec, dtype, device):
    check_forward(spec, dtype, device)


@pytest.mark.parametrize("spec", AA_SPECS, ids=spec_id)
def test_antialias_gradcheck(spec):
    assert check_gradcheck(spec)


def test_antialias_scale_factor_and_inf():
    x = np.random.default_rng(1).standard_normal((1, 1, 10, 9))
    y = F.interpolate(t64(x), scale_factor=0.4, mode="bicubic", antialias=True)   # scale 1/0.4, not 10/4
    A, B = _aa_matrix(10, 4, "bicubic", 2.5), _aa_matrix(9, 3, "bicubic", 2.5)
    np.testing.assert_allclose(y.numpy(), np.einsum("jh,nchw,kw->ncjk", A, x, B), atol=1e-12)
    row = np.arange(1.0, 11.0)
    row[9] = np.inf     # outputs 0 and 1 read 0..4 and 2..7, their unused taps clipped to 9 but masked off
    out = F.interpolate(t64(row.reshape(1, 1, 1, 10)), size=(1, 3), mode="bilinear", antialias=True).numpy().ravel()
    assert np.isfinite(out[:2]).all() and np.isinf(out[2])


@pytest.mark.parametrize("call,exc,match", [
    (lambda x: F.interpolate(x, scale_factor=0.5, antialias=True), ValueError, "Anti-alias"),
    (lambda x: F.interpolate(x[0], scale_factor=0.5, mode="linear", antialias=True), ValueError, "4-D"),
    (lambda x: F.interpolate(x, scale_factor=0.5, mode="lanczos"), ValueError, "requires antialias"),
    (lambda x: F.interpolate(x, scale_factor=0.5, mode="lanczos", antialias=True, align_corners=True), ValueError,
     "align_corners"),
    (lambda x: F.interpolate(x, size=(3, 3), recompute_scale_factor=True), ValueError, "not meaningful"),
    (lambda x: F.interpolate(x, size=(3.0, 3)), TypeError, "expected size"),
])
def test_interpolate_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call(md.zeros(1, 1, 6, 6))


# bicubic grid_sample -----------------------------------------------------------------------

def _cubic(t, A=-0.75):
    def w(d):
        d = abs(d)
        return ((A + 2) * d - (A + 3)) * d * d + 1 if d <= 1 else ((A * d - 5 * A) * d + 8 * A) * d - 4 * A
    return [w(t + 1), w(t), w(1 - t), w(2 - t)]


def _bounded(v, n, padding_mode, align_corners):
    if padding_mode == "border":
        return min(max(v, 0), n - 1)
    if padding_mode == "reflection":
        lo, hi = (0.0, n - 1.0) if align_corners else (-0.5, n - 0.5)
        span = hi - lo
        if span <= 0:
            return 0
        d = abs(v - lo)
        flips, extra = divmod(d, span)
        v = extra + lo if flips % 2 == 0 else span - extra + lo
        return int(min(max(v, 0), n - 1))
    return v


def _grid_bicubic_reference(x, grid, padding_mode, align_corners):
    N, C, H, W = x.shape
    out = np.zeros((N, C) + grid.shape[1:3])
    for n, h, w in np.ndindex(N, *grid.shape[1:3]):
        gx, gy = grid[n, h, w]
        ix = (gx + 1) / 2 * (W - 1) if align_corners else ((gx + 1) * W - 1) / 2
        iy = (gy + 1) / 2 * (H - 1) if align_corners else ((gy + 1) * H - 1) / 2
        x0, y0 = math.floor(ix), math.floor(iy)
        cx, cy = _cubic(ix - x0), _cubic(iy - y0)
        for j in range(4):
            yy = _bounded(y0 - 1 + j, H, padding_mode, align_corners)
            for i in range(4):
                xx = _bounded(x0 - 1 + i, W, padding_mode, align_corners)
                if 0 <= xx < W and 0 <= yy < H:
                    out[n, :, h, w] += cx[i] * cy[j] * x[n, :, int(yy), int(xx)]
    return out


GRID_SPECS = [OpSpec(name=f"grid-bicubic-{pm}-{ac}",
                     op=lambda x, g, pm=pm, ac=ac: F.grid_sample(x, g, mode="bicubic", padding_mode=pm,
                                                                 align_corners=ac),
                     reference=lambda x, g, pm=pm, ac=ac: _grid_bicubic_reference(x, g, pm, ac),
                     inputs=lambda rng: (rng.standard_normal((2, 2, 4, 5)), rng.uniform(-1.6, 1.6, (2, 3, 4, 2))))
              for pm in ("zeros", "border", "reflection") for ac in (False, True)]


@pytest.mark.parametrize("spec,dtype,device", forward_cases(GRID_SPECS))
def test_grid_sample_bicubic_forward(spec, dtype, device):
    check_forward(spec, dtype, device)


@pytest.mark.parametrize("spec", GRID_SPECS, ids=spec_id)
def test_grid_sample_bicubic_gradcheck(spec):
    assert check_gradcheck(spec)


def test_grid_sample_bicubic_rejects_5d():
    with pytest.raises(RuntimeError, match="bicubic interpolation only supports 4D input"):
        F.grid_sample(md.zeros(1, 1, 2, 2, 2), md.zeros(1, 1, 1, 1, 3), mode="bicubic", align_corners=False)


# against PyTorch ---------------------------------------------------------------------------

def _both(torch, fn_md, fn_t, arrays, atol=1e-10):
    """fn on copies of ``arrays`` in each framework: outputs and input gradients compared."""
    ins_m = [t64(a, True) for a in arrays]
    ins_t = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    om, ot = fn_md(*ins_m), fn_t(*ins_t)
    np.testing.assert_allclose(om.detach().numpy(), ot.detach().numpy(), atol=atol)
    g = np.random.default_rng(5).standard_normal(tuple(ot.shape))
    om.backward(t64(g))
    ot.backward(torch.tensor(g))
    for a, b in zip(ins_m, ins_t):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=atol)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("dims,padding,kernel,dilation", _PAD_CASES)
def test_padding_mode_matches_torch(mode, dims, padding, kernel, dilation):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    spatial = (5, 6, 4)[:dims]
    x, w, b = rng.standard_normal((2, 2) + spatial), rng.standard_normal((4, 1) + kernel), rng.standard_normal(4)
    layers = [getattr(lib.nn, f"Conv{dims}d")(2, 4, kernel, padding=padding, dilation=dilation, groups=2,
                                              padding_mode=mode).double() for lib in (md, torch)]
    _both(torch, lambda x, w, b: layers[0]._conv_forward(x, w, b), lambda x, w, b: layers[1]._conv_forward(x, w, b),
          [x, w, b])


@pytest.mark.parametrize("mode,size,ac", _AA_CASES + [("bilinear", (9, 8), False), ("bicubic", (20, 12), False)])
def test_antialias_matches_torch(mode, size, ac):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(3).standard_normal((2, 3, 11, 6))
    _both(torch, lambda a: F.interpolate(a, size=size, mode=mode, antialias=True, align_corners=ac),
          lambda a: torch.nn.functional.interpolate(a, size=size, mode=mode, antialias=True, align_corners=ac), [x])


@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_bicubic_matches_torch(padding_mode, align_corners):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    x, grid = rng.standard_normal((2, 3, 5, 6)), rng.uniform(-2.5, 2.5, (2, 4, 3, 2))
    _both(torch, lambda a, g: F.grid_sample(a, g, "bicubic", padding_mode, align_corners),
          lambda a, g: torch.nn.functional.grid_sample(a, g, "bicubic", padding_mode, align_corners), [x, grid])


def test_max_pool3d_int_and_conv_errors_match_torch():
    torch = pytest.importorskip("torch")
    x = np.arange(2 * 5 * 4 * 6).reshape(1, 2, 5, 4, 6) % 13 - 30
    ym, im = F.max_pool3d(md.tensor(x), 3, 2, 1, ceil_mode=True, return_indices=True)
    yt, it = torch.nn.functional.max_pool3d(torch.tensor(x), 3, 2, 1, ceil_mode=True, return_indices=True)
    np.testing.assert_array_equal(ym.numpy(), yt.numpy())
    np.testing.assert_array_equal(im.numpy(), it.numpy())
    for lib, fn in ((md, F), (torch, torch.nn.functional)):
        with pytest.raises(RuntimeError):
            fn.conv2d(lib.zeros(1, 4, 5, 5), lib.zeros(3, 2, 3, 3), groups=2)


def test_gradcheck_padding_mode_layer_end_to_end():
    conv = nn.Conv2d(1, 2, (2, 3), padding="same", padding_mode="reflect", dtype=md.float64)
    x = t64(np.random.default_rng(6).standard_normal((1, 1, 4, 5)), True)
    assert gradcheck(lambda a: conv(a), (x,))
