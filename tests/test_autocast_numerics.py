"""Numerics of low precision: under autocast a GEMM is float32-accumulated products of the
inputs rounded to the low dtype, rounded once at the end (forward and backward); the float16 and
bfloat16 norms equal the float32 reference of the rounded input within one ulp of the output."""
import ml_dtypes
import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F

LOW = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def _round(a, low):
    return np.asarray(a, np.float32).astype(LOW[low]).astype(np.float32)


def _ulp(values, low):
    """One ulp of the low dtype at each value (the spacing of the representable numbers there)."""
    v = np.abs(np.asarray(values, np.float64))
    info = ml_dtypes.finfo(LOW[low]) if low == "bfloat16" else np.finfo(np.float16)
    exponent = np.floor(np.log2(np.maximum(v, float(info.smallest_normal))))
    return 2.0 ** (exponent - int(info.nmant))


@pytest.mark.parametrize("low", ["float16", "bfloat16"])
def test_matmul_is_float32_accumulated_products_of_rounded_inputs(low):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((33, 70)), rng.standard_normal((70, 21))
    with md.autocast("cpu", dtype=getattr(md, low)):
        y = md.tensor(a.astype(np.float32)) @ md.tensor(b.astype(np.float32))
    assert y.dtype is getattr(md, low)
    got = y.float().numpy()
    # the same float32 GEMM of the rounded inputs, rounded once: equal bit for bit
    np.testing.assert_array_equal(got, _round(_round(a, low) @ _round(b, low), low))
    # and within one low-precision ulp of the exact sum of the (exact) products of rounded inputs,
    # plus what float32 accumulation may lose in any order (K eps32 sum |products|, under cancellation)
    ar, br = _round(a, low).astype(np.float64), _round(b, low).astype(np.float64)
    exact = ar @ br
    summation = a.shape[1] * np.finfo(np.float32).eps * (np.abs(ar) @ np.abs(br))
    assert np.all(np.abs(got - exact) <= _ulp(exact, low) + summation)
    assert np.mean(np.abs(got - exact) <= 0.5 * _ulp(exact, low)) > 0.95     # nearly all correctly rounded
    # the rounding of the inputs is visible: float32 inputs alone would give other values
    assert not np.array_equal(got, _round(a.astype(np.float32) @ b.astype(np.float32), low))


@pytest.mark.parametrize("low", ["float16", "bfloat16"])
def test_linear_backward_rounds_like_a_low_precision_gemm(low):
    rng = np.random.default_rng(2)
    x = md.tensor(rng.standard_normal((8, 12)).astype(np.float32), requires_grad=True)
    w = md.tensor(rng.standard_normal((5, 12)).astype(np.float32), requires_grad=True)
    b = md.tensor(rng.standard_normal(5).astype(np.float32), requires_grad=True)
    g = rng.standard_normal((8, 5))
    with md.autocast("cpu", dtype=getattr(md, low)):
        y = F.linear(x, w, b)
    y.backward(md.tensor(g.astype(np.float32)).to(y.dtype))
    xr, wr, br, gr = (_round(v, low) for v in (x.detach().numpy(), w.detach().numpy(), b.detach().numpy(), g))
    np.testing.assert_array_equal(y.float().detach().numpy(), _round(xr @ wr.T + br, low))   # bias before the rounding
    np.testing.assert_array_equal(x.grad.numpy(), _round(gr @ wr, low))
    np.testing.assert_array_equal(w.grad.numpy(), _round(gr.T @ xr, low))
    np.testing.assert_array_equal(b.grad.numpy(), _round(gr.sum(0), low))
    assert x.grad.dtype is w.grad.dtype is md.float32


@pytest.mark.parametrize("low", ["float16", "bfloat16"])
def test_conv2d_and_attention_round_their_inputs_and_output(low):
    rng = np.random.default_rng(3)
    x, k = rng.standard_normal((2, 3, 7, 7)), rng.standard_normal((4, 3, 3, 3))
    q = rng.standard_normal((2, 5, 8))
    with md.autocast("cpu", dtype=getattr(md, low)):
        y = F.conv2d(md.tensor(x.astype(np.float32)), md.tensor(k.astype(np.float32)), padding=1)
        a = F.scaled_dot_product_attention(*(md.tensor(q.astype(np.float32)),) * 3)
    ref = F.conv2d(md.tensor(_round(x, low)), md.tensor(_round(k, low)), padding=1).numpy()
    np.testing.assert_array_equal(y.float().numpy(), _round(ref, low))
    qr = md.tensor(_round(q, low))
    np.testing.assert_array_equal(a.float().numpy(), _round(F.scaled_dot_product_attention(qr, qr, qr).numpy(), low))


# the norms ------------------------------------------------------------------------------------
def _norm_cases(rng):
    """(name, call(x), float64 reference(x), input): the last dims normalized, or the channels."""
    x2 = rng.standard_normal((6, 40)) * 3 + 2
    low_spread = 1.0 + 1e-3 * rng.standard_normal((4, 64))      # variance far below float16's eps**2
    img = rng.standard_normal((4, 6, 5, 5)) * 2 - 1
    w, b = rng.standard_normal(40), rng.standard_normal(40)
    wc, bc = rng.standard_normal(6), rng.standard_normal(6)

    def ln(x, w=None, b=None, eps=1e-5):
        m, v = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        y = (x - m) / np.sqrt(v + eps)
        return y * w + b if w is not None else y

    def gn(x, g, eps=1e-5):
        n, c = x.shape[:2]
        r = x.reshape(n, g, -1)
        y = (r - r.mean(-1, keepdims=True)) / np.sqrt(r.var(-1, keepdims=True) + eps)
        return y.reshape(x.shape) * wc[:, None, None] + bc[:, None, None]

    def bn(x, eps=1e-5):
        m, v = x.mean((0, 2, 3), keepdims=True), x.var((0, 2, 3), keepdims=True)
        return (x - m) / np.sqrt(v + eps) * wc[:, None, None] + bc[:, None, None]

    T = md.tensor
    f32 = np.float32
    return [
        ("layer_norm", lambda x: F.layer_norm(x, (40,), T(w.astype(f32)), T(b.astype(f32))),
         lambda x: ln(x, w, b), x2),
        ("layer_norm_low_spread", lambda x: F.layer_norm(x, (64,)), ln, low_spread),
        ("rms_norm", lambda x: F.rms_norm(x, (40,), T(w.astype(f32))),
         lambda x: x / np.sqrt((x * x).mean(-1, keepdims=True) + np.finfo(np.float32).eps) * w, x2),
        ("group_norm", lambda x: F.group_norm(x, 3, T(wc.astype(f32)), T(bc.astype(f32))), lambda x: gn(x, 3), img),
        ("batch_norm", lambda x: F.batch_norm(x, None, None, T(wc.astype(f32)), T(bc.astype(f32)), training=True),
         bn, img),
        ("instance_norm", lambda x: F.instance_norm(x), lambda x: (x - x.mean((2, 3), keepdims=True))
         / np.sqrt(x.var((2, 3), keepdims=True) + 1e-5), img),
    ]


@pytest.mark.parametrize("low", ["float16", "bfloat16"])
@pytest.mark.parametrize("impl", ["numba", "reference"])
def test_low_precision_norms_are_within_one_ulp_of_the_float32_reference(low, impl):
    for name, call, reference, x in _norm_cases(np.random.default_rng(4)):
        rounded = x.astype(np.float32).astype(LOW[low])
        with md.implementation(norm=impl):
            y = call(md.tensor(rounded))
        assert y.dtype is getattr(md, low), name                     # outside autocast: the input's dtype
        exact = reference(rounded.astype(np.float64))
        err = np.abs(y.float().numpy().astype(np.float64) - exact)
        worst = float((err / _ulp(exact, low)).max())
        assert worst <= 1.0, f"{name} ({impl}, {low}): {worst:.2f} ulps from the float32 reference"


@pytest.mark.parametrize("low", ["float16", "bfloat16"])
def test_norm_gradients_of_a_low_precision_input(low):
    rng = np.random.default_rng(5)
    x = md.tensor(rng.standard_normal((5, 16)).astype(LOW[low]), requires_grad=True)
    w = md.tensor(rng.standard_normal(16).astype(np.float32), requires_grad=True)
    g = rng.standard_normal((5, 16)).astype(np.float32)
    F.layer_norm(x, (16,), w).backward(md.tensor(g).to(getattr(md, low)))
    assert x.grad.dtype is getattr(md, low) and w.grad.dtype is md.float32
    x64 = md.tensor(x.detach().float().numpy().astype(np.float64), requires_grad=True)
    w64 = md.tensor(w.detach().numpy().astype(np.float64), requires_grad=True)
    F.layer_norm(x64, (16,), w64).backward(md.tensor(_round(g, low).astype(np.float64)))
    atol = 4 * _ulp(x64.grad.numpy(), low).max()
    np.testing.assert_allclose(x.grad.float().numpy(), x64.grad.numpy(), rtol=0, atol=atol)
    np.testing.assert_allclose(w.grad.numpy(), w64.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_norms_under_cpu_autocast_keep_the_input_dtype_as_pytorch():
    """PyTorch's CPU policy has no rule for the norms: a bfloat16 activation stays bfloat16
    (statistics in float32 inside the kernel); a float32 one stays float32."""
    x = md.randn(4, 8)
    with md.autocast("cpu"):
        h = F.linear(x, md.randn(8, 8))
        assert F.layer_norm(h, (8,)).dtype is md.bfloat16
        assert F.layer_norm(x, (8,)).dtype is md.float32


def test_a_value_past_float16s_range_casts_to_inf_without_a_warning():
    import warnings
    x = md.tensor(np.array([1e6, -1e6, 1.0], np.float32), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = x.half()
        y.float().backward(md.tensor([0.5, 2.0, 1.0]))
    assert y.detach().numpy().tolist() == [np.inf, -np.inf, 1.0]
    assert x.grad.numpy().tolist() == [0.5, 2.0, 1.0]
