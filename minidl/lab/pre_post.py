"""Lab 4, ``pre-post``: Pre-LN vs Post-LN GPT, with and without learning-rate warm-up.

Post-LN (LN(x + f(x)), the original Transformer) puts a LayerNorm on the residual path, so
at initialisation the gradient reaching the parameters near the output is large and the
lower layers' is small; it needs a learning-rate warm-up to train stably. Pre-LN
(x + f(LN(x))) keeps an identity path from the loss to every layer, its per-layer gradients
are well balanced at initialisation, and it trains without warm-up (Xiong et al. 2020, "On
Layer Normalization in the Transformer Architecture", Figure 3 and Section 3).

Xiong et al. analyse Xavier-initialised Transformers trained with Adam, so both placements
here get Xavier-normal weights in every block (``deepnorm_init(1.0)``, as in the deepnorm
lab) instead of the zoo GPT's GPT-2 init: its 1/sqrt(2L)-scaled residual projections already
flatten Post-LN's gradients at initialisation (a previous run measured a last/first-layer
ratio of 1.0 for Post-LN) and hid the imbalance this lab is about.

Two measurements on the bundled text (the same seed, so the same weights apart from the
placement):
- gradient norms at initialisation: for one batch, the norm of the gradient of each block's
  MLP output weight (``mlp.fc2``) and of all its parameters, layer by layer;
- training curves at two learning rates: Post-LN without and with a linear warm-up over
  the first half of the run, Pre-LN without warm-up. The paper warms up over thousands of
  steps; what matters is the share: a previous run with 40 of 150 steps at lr 1e-2 left
  Post-LN on the unigram plateau either way. Measured while choosing (6 layers, d = 64,
  400 steps, val loss): lr 1e-3, Post-LN 2.45 without warm-up, 2.10 with 200 warm-up steps,
  Pre-LN 2.13 without; lr 3e-3, Post-LN 3.25 (stuck on the plateau) vs 2.05, Pre-LN 2.06.
The conclusion compares validation losses (four fixed batches), steadier than the last
training steps' losses.
"""
import math

import numpy as np

from ._common import LabResult, Table, out_dir, pyplot, save_figure, smooth
from ._gpt import corpus, make_gpt, train_gpt


def xavier_gpt(seed, position, cfg):
    model = make_gpt(seed, norm_position=position, **cfg)
    for blk in model.blocks:
        blk.deepnorm_init(1.0)
    return model


def grad_norms_at_init(position, cfg, seed, batch=16):
    model = xavier_gpt(seed, position, cfg)
    x, y = corpus().batch("train", batch, model.block_size, generator=np.random.default_rng(seed))
    _, loss = model(x, y)
    loss.backward()
    fc2 = [float(np.linalg.norm(b.mlp.fc2.weight.grad.numpy())) for b in model.blocks]
    block = [math.sqrt(sum(float(np.sum(p.grad.numpy().astype(np.float64) ** 2)) for p in b.parameters()
                           if p.grad is not None)) for b in model.blocks]
    return fc2, block


def run(quick=True, out=None, seed=0):
    out = out_dir("pre-post", out)
    # one backward pass: cheap enough for quick mode at full size (at 6 layers, d = 32, Post-LN's
    # gradients did not yet grow towards the output)
    gcfg = dict(block_size=64, n_layer=12, n_head=4, d_model=64)
    if quick:
        # too small and short for the warm-up effect (at batch 8, even 250 steps of the full
        # model left warmed-up Post-LN on the plateau): quick mode checks the machinery only
        cfg = dict(block_size=32, n_layer=3, n_head=2, d_model=32)
        lrs, steps, warmup, batch = (3e-3,), 100, 50, 8
    else:
        cfg = dict(block_size=64, n_layer=6, n_head=4, d_model=64)
        lrs, steps, warmup, batch = (1e-3, 3e-3), 400, 200, 16
    grad_table = Table(f"gradient norm per layer at initialisation, GPT {gcfg}",
                       ["layer", "Pre-LN |dL/dW_fc2|", "Post-LN |dL/dW_fc2|", "Pre-LN block", "Post-LN block"])
    norms = {p: grad_norms_at_init(p, gcfg, seed) for p in ("pre", "post")}
    for i in range(gcfg["n_layer"]):
        grad_table.add(**{"layer": i + 1, "Pre-LN |dL/dW_fc2|": norms["pre"][0][i],
                          "Post-LN |dL/dW_fc2|": norms["post"][0][i], "Pre-LN block": norms["pre"][1][i],
                          "Post-LN block": norms["post"][1][i]})
    train_table = Table(f"GPT {cfg}: {steps} AdamW steps of batch {batch}, warm-up {warmup} steps or none",
                        ["placement", "lr", "warm-up", "final train loss (last 5)", "val loss", "diverged"])
    runs = {}
    # Pre-LN with warm-up is left out: Pre-LN without it is the claim, and the budget is tight
    variants = (("pre", 0), ("post", 0), ("post", warmup))
    for position, w in variants:
        for lr in lrs:
            model = xavier_gpt(seed, position, cfg)
            r = runs[position, lr, w] = train_gpt(model, steps, lr, warmup=w, batch_size=batch, seed=seed)
            train_table.add(**{"placement": "Pre-LN" if position == "pre" else "Post-LN", "lr": lr,
                               "warm-up": w, "final train loss (last 5)": float(np.mean(r["losses"][-5:])),
                               "val loss": r["val"], "diverged": r["diverged"]})
    plt = pyplot()
    fig, axes = plt.subplots(1, 1 + len(lrs), figsize=(4.2 * (1 + len(lrs)), 3.8))
    layers = np.arange(1, gcfg["n_layer"] + 1)
    axes[0].semilogy(layers, norms["pre"][0], "o-", label="Pre-LN")
    axes[0].semilogy(layers, norms["post"][0], "s-", label="Post-LN")
    axes[0].set_xlabel("layer")
    axes[0].set_ylabel("|dL/dW| of the MLP output weight")
    axes[0].set_title("gradients at initialisation (Xavier)")
    axes[0].legend()
    axes[0].grid(alpha=0.3, which="both")
    for ax, lr in zip(axes[1:], lrs):
        for k, (position, w) in enumerate(variants):
            ax.plot(smooth(runs[position, lr, w]["losses"], 5), color=f"C{k}",
                    label=f"{'Pre' if position == 'pre' else 'Post'}-LN, "
                          f"{f'warm-up {w} steps' if w else 'no warm-up'}")
        ax.set_title(f"lr {lr:g}")
        ax.set_xlabel("step")
        ax.set_ylabel("train loss (5-step mean, nats/char)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    path = save_figure(fig, out, "pre-post")
    pre, post = norms["pre"][0], norms["post"][0]
    post_ratio, pre_ratio = post[-1] / post[0], pre[-1] / pre[0]

    def val(p, lr, w):
        r = runs[p, lr, w]
        return float("inf") if r["diverged"] else r["val"]
    post_nw, post_w, pre_nw = ([val(p, lr, w) for lr in lrs] for p, w in (("post", 0), ("post", warmup), ("pre", 0)))
    # warm-up "needed" at an lr where it buys Post-LN a clear 0.1 nats/char; Pre-LN "does not
    # need it" if, without warm-up, it comes within 0.1 of the warmed-up Post-LN there
    needed = [lr for lr, a, b in zip(lrs, post_nw, post_w) if a > b + 0.1]
    pre_ok = all(pre_nw[lrs.index(lr)] < post_w[lrs.index(lr)] + 0.1 for lr in needed)
    imbalance = post_ratio > 1.0 and post_ratio > 1.5 * pre_ratio
    shape = "gradients grow towards the output in Post-LN only" if imbalance else "the imbalance did not show"
    grads = (f"at initialisation Post-LN's last/first-layer gradient ratio is {post_ratio:.2f} vs Pre-LN's "
             f"{pre_ratio:.2f} ({shape})")

    def fmt(v):
        return " / ".join(f"{x:.2f}" for x in v)
    losses = (f"val loss at lr {' / '.join(f'{lr:g}' for lr in lrs)}: Post-LN {fmt(post_nw)} without warm-up, "
              f"{fmt(post_w)} with {warmup} warm-up steps of {steps}, Pre-LN {fmt(pre_nw)} without")
    if needed and pre_ok:
        verdict = f"Post-LN needed the warm-up at lr {', '.join(f'{lr:g}' for lr in needed)} and Pre-LN did not"
    elif needed:
        verdict = (f"warm-up helped Post-LN at lr {', '.join(f'{lr:g}' for lr in needed)}, "
                   f"but Pre-LN also trailed without it")
    else:
        verdict = "the warm-up benefit for Post-LN did not show in this run"
    conclusion = f"{grads}; {losses}: {verdict}"
    return LabResult("pre-post", [grad_table, train_table], path, conclusion, quick,
                     {"grad_norms": norms, "losses": {f"{k[0]}-{k[1]}-{k[2]}": v["losses"] for k, v in runs.items()}})
