"""Lab 1, ``padding``: BatchNorm vs masked BatchNorm vs LayerNorm on padded sequences.

Sequences of different lengths are padded into a batch. LayerNorm normalizes each token on
its own, so padding cannot reach a real token. BatchNorm averages over every position of the
batch: without a mask the padding positions (the pad embedding plus a position encoding)
enter its mean and variance, and those statistics drift with the share of padding in the
batch; the masked BatchNorm of minidl (``BatchNorm1d.forward(x, mask)``) excludes them
(PowerNorm, Shen et al. 2020, discusses why BN struggles in NLP for this and other reasons).

Three zoo encoder classifiers (pre-LN, masked attention and masked mean pooling in all
three) are trained on the same ``CountTask`` batches: LayerNorm, masked BatchNorm, and
BatchNorm with the mask withheld from the norm layers. Reported: test accuracy in eval mode
(running statistics); test accuracy with batch statistics (train-mode norms, as during
training) when the test batches are padded to a growing share of padding; and the drift of
the first BatchNorm's batch statistics, computed on the actual input of that layer, between
all positions and real tokens only.
"""
import numpy as np

from .. import optim, random
from ..autograd import grad_mode
from ..nn import functional as F
from ..tensor.factories import tensor
from ..zoo import TransformerEncoderClassifier
from ..zoo.transformer import SeqNorm
from ._common import LabResult, Table, out_dir, progress, pyplot, save_figure
from ._state import buffers_restored
from .seqdata import CountTask

VARIANTS = (("layer", "LayerNorm"), ("masked-batch", "masked BatchNorm"), ("batch", "BatchNorm (no mask)"))


def _withhold_mask(norm, args):
    """Forward pre-hook of a SeqNorm: call it without the padding mask, so that the padding
    enters its BatchNorm's statistics."""
    return args[:1]


def build(variant, task, max_len, d_model, seed):
    random.manual_seed(seed)
    norm = "layer" if variant == "layer" else "batch"
    model = TransformerEncoderClassifier(task.vocab_size, task.num_classes, max_len, d_model=d_model, n_head=2,
                                         n_layer=2, dropout=0.0, norm=norm)
    if variant == "batch":
        for m in model.modules():
            if isinstance(m, SeqNorm):
                m.register_forward_pre_hook(_withhold_mask)
    return model


def accuracy(model, batches, train_mode):
    """Accuracy over (ids, mask, labels) batches; train_mode uses batch statistics, and the
    running statistics that those forwards update are put back."""
    correct = total = 0
    model.train(train_mode)
    with grad_mode.no_grad(), buffers_restored(model):
        for ids, kpm, y in batches:
            pred = model(tensor(ids), kpm).numpy().argmax(1)
            correct += int((pred == y).sum())
            total += len(y)
    model.train()
    return correct / total


def first_norm_input(model, ids, kpm):
    """What the first block's first norm receives (pre-LN: the embedded tokens), as (B, T, d),
    caught by a forward pre-hook during one eval-mode forward."""
    norm = model.blocks[0].norm1
    seen = []
    handle = norm.register_forward_pre_hook(lambda module, args: seen.append(args[0].detach().numpy().copy())
                                            if not seen else None)
    was_training = model.training
    try:
        with grad_mode.no_grad():
            model.eval()(tensor(ids), kpm)
    finally:
        handle.remove()
        model.train(was_training)
    return seen[0].astype(np.float64)


def drift(x, kpm):
    """(mean |mu_all - mu_real| / sigma_real, mean sigma_all^2 / sigma_real^2) over channels."""
    flat, real = x.reshape(-1, x.shape[-1]), x[~kpm]
    mu_a, mu_r = flat.mean(0), real.mean(0)
    va, vr = flat.var(0), real.var(0)
    return float(np.mean(np.abs(mu_a - mu_r) / np.sqrt(vr))), float(np.mean(va / vr))


def run(quick=True, out=None, seed=0):
    out = out_dir("padding", out)
    steps, batch, d_model, n_test = (40, 16, 32, 96) if quick else (300, 32, 64, 512)
    task = CountTask()
    max_len = task.max_len * 7
    rng = np.random.default_rng(seed)
    train_batches = [task.sample(batch, rng) for _ in range(steps)]
    test_seqs, test_y = task.sample(n_test, np.random.default_rng(seed + 1))
    shares = (0.0, 0.5, 0.75)

    def test_batches(share):
        out_ = []
        for i in range(0, n_test, batch):
            seqs = test_seqs[i:i + batch]
            longest = max(len(s) for s in seqs)
            T = longest if share == 0 else max(longest, int(np.ceil(np.mean([len(s) for s in seqs]) / (1 - share))))
            ids, kpm = task.pad(seqs, min(T, max_len))
            out_.append((ids, kpm, test_y[i:i + batch]))
        return out_

    by_share = {p: test_batches(p) for p in shares}
    actual = {p: float(np.mean([b[1].mean() for b in by_share[p]])) for p in shares}
    acc_table = Table(f"encoder classifier on CountTask, {steps} AdamW steps of batch {batch}: test accuracy",
                      ["model", "eval mode"] + [f"batch stats, {100 * actual[p]:.0f}% pad" for p in shares])
    results, losses = {}, {}
    for variant, name in VARIANTS:
        model = build(variant, task, max_len, d_model, seed)
        opt = optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
        losses[variant] = []
        for seqs, y in progress(train_batches, name):
            ids, kpm = task.pad(seqs)
            loss = F.cross_entropy(model(tensor(ids), kpm), tensor(y))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses[variant].append(float(loss.item()))
        row = {"model": name, "eval mode": accuracy(model, by_share[0.0], False)}
        for p in shares:
            row[f"batch stats, {100 * actual[p]:.0f}% pad"] = accuracy(model, by_share[p], True)
        results[variant] = row
        acc_table.add(**row)
        if variant == "batch":
            unmasked_model = model
    drift_shares = (0.0, 0.6, 0.75, 0.9)   # 0: padded to the batch's longest sequence
    drift_table = Table("first BatchNorm's batch statistics: all positions vs real tokens (unmasked model)",
                        ["padding share", "|mean shift| / std", "variance ratio"])
    drifts = []
    seqs = test_seqs[:batch]
    for p in drift_shares:
        longest = max(len(s) for s in seqs)
        T = max(longest, int(np.ceil(np.mean([len(s) for s in seqs]) / (1 - p))))
        ids, kpm = task.pad(seqs, min(T, max_len))
        shift, ratio = drift(first_norm_input(unmasked_model, ids, kpm), kpm)
        drifts.append((float(kpm.mean()), shift, ratio))
        drift_table.add(**{"padding share": float(kpm.mean()), "|mean shift| / std": shift,
                           "variance ratio": ratio})
    plt = pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    ps = [d[0] for d in drifts]
    a1.plot(ps, [d[1] for d in drifts], "o-", label="|mean(all) - mean(real)| / std(real)")
    a1.plot(ps, [d[2] for d in drifts], "s-", label="var(all) / var(real)")
    a1.axhline(1.0, color="gray", lw=0.6, ls=":")
    a1.set_xlabel("share of padding in the batch")
    a1.set_title("BatchNorm statistics with padding included")
    a1.legend(fontsize=8)
    a1.grid(alpha=0.3)
    cols = [c for c in acc_table.columns if c.startswith("batch stats")]
    xs = [actual[p] for p in shares]
    for k, (variant, name) in enumerate(VARIANTS):
        a2.plot(xs, [100 * results[variant][c] for c in cols], "o-", color=f"C{k}", label=f"{name}, batch stats")
        a2.axhline(100 * results[variant]["eval mode"], color=f"C{k}", ls="--", lw=0.8)
    a2.set_xlabel("share of padding in the test batches")
    a2.set_ylabel("test accuracy (%)  (dashed: eval mode)")
    a2.set_ylim(0, 100)
    a2.set_title("accuracy vs padding")
    a2.legend(fontsize=8)
    a2.grid(alpha=0.3)
    path = save_figure(fig, out, "padding")
    bn = [results["batch"][c] for c in cols]
    stable = {v: max(results[v][c] for c in cols) - min(results[v][c] for c in cols) for v, _ in VARIANTS}
    conclusion = (f"with padding in its statistics BatchNorm's mean moves by {drifts[-1][1]:.2f} std at "
                  f"{100 * drifts[-1][0]:.0f}% padding (variance ratio {drifts[-1][2]:.2f}); with batch statistics "
                  f"its test accuracy goes {100 * bn[0]:.0f}% -> {100 * bn[-1]:.0f}% as padding grows, while "
                  f"LayerNorm and masked BatchNorm vary by {100 * stable['layer']:.0f} and "
                  f"{100 * stable['masked-batch']:.0f} points; eval-mode accuracy: "
                  + ", ".join(f"{n} {100 * results[v]['eval mode']:.0f}%" for v, n in VARIANTS))
    return LabResult("padding", [acc_table, drift_table], path, conclusion, quick,
                     {"results": results, "drifts": drifts, "losses": losses})
