"""conv2d's direct sums (minidl.ops.conv_direct, kernels in minidl.kernels.cpu.conv_direct): the
kernels against the NumPy reference in float32 and float64 over kernel sizes (runs of five,
three and one tap), odd channel counts, padding, groups of images and blocks of positions;
the reference against a plain loop; conv2d taking the path exactly where the rule says, with
its gradients by finite differences and equal to the column path's; bad and empty inputs."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minidl as md
import minidl.nn.functional as F
from minidl.autograd import gradcheck
from minidl.kernels.cpu import conv_direct as k_direct
from minidl.ops import conv_direct
from minidl.ops._kernel_switch import implementation
from minidl.testing import OpSpec, check_implementations

CASES = [  # (N, C, H, W), (O, kh, kw), (ph, pw)
    ((2, 1, 28, 28), (6, 5, 5), (2, 2)),       # LeNet's first layer
    ((3, 6, 14, 14), (16, 5, 5), (0, 0)),      # its second
    ((2, 3, 9, 11), (5, 3, 3), (1, 1)),        # odd O: a zero channel pads the pairs
    ((4, 2, 7, 6), (3, 2, 4), (0, 1)),         # taps 1 + 1, 3 + 1; asymmetric padding
    ((2, 3, 8, 8), (4, 7, 6), (3, 2)),         # runs of 5 + 1 + 1 and 5 + 1
    ((1, 5, 6, 5), (2, 1, 1), (0, 0)),         # 1x1
    ((2, 2, 3, 3), (3, 3, 3), (3, 3)),         # more padding than image
    ((1, 1, 50, 52), (3, 3, 3), (1, 1)),       # more positions than one block (BLOCK)
    ((9, 3, 5, 5), (4, 3, 3), (1, 1)),         # several groups of images, the last one short
    ((2, 12, 6, 6), (16, 3, 3), (1, 1)),       # 12 in: a 3x3 layer Winograd could take, below its C*O
]


def _inputs(case):
    (N, C, H, W), (O, kh, kw), (ph, pw) = case
    OH, OW = H + 2 * ph - kh + 1, W + 2 * pw - kw + 1

    def make(rng):
        return (rng.standard_normal((N, C, H, W)), rng.standard_normal((O, C, kh, kw)), rng.standard_normal(O),
                rng.standard_normal((N, O, OH, OW)))    # the last: a random output gradient
    return make, (ph, pw)


def _loop_conv(x, w, b, ph, pw):
    """The definition, one output element at a time (float64)."""
    N, C, H, W = x.shape
    O, _, kh, kw = w.shape
    xpad = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    OH, OW = H + 2 * ph - kh + 1, W + 2 * pw - kw + 1
    y = np.empty((N, O, OH, OW))
    for n in range(N):
        for o in range(O):
            for a in range(OH):
                for c in range(OW):
                    y[n, o, a, c] = b[o] + np.sum(w[o] * xpad[n, :, a: a + kh, c: c + kw])
    return y


@pytest.mark.parametrize("case", CASES[:7], ids=str)
def test_reference_is_the_definition_and_its_backward_the_adjoint(case):
    make, (ph, pw) = _inputs(case)
    x, w, b, g = make(np.random.default_rng(0))
    y = conv_direct.conv_direct_forward_reference(x, w, b, ph, pw)
    np.testing.assert_allclose(y, _loop_conv(x, w, b, ph, pw), rtol=1e-12, atol=1e-12)
    dx, dw, db = conv_direct.conv_direct_backward_reference(g, x, w, ph, pw)
    # <g, conv(x, w)> is linear in x and in w: its gradients are the backward's outputs
    np.testing.assert_allclose(np.sum(g * conv_direct.conv_direct_forward_reference(x, w, None, ph, pw)),
                               np.sum(dx * x), rtol=1e-10)
    np.testing.assert_allclose(np.sum(g * conv_direct.conv_direct_forward_reference(x, w, None, ph, pw)),
                               np.sum(dw * w), rtol=1e-10)
    np.testing.assert_allclose(db, g.sum(axis=(0, 2, 3)), rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_kernels_match_the_reference(case, dtype, threads):
    make, (ph, pw) = _inputs(case)

    def reference(x, w, b, g):
        return (conv_direct.conv_direct_forward_reference(x, w, b, ph, pw),
                *conv_direct.conv_direct_backward_reference(g, x, w, ph, pw))

    def kernels(x, w, b, g):
        return (k_direct.conv_direct_forward(x, w, b, ph, pw), *k_direct.conv_direct_backward(g, x, w, ph, pw))

    spec = OpSpec(name=f"conv_direct_{case}", op=None, reference=reference, inputs=make,
                  implementations={"numba": kernels},
                  tolerances={"float32": (2e-4, 2e-4)})    # sums of up to 2,500 products
    check_implementations(spec, dtype)


@pytest.mark.parametrize("need", [(True, False, False), (False, True, False), (False, False, True),
                                  (True, True, False), (False, True, True)])
def test_only_the_wanted_gradients_are_computed(need, threads):
    make, (ph, pw) = _inputs(CASES[2])
    x, w, b, g = make(np.random.default_rng(3))
    got = k_direct.conv_direct_backward(g, x, w, ph, pw, *need)
    full = conv_direct.conv_direct_backward_reference(g, x, w, ph, pw)
    for wanted, a, e in zip(need, got, full):
        if wanted:
            np.testing.assert_allclose(a, e, rtol=1e-10, atol=1e-10)
        else:
            assert a is None


def _conv(x, w, b, g, padding, dtype=np.float32):
    tx, tw, tb = (md.tensor(a.astype(dtype), requires_grad=True) for a in (x, w, b))
    y = F.conv2d(tx, tw, tb, padding=padding)
    y.backward(md.tensor(g.astype(dtype)))
    return y.detach().numpy(), tx.grad.numpy(), tw.grad.numpy(), tb.grad.numpy()


@pytest.fixture
def spy(monkeypatch):
    """The calls conv2d makes to the direct kernels."""
    calls = []
    for name in ("conv_direct_forward", "conv_direct_backward"):
        original = getattr(k_direct, name)
        monkeypatch.setattr(k_direct, name, lambda *a, _f=original, _n=name: calls.append(_n) or _f(*a))
    return calls


@pytest.mark.parametrize("case", [CASES[0], CASES[1], CASES[2], CASES[4], CASES[9]], ids=str)
def test_conv2d_takes_the_direct_sums_and_equals_the_column_path(case, spy, monkeypatch):
    make, padding = _inputs(case)
    x, w, b, g = make(np.random.default_rng(4))
    got = _conv(x, w, b, g, padding)
    assert spy == ["conv_direct_forward", "conv_direct_backward"]
    monkeypatch.setattr(conv_direct, "USE_DIRECT", False)
    for a, e in zip(got, _conv(x, w, b, g, padding)):
        np.testing.assert_allclose(a, e, rtol=2e-4, atol=2e-4)
    assert len(spy) == 2


@pytest.mark.parametrize("shapes, kwargs", [
    (((2, 17, 8, 8), (4, 17, 3, 3)), {}),                   # 17 input channels
    (((2, 16, 8, 8), (16, 16, 3, 3)), {}),                  # 16 x 16 channels of a 3x3 layer: Winograd's
    (((2, 3, 8, 8), (17, 3, 3, 3)), {}),                    # 17 output channels
    (((2, 3, 8, 8), (4, 3, 1, 1)), {}),                     # 1x1: a GEMM on x itself
    (((2, 3, 8, 8), (4, 3, 3, 3)), {"stride": 2}),
    (((2, 3, 8, 8), (4, 3, 3, 3)), {"dilation": 2}),
    (((2, 4, 8, 8), (4, 2, 3, 3)), {"groups": 2}),
])
def test_conv2d_keeps_its_other_paths_outside_the_rule(shapes, kwargs, spy):
    rng = np.random.default_rng(5)
    x = md.tensor(rng.standard_normal(shapes[0]).astype(np.float32), requires_grad=True)
    w = md.tensor(rng.standard_normal(shapes[1]).astype(np.float32), requires_grad=True)
    F.conv2d(x, w, **kwargs).sum().backward()
    assert spy == []


def test_float16_input_takes_the_direct_sums_in_float32(spy):
    rng = np.random.default_rng(6)
    x, w = rng.standard_normal((2, 3, 6, 6)), rng.standard_normal((4, 3, 3, 3))
    tx = md.tensor(x.astype(np.float16), requires_grad=True)
    tw = md.tensor(w.astype(np.float16), requires_grad=True)
    y = F.conv2d(tx, tw, padding=1)
    y.sum().backward()
    assert y.dtype == md.float16 and tx.grad.dtype == md.float16 and tw.grad.dtype == md.float16
    assert spy == ["conv_direct_forward", "conv_direct_backward"]
    expected = conv_direct.conv_direct_forward_reference(x.astype(np.float16).astype(np.float64),
                                                         w.astype(np.float16).astype(np.float64), None, 1, 1)
    np.testing.assert_allclose(y.detach().numpy().astype(np.float64), expected, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("impl", ["numba", "reference"])
@pytest.mark.parametrize("case", [CASES[2], CASES[3]], ids=str)
def test_conv2d_gradients_by_finite_differences(case, impl):
    make, padding = _inputs(case)
    x, w, b, _ = make(np.random.default_rng(7))
    x, w, b = (md.tensor(a, requires_grad=True) for a in (x[:2], w, b))
    with implementation(impl):
        assert gradcheck(lambda x, w, b: F.conv2d(x, w, b, padding=padding), (x, w, b))


def test_bad_shapes_are_refused_before_the_kernels():
    x = np.ones((2, 3, 5, 5), np.float32)
    w = np.ones((4, 3, 3, 3), np.float32)
    with pytest.raises(ValueError, match=r"expected x \(N, C, H, W\) and w \(O, C, kh, kw\) of one dtype"):
        k_direct.conv_direct_forward(x, np.ones((4, 2, 3, 3), np.float32), None, 1, 1)
    with pytest.raises(ValueError, match="of one dtype"):
        k_direct.conv_direct_forward(x, w.astype(np.float64), None, 1, 1)
    with pytest.raises(ValueError, match=r"expected non-negative padding, got \(-1, 0\)"):
        k_direct.conv_direct_forward(x, w, None, -1, 0)
    with pytest.raises(ValueError, match="a 3x3 kernel does not fit the padded input 1x5"):
        k_direct.conv_direct_forward(np.ones((2, 3, 1, 5), np.float32), w, None, 0, 0)
    with pytest.raises(ValueError, match=r"expected a bias of shape \(4,\), got \(3,\)"):
        k_direct.conv_direct_forward(x, w, np.ones(3, np.float32), 1, 1)
    with pytest.raises(ValueError, match=r"expected an output gradient of shape \(2, 4, 5, 5\) and dtype float32, "
                                         r"got \(2, 4, 5, 4\)"):
        k_direct.conv_direct_backward(np.ones((2, 4, 5, 4), np.float32), x, w, 1, 1)


@pytest.mark.parametrize("xs, ws", [((0, 3, 5, 5), (4, 3, 3, 3)),      # no images
                                    ((2, 0, 5, 5), (4, 0, 3, 3)),      # no input channels: y is the bias
                                    ((2, 3, 5, 5), (0, 3, 3, 3))])     # no output channels
def test_empty_inputs(xs, ws, threads):
    rng = np.random.default_rng(8)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    b = rng.standard_normal(ws[0])
    y = k_direct.conv_direct_forward(x, w, b, 1, 1)
    np.testing.assert_array_equal(y, conv_direct.conv_direct_forward_reference(x, w, b, 1, 1))
    g = rng.standard_normal(y.shape)
    for a, e in zip(k_direct.conv_direct_backward(g, x, w, 1, 1), conv_direct.conv_direct_backward_reference(g, x, w,
                                                                                                            1, 1)):
        assert a.shape == e.shape
        np.testing.assert_allclose(a, e, atol=1e-12)


def _assert_kernels_match_the_reference(x, w, b, ph, pw, rng):
    """Forward and the three gradients (for a random output gradient) of the kernels and the reference."""
    y = k_direct.conv_direct_forward(x, w, b, ph, pw)
    np.testing.assert_allclose(y, conv_direct.conv_direct_forward_reference(x, w, b, ph, pw), atol=1e-10)
    g = rng.standard_normal(y.shape)
    for a, e in zip(k_direct.conv_direct_backward(g, x, w, ph, pw),
                    conv_direct.conv_direct_backward_reference(g, x, w, ph, pw)):
        np.testing.assert_allclose(a, e, atol=1e-9)


@given(st.integers(0, 4), st.integers(0, 4), st.integers(1, 6), st.integers(1, 7), st.integers(1, 7),
       st.integers(0, 3), st.integers(0, 3), st.integers(0, 9), st.integers(0, 9), st.integers(0, 2 ** 32 - 1))
def test_kernels_match_the_reference_on_drawn_geometries(N, C, O, kh, kw, ph, pw, dh, dw, seed):
    """Any batch, channel count, kernel size and padding (an image at least as large as the
    padded kernel needs): the kernels' sums equal the reference's."""
    H, W = max(1, kh - 2 * ph) + dh, max(1, kw - 2 * pw) + dw
    rng = np.random.default_rng(seed)
    x, w, b = rng.standard_normal((N, C, H, W)), rng.standard_normal((O, C, kh, kw)), rng.standard_normal(O)
    _assert_kernels_match_the_reference(x, w, b, ph, pw, rng)


@given(st.integers(0, 3), st.integers(0, 5), st.integers(1, 9), st.integers(0, 3), st.integers(0, 3),
       st.integers(0, 12), st.integers(0, 12), st.integers(0, 2 ** 32 - 1))
def test_3x3_windows_match_the_reference_on_drawn_geometries(N, C, O, ph, pw, dh, dw, seed):
    """3x3 kernels take the whole-window loops (forward, dx and dW): odd and even channel
    counts (an odd one padded with a zero channel), any padding, images from the smallest that fits."""
    H, W = max(1, 3 - 2 * ph) + dh, max(1, 3 - 2 * pw) + dw
    rng = np.random.default_rng(seed)
    x, w, b = rng.standard_normal((N, C, H, W)), rng.standard_normal((O, C, 3, 3)), rng.standard_normal(O)
    _assert_kernels_match_the_reference(x, w, b, ph, pw, rng)
