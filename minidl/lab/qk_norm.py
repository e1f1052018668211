"""Lab ``qk-norm``: attention-logit growth with the learning rate, and LayerNorm on queries and keys.

Dehghani et al. 2023 ("Scaling Vision Transformers to 22 Billion Parameters") saw training
diverge when attention logits grew without bound, the softmax collapsing onto one key per query
(near-zero entropy), and cured it by normalizing queries and keys (LayerNorm over each head's
features) before their dot product. Wortsman et al. 2023 ("Small-scale proxies for large-scale
Transformer training instabilities") reproduced the instability in small models by raising the
learning rate: the largest attention logit grows with the LR until the loss diverges, and with
qk-layernorm the final loss stays flat over a much wider range of LRs. Their summary number is
the LR sensitivity, E_lr[min(L(lr), L0) - L*]: the mean excess over the best loss L* across the
LR grid, a diverged run counting as the loss at initialisation L0.

Here: the zoo's Pre-LN GPT (tanh-GELU MLP, learned positions) on the bundled character text,
AdamW (beta2 0.95, no weight decay), a linear warm-up over a tenth of the steps, no gradient
clipping (which would hide the instability), the same seed and batches for every run, once with
plain attention and once with ``qk_norm="layer"``, over a log grid of learning rates. The largest
attention logit (max |q.k| / sqrt(D) over layers, heads and causal positions) is probed on a
fixed batch every few steps; the table reports its maximum over training.
"""
import math

import numpy as np

from ..autograd import grad_mode
from ..ops.heads import split_heads
from ._common import LabResult, Table, out_dir, pyplot, save_figure
from ._gpt import corpus, make_gpt, train_gpt

VARIANTS = ((None, "plain attention"), ("layer", "qk-norm (LayerNorm)"))


def max_attention_logit(model, x):
    """The largest |q.k| / sqrt(D) the model's attention computes on the ids x (B, T), over
    every layer, head and causal (query, key) pair, probed by forward hooks."""
    found = []

    def hook(attn, args, out):
        q, k, _ = split_heads(attn.qkv(args[0]), 3, attn.n_heads)
        if attn.qk_norm is not None:
            q, k = attn.q_norm(q), attn.k_norm(k)
        if attn.rotary is not None:
            q, k = attn.rotary(q), attn.rotary(k)
        s = np.abs(q.detach().numpy().astype(np.float64) @ k.detach().numpy().astype(np.float64).swapaxes(-1, -2))
        T = s.shape[-1]
        found.append(float(s[..., np.tril(np.ones((T, T), bool))].max() / math.sqrt(attn.head_dim)))

    handles = [blk.attn.register_forward_hook(hook) for blk in model.blocks]
    try:
        with grad_mode.no_grad():
            model(x)
    finally:
        for h in handles:
            h.remove()
    return max(found) if found else float("nan")


def train(model, steps, lr, batch_size, seed, probe_every):
    """Train ``model`` (see the module docstring); returns the per-step losses, the largest
    attention logit probed during training, the final validation loss (NaN when diverged) and
    whether the run diverged (a non-finite loss, or one above twice the uniform loss)."""
    probe = corpus().batch("val", 4, model.block_size, generator=np.random.default_rng(777))[0]
    logits = []

    def probe_logits(t):
        if t % probe_every == 0:
            logits.append(max_attention_logit(model, probe))

    run = train_gpt(model, steps, lr, warmup=max(1, steps // 10), batch_size=batch_size, seed=seed,
                    betas=(0.9, 0.95), before_step=probe_logits,
                    desc=f"GPT{' qk-norm' if model.blocks[0].attn.qk_norm else ''}, lr {lr:g}")
    logits.append(max_attention_logit(model, probe))
    finite = [v for v in logits if math.isfinite(v)]
    run["max_logit"] = max(finite) if finite else float("inf")
    return run


def lr_sensitivity(finals, initial):
    """Wortsman et al.'s E_lr[min(L(lr), L0) - L*], a diverged run (NaN) counting as L0."""
    capped = np.array([initial if not math.isfinite(v) else min(v, initial) for v in finals])
    return float(np.mean(capped - capped.min()))


def summarize(runs, lrs, initial, steps, cfg):
    """(summary table, conclusion, LR sensitivity and logit growth per variant) from the runs
    {(qk_norm, lr): train(...)'s dict}. The growth is the largest logit over the grid against
    the smallest lr's (a diverged run stops early, so the largest lr need not hold the largest)."""
    sens = {qk: lr_sensitivity([runs[(qk, lr)]["val"] for lr in lrs], initial) for qk, _ in VARIANTS}
    growth = {qk: max(runs[(qk, lr)]["max_logit"] for lr in lrs) / runs[(qk, lrs[0])]["max_logit"]
              for qk, _ in VARIANTS}
    n_div = {qk: sum(runs[(qk, lr)]["diverged"] for lr in lrs) for qk, _ in VARIANTS}
    summary = Table("LR sensitivity (Wortsman et al.: mean excess loss over the best, diverged = loss at init)",
                    ["attention", "LR sensitivity", "logit growth, largest over the lrs / smallest lr's",
                     "runs diverged"])
    for qk, label in VARIANTS:
        summary.add(**{"attention": label, "LR sensitivity": sens[qk],
                       "logit growth, largest over the lrs / smallest lr's": growth[qk], "runs diverged": n_div[qk]})
    s0, s1, g0, g1 = sens[None], sens["layer"], growth[None], growth["layer"]
    flatter = s1 < 0.5 * s0
    grows = g0 > 2 * g1
    verdict = ("reproduces" if flatter and grows else
               "reproduces only in part" if flatter or grows else "does not reproduce at this scale")
    shape = "flatter" if s1 < 0.9 * s0 else "about as flat" if s1 <= 1.1 * s0 else "steeper"
    conclusion = (f"over lr {lrs[0]:g}-{lrs[-1]:g}, qk-norm's LR sensitivity is {s1:.3f} vs {s0:.3f} without it "
                  f"({shape}), {n_div['layer']} vs {n_div[None]} runs diverged; the largest attention logit "
                  f"grows {g0:.3g}x over the lr grid without qk-norm and {g1:.3g}x with it: the claim {verdict}"
                  + ("" if flatter and grows else
                     f" (with {steps} steps of a {cfg['n_layer']}-layer d={cfg['d_model']} model; the papers' "
                     f"divergences come from larger, longer runs, and another instability, output-logit "
                     f"divergence, which qk-norm does not address, may end these runs first)"))
    return summary, conclusion, sens, growth


def run(quick=True, out=None, seed=0):
    out = out_dir("qk-norm", out)
    if quick:
        cfg = dict(block_size=32, n_layer=2, n_head=2, d_model=32)
        lrs, steps, batch, probe_every = [3e-3, 3e-2, 1e-1, 3e-1], 60, 8, 10
    else:
        cfg = dict(block_size=64, n_layer=4, n_head=4, d_model=128)
        lrs, steps, batch, probe_every = [1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0], 300, 16, 25
    initial = math.log(corpus().vocab_size)     # the loss of a uniform prediction, ~ the loss at init
    table = Table(f"GPT {cfg}, {steps} steps of batch {batch}, AdamW, warm-up {max(1, steps // 10)} steps",
                  ["attention", "lr", "largest attention logit", "final val loss", "diverged"])
    runs = {}
    for qk, label in VARIANTS:
        for lr in lrs:
            model = make_gpt(seed, qk_norm=qk, **cfg)
            r = runs[(qk, lr)] = train(model, steps, lr, batch, seed, probe_every)
            table.add(**{"attention": label, "lr": lr, "largest attention logit": r["max_logit"],
                         "final val loss": r["val"], "diverged": r["diverged"]})

    summary, conclusion, sens, growth = summarize(runs, lrs, initial, steps, cfg)

    plt = pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
    for qk, label in VARIANTS:
        a1.plot(lrs, [runs[(qk, lr)]["max_logit"] for lr in lrs], "o-", label=label)
        vals = [runs[(qk, lr)]["val"] for lr in lrs]
        line, = a2.plot(lrs, [min(v, initial) if math.isfinite(v) else initial for v in vals], "o-", label=label)
        bad = [lr for lr, v in zip(lrs, vals) if not math.isfinite(v)]
        if bad:
            a2.plot(bad, [initial] * len(bad), "x", color=line.get_color(), markersize=10, mew=2)
    for ax in (a1, a2):
        ax.set_xscale("log")
        ax.set_xlabel("learning rate")
        ax.grid(alpha=0.3)
        ax.legend()
    a1.set_yscale("log")
    a1.set_ylabel("largest attention logit |q.k|/sqrt(D)")
    a1.set_title("attention-logit growth with the learning rate")
    a2.axhline(initial, color="gray", lw=0.8, ls="--")
    a2.set_ylabel("final val loss (nats/char; x: diverged, at ln V)")
    a2.set_title(f"final loss vs learning rate ({steps} steps)")
    path = save_figure(fig, out, "qk-norm")

    return LabResult("qk-norm", [table, summary], path, conclusion, quick,
                     {"lrs": lrs, "sensitivity": {str(k): v for k, v in sens.items()},
                      "growth": {str(k): v for k, v in growth.items()},
                      "losses": {f"{k}-{lr:g}": r["losses"] for (k, lr), r in runs.items()}})
