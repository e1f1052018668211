"""Public ops on the "cuda" device (CUDA simulator) give the CPU's values and gradients, and live on
the device: rounding and inverse trigonometry kernels, NumPy calls dispatched to the device
namespace (moveaxis, roll, tile, diag, add.at), host-computed results (nonzero, unique, isclose)
moved back to the input's device, host constants uploaded (padding, fill, block_diag), and ops
the device cannot run raising NotImplementedError naming the op and the device."""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl import backends

try:
    backends.get("cuda")
except RuntimeError as exc:   # pragma: no cover - only without numba.cuda
    pytest.skip(f"cuda device unavailable: {exc}", allow_module_level=True)

from minidl.backends.cuda import CUDA_NUMPY as xp  # noqa: E402
from minidl.backends.cuda import CudaArray  # noqa: E402

from test_cuda_core import check, rnd  # noqa: E402


def unit(*shape, seed=0):
    """Values in (0.2, 0.8): inside every inverse-trigonometric domain, away from rounding steps."""
    return np.random.default_rng(seed).uniform(0.2, 0.8, shape)


def _on(device, a):
    return md.tensor(a, device=device)


ELEMENTWISE = {   # name: (fn, inputs)
    "floor_ceil_trunc_frac": (lambda x: (x * 4).floor() + (x * 4).ceil() * 2 + (x * -4).trunc() + (x * 4).frac(),
                              (unit(2, 3),)),
    "round_half_even_decimals": (lambda x: md.round(x * 4 - 2) + md.round(x, decimals=1),
                                 (np.array([[0.125, 0.375, 0.625], [0.5, 0.3, 0.7]]),)),
    "asin_acos_atan": (lambda x: x.asin() + x.acos() * 2 + x.atan() * 3, (unit(2, 3),)),
    "sinh_cosh_asinh_acosh_atanh": (lambda x: x.sinh() + x.cosh() + x.asinh() + (x + 1).acosh() + x.atanh(),
                                    (unit(2, 3),)),
    "exp2": (lambda x: x.exp2(), (unit(2, 3),)),
    "atan2_hypot_copysign_fmod": (lambda a, b: md.atan2(a, b) + md.hypot(a, b) + md.copysign(a, b - 0.5)
                                  + md.fmod(a * 5, b), (unit(2, 3), unit(2, 3, seed=1))),
    "erf": (lambda x: md.erf(x * 3 - 1), (unit(2, 3),)),
    "logsumexp": (lambda x: x.logsumexp(1), (rnd(2, 4),)),
    "nansum_nanmean": (lambda x: x.nansum(1) + x.nanmean(), (rnd(2, 3),)),
    "quantile": (lambda x: x.quantile(0.3, 1), (rnd(2, 5),)),
    "diag": (lambda x: x.diag(1).sum(0) + x[0].diag(-1)[:, :3].sum(0), (rnd(3, 3),)),
    "roll": (lambda x: x.roll(1, 1) * 2 + x.roll((1, -1), (0, 1)) + x.roll(2), (rnd(2, 3),)),
    "repeat_tile": (lambda x: x.repeat(1, 2)[:, :3] + x.tile((1, 2))[:, 3:] + x.repeat(2, 1)[2:], (rnd(2, 3),)),
    "repeat_interleave": (lambda x: x.repeat_interleave(2, 1), (rnd(2, 3),)),
    "cummax_cummin_backward": (lambda x: x.cummax(1)[0] + x.cummin(0)[0], (rnd(2, 3),)),
    "block_diag": (lambda a, b: md.block_diag(a, b), (rnd(2, 2), rnd(1, 3, seed=1))),
    "constant_pad_nd": (lambda x: md.constant_pad_nd(x, (1, 2, 0, 1), 0.5), (rnd(2, 3),)),
    "fill": (lambda x: md.fill(x, 1.5) + x, (rnd(2, 3),)),
    "fill_diagonal_": (lambda x: (x * 1).fill_diagonal_(2.0), (rnd(3, 3),)),
    "glu_split": (lambda x: F.glu(x) + x.split(2, 1)[1], (rnd(2, 4),)),
    "cosine_similarity_broadcast": (lambda a, b: F.cosine_similarity(a, b[:1]), (rnd(2, 4), rnd(2, 4, seed=1))),
    "nan_to_num": (lambda x: (x / (x - x.detach())).nan_to_num(0.0, 3.0, -3.0), (rnd(2, 3),)),
}


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_op_matches_cpu(name):
    fn, arrays = ELEMENTWISE[name]
    check(fn, *arrays, atol=1e-9)


LAYERS = {
    "interpolate_bilinear": (lambda x: F.interpolate(x, size=(3, 4), mode="bilinear"), (rnd(1, 2, 4, 4),)),
    "interpolate_nearest": (lambda x: F.interpolate(x, scale_factor=2), (rnd(1, 2, 2, 3),)),
    "interpolate_bicubic_align": (lambda x: F.interpolate(x, size=(3, 5), mode="bicubic", align_corners=True),
                                  (rnd(1, 1, 4, 4),)),
    "interpolate_linear_1d": (lambda x: F.interpolate(x, size=7, mode="linear"), (rnd(1, 2, 4),)),
    "pad_reflect_replicate_circular": (lambda x: F.pad(x, (1, 2, 1, 0), mode="reflect")[..., :4, :4]
                                       + F.pad(x, (1, 0, 1, 0), mode="replicate")
                                       + F.pad(x, (0, 1, 0, 1), mode="circular"), (rnd(1, 1, 3, 3),)),
    "pad_constant": (lambda x: F.pad(x, (1, 2), value=0.5), (rnd(1, 2, 3),)),
    "conv2d_reflect": (lambda x, w: F.conv2d(F.pad(x, (1, 1, 1, 1), mode="reflect"), w), (rnd(1, 2, 4, 4),
                                                                                          rnd(2, 2, 3, 3, seed=1))),
    "grid_sample_bilinear": (lambda x, g: F.grid_sample(x, g, align_corners=False),
                             (rnd(1, 2, 4, 4), unit(1, 2, 3, 2, seed=3) * 2.4 - 1.2)),
    "conv_transpose2d": (lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1),
                         (rnd(1, 2, 3, 3), rnd(2, 3, 3, 3, seed=1))),
    "cross_entropy_smoothing": (lambda x: F.cross_entropy(x, _on(x.device, np.array([0, 3, 1])),
                                                          label_smoothing=0.1), (rnd(3, 4),)),
    "sdpa_causal": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                    (rnd(1, 2, 3, 4), rnd(1, 2, 3, 4, seed=1), rnd(1, 2, 3, 4, seed=2))),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_op_matches_cpu(name):
    fn, arrays = LAYERS[name]
    check(fn, *arrays, atol=1e-9)


TESTS = {   # non-differentiable results, which must live on the input's device
    "isnan_isinf_isfinite": lambda x: x.isnan() | (x / (x - x)).isinf() | ~(x / (x - x)).isfinite(),
    "logical_not": lambda x: (x > 0).logical_not(),
    "isclose": lambda x: x.isclose(x + 1e-3, atol=1e-2) & ~x.isclose(x + 1.0),
    "any_all": lambda x: (x > 0).any(1) & (x > -9).all(0)[:2],
    "nonzero_argwhere": lambda x: (x > 0).nonzero() + (x > 0).argwhere(),
    "count_nonzero": lambda x: (x > 0).count_nonzero(1),
    "unique": lambda x: (x > 0).to(md.float64).unique(),
    "isin": lambda x: md.isin(x, x[0]),
}


@pytest.mark.parametrize("name", sorted(TESTS))
def test_host_computed_results_live_on_the_inputs_device(name):
    check(TESTS[name], np.array([[1.0, -2.0, 0.0], [3.0, -1.0, 5.0]]), grad=False)


@pytest.mark.parametrize("make", [lambda: nn.LSTM(3, 4), lambda: nn.GRU(3, 4, batch_first=True),
                                  lambda: nn.Conv2d(2, 2, 3, padding=1, padding_mode="circular"),
                                  lambda: nn.Upsample(scale_factor=2, mode="bilinear")],
                         ids=["lstm", "gru", "conv_circular", "upsample"])
def test_module_matches_cpu_in_outputs_and_parameter_grads(make):
    md.manual_seed(0)
    mc = make()
    mg = make().to("cuda")
    mg.load_state_dict(mc.state_dict())
    x = rnd(2, 3, 3) if isinstance(mc, (nn.LSTM, nn.GRU)) else rnd(1, 2, 3, 3)
    outs, inputs = [], []
    for m, dev in ((mc, "cpu"), (mg, "cuda")):
        inputs.append(md.tensor(x.astype(np.float32), device=dev, requires_grad=True))
        y = m(inputs[-1])
        y = y[0] if isinstance(y, tuple) else y
        (y * y).sum().backward()
        outs.append(y)
    assert outs[1].device == "cuda" and isinstance(inputs[1].grad._data, CudaArray)
    np.testing.assert_allclose(outs[1].detach().cpu().numpy(), outs[0].detach().cpu().numpy(), atol=1e-5)
    np.testing.assert_allclose(inputs[1].grad.cpu().numpy(), inputs[0].grad.cpu().numpy(), atol=1e-4)
    for pc, pg in zip(mc.parameters(), mg.parameters()):
        assert isinstance(pg.grad._data, CudaArray)
        np.testing.assert_allclose(pg.grad.cpu().numpy(), pc.grad.cpu().numpy(), atol=1e-4)


def test_numpy_calls_on_device_arrays_run_in_the_device_namespace():
    a = rnd(2, 3, 4)
    x = CudaArray.from_host(a)
    for got, want in ((np.moveaxis(x, 0, -1), np.moveaxis(a, 0, -1)), (np.exp(x), np.exp(a)),
                      (np.roll(x, 2, 1), np.roll(a, 2, 1)), (np.tile(x, (2, 1, 1)), np.tile(a, (2, 1, 1))),
                      (np.max(x, axis=1, keepdims=True), np.max(a, axis=1, keepdims=True)),
                      (np.diagonal(x, 1, 1, 2), np.diagonal(a, 1, 1, 2)), (np.floor(x * 3), np.floor(a * 3))):
        assert isinstance(got, CudaArray)
        np.testing.assert_allclose(got.copy_to_host(), want)
    acc = xp.zeros(3)
    np.add.at(acc, CudaArray.from_host(np.array([0, 0, 2])), CudaArray.from_host(np.ones(3)))
    np.testing.assert_array_equal(acc.copy_to_host(), [2.0, 0.0, 1.0])
    assert np.shape(x) == (2, 3, 4) and np.ndim(x) == 3


def test_numpy_functions_the_device_lacks_raise_not_implemented_naming_them():
    x = CudaArray.from_host(rnd(2, 3))
    with pytest.raises(NotImplementedError, match=r"numpy\.logaddexp\.reduce .*device 'cuda'"):
        np.logaddexp.reduce(x, axis=1)
    with pytest.raises(NotImplementedError, match=r"numpy\.fliplr .*device 'cuda'"):
        np.fliplr(x)
    with pytest.raises(TypeError, match="same device"):
        np.ones((2, 3)) + x   # a host array never mixes silently into a device result
