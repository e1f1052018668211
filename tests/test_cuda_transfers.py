"""Host <-> device copies during a training step on cuda, counted by
``minidl.backends.cuda.transfer_log`` (CUDA simulator; the counts are the same on a GPU).

Each test takes a warm-up step (it allocates the optimizer state and caches the few device
constants an op needs: one small upload each, once), then counts one more step. The batch is
put on the device before the step, as a data loader would. What may cross:

- device -> host: reading the loss (4 bytes), and the 8-byte flag of the deferred device checks
  (embedding index range, cross-entropy target range, masked BatchNorm's real-token count;
  kernels/cuda/checks.py), read together with the loss: 2 copies, 12 bytes;
- host -> device: nothing (dropout masks are drawn on the device, causal masks and index
  offsets computed there, optimizer updates run there).
"""
import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
import minidl.optim as optim
from minidl import backends
from minidl.zoo import GPT, ResNet, TransformerEncoderClassifier, ViT

try:
    backends.get("cuda")
except RuntimeError as exc:   # pragma: no cover
    pytest.skip(f"cuda device unavailable: {exc}", allow_module_level=True)

from minidl.backends.cuda import transfer_log  # noqa: E402

LOSS_READ = 2   # the loss (float32: 4 bytes) and the deferred-check flag (int64: 8 bytes)
LOSS_BYTES = 12


def _count_step(model, make_opt, loss_fn, inputs):
    """(TransferLog of the second training step, the two losses)."""
    md.manual_seed(0)
    model.to("cuda")
    opt = make_opt(model.parameters())
    batch = [md.tensor(a, device="cuda") for a in inputs]

    def step():
        opt.zero_grad()
        loss = loss_fn(model, *batch)
        loss.backward()
        opt.step()
        return float(loss)

    first = step()
    with transfer_log() as log:
        second = step()
    return log, (first, second)


def _assert_only_the_loss_is_read(log):
    assert log.h2d_count == 0, f"host -> device copies in a training step:\n{log}"
    assert log.d2h_count <= LOSS_READ and log.d2h_bytes <= LOSS_BYTES, f"device -> host copies:\n{log}"
    assert sorted(t.nbytes for t in log.d2h) in ([4], [4, 8]), log


def test_transfer_log_counts_copies_both_ways_and_names_the_caller():
    from minidl.backends.cuda import CudaArray
    with transfer_log() as outer:
        x = CudaArray.from_host(np.arange(6, dtype=np.float32))
        with transfer_log() as inner:
            x.copy_to_host()
    assert (outer.h2d_count, outer.h2d_bytes, outer.d2h_count, outer.d2h_bytes) == (1, 24, 1, 24)
    assert (inner.h2d_count, inner.d2h_count, inner.d2h_bytes) == (0, 1, 24)
    assert "test_cuda_transfers.py" in inner.d2h[0].site and "d2h" in repr(inner)


@pytest.mark.slow
def test_gpt_step_with_dropout_and_adamw_reads_only_the_loss():
    idx = np.array([[1, 3, 0, 4]])
    log, losses = _count_step(GPT(5, 3, n_layer=1, n_head=1, d_model=2, dropout=0.5),
                              lambda p: optim.AdamW(p, lr=1e-2), lambda m, i: m(i[:, :-1], i[:, 1:])[1], [idx])
    assert np.isfinite(losses).all()
    _assert_only_the_loss_is_read(log)


@pytest.mark.slow
def test_resnet_step_with_batchnorm_and_sgd_momentum_reads_only_the_loss():
    x = np.random.default_rng(0).standard_normal((2, 3, 1, 1)).astype(np.float32)
    log, losses = _count_step(ResNet(depth=8, num_classes=2, norm="batch", width=1),
                              lambda p: optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=1e-4),
                              lambda m, a, b: F.cross_entropy(m(a), b), [x, np.array([1, 0])])
    assert np.isfinite(losses).all()
    _assert_only_the_loss_is_read(log)


@pytest.mark.slow
def test_encoder_step_with_masked_batchnorm_reads_only_the_loss():
    idx = np.array([[1, 2, 3], [2, 3, 0]])   # pad_idx 0: the second sequence is padded
    log, losses = _count_step(TransformerEncoderClassifier(5, 2, 3, d_model=2, n_head=1, n_layer=1, norm="batch",
                                                           dropout=0.5),
                              lambda p: optim.AdamW(p, lr=1e-2), lambda m, i, y: F.cross_entropy(m(i), y),
                              [idx, np.array([1, 0])])
    assert np.isfinite(losses).all()
    _assert_only_the_loss_is_read(log)


@pytest.mark.slow
def test_vit_step_reads_only_the_loss():
    x = np.random.default_rng(0).standard_normal((2, 1, 2, 2)).astype(np.float32)
    log, losses = _count_step(ViT(image_size=2, patch_size=2, d_model=2, n_layer=1, n_head=1, num_classes=2,
                                  dropout=0.5),
                              lambda p: optim.Adam(p, lr=1e-2), lambda m, a, b: F.cross_entropy(m(a), b),
                              [x, np.array([1, 0])])
    assert np.isfinite(losses).all()
    _assert_only_the_loss_is_read(log)
