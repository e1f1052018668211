"""Lab 5, ``deepnorm``: a deep, narrow Post-LN Transformer stalls or diverges where DeepNorm trains.

DeepNet (Wang et al. 2022) traces Post-LN's failure at depth to an exploding model update in
the first steps: every layer's LayerNorm sits on the residual path, and with N layers the
output moves by O(N) times the per-layer update. DeepNorm, LN(alpha x + f(x)) with alpha =
(2N)^(1/4) and the sublayers initialised smaller by beta = (8N)^(-1/4) (decoder-only), bounds
the update and trains hundreds of layers. The zoo's ``norm_position="deepnorm"`` implements
it; here the same deep, narrow GPT (one seed, the same batches, AdamW, no clipping) is
trained as Post-LN and as DeepNorm, with Pre-LN as a reference in full mode. Post-LN gets the
paper's baseline initialisation, Xavier-normal with gain 1 (``deepnorm_init(1.0)``: DeepNorm's
init with alpha = beta = 1), rather than the zoo GPT's GPT-2 init, whose depth-scaled small
residual weights already tame Post-LN at initialisation. Also reported: the gradient norm of
the first and the last block at initialisation.

Why lr 1e-3 in full mode (64 layers, d = 32, 200 steps): at lr 1e-2 both Post-LN and
DeepNorm sat on the unigram plateau (3.21 nats/char after 150 steps, identical curves), and a
previous full run at lr 3e-3 did the same (3.27 after 200 steps): so large a step moves any
64-layer post-norm stack too far. At lr 1e-3 (still without the thousands of warm-up steps the
paper's runs use), DeepNorm left the plateau (2.80 after 150 steps) while Post-LN stayed on it
(3.22): the bounded update is what lets the deep stack train at a given learning rate.
"""
import math

import numpy as np

from ._common import LabResult, Table, out_dir, pyplot, save_figure, smooth
from ._gpt import corpus, make_gpt, train_gpt
from ..zoo.transformer import deepnorm_constants


def block_grad_norms(model, seed, batch):
    x, y = corpus().batch("train", batch, model.block_size, generator=np.random.default_rng(seed))
    _, loss = model(x, y)
    loss.backward()
    out = [math.sqrt(sum(float(np.sum(p.grad.numpy().astype(np.float64) ** 2)) for p in b.parameters()
                         if p.grad is not None)) for b in model.blocks]
    model.zero_grad()
    return out


def max_spike(losses):
    """The largest rise of the loss above its running minimum (0 for a monotone curve)."""
    v = np.asarray(losses, dtype=np.float64)
    return float(np.max(v - np.minimum.accumulate(v))) if len(v) else 0.0


def run(quick=True, out=None, seed=0):
    out = out_dir("deepnorm", out)
    if quick:
        cfg = dict(block_size=16, n_layer=48, n_head=2, d_model=16)
        steps, batch, lr, warmup, positions = 25, 8, 5e-3, 0, ("post", "deepnorm")
    else:
        cfg = dict(block_size=32, n_layer=64, n_head=2, d_model=32)
        steps, batch, lr, warmup, positions = 200, 16, 1e-3, 0, ("post", "deepnorm", "pre")
    alpha, beta = deepnorm_constants(0, cfg["n_layer"])["decoder"]
    names = {"post": "Post-LN", "deepnorm": "DeepNorm", "pre": "Pre-LN"}
    table = Table(f"GPT {cfg}, {steps} AdamW steps of batch {batch}, lr {lr:g}, no warm-up "
                  f"(DeepNorm alpha {alpha:.3f}, beta {beta:.3f})",
                  ["model", "first loss", "final train loss (last 5)", "loss drop", "val loss", "diverged",
                   "|grad| block 1", f"|grad| block {cfg['n_layer']}"])
    runs = {}
    for p in positions:
        model = make_gpt(seed, norm_position=p, **cfg)
        if p == "post":
            for blk in model.blocks:
                blk.deepnorm_init(1.0)
        g = block_grad_norms(model, seed, batch)
        r = runs[p] = train_gpt(model, steps, lr, warmup=warmup, batch_size=batch, seed=seed)
        r["grads"] = g
        final = float("nan") if r["diverged"] else float(np.mean(r["losses"][-5:]))
        table.add(**{"model": names[p], "first loss": r["losses"][0], "final train loss (last 5)": final,
                     "loss drop": r["losses"][0] - final, "val loss": r["val"], "diverged": r["diverged"],
                     "|grad| block 1": g[0], f"|grad| block {cfg['n_layer']}": g[-1]})
    plt = pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    for k, p in enumerate(positions):
        a1.plot(smooth(runs[p]["losses"], 3), color=f"C{k}", label=names[p])
        a2.semilogy(np.arange(1, cfg["n_layer"] + 1), runs[p]["grads"], color=f"C{k}", label=names[p])
    a1.set_xlabel("step")
    a1.set_ylabel("train loss (3-step mean, nats/char)")
    a1.set_title(f"{cfg['n_layer']}-layer, d={cfg['d_model']} GPT, lr {lr:g}, no warm-up")
    a1.legend()
    a1.grid(alpha=0.3)
    a2.set_xlabel("block")
    a2.set_ylabel("|dL/dparams| of the block at init")
    a2.set_title("gradient per block at initialisation")
    a2.legend()
    a2.grid(alpha=0.3, which="both")
    path = save_figure(fig, out, "deepnorm")
    drop = {p: (float("-inf") if runs[p]["diverged"] else runs[p]["losses"][0] - np.mean(runs[p]["losses"][-5:]))
            for p in positions}
    spike = {p: max_spike(runs[p]["losses"]) for p in positions}
    tilt = {p: runs[p]["grads"][-1] / float(np.median(runs[p]["grads"])) for p in positions}
    if runs["post"]["diverged"] and not runs["deepnorm"]["diverged"]:
        verdict = "Post-LN diverged while DeepNorm trained"
    elif drop["deepnorm"] > drop["post"] + 0.5:
        verdict = "Post-LN stalled while DeepNorm trained"
    elif drop["deepnorm"] > drop["post"] + 0.1 or spike["post"] > spike["deepnorm"] + 0.5:
        verdict = "Post-LN trained less smoothly than DeepNorm (a modest gap, not a failure)"
    else:
        verdict = "DeepNorm's advantage over Post-LN did not show in this run"
    conclusion = (f"{verdict}: loss drop over {steps} steps Post-LN {drop['post']:.2f}, DeepNorm "
                  f"{drop['deepnorm']:.2f} nats/char, largest loss spike Post-LN {spike['post']:.2f}, DeepNorm "
                  f"{spike['deepnorm']:.2f}; at init the last block's gradient is {tilt['post']:.1f}x the median "
                  f"block's in Post-LN and {tilt['deepnorm']:.1f}x in DeepNorm")
    table.title += "; largest loss spike: " + ", ".join(f"{names[p]} {spike[p]:.2f}" for p in positions)
    return LabResult("deepnorm", [table], path, conclusion, quick,
                     {"losses": {p: r["losses"] for p, r in runs.items()},
                      "grads": {p: r["grads"] for p, r in runs.items()}})
