"""The running estimates of BatchNorm and InstanceNorm follow PyTorch's rule on every device:

    running_mean <- (1 - momentum) running_mean + momentum mean
    running_var  <- (1 - momentum) running_var  + momentum var n / (n - 1)   (NaN when n == 1)

and an input without values leaves them alone. One function (ops/normalization/running_stats.py)
does it for every norm and device; these tests hold it to the rule directly and through the norms
(on the CPU, and on cuda under the simulator), and to PyTorch where it is installed."""
import numpy as np
import pytest

import minidl as md
from minidl import backends
from minidl.ops.normalization import BatchNormFunction, InstanceNormFunction
from minidl.ops.normalization.running_stats import unbiased_var, update_running_stats

try:
    backends.get("cuda")
    DEVICES = ["cpu", "cuda"]
except RuntimeError:   # pragma: no cover - only without numba.cuda
    DEVICES = ["cpu"]

MOMENTUM, EPS = 0.3, 1e-5


def _on(device, a):
    return backends.get(device).from_host(np.asarray(a))


def _host(a):
    return backends.get(backends.device_of(a)).to_host(a)


def _expected(running_mean, running_var, x_channels_last):
    """PyTorch's rule written out for values (n, C): one row per value behind each statistic."""
    n = x_channels_last.shape[0]
    mean = x_channels_last.mean(axis=0)
    unbiased = x_channels_last.var(axis=0, ddof=1) if n > 1 else np.full(mean.shape, np.nan)
    return ((1 - MOMENTUM) * running_mean + MOMENTUM * mean, (1 - MOMENTUM) * running_var + MOMENTUM * unbiased)


@pytest.mark.parametrize("device", DEVICES)
def test_unbiased_variance_is_bessel_corrected_and_nan_for_one_value(device):
    var = _on(device, np.array([2.0, 0.5]))
    np.testing.assert_allclose(_host(unbiased_var(var, 4)), [2.0 * 4 / 3, 0.5 * 4 / 3])
    assert np.isnan(_host(unbiased_var(var, 1))).all()
    # a device count (masked BatchNorm counts its tokens on the device) follows the same rule
    np.testing.assert_allclose(_host(unbiased_var(var, _on(device, np.array(4.0)))), [2.0 * 4 / 3, 0.5 * 4 / 3])
    assert np.isnan(_host(unbiased_var(var, _on(device, np.array(1.0))))).all()


@pytest.mark.parametrize("device", DEVICES)
def test_update_folds_the_batch_in_and_leaves_the_estimates_alone_without_values(device):
    rm, rv = _on(device, np.array([1.0, -1.0])), _on(device, np.array([1.0, 2.0]))
    update_running_stats(rm, rv, _on(device, np.array([3.0, 5.0])), _on(device, np.array([0.5, 1.5])), 3, MOMENTUM)
    np.testing.assert_allclose(_host(rm), [0.7 * 1 + 0.3 * 3, 0.7 * -1 + 0.3 * 5])
    np.testing.assert_allclose(_host(rv), [0.7 * 1 + 0.3 * 0.5 * 1.5, 0.7 * 2 + 0.3 * 1.5 * 1.5])
    before = _host(rm).copy(), _host(rv).copy()
    update_running_stats(rm, rv, _on(device, np.full(2, np.nan)), _on(device, np.full(2, np.nan)), 0, MOMENTUM)
    np.testing.assert_array_equal(_host(rm), before[0])
    np.testing.assert_array_equal(_host(rv), before[1])


def _batch_norm_stats(device, x, mask=None):
    rm, rv = md.zeros(x.shape[1], dtype=md.float64, device=device), md.ones(x.shape[1], dtype=md.float64, device=device)
    m = None if mask is None else _on(device, mask)
    BatchNormFunction.apply(md.tensor(x, device=device), None, None, rm._data, rv._data, True, MOMENTUM, EPS, m)
    return rm.cpu().numpy(), rv.cpu().numpy()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(5, 3), (2, 3, 4), (1, 3), (1, 3, 1)])
def test_batch_norm_running_statistics_follow_the_rule(device, shape):
    x = np.random.default_rng(0).standard_normal(shape) * 2 + 1
    values = np.moveaxis(x, 1, -1).reshape(-1, shape[1])
    rm, rv = _batch_norm_stats(device, x)
    em, ev = _expected(np.zeros(shape[1]), np.ones(shape[1]), values)
    np.testing.assert_allclose(rm, em, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(rv, ev, rtol=1e-9, atol=1e-9)   # NaN where one value per channel, as expected


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("real", [[[True, True, False], [False, True, True]], [[True, False, False], [False] * 3]])
def test_masked_batch_norm_running_statistics_count_only_the_real_tokens(device, real):
    mask = np.array(real)
    x = np.random.default_rng(1).standard_normal((2, 3, 3))
    values = np.moveaxis(x, 1, -1)[mask]       # (real tokens, C)
    rm, rv = _batch_norm_stats(device, x, mask)
    em, ev = _expected(np.zeros(3), np.ones(3), values)
    np.testing.assert_allclose(rm, em, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(rv, ev, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(2, 3, 4), (3, 2, 1)])
def test_instance_norm_running_statistics_average_the_instances(device, shape):
    x = np.random.default_rng(2).standard_normal(shape)
    rm, rv = md.zeros(shape[1], dtype=md.float64, device=device), md.ones(shape[1], dtype=md.float64, device=device)
    InstanceNormFunction.apply(md.tensor(x, device=device), None, None, rm._data, rv._data, MOMENTUM, EPS)
    m = shape[2]
    unbiased = x.var(axis=2, ddof=1).mean(axis=0) if m > 1 else np.full(shape[1], np.nan)
    np.testing.assert_allclose(rm.cpu().numpy(), MOMENTUM * x.mean(axis=2).mean(axis=0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(rv.cpu().numpy(), (1 - MOMENTUM) + MOMENTUM * unbiased, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (1, 3), (1, 2, 1)])
def test_batch_and_instance_norm_running_statistics_match_pytorch(device, shape):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(3).standard_normal(shape)
    rm, rv = _batch_norm_stats(device, x)
    trm, trv = torch.zeros(shape[1], dtype=torch.float64), torch.ones(shape[1], dtype=torch.float64)
    torch.batch_norm(torch.tensor(x), None, None, trm, trv, True, MOMENTUM, EPS, False)
    np.testing.assert_allclose(rm, trm.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(rv, trv.numpy(), rtol=1e-9, atol=1e-12)
    if len(shape) == 3:
        rm, rv = md.zeros(shape[1], dtype=md.float64, device=device), md.ones(shape[1], dtype=md.float64,
                                                                                device=device)
        InstanceNormFunction.apply(md.tensor(x, device=device), None, None, rm._data, rv._data, MOMENTUM, EPS)
        trm, trv = torch.zeros(shape[1], dtype=torch.float64), torch.ones(shape[1], dtype=torch.float64)
        torch.instance_norm(torch.tensor(x), None, None, trm, trv, True, MOMENTUM, EPS, False)
        np.testing.assert_allclose(rm.cpu().numpy(), trm.cpu().numpy(), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(rv.cpu().numpy(), trv.cpu().numpy(), rtol=1e-9, atol=1e-12)
