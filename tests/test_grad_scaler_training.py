"""A small model trained 50 steps in float16 (autocast + GradScaler) tracks the same model trained in
float32: same initial weights, same batches, same optimizer (plain SGD, lr 0.05).

The tolerance, and why: autocast rounds the GEMM inputs and outputs to float16 (a relative error
of 2**-11 = 4.9e-4 each), so the float16 run's loss differs from the float32 run's by about 1e-4
at first, and the trajectories drift apart slowly as the updates differ (measured: at most 0.004
nats over these 50 steps). We require every step's loss within 0.02 nats (absolute) of the float32
run's and the mean of the last 10 within 0.01: tight enough that a scaler which skipped good steps,
forgot to unscale (updates 65536x too large) or let an inf through fails. A skipped step is a real
difference (that update is lost), so the check is made where none overflows at PyTorch's default
scale 2**16; with momentum 0.9 and lr 0.1 the same model overflows twice in 50 steps and, the
training being chaotic at that learning rate, the two runs then part by up to 0.8 nats.
"""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.data.digits import digits_arrays

STEPS, BATCH = 50, 32
GROWTH = 2000
STEP_TOL, FINAL_TOL = 0.02, 0.01


def _model():
    md.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.GroupNorm(4, 8), nn.ReLU(), nn.Flatten(),
                         nn.Linear(8 * 64, 32), nn.ReLU(), nn.Linear(32, 10))


def _train(mixed, dtype=md.float16, grad_clip=None):
    xs, ys = digits_arrays("train")
    model = _model()
    opt = md.optim.SGD(model.parameters(), lr=0.05)
    scaler = md.amp.GradScaler("cpu", growth_interval=GROWTH, enabled=mixed and dtype == md.float16)
    losses, scales = [], []
    for t in range(STEPS):
        idx = np.random.default_rng((0, t)).choice(len(xs), BATCH, replace=False)
        with md.autocast("cpu", dtype=dtype, enabled=mixed):
            logits = model(md.tensor(xs[idx]))
            loss = F.cross_entropy(logits, md.tensor(ys[idx]))
        assert loss.dtype == md.float32
        if mixed:
            assert logits.dtype == dtype
        opt.zero_grad()
        scales.append(scaler.get_scale())
        scaler.scale(loss).backward()
        if grad_clip:
            scaler.unscale_(opt)
            nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        scaler.step(opt)
        scaler.update()
        losses.append(float(loss.item()))
    for p in model.parameters():
        assert p.dtype == md.float32      # master weights stay float32
    return np.array(losses), scales


@pytest.mark.parametrize("grad_clip", [None, 1.0])
def test_fp16_with_the_scaler_tracks_fp32(grad_clip):
    ref, _ = _train(False, grad_clip=grad_clip)
    got, scales = _train(True, grad_clip=grad_clip)
    assert ref[-10:].mean() < ref[0] - 1.0                # the model does learn in these 50 steps
    assert np.abs(got - ref).max() < STEP_TOL, np.abs(got - ref).max()
    assert abs(got[-10:].mean() - ref[-10:].mean()) < FINAL_TOL
    assert scales == [2.0 ** 16] * STEPS                        # no step overflowed, none was skipped


def test_bf16_without_a_scaler_tracks_fp32_more_loosely():
    """bfloat16 keeps 8 significant bits (relative rounding 2**-8 = 3.9e-3): the tolerance is 4x."""
    ref, _ = _train(False)
    got, _ = _train(True, dtype=md.bfloat16)
    assert np.abs(got - ref).max() < 4 * STEP_TOL and abs(got[-10:].mean() - ref[-10:].mean()) < 4 * FINAL_TOL
