"""Layer-level ops on the "cuda" device (CUDA simulator): each matches the CPU in values and
gradients on tiny shapes, running through the generic kernels (or its own, where it has one)."""
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
from minidl.backends.cuda import CudaArray  # noqa: E402

from test_cuda_core import check, rnd  # noqa: E402


def _on(device, a):
    return md.tensor(a, device=device)


def test_argmax_any_all_pad_floor_divide():
    a = np.array([[1.0, 5.0, 5.0, -2.0], [np.nan, 0.0, 7.0, 7.0], [-3.0, -1.0, -1.0, -9.0]])
    x = CudaArray.from_host(a)
    for axis in (None, 0, 1):
        np.testing.assert_array_equal(x.argmax(axis=axis).copy_to_host(), a.argmax(axis=axis))
        np.testing.assert_array_equal(x.argmin(axis=axis).copy_to_host(), a.argmin(axis=axis))
    t = md.tensor(a[[0, 2]], device="cuda")
    assert t.argmax(dim=1).tolist() == [1, 1] and t.argmax(dim=1).device == "cuda"
    assert bool((x > 6).any()) and not bool((x > 6).all())
    np.testing.assert_array_equal(x.any(axis=1).copy_to_host(), np.array([True, True, True]))
    b = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(xp.pad(CudaArray.from_host(b), ((0, 0), (1, 2)), constant_values=-1).copy_to_host(),
                                  np.pad(b, ((0, 0), (1, 2)), constant_values=-1))
    i = CudaArray.from_host(np.arange(-4, 5))
    np.testing.assert_array_equal((i // 3).copy_to_host(), np.arange(-4, 5) // 3)
    np.testing.assert_array_equal((i % 3).copy_to_host(), np.arange(-4, 5) % 3)


def test_gelu_exact_and_tanh():
    check(lambda x: F.gelu(x) * 2 + F.gelu(x, approximate="tanh"), rnd(2, 3), atol=1e-9)


def test_cross_entropy_nll_and_mse():
    a, t = rnd(4, 5), np.array([0, 4, 4, 1])
    check(lambda x: F.cross_entropy(x, _on(x.device, t)), a, atol=1e-9)
    check(lambda x: F.cross_entropy(x, _on(x.device, np.array([0, -100, 4, 1])), label_smoothing=0.1,
                                    reduction="sum"), a, atol=1e-9)
    check(lambda x: F.nll_loss(x.log_softmax(1), _on(x.device, t), reduction="none"), a, atol=1e-9)
    check(lambda x, y: F.mse_loss(x, y), a, rnd(4, 5, seed=2), atol=1e-9)


def test_embedding_scatter_adds_repeated_rows():
    idx = np.array([[0, 2, 2], [3, 0, 2]])
    check(lambda w: F.embedding(_on(w.device, idx), w), rnd(4, 3), atol=1e-12)


def test_conv2d_and_pooling():
    x = rnd(1, 2, 5, 5)
    check(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1), x, rnd(3, 2, 3, 3, seed=2), rnd(3, seed=3),
          atol=1e-9)
    check(lambda x: F.max_pool2d(x, 2) + F.avg_pool2d(x, 2), rnd(1, 2, 4, 4), atol=1e-9)
    check(lambda x: F.adaptive_avg_pool2d(x, 1), rnd(1, 2, 4, 4), atol=1e-9)
    check(lambda x: F.relu_max_pool2d(x, 2), rnd(1, 2, 4, 6), atol=1e-9)   # the reference on device arrays
    check(lambda a, b: F.add_relu(a, b), rnd(2, 3), rnd(2, 3, seed=2), atol=1e-9)


def test_scaled_dot_product_attention_causal_and_masked():
    q, k, v = rnd(1, 2, 3, 4), rnd(1, 2, 3, 4, seed=2), rnd(1, 2, 3, 4, seed=3)
    check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), q, k, v, atol=1e-9)
    mask = np.array([[True, False, True], [True, True, False], [False, True, True]])
    check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=_on(q.device, mask)), q, k, v,
          atol=1e-9)


def test_dropout_mask_is_drawn_on_the_device_and_reproduces():
    """The mask comes from the device's generator (no host copy; not the CPU's mask): each
    element is 0 or 1/(1-p), the same seed gives the same mask, and the gradient is the mask."""
    x = md.ones(4, 5, device="cuda", requires_grad=True)
    md.manual_seed(3)
    y = F.dropout(x, 0.5)
    md.manual_seed(3)
    again = F.dropout(md.ones(4, 5, device="cuda"), 0.5)
    assert y.device == "cuda"
    mask = y.detach().cpu().numpy()
    assert set(np.unique(mask)) <= {0.0, 2.0} and 0 < np.count_nonzero(mask) < mask.size
    np.testing.assert_array_equal(again.cpu().numpy(), mask)
    assert not np.array_equal(F.dropout(md.ones(4, 5, device="cuda"), 0.5).cpu().numpy(), mask)   # the stream moves on
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.cpu().numpy(), mask)


@pytest.mark.parametrize("make", [lambda p: optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01),
                                  lambda p: optim.Adam(p, lr=0.1), lambda p: optim.AdamW(p, lr=0.1)],
                         ids=["sgd", "adam", "adamw"])
def test_optimizer_steps_match_cpu(make):
    md.manual_seed(0)
    cpu = nn.Linear(3, 2)
    gpu = nn.Linear(3, 2)
    gpu.load_state_dict(cpu.state_dict())
    gpu.to("cuda")
    x = rnd(4, 3).astype(np.float32)
    for m in (cpu, gpu):
        opt = make(m.parameters())
        dev = next(m.parameters()).device
        for _ in range(2):
            opt.zero_grad()
            (m(_on(dev, x)) ** 2).mean().backward()
            opt.step()
    for pc, pg in zip(cpu.parameters(), gpu.parameters()):
        assert pg.device == "cuda"
        np.testing.assert_allclose(pg.detach().cpu().numpy(), pc.detach().cpu().numpy(), atol=1e-5)


@pytest.mark.parametrize("geom", [dict(stride=1, padding=1), dict(stride=2, padding=0, dilation=2),
                                  dict(stride=(2, 1), padding=(0, 1), groups=2)])
def test_conv2d_cuda_im2col_kernels(geom):
    from minidl.kernels.cuda import im2col as k
    from minidl.ops.conv import col2im_reference, im2col_reference
    x = rnd(2, 4, 5, 4)
    g = geom.get("groups", 1)
    check(lambda x, w: F.conv2d(x, w, **geom), x, rnd(2, 4 // g, 3, 2, seed=2), atol=1e-9)
    args = (2, 2, 2, 1, 1, 0, 1, 1, 3, 3, 2)   # kh kw sh sw ph pw dh dw OH OW groups
    strided = CudaArray.from_host(np.ascontiguousarray(x.transpose(0, 1, 3, 2))).transpose(0, 1, 3, 2)
    assert not strided.is_contiguous()
    cols = k.im2col(strided, *args)
    ref = im2col_reference(x, *args)
    np.testing.assert_allclose(cols.copy_to_host(), ref)
    back = k.col2im(CudaArray.from_host(ref), 2, 4, 5, 4, *args[:8], groups=2)
    np.testing.assert_allclose(back.copy_to_host(), col2im_reference(ref, 2, 4, 5, 4, *args[:8], groups=2), atol=1e-12)


def test_rotary_embedding_with_host_tables():
    rope = nn.RotaryEmbedding(4, max_len=5)
    check(lambda x: rope(x), rnd(1, 2, 3, 4), atol=1e-9)


def test_unfold_and_fold_on_the_device():
    """F.unfold / F.fold take the NumPy references on device arrays (the CPU has the kernels)."""
    check(lambda x: F.fold(F.unfold(x, (2, 3), padding=1, stride=(1, 2)) * 2, (5, 4), (2, 3), padding=1,
                           stride=(1, 2)), rnd(2, 3, 5, 4), atol=1e-12)
