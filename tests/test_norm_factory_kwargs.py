"""The norm layers' factory keywords (device, dtype), the lazy norms' keyword ``bias`` and
Hardtanh's deprecated ``min_value`` / ``max_value``, as PyTorch's constructors take them."""
import inspect
import os
import subprocess
import sys

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn

EAGER = {
    "BatchNorm1d": lambda **kw: nn.BatchNorm1d(3, **kw),
    "BatchNorm2d": lambda **kw: nn.BatchNorm2d(3, **kw),
    "BatchNorm3d": lambda **kw: nn.BatchNorm3d(3, **kw),
    "InstanceNorm1d": lambda **kw: nn.InstanceNorm1d(3, affine=True, track_running_stats=True, **kw),
    "InstanceNorm2d": lambda **kw: nn.InstanceNorm2d(3, affine=True, track_running_stats=True, **kw),
    "InstanceNorm3d": lambda **kw: nn.InstanceNorm3d(3, affine=True, track_running_stats=True, **kw),
    "SyncBatchNorm": lambda **kw: nn.SyncBatchNorm(3, **kw),
    "GroupNorm": lambda **kw: nn.GroupNorm(1, 3, **kw),
    "LayerNorm": lambda **kw: nn.LayerNorm((2, 3), **kw),
    "RMSNorm": lambda **kw: nn.RMSNorm(3, **kw),
}


@pytest.mark.parametrize("name", sorted(EAGER))
def test_dtype_of_parameters_and_buffers(name):
    m = EAGER[name](dtype=md.float64)
    tensors = dict(m.named_parameters()) | dict(m.named_buffers())
    assert "weight" in tensors
    for key, t in tensors.items():
        want = md.int64 if key == "num_batches_tracked" else md.float64
        assert t.dtype == want, (key, t.dtype)
        assert t.device.type == "cpu"
    assert np.array_equal(m.weight.detach().numpy(), np.ones(m.weight.shape))
    if "running_var" in tensors:
        assert np.array_equal(m.running_var.numpy(), np.ones(3))
        assert np.array_equal(m.running_mean.numpy(), np.zeros(3))
    default = EAGER[name](device="cpu")
    assert default.weight.dtype == md.float32


def test_float64_batchnorm_runs_in_float64():
    m = nn.BatchNorm1d(3, dtype="float64")
    x = np.random.default_rng(0).standard_normal((5, 3))
    y = m(md.tensor(x))
    assert y.dtype == md.float64 and m.running_mean.dtype == md.float64
    ref = (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5)
    np.testing.assert_allclose(y.detach().numpy(), ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(m.running_mean.numpy(), 0.1 * x.mean(0), rtol=1e-12)


def test_sync_batchnorm_positions():
    m = nn.SyncBatchNorm(3, 1e-3, 0.2, True, True, None, "cpu", md.float64, bias=False)
    assert m.eps == 1e-3 and m.momentum == 0.2 and m.bias is None and m.weight.dtype == md.float64
    with pytest.raises(TypeError):
        nn.SyncBatchNorm(3, 1e-5, 0.1, True, True, None, None, None, False)   # bias is keyword-only


@pytest.mark.parametrize("cls, shape", [(nn.LazyBatchNorm1d, (4, 3)), (nn.LazyBatchNorm2d, (2, 3, 2, 2)),
                                        (nn.LazyInstanceNorm1d, (2, 3, 5)), (nn.LazyInstanceNorm3d, (3, 2, 2, 2))])
def test_lazy_bias_false(cls, shape):
    m = cls(bias=False, dtype=md.float64)
    assert m.bias is None and m._version == 2
    assert "affine=True, bias=False, track_running_stats=True" in repr(m)
    m(md.randn(*shape, dtype=md.float64))
    assert m.bias is None and m.weight.shape == (3,) and m.weight.dtype == md.float64
    assert [n for n, _ in m.named_parameters()] == ["weight"]
    assert m.running_mean.dtype == md.float64 and m.num_batches_tracked.dtype == md.int64
    assert "bias=False" in repr(m) and "(3," in repr(m)


def test_lazy_repr_default_bias():
    assert repr(nn.LazyBatchNorm1d()) == ("LazyBatchNorm1d(0, eps=1e-05, momentum=0.1, affine=True, bias=True, "
                                          "track_running_stats=True)")


def test_hardtanh_deprecated_names():
    with pytest.warns(FutureWarning, match="min_value"):
        m = nn.Hardtanh(min_value=-0.5)
    assert m.min_val == -0.5 and m.max_val == 1.0
    with pytest.warns(FutureWarning, match="max_value"):
        m = nn.Hardtanh(max_value=2.0)
    y = m(md.tensor([-3.0, 0.5, 3.0]))
    np.testing.assert_array_equal(y.numpy(), np.array([-1.0, 0.5, 2.0], np.float32))


SIGNED = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d",
          "GroupNorm", "LayerNorm", "RMSNorm", "SyncBatchNorm", "LazyBatchNorm1d", "LazyBatchNorm2d",
          "LazyBatchNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d", "Hardtanh"]


@pytest.mark.parametrize("name", SIGNED)
def test_signature_matches_torch(name):
    torch = pytest.importorskip("torch")

    def params(cls):
        return [(p.name, p.kind, p.default) for p in inspect.signature(cls.__init__).parameters.values()]
    assert params(getattr(nn, name)) == params(getattr(torch.nn, name))


@pytest.mark.parametrize("name", ["LazyBatchNorm2d", "LazyInstanceNorm1d"])
def test_lazy_repr_matches_torch(name):
    torch = pytest.importorskip("torch")
    for kw in ({}, {"bias": False}, {"affine": False, "momentum": None}):
        assert repr(getattr(nn, name)(**kw)) == repr(getattr(torch.nn, name)(**kw))


def test_float64_state_dict_matches_torch():
    torch = pytest.importorskip("torch")
    ours = nn.BatchNorm2d(3, dtype=md.float64).state_dict()
    theirs = torch.nn.BatchNorm2d(3, dtype=torch.float64).state_dict()
    assert list(ours) == list(theirs)
    for key in theirs:
        assert str(ours[key].dtype).split(".")[-1] == str(theirs[key].dtype).split(".")[-1], key


CUDA_SCRIPT = """
import minidl as md, minidl.nn as nn
m = nn.BatchNorm1d(3, device="cuda", dtype=md.float64)
assert m.weight.device.type == "cuda" and m.running_mean.device.type == "cuda", m.weight.device
assert m.weight.dtype == md.float64 and m.num_batches_tracked.dtype == md.int64
g = nn.GroupNorm(1, 3, device="cuda")
assert g.weight.device.type == "cuda" and g.bias.device.type == "cuda"
print("ok")
"""


def test_cuda_device_under_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    out = subprocess.run([sys.executable, "-c", CUDA_SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-2000:]


def test_bad_device_is_type_error():
    with pytest.raises(TypeError, match="device"):
        nn.BatchNorm1d(3, 1e-5, 0.1, True, True, False)
    with pytest.raises(TypeError, match="device"):
        nn.LayerNorm(3, device=1.5)
