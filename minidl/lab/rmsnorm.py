"""Lab 6, ``rmsnorm``: RMSNorm vs LayerNorm, kernel time and training loss side by side.

RMSNorm (Zhang & Sennrich 2019) drops LayerNorm's mean subtraction and bias: y = g * x /
sqrt(mean(x^2) + eps). It saves one reduction in the forward and two in the backward, and
the claim is that it trains as well. Timing: minidl's ``F.layer_norm`` and ``F.rms_norm``
(fused Numba kernels, float32) forward and forward+backward through the user-facing path,
best of several repeats (a shared, loaded machine makes single timings noisy). Training: the
same small GPT, seed and batches with ``norm="layer"`` and ``norm="rms"``.
"""
import time

import numpy as np

from ..nn import functional as F
from ..tensor.factories import tensor
from ._common import LabResult, Table, out_dir, pyplot, save_figure, smooth
from ._gpt import make_gpt, train_gpt


def _timer(kind, shape, backward):
    """A closure running one forward (and backward) of ``kind`` on fixed float32 data."""
    rng = np.random.default_rng(0)
    D = shape[-1]
    x = tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=backward)
    w = tensor(np.ones(D, np.float32), requires_grad=backward)
    b = tensor(np.zeros(D, np.float32), requires_grad=backward)
    g = tensor(rng.standard_normal(shape).astype(np.float32))

    def once():
        y = F.layer_norm(x, (D,), w, b) if kind == "layer" else F.rms_norm(x, (D,), w)
        if backward:
            y.backward(g)
    return once


def time_norms(shape, repeats, backward):
    """{kind: best seconds}: LayerNorm and RMSNorm timed alternately (so a load spike on a shared
    machine hits both alike), best of ``repeats``, after a warm-up call (compilation)."""
    fns = {k: _timer(k, shape, backward) for k in ("layer", "rms")}
    best = {k: float("inf") for k in fns}
    for f in fns.values():
        f()
    for _ in range(repeats):
        for k, f in fns.items():
            t0 = time.perf_counter()
            f()
            best[k] = min(best[k], time.perf_counter() - t0)
    return best


def run(quick=True, out=None, seed=0):
    out = out_dir("rmsnorm", out)
    shape = (2048, 256) if quick else (8192, 768)
    repeats = 10 if quick else 30
    timing = Table(f"kernel time on ({shape[0]}, {shape[1]}) float32, best of {repeats} (ms)",
                   ["norm", "forward ms", "fwd+bwd ms"])
    fwd, both = time_norms(shape, repeats, False), time_norms(shape, repeats, True)
    times = {k: (1e3 * fwd[k], 1e3 * both[k]) for k in ("layer", "rms")}
    for kind in ("layer", "rms"):
        timing.add(**{"norm": "LayerNorm" if kind == "layer" else "RMSNorm", "forward ms": times[kind][0],
                      "fwd+bwd ms": times[kind][1]})
    cfg = dict(block_size=32, n_layer=2, n_head=2, d_model=32) if quick else \
        dict(block_size=64, n_layer=4, n_head=4, d_model=128)
    steps, batch = (40, 8) if quick else (300, 16)
    training = Table(f"GPT {cfg}, {steps} steps of batch {batch}, AdamW lr 3e-3",
                     ["norm", "first loss", "final train loss (mean of last 10)", "val loss"])
    runs = {}
    for kind in ("layer", "rms"):
        model = make_gpt(seed, norm=kind, **cfg)
        r = runs[kind] = train_gpt(model, steps, 3e-3, warmup=10, batch_size=batch, seed=seed)
        training.add(**{"norm": "LayerNorm" if kind == "layer" else "RMSNorm", "first loss": r["losses"][0],
                        "final train loss (mean of last 10)": float(np.mean(r["losses"][-10:])), "val loss": r["val"]})
    plt = pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
    pos = np.arange(2)
    for k, (label, j) in enumerate((("forward", 0), ("forward+backward", 1))):
        a1.bar(pos + 0.38 * k, [times["layer"][j], times["rms"][j]], 0.38, label=label)
    a1.set_xticks(pos + 0.19)
    a1.set_xticklabels(["LayerNorm", "RMSNorm"])
    a1.set_ylabel("ms (best of %d)" % repeats)
    a1.set_title(f"kernel time, ({shape[0]}, {shape[1]}) float32")
    a1.legend()
    for kind, label in (("layer", "LayerNorm"), ("rms", "RMSNorm")):
        a2.plot(smooth(runs[kind]["losses"], 5), label=label)
    a2.set_xlabel("step")
    a2.set_ylabel("train loss (5-step mean, nats/char)")
    a2.set_title("GPT training loss")
    a2.legend()
    a2.grid(alpha=0.3)
    path = save_figure(fig, out, "rmsnorm")
    ratio = times["rms"][1] / times["layer"][1]
    dl = float(np.mean(runs["rms"]["losses"][-10:]) - np.mean(runs["layer"]["losses"][-10:]))
    conclusion = (f"RMSNorm forward+backward {times['rms'][1]:.2f} ms vs LayerNorm {times['layer'][1]:.2f} ms "
                  f"(RMS/LN = {ratio:.2f}: {'faster' if ratio < 1 else 'not faster'} here, timings noisy on a "
                  f"shared machine); final training loss {abs(dl):.3f} nats/char {'lower' if dl < 0 else 'higher'} "
                  f"than LayerNorm's after {steps} steps "
                  f"({'about the same' if abs(dl) < 0.05 else 'a visible difference'})")
    return LabResult("rmsnorm", [timing, training], path, conclusion, quick,
                     {"times": times, "losses": {k: v["losses"] for k, v in runs.items()}})
