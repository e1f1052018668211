"""The kernels and device paths that keep a training step on the device (CUDA simulator, tiny
shapes): arange, integer-index offsets, deferred device checks, dropout masks, masked
BatchNorm, fused optimizer updates. Each matches the CPU (values and gradients) and makes no
host copy where the CPU path would have needed one."""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
import minidl.optim as optim
from minidl import backends

try:
    backends.get("cuda")
except RuntimeError as exc:   # pragma: no cover
    pytest.skip(f"cuda device unavailable: {exc}", allow_module_level=True)

from minidl.backends.cuda import CUDA_NUMPY as xp  # noqa: E402
from minidl.backends.cuda import CudaArray, transfer_log  # noqa: E402
from minidl.kernels.cuda._common import SIMULATOR  # noqa: E402

from test_cuda_core import check, rnd  # noqa: E402


def dev(a):
    return CudaArray.from_host(np.asarray(a))


# arange ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("args,dtype", [((5,), None), ((2, 9, 3), None), ((1, 2, 0.25), None), ((3,), np.float32),
                                        ((4, -2, -1), None), ((0,), None)])
def test_arange_kernel_matches_numpy(args, dtype):
    with transfer_log() as log:
        a = xp.arange(*args, dtype=dtype)
    assert log.h2d_count == 0
    ref = np.arange(*args, dtype=dtype)
    assert a.dtype == ref.dtype and a.shape == ref.shape
    np.testing.assert_array_equal(a.copy_to_host(), ref)


def test_causal_attention_mask_is_built_on_the_device():
    q, k, v = rnd(1, 3, 2), rnd(1, 4, 2, seed=2), rnd(1, 4, 2, seed=3)
    check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), q, k, v, atol=1e-9)


# integer indexing: offsets computed on the device ----------------------------------------------

@pytest.mark.parametrize("index", [
    lambda i, j: (slice(None), i, j),            # a run of two index arrays after a slice
    lambda i, j: (i, j),                         # leading run, trailing dims taken whole
    lambda i, j: (1, i),                         # an int joins the run (broadcast as 0-d)
    lambda i, j: (i[0], slice(None), j),         # separated by a slice: NumPy's host path
])
def test_advanced_indexing_offsets_values_and_grads(index):
    a = rnd(2, 3, 4)
    i_h, j_h = np.array([[0, -1], [1, 1]]), np.array([1, -2])
    i_d, j_d = md.tensor(i_h, device="cuda"), md.tensor(j_h, device="cuda")

    def pick(x):
        i, j = (i_d, j_d) if x.device == "cuda" else (md.tensor(i_h), md.tensor(j_h))
        return x[index(i, j)]
    check(pick, a, atol=1e-12)


def test_device_offsets_make_no_host_copies_and_scatter_add_repeats():
    x = dev(np.zeros((3, 4)))
    i, j = dev(np.array([0, 0, 2])), dev(np.array([1, 1, -1]))
    xp.add.at(x, (i, j), 1.0)   # warm-up: caches the 0-d constants they need (one upload each, once)
    x[i, j] = 5.0
    with transfer_log() as log:
        xp.add.at(x, (i, j), 1.0)
        x[i, j] = 5.0
        y = x[i, j]
    assert log.h2d_count == 0 and log.d2h_count == 0, log
    ref = np.zeros((3, 4))
    np.add.at(ref, ([0, 0, 2], [1, 1, -1]), 1.0)
    ref[[0, 0, 2], [1, 1, -1]] = 5.0
    np.add.at(ref, ([0, 0, 2], [1, 1, -1]), 1.0)
    ref[[0, 0, 2], [1, 1, -1]] = 5.0
    np.testing.assert_array_equal(x.copy_to_host(), ref)
    np.testing.assert_array_equal(y.copy_to_host(), ref[[0, 0, 2], [1, 1, -1]])


# deferred device checks ---------------------------------------------------------------------------

def test_out_of_range_indices_raise_at_the_next_read_then_reads_work_again():
    w = md.tensor(rnd(4, 2), device="cuda")
    bad = md.tensor(np.array([[1, 4]]), device="cuda")
    y = F.embedding(bad, w)   # no read yet: the check runs on the device
    with pytest.raises(IndexError, match="embedding: index out of range"):
        y.cpu().numpy()
    good = F.embedding(md.tensor(np.array([[3, 0]]), device="cuda"), w)
    np.testing.assert_array_equal(good.cpu().numpy(), w.cpu().numpy()[[[3, 0]]])   # the flag was cleared
    with pytest.raises(IndexError, match="cross_entropy: a target is out of bounds for 4 classes"):
        float(F.cross_entropy(md.tensor(rnd(2, 4), device="cuda"), md.tensor(np.array([0, 7]), device="cuda")))
    x = dev(np.arange(6.0).reshape(2, 3))
    with pytest.raises(IndexError, match="index out of bounds for axis 1 with size 3"):
        x[dev(np.array([0])), dev(np.array([3]))].copy_to_host()
    ok = F.cross_entropy(md.tensor(rnd(2, 4), device="cuda"), md.tensor(np.array([0, -100]), device="cuda"))
    assert np.isfinite(float(ok))   # ignore_index is not out of range


def test_gathers_clamp_out_of_range_indices_inside_the_array_and_report_them():
    x = dev(np.arange(4.0))
    y = x[dev(np.array([7, -9, 1]))]   # one index array on one axis: take_axis
    from minidl.kernels.cuda import checks
    with pytest.raises(IndexError, match="index out of bounds for axis 0 with size 4"):
        checks.raise_pending()
    np.testing.assert_array_equal(y.copy_to_host(), [3.0, 0.0, 1.0])   # read nothing outside x


@pytest.mark.parametrize("index", [lambda: md.tensor([5], device="cuda"), lambda: md.tensor([-7]), lambda: [5]],
                         ids=["device", "host-tensor", "list"])
def test_one_axis_index_out_of_range_raises_at_the_next_read(index):
    x = md.arange(3).float().cuda()
    with pytest.raises(IndexError, match="index out of bounds for axis 0 with size 3"):
        x[index()].cpu().numpy()
    with pytest.raises(IndexError, match="index out of bounds for axis 1 with size 3"):
        y = md.zeros(2, 3, device="cuda")
        y[:, index()] = 7.0
        y.cpu().numpy()
    np.testing.assert_array_equal(x[md.tensor([2, -3], device="cuda")].cpu().numpy(), [2.0, 0.0])   # flag cleared


# dropout on the device -------------------------------------------------------------------------------

def test_keep_mask_kernel_rate_scale_and_reproducibility():
    from minidl.kernels.cuda import random as r
    out = xp.empty((300,), dtype=np.float32)
    with transfer_log() as log:
        r.keep_mask(out._buf, 0.25, 123)
    assert log.h2d_count == 0
    m = out.copy_to_host()
    assert set(np.unique(m)) <= {0.0, np.float32(1 / 0.75)}
    assert 0.6 < np.count_nonzero(m) / m.size < 0.9
    again = xp.empty((300,), dtype=np.float32)
    r.keep_mask(again._buf, 0.25, 123)
    np.testing.assert_array_equal(again.copy_to_host(), m)
    r.keep_mask(again._buf, 0.25, 124)
    assert not np.array_equal(again.copy_to_host(), m)
    r.keep_mask(again._buf, 1.0, 5)
    assert not again.copy_to_host().any()


def test_attention_dropout_on_the_device_uses_one_mask_forward_and_backward():
    """With v = I the output is the dropped-out attention matrix itself, so the mask is visible;
    the gradient of v must then use the same mask (dv = P_dropped^T g)."""
    q, k = rnd(1, 3, 2), rnd(1, 3, 2, seed=2)
    qd, kd = md.tensor(q, device="cuda"), md.tensor(k, device="cuda")
    vd = md.tensor(np.eye(3)[None], device="cuda", requires_grad=True)
    md.manual_seed(1)
    out = F.scaled_dot_product_attention(qd, kd, vd, dropout_p=0.5)
    md.manual_seed(1)
    again = F.scaled_dot_product_attention(qd, kd, vd, dropout_p=0.5)
    p_drop = out.detach().cpu().numpy()[0]
    np.testing.assert_array_equal(again.detach().cpu().numpy(), out.detach().cpu().numpy())
    full = F.scaled_dot_product_attention(md.tensor(q), md.tensor(k), md.tensor(np.eye(3)[None])).numpy()[0]
    kept = p_drop != 0
    np.testing.assert_allclose(p_drop[kept], 2 * full[kept], rtol=1e-12)
    g = rnd(1, 3, 3, seed=4)
    out.backward(md.tensor(g, device="cuda"))
    np.testing.assert_allclose(vd.grad.cpu().numpy()[0], p_drop.T @ g[0], rtol=1e-10)


# masked BatchNorm with a device mask ----------------------------------------------------------------

@pytest.mark.parametrize("training", [True, False])
def test_masked_batch_norm_on_cuda_matches_cpu(training):
    mask = np.array([[True, True, False], [True, False, False]])
    stats = {}

    def bn(x, w, b):
        rm, rv = md.tensor(np.full(2, 0.5), device=x.device), md.tensor(np.full(2, 2.0), device=x.device)
        y = F.masked_batch_norm(x, md.tensor(mask, device=x.device), rm, rv, w, b, training=training, momentum=0.3)
        stats[x.device] = (rm.cpu().numpy(), rv.cpu().numpy())
        return y
    check(bn, rnd(2, 2, 3), rnd(2, seed=2), rnd(2, seed=3), atol=1e-9)
    for a, b in zip(stats["cuda"], stats["cpu"]):
        np.testing.assert_allclose(a, b, atol=1e-12)


def test_masked_batch_norm_module_keeps_the_mask_on_the_device():
    m = nn.BatchNorm1d(2).to("cuda")
    x = md.tensor(rnd(2, 2, 3).astype(np.float32), device="cuda")
    mask = md.tensor(np.array([[True, True, False], [True, False, True]]), device="cuda")
    m(x, mask=mask).detach().cpu().numpy()   # warm-up
    with transfer_log() as log:
        y = m(x, mask=mask)
    assert log.h2d_count == 0 and log.d2h_count == 0, log
    ref = nn.BatchNorm1d(2)(md.tensor(x.cpu().numpy()), mask=mask.cpu().numpy())
    np.testing.assert_allclose(y.detach().cpu().numpy(), ref.detach().cpu().numpy(), atol=1e-6)
    m.eval()   # a host mask is accepted too (copied up); eval uses the running statistics
    ref_m = nn.BatchNorm1d(2)
    ref_m.load_state_dict({k: v.cpu().numpy() for k, v in m.state_dict().items()})
    ref_m.eval()
    host_mask = mask.cpu().numpy()
    np.testing.assert_allclose(m(x, mask=host_mask).detach().cpu().numpy(),
                               ref_m(md.tensor(x.cpu().numpy()), mask=host_mask).detach().numpy(),
                               atol=1e-6)
    m.train()
    one_sample = md.tensor(np.array([[True, False, False], [False, False, False]]), device="cuda")
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        m(x, mask=one_sample).detach().cpu().numpy()


# fused optimizer updates -----------------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda p: optim.SGD(p, lr=0.1),
    lambda p: optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.2, weight_decay=0.01),
    lambda p: optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, maximize=True),
    lambda p: optim.Adam(p, lr=0.1, weight_decay=0.1, amsgrad=True),
    lambda p: optim.AdamW(p, lr=0.1, weight_decay=0.1, maximize=True),
], ids=["sgd", "sgd-momentum-dampening-wd", "sgd-nesterov-maximize", "adam-wd-amsgrad", "adamw-maximize"])
def test_fused_optimizer_kernels_match_cpu_over_three_steps(make):
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((3, 2))
    grads = [rng.standard_normal((3, 2)) for _ in range(3)]
    result = {}
    for device in ("cpu", "cuda"):
        p = md.tensor(w0, device=device, requires_grad=True)
        opt = make([p])
        for g in grads:
            p.grad = md.tensor(g, device=device)
            opt.step()
        result[device] = p.detach().cpu().numpy()
        buf = opt.state.get(p, {}).get("momentum_buffer")
        if buf is not None:
            assert buf.device.type == device
    np.testing.assert_allclose(result["cuda"], result["cpu"], rtol=1e-12, atol=1e-12)


@pytest.mark.skipif(not SIMULATOR, reason="counts launches through the simulator's kernel objects")
def test_fused_optimizer_step_is_one_kernel_per_parameter():
    from numba.cuda.simulator import kernel as sim
    p = md.tensor(rnd(4), device="cuda", requires_grad=True)
    opt = optim.AdamW([p], lr=0.1)
    p.grad = md.tensor(rnd(4, seed=1), device="cuda")
    opt.step()
    launched = []
    original = sim.FakeCUDAKernel.__call__

    def spy(self, *args, **kwargs):
        if not self._device:      # device functions are simulator kernel objects too; count launches only
            launched.append(self.fn.__name__)
        return original(self, *args, **kwargs)
    sim.FakeCUDAKernel.__call__ = spy
    try:
        opt.step()
    finally:
        sim.FakeCUDAKernel.__call__ = original
    assert launched == ["_adam"]


def test_encoder_classifier_with_masked_batch_norm_matches_cpu_on_cuda():
    """The padding mask is computed from the ids on the device (idx == pad_idx), used by
    attention, masked BatchNorm and the masked mean pooling: loss and gradients match the CPU."""
    from minidl.zoo import TransformerEncoderClassifier
    idx, y = np.array([[1, 2, 3], [2, 3, 0]]), np.array([1, 0])
    md.manual_seed(0)
    cpu = TransformerEncoderClassifier(5, 2, 3, d_model=2, n_head=1, n_layer=1, norm="batch", dropout=0.0)
    gpu = TransformerEncoderClassifier(5, 2, 3, d_model=2, n_head=1, n_layer=1, norm="batch", dropout=0.0)
    gpu.load_state_dict(cpu.state_dict())
    gpu.to("cuda")
    losses = {}
    for m, device in ((cpu, "cpu"), (gpu, "cuda")):
        loss = F.cross_entropy(m(md.tensor(idx, device=device)), md.tensor(y, device=device))
        loss.backward()
        losses[device] = float(loss)
    assert abs(losses["cuda"] - losses["cpu"]) < 1e-5
    for (name, pc), pg in zip(cpu.named_parameters(), gpu.parameters()):
        np.testing.assert_allclose(pg.grad.cpu().numpy(), pc.grad.cpu().numpy(), atol=1e-5, rtol=1e-4, err_msg=name)


@pytest.mark.parametrize("norm_type,max_norm", [(2.0, 0.5), (2.0, 100.0), (1.0, 0.3), (float("inf"), 0.2)])
def test_clip_grad_norm_on_cuda_matches_cpu_without_reading_the_grads(norm_type, max_norm):
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal(4).astype(np.float32)]
    out = {}
    for device in ("cpu", "cuda"):
        ps = [md.tensor(np.zeros_like(g), device=device, requires_grad=True) for g in grads]
        for p, g in zip(ps, grads):
            p.grad = md.tensor(g, device=device)
        with transfer_log() as log:
            total = nn.utils.clip_grad_norm_(ps, max_norm, norm_type=norm_type)
        if device == "cuda":
            assert total.device == "cuda" and log.d2h_count == 0, log
        out[device] = (float(total), [p.grad.cpu().numpy() for p in ps])
    assert abs(out["cuda"][0] - out["cpu"][0]) < 1e-5
    for a, b in zip(out["cuda"][1], out["cpu"][1]):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_loaded_optimizer_state_lives_beside_cuda_parameters():
    p = md.tensor(rnd(3), device="cuda", requires_grad=True)
    opt = optim.Adam([p], lr=0.1)
    p.grad = md.tensor(rnd(3, seed=1), device="cuda")
    opt.step()
    saved = {"state": {0: {k: (v.copy_to_host() if hasattr(v, "copy_to_host") else v)
                           for k, v in opt.state[p].items()}},
             "param_groups": opt.state_dict()["param_groups"]}
    fresh = optim.Adam([p], lr=0.1)
    fresh.load_state_dict(saved)
    assert fresh.state[p]["exp_avg"].device.type == "cuda"
    fresh.step()   # the fused update reads the loaded moments on the device
    assert np.isfinite(p.detach().cpu().numpy()).all()
