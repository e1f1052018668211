"""Norm-layer reprs, the ``bias`` keyword of the channel norms, state-dict versions and their
load-side handling, MultiheadAttention's out_proj type, and grid_sample on volumetric (5-D)
input: as PyTorch's."""
import itertools
from collections import OrderedDict

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.autograd import gradcheck
from minidl.nn.modules.linear import NonDynamicallyQuantizableLinear
from minidl.testing import OpSpec, check_forward, check_gradcheck, forward_cases, spec_id

# (class name, args, kwargs, the repr PyTorch prints); RMSNorm's, LocalResponseNorm's and
# CrossMapLRN2d's reprs, already PyTorch's, are checked beside their layers' other tests.
REPRS = [
    ("BatchNorm1d", (4,), {}, "BatchNorm1d(4, eps=1e-05, momentum=0.1, affine=True, bias=True, "
                              "track_running_stats=True)"),
    ("BatchNorm2d", (4,), dict(momentum=None, affine=False),
     "BatchNorm2d(4, eps=1e-05, momentum=None, affine=False, bias=False, track_running_stats=True)"),
    ("BatchNorm3d", (4,), dict(track_running_stats=False, bias=False),
     "BatchNorm3d(4, eps=1e-05, momentum=0.1, affine=True, bias=False, track_running_stats=False)"),
    ("SyncBatchNorm", (4,), {}, "SyncBatchNorm(4, eps=1e-05, momentum=0.1, affine=True, bias=True, "
                                "track_running_stats=True)"),
    ("InstanceNorm1d", (4,), {}, "InstanceNorm1d(4, eps=1e-05, momentum=0.1, affine=False, bias=False, "
                                 "track_running_stats=False)"),
    ("InstanceNorm2d", (4,), dict(affine=True), "InstanceNorm2d(4, eps=1e-05, momentum=0.1, affine=True, "
                                                "bias=True, track_running_stats=False)"),
    ("InstanceNorm3d", (4,), dict(affine=True, bias=False, track_running_stats=True),
     "InstanceNorm3d(4, eps=1e-05, momentum=0.1, affine=True, bias=False, track_running_stats=True)"),
    ("LayerNorm", (4,), {}, "LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=True)"),
    ("LayerNorm", ((2, 3),), dict(bias=False), "LayerNorm((2, 3), eps=1e-05, elementwise_affine=True, bias=False)"),
    ("LayerNorm", (4,), dict(elementwise_affine=False), "LayerNorm((4,), eps=1e-05, elementwise_affine=False, "
                                                        "bias=False)"),
    ("GroupNorm", (2, 4), {}, "GroupNorm(2, 4, eps=1e-05, affine=True, bias=True)"),
    ("GroupNorm", (2, 4), dict(affine=False), "GroupNorm(2, 4, eps=1e-05, affine=False, bias=False)"),
    ("GroupNorm", (2, 4), dict(bias=False), "GroupNorm(2, 4, eps=1e-05, affine=True, bias=False)"),
]


@pytest.mark.parametrize("name, args, kwargs, text", REPRS)
def test_norm_reprs(name, args, kwargs, text):
    assert repr(getattr(nn, name)(*args, **kwargs)) == text


@pytest.mark.parametrize("name, args, kwargs, text", REPRS)
def test_norm_reprs_match_torch(name, args, kwargs, text):
    torch = pytest.importorskip("torch")
    assert repr(getattr(nn, name)(*args, **kwargs)) == repr(getattr(torch.nn, name)(*args, **kwargs))


# the bias keyword -------------------------------------------------------------------------

@pytest.mark.parametrize("make", [lambda: nn.BatchNorm1d(3, bias=False), lambda: nn.InstanceNorm1d(3, affine=True,
                                                                                                   bias=False),
                                  lambda: nn.GroupNorm(1, 3, bias=False)])
def test_bias_false_keeps_the_weight_and_drops_the_bias(make):
    m = make()
    assert m.bias is None and m.weight is not None
    assert list(m.state_dict()).count("bias") == 0 and "weight" in m.state_dict()
    assert [n for n, _ in m.named_parameters()] == ["weight"]
    m.reset_parameters()
    assert np.array_equal(m.weight.detach().numpy(), np.ones(3))


def test_bias_is_keyword_only():
    assert nn.GroupNorm(1, 3, 1e-5, True, bias=False).bias is None
    assert nn.BatchNorm2d(3, 1e-5, 0.1, True, True, bias=False).bias is None
    with pytest.raises(TypeError):
        nn.GroupNorm(1, 3, 1e-5, True, False)


def test_batchnorm_without_bias_values_and_gradients():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 3, 4))
    w = rng.standard_normal(3)
    m = nn.BatchNorm1d(3, bias=False).double()
    m.weight._data[...] = w
    y = m(md.tensor(x)).detach().numpy()
    mean, var = x.mean(axis=(0, 2), keepdims=True), x.var(axis=(0, 2), keepdims=True)
    assert np.allclose(y, (x - mean) / np.sqrt(var + 1e-5) * w[None, :, None])
    xt = md.tensor(x, requires_grad=True)
    assert gradcheck(lambda a, b: md.nn.functional.batch_norm(a, None, None, b, None, True), (xt, m.weight))


def test_groupnorm_without_bias_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 4, 5))
    ours, theirs = nn.GroupNorm(2, 4, bias=False).double(), torch.nn.GroupNorm(2, 4, bias=False).double()
    w = rng.standard_normal(4)
    ours.weight._data[...] = w
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(w))
    xo, xt = md.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    yo, yt = ours(xo), theirs(xt)
    g = rng.standard_normal(yo.shape)
    yo.backward(md.tensor(g))
    yt.backward(torch.tensor(g))
    assert np.allclose(yo.detach().numpy(), yt.detach().numpy())
    assert np.allclose(xo.grad.numpy(), xt.grad.numpy())
    assert np.allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy())


# state-dict versions -----------------------------------------------------------------------

VERSIONED = [lambda lib: lib.nn.BatchNorm1d(2), lambda lib: lib.nn.BatchNorm2d(2), lambda lib: lib.nn.BatchNorm3d(2),
             lambda lib: lib.nn.SyncBatchNorm(2), lambda lib: lib.nn.InstanceNorm1d(2),
             lambda lib: lib.nn.InstanceNorm2d(2, track_running_stats=True)]


@pytest.mark.parametrize("make", VERSIONED)
def test_channel_norms_save_version_2(make):
    m = md.nn.Sequential(make(md), md.nn.LayerNorm(2), md.nn.MultiheadAttention(2, 1), md.nn.Embedding(3, 2))
    meta = m.state_dict()._metadata
    assert meta["0"] == {"version": 2}
    assert meta["1"] == meta["2"] == meta["2.out_proj"] == meta["3"] == meta[""] == {"version": 1}


@pytest.mark.parametrize("make", VERSIONED)
def test_versions_match_torch(make):
    torch = pytest.importorskip("torch")

    def meta(lib):
        m = lib.nn.Sequential(make(lib), lib.nn.LayerNorm(2), lib.nn.GroupNorm(1, 2), lib.nn.RMSNorm(2),
                              lib.nn.MultiheadAttention(2, 1), lib.nn.Embedding(3, 2))
        return dict(m.state_dict()._metadata)

    assert meta(md) == meta(torch)


def _batchnorm_without_counter(version):
    """A BatchNorm1d state dict without num_batches_tracked, its metadata version as saved
    (``"saved"``), ``version``, or absent (None)."""
    sd = nn.BatchNorm1d(3).state_dict()
    del sd["num_batches_tracked"]
    if version == "saved":
        pass
    elif version is None:
        del sd._metadata[""]
    else:
        sd._metadata[""]["version"] = version
    return sd


def test_batchnorm_state_dict_without_counter():
    """Saved now (version 2) the counter is a missing key; an older or unversioned state dict
    loads without it, the module's counter kept as it is."""
    with pytest.raises(RuntimeError, match='Missing key.*"num_batches_tracked"'):
        nn.BatchNorm1d(3).load_state_dict(_batchnorm_without_counter("saved"))
    with pytest.raises(RuntimeError, match='Missing key.*"num_batches_tracked"'):
        nn.BatchNorm1d(3).load_state_dict(_batchnorm_without_counter(2))
    for version in (None, 1):
        m = nn.BatchNorm1d(3)
        m.num_batches_tracked._data[...] = 7
        result = m.load_state_dict(_batchnorm_without_counter(version))
        assert result.missing_keys == [] and int(m.num_batches_tracked.item()) == 7


def test_unversioned_instancenorm_running_stats_are_reported_and_dropped():
    sd = {"running_mean": np.zeros(3, np.float32), "running_var": np.ones(3, np.float32)}
    with pytest.raises(RuntimeError, match='Unexpected running stats buffer\\(s\\) "running_mean" and "running_var" '
                                           'for InstanceNorm1d with track_running_stats=False'):
        nn.InstanceNorm1d(3).load_state_dict(sd)
    versioned = OrderedDict(sd)
    versioned._metadata = OrderedDict({"": {"version": 2}})
    with pytest.raises(RuntimeError, match='Unexpected key\\(s\\) in state_dict: "running_mean", "running_var"'):
        nn.InstanceNorm1d(3).load_state_dict(versioned)


def test_old_state_dicts_load_as_in_torch():
    torch = pytest.importorskip("torch")

    def outcome(lib, make, sd):
        try:
            return str(make(lib).load_state_dict(sd))
        except RuntimeError as exc:
            return str(exc)

    sd = {"running_mean": np.zeros(3, np.float32)}
    assert outcome(md, lambda lib: lib.nn.InstanceNorm1d(3), sd) == \
        outcome(torch, lambda lib: lib.nn.InstanceNorm1d(3), {k: torch.tensor(v) for k, v in sd.items()})
    for version in (None, 1, 2, "saved"):
        ours = _batchnorm_without_counter(version)
        theirs = OrderedDict((k, torch.tensor(v.numpy())) for k, v in ours.items())
        theirs._metadata = ours._metadata
        assert outcome(md, lambda lib: lib.nn.BatchNorm1d(3), ours) == \
            outcome(torch, lambda lib: lib.nn.BatchNorm1d(3), theirs)


# MultiheadAttention's out_proj ------------------------------------------------------------

def test_multihead_attention_out_proj_type_and_repr():
    mha = nn.MultiheadAttention(4, 2)
    assert type(mha.out_proj) is NonDynamicallyQuantizableLinear and isinstance(mha.out_proj, nn.Linear)
    assert repr(mha) == ("MultiheadAttention(\n  (out_proj): NonDynamicallyQuantizableLinear(in_features=4, "
                         "out_features=4, bias=True)\n)")
    assert mha.out_proj.bias is not None and nn.MultiheadAttention(4, 2, bias=False).out_proj.bias is None
    layer = NonDynamicallyQuantizableLinear(3, 2, bias=False, dtype="float64")
    assert layer.weight.dtype == md.float64 and layer.bias is None
    x = np.arange(6.0).reshape(2, 3)
    assert np.allclose(layer(md.tensor(x)).detach().numpy(), x @ layer.weight.detach().numpy().T)


def test_multihead_attention_repr_matches_torch():
    torch = pytest.importorskip("torch")
    for kwargs in ({}, dict(bias=False), dict(kdim=3, vdim=5)):
        assert repr(nn.MultiheadAttention(4, 2, **kwargs)) == repr(torch.nn.MultiheadAttention(4, 2, **kwargs))


# grid_sample on volumetric input --------------------------------------------------------

def _voxel(coord, n, padding_mode, align_corners):
    """A normalized coordinate in voxel units, padded."""
    v = (coord + 1) / 2 * (n - 1) if align_corners else ((coord + 1) * n - 1) / 2
    if padding_mode == "border":
        v = min(max(v, 0.0), n - 1.0)
    elif padding_mode == "reflection":
        lo, hi = (0.0, n - 1.0) if align_corners else (-0.5, n - 0.5)
        span = hi - lo
        if span <= 0:
            return 0.0
        flips, extra = divmod(abs(v - lo), span)
        v = min(max(extra + lo if flips % 2 == 0 else span - extra + lo, 0.0), n - 1.0)
    return v


def _grid_sample_3d_reference(x, grid, mode, padding_mode, align_corners):
    N, C, D, H, W = x.shape
    out = np.zeros((N, C) + grid.shape[1:4])
    for n, d, h, w in np.ndindex(N, *grid.shape[1:4]):
        p = [_voxel(grid[n, d, h, w, k], size, padding_mode, align_corners) for k, size in enumerate((W, H, D))]
        if mode == "nearest":
            taps = [([int(np.rint(v)) for v in p], 1.0)]
        else:
            low = [int(np.floor(v)) for v in p]
            taps = []
            for bits in itertools.product((0, 1), repeat=3):
                weight = np.prod([(v - lo) if b else 1 - (v - lo) for v, lo, b in zip(p, low, bits)])
                taps.append(([lo + b for lo, b in zip(low, bits)], weight))
        for (i, j, k), weight in taps:
            if 0 <= i < W and 0 <= j < H and 0 <= k < D:
                out[n, :, d, h, w] += weight * x[n, :, k, j, i]
    return out


GRID3D_SPECS = [OpSpec(name=f"grid3d-{mode}-{pm}-{ac}",
                       op=lambda x, g, mode=mode, pm=pm, ac=ac: F.grid_sample(x, g, mode=mode, padding_mode=pm,
                                                                              align_corners=ac),
                       reference=lambda x, g, mode=mode, pm=pm, ac=ac: _grid_sample_3d_reference(x, g, mode, pm, ac),
                       inputs=lambda rng: (rng.standard_normal((2, 2, 3, 2, 4)),
                                           rng.uniform(-1.5, 1.5, (2, 2, 3, 2, 3))))
                for mode in ("bilinear", "nearest") for pm in ("zeros", "border", "reflection") for ac in (False, True)]


@pytest.mark.parametrize("spec,dtype,device", forward_cases(GRID3D_SPECS))
def test_grid_sample_3d_forward(spec, dtype, device):
    check_forward(spec, dtype, device)


@pytest.mark.parametrize("spec", GRID3D_SPECS, ids=spec_id)
def test_grid_sample_3d_gradcheck(spec):
    assert check_gradcheck(spec)


def test_grid_sample_3d_nearest_gives_the_grid_zero_gradient():
    x = md.randn(1, 1, 2, 3, 3, requires_grad=True)
    g = md.tensor(np.random.default_rng(2).uniform(-1, 1, (1, 2, 2, 2, 3)).astype(np.float32), requires_grad=True)
    F.grid_sample(x, g, mode="nearest", align_corners=False).sum().backward()
    assert g.grad.shape == (1, 2, 2, 2, 3) and not g.grad.numpy().any()
    assert x.grad.numpy().sum() == 8


@pytest.mark.parametrize("call, exc, match", [
    (lambda x, g: F.grid_sample(x, g, mode="bicubic", align_corners=False), RuntimeError, "only supports 4D"),
    (lambda x, g: F.grid_sample(x, g[..., :2], align_corners=False), RuntimeError, "size 3 in last dimension"),
    (lambda x, g: F.grid_sample(x[:, :, :, :0], g, align_corners=False), RuntimeError, "dimension 3 being empty"),
    (lambda x, g: F.grid_sample(x, g.double(), align_corners=False), RuntimeError, "same dtype"),
])
def test_grid_sample_3d_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call(md.randn(1, 2, 3, 3, 3), md.rand(1, 2, 2, 2, 3) * 2 - 1)


def test_grid_sample_3d_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    for mode, pm, ac in itertools.product(("bilinear", "nearest"), ("zeros", "border", "reflection"), (False, True)):
        x, g = rng.standard_normal((2, 3, 3, 4, 5)), rng.uniform(-1.3, 1.3, (2, 2, 3, 4, 3))
        up = rng.standard_normal((2, 3, 2, 3, 4))
        xo, go = md.tensor(x, requires_grad=True), md.tensor(g, requires_grad=True)
        xt, gt = torch.tensor(x, requires_grad=True), torch.tensor(g, requires_grad=True)
        yo = F.grid_sample(xo, go, mode=mode, padding_mode=pm, align_corners=ac)
        yt = torch.nn.functional.grid_sample(xt, gt, mode=mode, padding_mode=pm, align_corners=ac)
        yo.backward(md.tensor(up))
        yt.backward(torch.tensor(up))
        np.testing.assert_allclose(yo.detach().numpy(), yt.detach().numpy(), atol=1e-12)
        np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), atol=1e-12)
        np.testing.assert_allclose(go.grad.numpy(), gt.grad.numpy(), atol=1e-12)


def test_affine_grid_then_grid_sample_3d_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    theta, x = rng.standard_normal((2, 3, 4)) * 0.6, rng.standard_normal((2, 2, 3, 4, 5))
    size = (2, 2, 2, 3, 4)
    to, xo = md.tensor(theta, requires_grad=True), md.tensor(x, requires_grad=True)
    tt, xt = torch.tensor(theta, requires_grad=True), torch.tensor(x, requires_grad=True)
    yo = F.grid_sample(xo, F.affine_grid(to, size, align_corners=False), padding_mode="border", align_corners=False)
    yt = torch.nn.functional.grid_sample(xt, torch.nn.functional.affine_grid(tt, size, align_corners=False),
                                         padding_mode="border", align_corners=False)
    (yo * yo).sum().backward()
    (yt * yt).sum().backward()
    np.testing.assert_allclose(yo.detach().numpy(), yt.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(to.grad.numpy(), tt.grad.numpy(), atol=1e-10)
    np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), atol=1e-12)
