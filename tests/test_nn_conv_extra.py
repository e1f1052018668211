"""Convolution and pooling beyond Conv2d / MaxPool2d: conv1d, conv_transpose1d/2d, unfold /
fold, max/avg/adaptive pooling in 1-D and adaptive max pooling in 2-D. Naive NumPy
references (loops over output positions, written from the definitions) and gradcheck through
OpSpec; PyTorch as the oracle for values, gradients, modules and reprs; bad input."""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.testing import OpSpec, check_forward, check_gradcheck, forward_cases, spec_id


def conv_transpose_ref(x, w, b, s, p):
    """Each input pixel stamps its scaled kernel into the output at stride s, then p is cropped."""
    N, Cin, H, W = x.shape
    _, Cout, kh, kw = w.shape
    full = np.zeros((N, Cout, (H - 1) * s + kh, (W - 1) * s + kw))
    for h in range(H):
        for v in range(W):
            full[:, :, h * s:h * s + kh, v * s:v * s + kw] += np.einsum("nc,cokl->nokl", x[:, :, h, v], w)
    return full[:, :, p:full.shape[2] - p, p:full.shape[3] - p] + b.reshape(1, -1, 1, 1)


def conv1d_ref(x, w, b, s, p):
    xp = np.pad(x, ((0, 0), (0, 0), (p, p)))
    k = w.shape[2]
    L = (xp.shape[2] - k) // s + 1
    return np.stack([np.einsum("ncl,ocl->no", xp[:, :, i * s:i * s + k], w) for i in range(L)], axis=2) + b[:, None]


def unfold_ref(x, k, s):
    N, C, H, W = x.shape
    blocks = [x[:, :, i:i + k, j:j + k].reshape(N, C * k * k) for i in range(0, H - k + 1, s)
              for j in range(0, W - k + 1, s)]
    return np.stack(blocks, axis=2)


def fold_ref(c, H, W, k):
    """Sum each column, as a k x k block, back into the (H, W) image at its stride-1 position."""
    N, CKK, L = c.shape
    C = CKK // (k * k)
    out = np.zeros((N, C, H, W))
    positions = [(i, j) for i in range(H - k + 1) for j in range(W - k + 1)]
    for col, (i, j) in enumerate(positions):
        out[:, :, i:i + k, j:j + k] += c[:, :, col].reshape(N, C, k, k)
    return out


def adaptive_max_ref(x, oh, ow):
    H, W = x.shape[2:]
    out = np.zeros(x.shape[:2] + (oh, ow))
    for i in range(oh):
        for j in range(ow):
            h0, h1 = (i * H) // oh, -(-((i + 1) * H) // oh)
            w0, w1 = (j * W) // ow, -(-((j + 1) * W) // ow)
            out[:, :, i, j] = x[:, :, h0:h1, w0:w1].max(axis=(2, 3))
    return out


SPECS = [
    OpSpec("conv_transpose2d_s2_p1", lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1),
           lambda x, w, b: conv_transpose_ref(x, w, b, 2, 1),
           lambda r: (r.standard_normal((2, 3, 3, 2)), r.standard_normal((3, 2, 3, 3)), r.standard_normal(2))),
    OpSpec("conv1d_s2_p1", lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1),
           lambda x, w, b: conv1d_ref(x, w, b, 2, 1),
           lambda r: (r.standard_normal((2, 3, 7)), r.standard_normal((4, 3, 3)), r.standard_normal(4))),
    OpSpec("unfold_k2_s1", lambda x: F.unfold(x, 2), lambda x: unfold_ref(x, 2, 1),
           lambda r: (r.standard_normal((2, 3, 3, 4)),)),
    OpSpec("fold_k2_s1", lambda c: F.fold(c, (3, 4), 2), lambda c: fold_ref(c, 3, 4, 2),
           lambda r: (r.standard_normal((2, 12, 6)),)),
    OpSpec("adaptive_max_pool2d", lambda x: F.adaptive_max_pool2d(x, (2, 3)), lambda x: adaptive_max_ref(x, 2, 3),
           lambda r: (r.standard_normal((2, 2, 5, 7)),)),
    OpSpec("max_pool1d", lambda x: F.max_pool1d(x, 3, 2), lambda x: np.stack([x[..., i:i + 3].max(-1)
                                                                            for i in range(0, 5, 2)], -1),
           lambda r: (r.standard_normal((2, 3, 7)),)),
    OpSpec("avg_pool1d", lambda x: F.avg_pool1d(x, 2), lambda x: (x[..., 0:6:2] + x[..., 1:6:2]) / 2,
           lambda r: (r.standard_normal((2, 3, 7)),)),
    OpSpec("adaptive_avg_pool1d", lambda x: F.adaptive_avg_pool1d(x, 2),
           lambda x: np.stack([x[..., 0:4].mean(-1), x[..., 3:7].mean(-1)], -1),
           lambda r: (r.standard_normal((2, 3, 7)),)),
]


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward_matches_numpy_reference(spec, dtype, device):
    check_forward(spec, dtype, device)


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck(spec):
    assert check_gradcheck(spec)


def test_fold_is_the_adjoint_of_unfold():
    """<unfold(x), c> == <x, fold(c)> for every x and c: fold sums each block back where it came from."""
    rng = np.random.default_rng(0)
    x, c = rng.standard_normal((2, 3, 5, 6)), rng.standard_normal((2, 3 * 2 * 3, 3 * 2))
    kw = dict(kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=2)
    lhs = (F.unfold(md.tensor(x), **kw).numpy() * c).sum()
    rhs = (x * F.fold(md.tensor(c), (5, 6), **kw).numpy()).sum()
    np.testing.assert_allclose(lhs, rhs)


def _against_torch(name, arrays, **kw):
    torch = pytest.importorskip("torch")
    ours = [md.tensor(a, requires_grad=True) if a is not None else None for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) if a is not None else None for a in arrays]
    y, ty = getattr(F, name)(*ours, **kw), getattr(torch.nn.functional, name)(*theirs, **kw)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    v = np.random.default_rng(1).standard_normal(y.shape)
    y.backward(md.tensor(v))
    ty.backward(torch.tensor(v))
    for o, t in zip(ours, theirs):
        if o is not None:
            np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)


rng = np.random.default_rng(0)


@pytest.mark.parametrize("xs,ws,bias,kw", [
    ((2, 4, 3, 3), (4, 3, 2, 2), True, {}),
    ((2, 4, 3, 4), (4, 1, 3, 2), True, dict(stride=2, padding=1, output_padding=1, groups=2, dilation=(1, 2))),
    ((4, 3, 3), (4, 2, 3, 3), False, dict(stride=(2, 1))),
])
def test_conv_transpose2d_matches_torch(xs, ws, bias, kw):
    b = rng.standard_normal(ws[1] * kw.get("groups", 1)) if bias else None
    _against_torch("conv_transpose2d", [rng.standard_normal(xs), rng.standard_normal(ws), b], **kw)


@pytest.mark.parametrize("kw", [dict(stride=2, padding=1, output_padding=1), dict(dilation=2, groups=3)])
def test_conv_transpose1d_matches_torch(kw):
    _against_torch("conv_transpose1d", [rng.standard_normal((2, 3, 5)), rng.standard_normal((3, 2, 3)),
                                        rng.standard_normal(2 * kw.get("groups", 1))], **kw)


@pytest.mark.parametrize("kw", [{}, dict(stride=2, padding=2, dilation=2), dict(padding="same", groups=3),
                                dict(padding="valid")])
def test_conv1d_matches_torch(kw):
    _against_torch("conv1d", [rng.standard_normal((2, 3, 8)), rng.standard_normal((6, 3 // kw.get("groups", 1), 3)),
                              rng.standard_normal(6)], **kw)


@pytest.mark.parametrize("name,args,kw", [
    ("max_pool1d", (3, 2, 1), {}), ("max_pool1d", (2,), dict(ceil_mode=True)), ("max_pool1d", (2, 1, 0, 2), {}),
    ("avg_pool1d", (3, 2, 1), dict(count_include_pad=False)), ("avg_pool1d", (2,), dict(ceil_mode=True)),
    ("adaptive_avg_pool1d", (3,), {}), ("adaptive_max_pool1d", (3,), {}),
])
def test_pool1d_matches_torch(name, args, kw):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((2, 3, 7))
    a, t = md.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y, ty = getattr(F, name)(a, *args, **kw), getattr(torch.nn.functional, name)(t, *args, **kw)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy())
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy())


@pytest.mark.parametrize("shape,out", [((2, 3, 5, 7), (3, 4)), ((3, 5, 7), (None, 2)), ((1, 2, 4, 4), 2)])
def test_adaptive_max_pool2d_matches_torch_values_indices_gradients(shape, out):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal(shape)
    a, t = md.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    (y, i), (ty, ti) = F.adaptive_max_pool2d(a, out, True), torch.nn.functional.adaptive_max_pool2d(t, out, True)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy())
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy())


MODULES = [("Conv1d", (2, 4, 3), {"stride": 2}, (2, 2, 9)), ("ConvTranspose1d", (2, 4, 3), {"stride": 2}, (2, 2, 5)),
           ("ConvTranspose2d", (2, 4, 3), {"padding": 1, "bias": False}, (2, 2, 3, 4)),
           ("MaxPool1d", (2,), {}, (2, 3, 6)), ("AvgPool1d", (3,), {}, (2, 3, 6)),
           ("AdaptiveAvgPool1d", (4,), {}, (2, 3, 6)), ("AdaptiveMaxPool1d", (4,), {}, (2, 3, 6)),
           ("AdaptiveMaxPool2d", ((2, 3),), {}, (2, 3, 4, 5)), ("Unfold", (2,), {}, (2, 3, 4, 5)),
           ("Fold", ((4, 4), 2), {}, (2, 12, 9))]


@pytest.mark.parametrize("name,args,kw,shape", MODULES, ids=[m[0] for m in MODULES])
def test_modules_match_torch(name, args, kw, shape):
    torch = pytest.importorskip("torch")
    ours, theirs = getattr(nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw).double()
    assert repr(ours) == repr(theirs)
    assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == \
           [(n, tuple(p.shape)) for n, p in theirs.named_parameters()]
    ours.double().load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    x = rng.standard_normal(shape)
    np.testing.assert_allclose(ours(md.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy(),
                               rtol=1e-10)


def test_conv_transpose_output_size_picks_the_output_padding():
    m = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1)
    assert m(md.zeros(1, 2, 4, 4), output_size=(8, 8)).shape == (1, 3, 8, 8)
    assert m(md.zeros(1, 2, 4, 4)).shape == (1, 3, 7, 7)
    with pytest.raises(ValueError, match="valid sizes range from 7 to 8"):
        m(md.zeros(1, 2, 4, 4), output_size=(9, 9))


def test_conv_layer_init_bounds_follow_fan_in():
    m = nn.ConvTranspose2d(4, 6, 3)         # fan_in = weight.size(1) * 9 = 54, as PyTorch
    assert np.abs(m.weight.detach().numpy()).max() <= 1 / np.sqrt(54) + 1e-7
    assert m.weight.shape == (4, 6, 3, 3)


@pytest.mark.parametrize("call,exc,match", [
    (lambda: F.conv1d(md.zeros(2, 3, 4, 5), md.zeros(2, 3, 3)), RuntimeError,
     r"Expected 2D \(unbatched\) or 3D \(batched\) input to conv1d, but got input of size: \[2, 3, 4, 5\]"),
    (lambda: F.conv_transpose2d(md.zeros(1, 2, 3, 3), md.zeros(3, 2, 2, 2)), RuntimeError,
     "expected input.*to have 3 channels, but got 2 channels"),
    (lambda: F.conv_transpose2d(md.zeros(1, 2, 3, 3), md.zeros(2, 2, 2, 2), output_padding=1), RuntimeError,
     "output padding must be smaller than either stride or dilation"),
    (lambda: F.max_pool1d(md.zeros(2, 3, 4, 5), 2), RuntimeError, r"Expected 2D or 3D.*got:\[2, 3, 4, 5\]"),
    (lambda: F.unfold(md.zeros(2, 3), 2), RuntimeError, r"Only 3D or 4D input Tensors are supported \(got 2D\)"),
    (lambda: F.unfold(md.zeros(1, 1, 2, 2), 3), RuntimeError, "sliding blocks is .* must be at least one"),
    (lambda: F.fold(md.zeros(2, 12, 5), (4, 4), 2), RuntimeError, r"3 \* 3 = 9, but got input.size\(2\)=5"),
    (lambda: F.fold(md.zeros(2, 10, 9), (4, 4), 2), RuntimeError, "divisible by the product of kernel_size"),
    (lambda: F.adaptive_max_pool2d(md.zeros(2, 3), 2), RuntimeError, "Expected 3D or 4D tensor"),
])
def test_bad_input_raises_torch_exception_type_naming_expected_and_got(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_adaptive_max_pool2d_of_an_empty_batch_and_empty_output():
    assert F.adaptive_max_pool2d(md.zeros(0, 2, 3, 3), 2).shape == (0, 2, 2, 2)
    assert F.adaptive_max_pool2d(md.zeros(1, 2, 3, 3), (0, 2)).shape == (1, 2, 0, 2)
