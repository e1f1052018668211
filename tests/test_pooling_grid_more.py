"""LP pooling, max unpooling, fractional max pooling, affine_grid / grid_sample, the
*_with_indices pools and the deprecated upsampling names: NumPy references and gradcheck
through OpSpec, PyTorch as the oracle for values and gradients, bad input."""
import math
import warnings

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.testing import OpSpec, check_forward, check_gradcheck, forward_cases, spec_id


# NumPy references ------------------------------------------------------------------------

def _pool_len(n, k, s, ceil):
    out = (n - k + (s - 1 if ceil else 0)) // s + 1
    return out - 1 if ceil and (out - 1) * s >= n else out


def lp_pool2d_ref(x, p, kh, kw, sh, sw, ceil=False):
    """(mean over the in-bounds window of x**p times the kernel numel) ** (1/p)."""
    N, C, H, W = x.shape
    OH, OW = _pool_len(H, kh, sh, ceil), _pool_len(W, kw, sw, ceil)
    out = np.empty((N, C, OH, OW))
    for i in range(OH):
        for j in range(OW):
            win = x[:, :, i * sh: i * sh + kh, j * sw: j * sw + kw] ** p
            out[:, :, i, j] = (win.mean(axis=(2, 3)) * kh * kw) ** (1 / p)
    return out


def unpool_ref(x, idx, oh, ow):
    N, C = x.shape[:2]
    y = np.zeros((N, C, oh * ow))
    for n in range(N):
        for c in range(C):
            y[n, c, idx[n, c].reshape(-1)] = x[n, c].reshape(-1)
    return y.reshape(N, C, oh, ow)


def _src(c, n, padding_mode, align_corners):
    i = (c + 1) / 2 * (n - 1) if align_corners else ((c + 1) * n - 1) / 2
    if padding_mode == "reflection":
        lo, hi = (0.0, n - 1.0) if align_corners else (-0.5, n - 0.5)
        if hi == lo:
            return 0.0
        span, d = hi - lo, abs(i - lo)
        flips = math.floor(d / span)
        extra = d - flips * span
        i = lo + extra if flips % 2 == 0 else hi - extra
    if padding_mode in ("border", "reflection"):
        i = min(max(i, 0.0), n - 1.0)
    return i


def grid_sample_ref(x, grid, mode, padding_mode, align_corners):
    N, C, H, W = x.shape
    OH, OW = grid.shape[1:3]
    out = np.zeros((N, C, OH, OW))

    def at(n, yy, xx):
        return x[n, :, yy, xx] if 0 <= yy < H and 0 <= xx < W else np.zeros(C)

    for n in range(N):
        for h in range(OH):
            for w in range(OW):
                ix = _src(grid[n, h, w, 0], W, padding_mode, align_corners)
                iy = _src(grid[n, h, w, 1], H, padding_mode, align_corners)
                if mode == "nearest":
                    out[n, :, h, w] = at(n, int(np.rint(iy)), int(np.rint(ix)))
                    continue
                x0, y0 = math.floor(ix), math.floor(iy)
                tx, ty = ix - x0, iy - y0
                out[n, :, h, w] = ((1 - tx) * (1 - ty) * at(n, y0, x0) + tx * (1 - ty) * at(n, y0, x0 + 1)
                                   + (1 - tx) * ty * at(n, y0 + 1, x0) + tx * ty * at(n, y0 + 1, x0 + 1))
    return out


def _lin(n, align_corners):
    if n == 1:
        return np.zeros(1)
    r = np.linspace(-1, 1, n)
    return r if align_corners else r * (n - 1) / n


def affine_grid_ref(theta, size, align_corners):
    spatial = size[2:]
    axes = [_lin(n, align_corners) for n in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")
    base = np.stack(list(reversed(mesh)) + [np.ones(mesh[0].shape)], axis=-1)    # (..., x y [z] 1)
    return np.einsum("...k,njk->n...j", base, theta)


def fractional_ref(x, samples, kh, kw, oh, ow):
    """PyTorch's loops: generate_intervals per plane, then the first max of each window."""
    def starts(u, size, out, k):
        seq = [0] * out
        if out > 1:
            alpha = (size - k) / (out - 1)
            seq[:out - 1] = [int((i + u) * alpha) - int(u * alpha) for i in range(out - 1)]
        seq[out - 1] = size - k
        return seq

    N, C, H, W = x.shape
    out, idx = np.empty((N, C, oh, ow)), np.empty((N, C, oh, ow), dtype=np.int64)
    for n in range(N):
        for c in range(C):
            rows, cols = starts(samples[n, c, 1], H, oh, kh), starts(samples[n, c, 0], W, ow, kw)
            for i, r in enumerate(rows):
                for j, q in enumerate(cols):
                    win = x[n, c, r:r + kh, q:q + kw]
                    a = int(win.argmax())
                    out[n, c, i, j] = win.reshape(-1)[a]
                    idx[n, c, i, j] = (r + a // kw) * W + q + a % kw
    return out, idx


def _block_indices(rng, N, C, ph, pw, W):
    """Indices as a 2x2 max pool over an (2 ph, W) plane gives them: one position per block."""
    di, dj = rng.integers(0, 2, (N, C, ph, pw)), rng.integers(0, 2, (N, C, ph, pw))
    i, j = np.meshgrid(np.arange(ph), np.arange(pw), indexing="ij")
    return (2 * i + di) * W + 2 * j + dj


_GRID_CASES = [(m, p, a) for m in ("bilinear", "nearest") for p in ("zeros", "border", "reflection")
               for a in (False, True)]

SPECS = [
    OpSpec("lp_pool2d_p2", lambda x: F.lp_pool2d(x, 2, (2, 3), stride=(2, 1)),
           lambda x: lp_pool2d_ref(x, 2, 2, 3, 2, 1), lambda r: (r.standard_normal((2, 3, 5, 6)),)),
    OpSpec("lp_pool2d_p3_ceil", lambda x: F.lp_pool2d(x, 3, 2, ceil_mode=True),
           lambda x: lp_pool2d_ref(x, 3, 2, 2, 2, 2, ceil=True), lambda r: (r.uniform(0.5, 2, (2, 2, 5, 5)),)),
    OpSpec("lp_pool1d_p1.5", lambda x: F.lp_pool1d(x, 1.5, 3, stride=2),
           lambda x: lp_pool2d_ref(x[:, :, None], 1.5, 1, 3, 1, 2)[:, :, 0], lambda r: (r.uniform(0.5, 2, (2, 3, 8)),)),
    OpSpec("max_unpool2d", lambda x, i: F.max_unpool2d(x, md.tensor(i), 2, output_size=(5, 7)),
           lambda x, i: unpool_ref(x, i, 5, 7),
           lambda r: (r.standard_normal((2, 3, 2, 3)), _block_indices(r, 2, 3, 2, 3, 7))),
    OpSpec("max_unpool1d", lambda x, i: F.max_unpool1d(x, md.tensor(i), 3, stride=2),
           lambda x, i: unpool_ref(x[..., None], i[..., None], 9, 1)[..., 0],
           lambda r: (r.standard_normal((1, 2, 4)), np.array([[[0, 3, 4, 8], [2, 3, 6, 7]]]))),
    OpSpec("affine_grid_2d", lambda t: F.affine_grid(t, (2, 1, 3, 4), align_corners=False),
           lambda t: affine_grid_ref(t, (2, 1, 3, 4), False), lambda r: (r.standard_normal((2, 2, 3)),)),
    OpSpec("affine_grid_3d_align", lambda t: F.affine_grid(t, (1, 2, 2, 3, 4), align_corners=True),
           lambda t: affine_grid_ref(t, (1, 2, 2, 3, 4), True), lambda r: (r.standard_normal((1, 3, 4)),)),
    OpSpec("fractional_max_pool2d", lambda x, s: F.fractional_max_pool2d(x, (2, 3), (4, 3), _random_samples=s),
           lambda x, s: fractional_ref(x, s, 2, 3, 4, 3)[0],
           lambda r: (r.standard_normal((2, 3, 7, 8)), r.random((2, 3, 2))), dtypes=("float64",), grad_inputs=[0]),
] + [OpSpec(f"grid_sample_{m}_{p}_{'align' if a else 'noalign'}",
            lambda x, g, m=m, p=p, a=a: F.grid_sample(x, g, m, p, a),
            lambda x, g, m=m, p=p, a=a: grid_sample_ref(x, g, m, p, a),
            lambda r: (r.standard_normal((2, 2, 4, 5)), r.uniform(-1.4, 1.4, (2, 3, 2, 2))),
            grad_inputs=[0, 1] if m == "bilinear" else [0]) for m, p, a in _GRID_CASES]


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward_matches_numpy_reference(spec, dtype, device):
    check_forward(spec, dtype, device)


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck(spec):
    assert check_gradcheck(spec)


def test_fractional_indices_match_reference():
    r = np.random.default_rng(3)
    x, s = r.standard_normal((2, 3, 9, 7)), r.random((2, 3, 2))
    out, idx = F.fractional_max_pool2d(md.tensor(x), 3, (5, 4), return_indices=True, _random_samples=md.tensor(s))
    ref_out, ref_idx = fractional_ref(x, s, 3, 3, 5, 4)
    np.testing.assert_array_equal(idx.numpy(), ref_idx)
    np.testing.assert_array_equal(out.numpy(), ref_out)


def test_with_indices_aliases_return_pairs():
    x = md.randn(2, 3, 6, 6)
    for got, want in [(F.max_pool2d_with_indices(x, 2), F.max_pool2d(x, 2, return_indices=True)),
                      (F.max_pool1d_with_indices(x[0], 3), F.max_pool1d(x[0], 3, return_indices=True)),
                      (F.adaptive_max_pool2d_with_indices(x, 4), F.adaptive_max_pool2d(x, 4, True)),
                      (F.adaptive_max_pool1d_with_indices(x[0], 4), F.adaptive_max_pool1d(x[0], 4, True))]:
        assert isinstance(got, tuple) and len(got) == 2
        np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())
        np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())


def test_unpool_inverts_pool_at_the_maxima():
    x = md.rand(2, 3, 6, 8) + 0.5                    # positive: the zeros unpooling adds lose every max
    out, idx = F.max_pool2d(x, 2, return_indices=True)
    y = nn.MaxUnpool2d(2)(out, idx)
    kept = y.numpy() != 0
    assert kept.sum() == out.numel()
    np.testing.assert_array_equal(y.numpy()[kept], x.numpy()[kept])
    np.testing.assert_array_equal(F.max_pool2d(y, 2).numpy(), out.numpy())


def test_deprecated_upsample_warns_and_interpolates():
    x = md.randn(1, 2, 3, 4)
    cases = [(lambda: F.upsample(x, scale_factor=2, mode="bilinear", align_corners=False), "upsample",
              F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)),
             (lambda: F.upsample_nearest(x, size=(5, 7)), "upsample_nearest", F.interpolate(x, size=(5, 7))),
             (lambda: F.upsample_bilinear(x, scale_factor=2), "upsample_bilinear",
              F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True))]
    for call, name, want in cases:
        with pytest.warns(UserWarning, match=f"`nn.functional.{name}` is deprecated"):
            got = call()
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # the modules are not deprecated
        np.testing.assert_array_equal(nn.UpsamplingBilinear2d(scale_factor=2)(x).numpy(), cases[2][2].numpy())
        np.testing.assert_array_equal(nn.UpsamplingNearest2d(size=(5, 7))(x).numpy(), cases[1][2].numpy())


def test_align_corners_default_warns():
    x, theta = md.randn(1, 1, 3, 3), md.randn(1, 2, 3)
    with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
        grid = F.affine_grid(theta, (1, 1, 3, 3))
    with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
        F.grid_sample(x, grid)


def test_modules_repr_and_buffer():
    assert repr(nn.LPPool2d(2, 3)) == "LPPool2d(norm_type=2, kernel_size=3, stride=None, ceil_mode=False)"
    assert repr(nn.MaxUnpool1d(2)) == "MaxUnpool1d(kernel_size=(2,), stride=(2,), padding=(0,))"
    s = md.rand(1, 2, 2)
    pool = nn.FractionalMaxPool2d(2, output_size=3, _random_samples=s)
    assert "_random_samples" in dict(pool.named_buffers())
    x = md.randn(1, 2, 6, 6)
    np.testing.assert_array_equal(pool(x).numpy(), pool(x).numpy())   # fixed samples: fixed windows
    assert nn.FractionalMaxPool2d(3, output_ratio=0.5)(x).shape == (1, 2, 3, 3)


@pytest.mark.parametrize("x_shape,grid_shape", [((1, 2, 4, 5), (1, 3, 2, 2)), ((1, 2, 3, 4, 5), (1, 2, 3, 2, 3))])
def test_grid_sample_runs_on_cuda(x_shape, grid_shape):
    r = np.random.default_rng(4)
    x, g = r.standard_normal(x_shape).astype(np.float32), r.uniform(-1.3, 1.3, grid_shape).astype(np.float32)
    try:
        md.tensor(x, device="cuda")
    except (RuntimeError, ImportError) as exc:
        pytest.skip(f"no cuda device: {exc}")
    results = []
    for dev in ("cpu", "cuda"):
        xt, gt = md.tensor(x, device=dev, requires_grad=True), md.tensor(g, device=dev, requires_grad=True)
        y = F.grid_sample(xt, gt, "bilinear", "reflection", False)
        y.sum().backward()
        results.append([y.detach().cpu().numpy(), xt.grad.cpu().numpy(), gt.grad.cpu().numpy()])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _unpool_inputs():
    out, idx = F.max_pool2d(md.randn(1, 2, 4, 4), 2, return_indices=True)
    return out, idx


@pytest.mark.parametrize("call,exc,match", [
    (lambda o, i: F.max_unpool2d(o, i.float(), 2), RuntimeError, "should be type int64"),
    (lambda o, i: F.max_unpool2d(o, i[:, :1], 2), RuntimeError, "Expected shape of indices"),
    (lambda o, i: F.max_unpool2d(o, i * 100, 2), RuntimeError, "invalid max index"),
    (lambda o, i: F.max_unpool2d(o, i - 100, 2), RuntimeError, "invalid max index"),
    (lambda o, i: F.max_unpool2d(o, i, 2, output_size=(6, 6)), ValueError, "invalid output_size"),
    (lambda o, i: F.max_unpool2d(o, i, 2, output_size=(5,)), ValueError, "2 or 4 elements"),
    (lambda o, i: F.max_unpool2d(o[0, 0], i[0, 0], 2), RuntimeError, "3d or 4d"),
    (lambda o, i: F.max_unpool1d(o, i, 2), RuntimeError, "3d or 4d"),
])
def test_unpool_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call(*_unpool_inputs())


@pytest.mark.parametrize("call,exc,match", [
    (lambda x, g: F.grid_sample(x, g, mode="foo", align_corners=False), ValueError, "expected mode"),
    (lambda x, g: F.grid_sample(x, g, padding_mode="foo", align_corners=False), ValueError, "padding_mode"),
    (lambda x, g: F.grid_sample(x[None], g[None], align_corners=False), RuntimeError, "size 3 in last"),
    (lambda x, g: F.grid_sample(x, md.cat([g, g]), align_corners=False), RuntimeError, "same batch size"),
    (lambda x, g: F.grid_sample(x, g[0], align_corners=False), RuntimeError, "same number of dimensions"),
    (lambda x, g: F.grid_sample(x, md.cat([g, g], -1), align_corners=False), RuntimeError, "size 2 in last"),
    (lambda x, g: F.grid_sample(x, g.double(), align_corners=False), RuntimeError, "same dtype"),
    (lambda x, g: F.grid_sample(x[:, :, :0], g, align_corners=False), RuntimeError, "non-empty spatial"),
    (lambda x, g: F.affine_grid(md.randn(1, 2, 4), (1, 1, 3, 4), False), ValueError, "Nx2x3"),
    (lambda x, g: F.affine_grid(md.randn(1, 2, 3), (1, 1, 3, 4, 5), False), ValueError, "Nx3x4"),
    (lambda x, g: F.affine_grid(md.randn(1, 2, 3), (1, 1, 4), False), NotImplementedError, "4D and 5D"),
    (lambda x, g: F.affine_grid(md.tensor([[[1, 0, 0], [0, 1, 0]]]), (1, 1, 3, 4), False), ValueError,
     "floating point"),
    (lambda x, g: F.affine_grid(md.randn(1, 2, 3), (1, 1, 0, 4), False), ValueError, "positive output size"),
    (lambda x, g: F.affine_grid(md.randn(2, 2, 3), (1, 1, 3, 4), False), RuntimeError, "batch size"),
])
def test_grid_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call(md.randn(1, 2, 4, 4), md.rand(1, 3, 5, 2) * 2 - 1)


@pytest.mark.parametrize("call,exc,match", [
    (lambda x: F.fractional_max_pool2d(x, 3), ValueError, "either an output_size or an output_ratio"),
    (lambda x: F.fractional_max_pool2d(x, 3, output_size=(8, 5)), RuntimeError, "pool height 3 too large"),
    (lambda x: F.fractional_max_pool2d(x, 3, output_size=(4, 7)), RuntimeError, "pool width 3 too large"),
    (lambda x: F.fractional_max_pool2d(x, 3, (4, 5), _random_samples=md.rand(1, 3, 2)), RuntimeError,
     "no less then input batch size"),
    (lambda x: F.fractional_max_pool2d(x, 3, (4, 5), _random_samples=md.rand(2, 3, 2).double()), RuntimeError,
     "same dtype"),
    (lambda x: F.fractional_max_pool2d(x[0, 0], 3, 4), RuntimeError, "3D or 4D"),
    (lambda x: nn.FractionalMaxPool2d(3, output_ratio=1.5), ValueError, "between 0 and 1"),
    (lambda x: nn.FractionalMaxPool2d(3), ValueError, "output size, or a pooling ratio"),
    (lambda x: nn.FractionalMaxPool2d(3, 4, 0.5), ValueError, "only one of"),
    (lambda x: F.lp_pool2d(x, "2", 2), TypeError, "norm_type"),
])
def test_fractional_and_lp_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call(md.randn(2, 3, 9, 8))


# PyTorch as the oracle --------------------------------------------------------------------

rng = np.random.default_rng(0)


def _compare(ours_fn, torch_fn, arrays, grads=None, rtol=1e-10, atol=1e-12):
    """Values and the gradients of the float inputs (or those listed in ``grads``)."""
    torch = pytest.importorskip("torch")
    grads = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"] if grads is None else grads
    ours = [md.tensor(a, requires_grad=i in grads) for i, a in enumerate(arrays)]
    theirs = [torch.tensor(a, requires_grad=i in grads) for i, a in enumerate(arrays)]
    y, ty = ours_fn(*ours), torch_fn(*theirs)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=rtol, atol=atol, equal_nan=True)
    v = rng.standard_normal(tuple(ty.shape))
    y.backward(md.tensor(v.astype(arrays[0].dtype)))
    ty.backward(torch.tensor(v.astype(arrays[0].dtype)))
    for i in grads:
        np.testing.assert_allclose(ours[i].grad.numpy(), theirs[i].grad.numpy(), rtol=rtol, atol=atol,
                                   equal_nan=True, err_msg=f"gradient of input {i}")


@pytest.mark.parametrize("p", [1, 2, 3, 1.5, float("inf"), -float("inf")])
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_lp_pool_matches_torch(p, ceil_mode):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((2, 3, 7, 6))
    x[0, 0, :2, :3] = 0                              # an all-zero window: the gradient stops there
    if p == 1.5:
        x = np.abs(x)
    _compare(lambda t: F.lp_pool2d(t, p, (2, 3), stride=2, ceil_mode=ceil_mode),
             lambda t: torch.nn.functional.lp_pool2d(t, p, (2, 3), stride=2, ceil_mode=ceil_mode), [x])
    _compare(lambda t: nn.LPPool1d(p, 3, ceil_mode=ceil_mode)(t),
             lambda t: torch.nn.LPPool1d(p, 3, ceil_mode=ceil_mode)(t), [x[0, :, 0]])


def test_lp_pool_float32_matches_torch():
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    y = nn.LPPool2d(2, 2)(md.tensor(x))
    assert y.dtype == md.float32
    np.testing.assert_allclose(y.numpy(), torch.nn.LPPool2d(2, 2)(torch.tensor(x)).numpy(), rtol=1e-5)


@pytest.mark.parametrize("output_size", [None, (5, 7), (1, 2, 5, 6)])
def test_max_unpool2d_matches_torch(output_size):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((2, 3, 5, 7))
    _, idx = torch.nn.functional.max_pool2d(torch.tensor(x), 2, return_indices=True)
    pooled = torch.nn.functional.max_pool2d(torch.tensor(x), 2).numpy()
    if output_size is None:   # a 4 x 6 default output holds only the indices of the 4 x 6 corner
        x = x[:, :, :4, :6]
        _, idx = torch.nn.functional.max_pool2d(torch.tensor(x), 2, return_indices=True)
    _compare(lambda t, i: F.max_unpool2d(t, i, 2, output_size=output_size),
             lambda t, i: torch.nn.functional.max_unpool2d(t, i, 2, output_size=output_size),
             [pooled, idx.numpy()])


def test_max_unpool1d_and_modules_match_torch():
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((3, 9))
    pooled, idx = torch.nn.functional.max_pool1d(torch.tensor(x), 3, stride=2, padding=1, return_indices=True)
    _compare(lambda t, i: nn.MaxUnpool1d(3, stride=2, padding=1)(t, i, output_size=[9]),
             lambda t, i: torch.nn.MaxUnpool1d(3, stride=2, padding=1)(t, i, output_size=[9]),
             [pooled.detach().numpy(), idx.numpy()])
    ours = F.max_pool2d(md.tensor(rng.standard_normal((3, 4, 6))), 2, return_indices=True)
    theirs = [torch.tensor(t.numpy()) for t in ours]
    np.testing.assert_array_equal(nn.MaxUnpool2d(2)(*ours).numpy(), torch.nn.MaxUnpool2d(2)(*theirs).numpy())


@pytest.mark.parametrize("mode,padding_mode,align_corners", _GRID_CASES)
def test_grid_sample_matches_torch(mode, padding_mode, align_corners):
    torch = pytest.importorskip("torch")
    x, grid = rng.standard_normal((2, 3, 5, 6)), rng.uniform(-1.8, 1.8, (2, 4, 7, 2))
    grid[0, 0, :4] = [[1, -1], [0, 0], [-1, 1], [0.5, -0.25]]   # corners, centre, exact halves for nearest
    _compare(lambda a, g: F.grid_sample(a, g, mode, padding_mode, align_corners),
             lambda a, g: torch.nn.functional.grid_sample(a, g, mode, padding_mode, align_corners), [x, grid])


@pytest.mark.parametrize("shape", [(1, 2, 1, 1), (1, 2, 1, 4), (2, 1, 3, 1)])
def test_grid_sample_unit_sizes_match_torch(shape):
    torch = pytest.importorskip("torch")
    for mode, padding_mode, align_corners in _GRID_CASES:
        x, grid = rng.standard_normal(shape), rng.uniform(-3, 3, (shape[0], 3, 4, 2))
        _compare(lambda a, g: F.grid_sample(a, g, mode, padding_mode, align_corners),
                 lambda a, g: torch.nn.functional.grid_sample(a, g, mode, padding_mode, align_corners), [x, grid])


def test_spatial_transformer_float32_matches_torch():
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((2, 3, 6, 5)).astype(np.float32)
    theta = (np.eye(2, 3) + 0.2 * rng.standard_normal((2, 2, 3))).astype(np.float32)

    def ours(a, t):
        return F.grid_sample(a, F.affine_grid(t, (2, 3, 4, 7), align_corners=False), align_corners=False)

    def theirs(a, t):
        fn = torch.nn.functional
        return fn.grid_sample(a, fn.affine_grid(t, (2, 3, 4, 7), align_corners=False), align_corners=False)

    _compare(ours, theirs, [x, theta], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("size", [(2, 3, 4, 5), (2, 1, 2, 3, 4), (2, 1, 1, 3)])
@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_matches_torch(size, align_corners):
    torch = pytest.importorskip("torch")
    theta = rng.standard_normal((2, 2, 3) if len(size) == 4 else (2, 3, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # unit-size grids with align_corners=True warn, in both
        _compare(lambda t: F.affine_grid(t, size, align_corners),
                 lambda t: torch.nn.functional.affine_grid(t, size, align_corners), [theta])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fractional_max_pool_matches_torch(dtype):
    torch = pytest.importorskip("torch")
    for kernel, out, shape in [(3, (4, 5), (2, 3, 9, 8)), ((2, 3), (5, 3), (1, 2, 7, 6)), (2, 1, (3, 4, 4))]:
        x = rng.standard_normal(shape).astype(dtype)
        s = rng.random((shape[0] if len(shape) == 4 else 1, shape[-3], 2)).astype(dtype)
        _, idx = F.fractional_max_pool2d(md.tensor(x), kernel, out, return_indices=True, _random_samples=md.tensor(s))
        _, tidx = torch.nn.functional.fractional_max_pool2d(torch.tensor(x), kernel, out, return_indices=True,
                                                            _random_samples=torch.tensor(s))
        np.testing.assert_array_equal(idx.numpy(), tidx.numpy())
        _compare(lambda a: nn.FractionalMaxPool2d(kernel, out, _random_samples=md.tensor(s))(a),
                 lambda a: torch.nn.FractionalMaxPool2d(kernel, out, _random_samples=torch.tensor(s))(a), [x],
                 rtol=1e-6, atol=1e-7)


def test_fractional_window_starts_match_torch_over_many_samples():
    torch = pytest.importorskip("torch")
    r = np.random.default_rng(5)
    x = r.standard_normal((1, 64, 31, 29)).astype(np.float32)
    s = r.random((1, 64, 2)).astype(np.float32)
    for out in [(2, 2), (13, 11), (28, 26)]:
        _, idx = F.fractional_max_pool2d(md.tensor(x), 3, out, return_indices=True, _random_samples=md.tensor(s))
        _, tidx = torch.nn.functional.fractional_max_pool2d(torch.tensor(x), 3, out, return_indices=True,
                                                            _random_samples=torch.tensor(s))
        np.testing.assert_array_equal(idx.numpy(), tidx.numpy())


def test_upsampling_modules_match_torch():
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((1, 2, 3, 4))
    _compare(lambda t: nn.UpsamplingBilinear2d(scale_factor=2)(t), lambda t: torch.nn.UpsamplingBilinear2d(
        scale_factor=2)(t), [x])
    _compare(lambda t: nn.UpsamplingNearest2d(size=(5, 7))(t), lambda t: torch.nn.UpsamplingNearest2d(
        size=(5, 7))(t), [x])
