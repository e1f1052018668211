"""Lab 4, ``pre-post``: Pre-LN vs Post-LN GPT, with and without learning-rate warm-up.

Post-LN (LN(x + f(x)), the original Transformer) puts a LayerNorm on the residual path, so
at initialisation the gradient reaching the parameters near the output is large and the
lower layers' is small; it needs a learning-rate warm-up to train stably. Pre-LN
(x + f(LN(x))) keeps an identity path from the loss to every layer, its per-layer gradients
are well balanced at initialisation, and it trains without warm-up (Xiong et al. 2020, "On
Layer Normalization in the Transformer Architecture", Figure 3 and Section 3).

Two measurements on the zoo GPT and the bundled text:
- gradient norms at initialisation: for one batch, the norm of the gradient of each block's
  MLP output weight (``mlp.fc2``) and of all its parameters, layer by layer, for both
  placements (the same seed, so the same weights apart from the placement);
- training curves at several learning rates, with a linear warm-up and without, for both.
"""
import math

import numpy as np

from ._common import LabResult, Table, out_dir, pyplot, save_figure, smooth
from ._gpt import corpus, make_gpt, train_gpt


def grad_norms_at_init(position, cfg, seed, batch=16):
    model = make_gpt(seed, norm_position=position, **cfg)
    x, y = corpus().batch("train", batch, model.block_size, generator=np.random.default_rng(seed))
    _, loss = model(x, y)
    loss.backward()
    fc2 = [float(np.linalg.norm(b.mlp.fc2.weight.grad.numpy())) for b in model.blocks]
    block = [math.sqrt(sum(float(np.sum(p.grad.numpy().astype(np.float64) ** 2)) for p in b.parameters()
                           if p.grad is not None)) for b in model.blocks]
    return fc2, block


def run(quick=True, out=None, seed=0):
    out = out_dir("pre-post", out)
    if quick:
        cfg = dict(block_size=32, n_layer=3, n_head=2, d_model=32)
        gcfg = dict(block_size=32, n_layer=6, n_head=2, d_model=32)
        lrs, steps, warmup, batch = (2e-2,), 30, 15, 8
    else:
        cfg = dict(block_size=64, n_layer=6, n_head=4, d_model=64)
        gcfg = dict(block_size=64, n_layer=12, n_head=4, d_model=64)
        lrs, steps, warmup, batch = (1e-3, 1e-2), 150, 40, 16
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
    for position in ("pre", "post"):
        for lr in lrs:
            for w in (0, warmup):
                model = make_gpt(seed, norm_position=position, **cfg)
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
    axes[0].set_title("gradients at initialisation")
    axes[0].legend()
    axes[0].grid(alpha=0.3, which="both")
    for ax, lr in zip(axes[1:], lrs):
        for k, position in enumerate(("pre", "post")):
            for w, ls in ((0, "--"), (warmup, "-")):
                loss = runs[position, lr, w]["losses"]
                ax.plot(smooth(loss, 3), ls, color=f"C{k}",
                        label=f"{'Pre' if position == 'pre' else 'Post'}-LN, {'warm-up' if w else 'no warm-up'}")
        ax.set_title(f"lr {lr:g}")
        ax.set_xlabel("step")
        ax.set_ylabel("train loss (nats/char)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    path = save_figure(fig, out, "pre-post")
    pre, post = norms["pre"][0], norms["post"][0]
    post_ratio, pre_ratio = post[-1] / post[0], pre[-1] / pre[0]
    top = max(lrs)

    def final(p, lr, w):
        r = runs[p, lr, w]
        return float("inf") if r["diverged"] else float(np.mean(r["losses"][-5:]))
    post_nw, post_w = final("post", top, 0), final("post", top, warmup)
    pre_nw = final("pre", top, 0)
    conclusion = (f"at initialisation Post-LN's last/first-layer gradient ratio is {post_ratio:.1f} vs Pre-LN's "
                  f"{pre_ratio:.1f}; at lr {top:g} Post-LN ends at loss {post_nw:.2f} without warm-up and "
                  f"{post_w:.2f} with it, Pre-LN at {pre_nw:.2f} without warm-up"
                  + ("" if post_nw > post_w + 0.05 else " (the warm-up benefit for Post-LN did not show in this run)"))
    return LabResult("pre-post", [grad_table, train_table], path, conclusion, quick,
                     {"grad_norms": norms, "losses": {f"{k[0]}-{k[1]}-{k[2]}": v["losses"] for k, v in runs.items()}})
