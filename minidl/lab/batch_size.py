"""Lab 2, ``batch-size``: BatchNorm vs GroupNorm vs LayerNorm in ResNet-8 across batch sizes.

BatchNorm estimates each channel's statistics from the batch: with 2 or 4 images the
estimate is noisy in training, and the running averages used at test time are averages of
noisy estimates, so accuracy drops at small batches (Wu & He 2018, "Group Normalization",
Figure 1). GroupNorm and LayerNorm compute per-sample statistics and do not care.

Protocol: the zoo ResNet-8 on the digits, the same number of SGD steps (momentum 0.9, the
same learning rate) at every batch size, test accuracy in eval mode on the 360 test images.
A fixed step budget gives larger batches more data, for every norm alike; the comparison is
between norms at each batch size. Batch 1 is tried for BatchNorm alone: with one image per
batch its statistics are per-image (instance-norm-like) in training but running averages at
test time; if the layer refuses (one value per channel), the error is reported instead.
"""
import numpy as np

from .. import optim, random
from ..autograd import grad_mode
from ..data.digits import digits_arrays
from ..nn import functional as F
from ..tensor.factories import tensor
from ..zoo import resnet8
from ._common import LabResult, Table, out_dir, pyplot, save_figure

NORMS = (("batch", "BatchNorm"), ("group", "GroupNorm"), ("layer", "LayerNorm"))


def train_resnet(norm, batch, steps, width, lr, seed, xtr, ytr):
    random.manual_seed(seed)
    model = resnet8(in_channels=1, num_classes=10, norm=norm, width=width)
    opt = optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    rng = np.random.default_rng((seed, batch))
    losses = []
    for _ in range(steps):
        idx = rng.choice(len(xtr), batch, replace=False)
        loss = F.cross_entropy(model(tensor(xtr[idx])), tensor(ytr[idx]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.item()))
    return model, losses


def test_accuracy(model, x, y):
    model.eval()
    with grad_mode.no_grad():
        pred = model(tensor(x)).numpy().argmax(1)
    model.train()
    return float((pred == y).mean())


def run(quick=True, out=None, seed=0):
    out = out_dir("batch-size", out)
    steps, width = (30, 4) if quick else (300, 8)
    lr = 0.02
    sizes = (2, 4, 16, 64)
    xtr, ytr = digits_arrays("train")
    xte, yte = digits_arrays("test")
    table = Table(f"ResNet-8 (width {width}) on digits: test accuracy after {steps} SGD steps (lr {lr})",
                  ["norm", "batch size", "test acc", "final train loss"])
    acc = {}
    batch1 = None
    try:
        model, losses = train_resnet("batch", 1, steps, width, lr, seed, xtr, ytr)
        batch1 = test_accuracy(model, xte, yte)
        table.add(**{"norm": "BatchNorm", "batch size": 1, "test acc": batch1,
                     "final train loss": float(np.mean(losses[-5:]))})
    except ValueError as exc:
        batch1 = str(exc).split(",")[0]
        table.add(**{"norm": "BatchNorm", "batch size": 1, "test acc": "error", "final train loss": batch1})
    for norm, name in NORMS:
        for b in sizes:
            model, losses = train_resnet(norm, b, steps, width, lr, seed, xtr, ytr)
            acc[norm, b] = test_accuracy(model, xte, yte)
            table.add(**{"norm": name, "batch size": b, "test acc": acc[norm, b],
                         "final train loss": float(np.mean(losses[-5:]))})
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for k, (norm, name) in enumerate(NORMS):
        ax.plot(sizes, [100 * acc[norm, b] for b in sizes], "o-", color=f"C{k}", label=name)
    if isinstance(batch1, float):
        ax.plot([1], [100 * batch1], "x", color="C0", ms=9, label="BatchNorm, batch 1")
    else:
        ax.annotate(f"BatchNorm at batch 1:\n{batch1}", (1, 5), fontsize=7, color="C0")
    ax.set_xscale("log", base=2)
    ax.set_xticks([1] + list(sizes))
    ax.set_xticklabels(["1"] + [str(b) for b in sizes])
    ax.set_xlabel("batch size")
    ax.set_ylabel("test accuracy (%)")
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(f"ResNet-8 on digits, {steps} steps at each batch size")
    path = save_figure(fig, out, "batch-size")
    small = min(sizes)
    gap_small = max(acc["group", small], acc["layer", small]) - acc["batch", small]
    gap_large = max(acc["group", max(sizes)], acc["layer", max(sizes)]) - acc["batch", max(sizes)]
    if gap_small > 0.05 and gap_small > gap_large:
        verdict = (f"at batch {small} BatchNorm trails the per-sample norms by {100 * gap_small:.0f} points, "
                   f"at batch {max(sizes)} by {100 * gap_large:.0f}: its small-batch penalty shows")
    else:
        verdict = (f"the small-batch penalty for BatchNorm did not show clearly in this run (gap to the best "
                   f"per-sample norm {100 * gap_small:.0f} points at batch {small}, {100 * gap_large:.0f} at "
                   f"batch {max(sizes)})")
    b1 = f"{100 * batch1:.0f}%" if isinstance(batch1, float) else f"an error ({batch1})"
    conclusion = f"{verdict}; BatchNorm at batch 1 gives {b1}"
    return LabResult("batch-size", [table], path, conclusion, quick, {"acc": acc, "batch1": batch1})
