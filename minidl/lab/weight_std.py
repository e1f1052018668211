"""Lab, ``weight-std``: GroupNorm + Weight Standardization at batch 1-2 vs BatchNorm at batch 64
vs GroupNorm alone (Qiao et al. 2019, "Micro-Batch Training with Batch-Channel Normalization and
Weight Standardization").

Weight Standardization (``nn.WSConv2d``) standardizes every filter to zero mean and unit variance
before the convolution; the paper argues that it smooths the loss landscape (it removes the
filters' scale and mean from the optimization) and reports that GroupNorm + WS trained at 1-2
images per batch matches or beats BatchNorm trained at large batches, where GroupNorm alone
falls short of BatchNorm.

Protocol, the batch-size experiment's (Wu & He's): the same number of epochs at every batch
size, SGD (momentum 0.9, weight decay 5e-4) at lr 0.1 * batch / 64 with cosine decay, test
accuracy in eval mode; a small VGG (``zoo.vgg``; ``weight_std=True`` for WS) on the colour shapes
of ``minidl.data.shapes`` (10 classes). Runs: BatchNorm at batch 64 (the reference) and at batch
2, GroupNorm at 64 and at 2, GroupNorm + WS at 64, 2 and 1.
"""
import numpy as np

from .. import optim, random
from ..data.shapes import shapes_arrays
from ..zoo.vgg import VGG
from ._common import LabResult, Table, classifier_step, eval_accuracy, out_dir, progress, pyplot, save_figure

NUM_CLASSES = 10
DIFFICULTY = 0.2
BASE_LR = 0.1
# (train images, test images, image size, epochs, VGG cfg) per mode
QUICK = (256, 300, 16, 2, (16, "M", 32, "M", 64))
FULL = (1000, 500, 16, 4, (32, "M", 64, "M", 128))
RUNS = (("BatchNorm", "batch", False, (64, 2)), ("GroupNorm", "group", False, (64, 2)),
        ("GroupNorm + WS", "group", True, (64, 2, 1)))


def train(norm, weight_std, batch, epochs, cfg, xtr, ytr, seed, desc):
    random.manual_seed(seed)
    model = VGG(cfg, in_channels=3, num_classes=NUM_CLASSES, norm=norm, weight_std=weight_std)
    opt = optim.SGD(model.parameters(), lr=BASE_LR * batch / 64, momentum=0.9, weight_decay=5e-4)
    per_epoch = max(1, len(xtr) // batch)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs * per_epoch)
    rng = np.random.default_rng((seed, batch))
    losses = []
    for step in progress(range(epochs * per_epoch), desc):
        if step % per_epoch == 0:
            perm = rng.permutation(len(xtr))
        idx = perm[(step % per_epoch) * batch:(step % per_epoch + 1) * batch]
        losses.append(classifier_step(model, opt, sched, xtr[idx], ytr[idx]))
    return model, losses


def run(quick=True, out=None, seed=0):
    out = out_dir("weight-std", out)
    n_train, n_test, size, epochs, cfg = QUICK if quick else FULL
    (xtr, ytr), (xte, yte) = [shapes_arrays(split, n, NUM_CLASSES, DIFFICULTY, size) for split, n in
                              (("train", n_train), ("test", n_test))]
    xtr, xte = (xtr - 0.5) / 0.25, (xte - 0.5) / 0.25
    table = Table(f"VGG {cfg} on shapes ({size}x{size}, {n_train} train images, {NUM_CLASSES} classes), {epochs} "
                  f"epochs at every batch size, lr {BASE_LR:g} * batch / 64, cosine decay",
                  ["model", "batch size", "test acc", "train acc", "final train loss"])
    acc = {}
    for name, norm, ws, sizes in RUNS:
        for b in sizes:
            model, losses = train(norm, ws, b, epochs, cfg, xtr, ytr, seed, f"{name}, batch {b}")
            acc[name, b] = eval_accuracy(model, xte, yte)
            table.add(**{"model": name, "batch size": b, "test acc": acc[name, b],
                         "train acc": eval_accuracy(model, xtr, ytr),
                         "final train loss": float(np.mean(losses[-max(1, len(losses) // 10):]))})
    path = plot(acc, f"VGG on {size}x{size} shapes, {epochs} epochs, lr scaled with the batch", out)
    return LabResult("weight-std", [table], path, conclude(acc), quick, {"acc": acc})


def conclude(acc):
    bn64, gn2, ws2, ws1 = acc["BatchNorm", 64], acc["GroupNorm", 2], acc["GroupNorm + WS", 2], acc["GroupNorm + WS", 1]
    bn2, gn64 = acc["BatchNorm", 2], acc["GroupNorm", 64]
    best_ws_small = max(ws1, ws2)
    if max(acc.values()) < 2.5 / NUM_CLASSES:
        return (f"every run stayed near chance (best {100 * max(acc.values()):.1f}%, chance {100 / NUM_CLASSES:.0f}%): "
                f"too little training to test the claim (quick mode only checks that the sweep runs)")
    claim = best_ws_small >= bn64 - 0.02 and ws2 > gn2 + 0.01
    head = (f"GroupNorm + WS at batch 1/2 reaches {100 * ws1:.1f}%/{100 * ws2:.1f}% vs BatchNorm at batch 64 "
            f"{100 * bn64:.1f}% and GroupNorm alone at batch 2 {100 * gn2:.1f}%")
    ws_gain = (f"WS changes GroupNorm at batch 2 by {100 * (ws2 - gn2):+.1f} points" if abs(ws2 - gn2) > 0.01
               else "WS leaves GroupNorm at batch 2 unchanged")
    if bn64 + 0.02 < max(bn2, acc["GroupNorm + WS", 64]):
        # The claim measures WS at micro-batches against BatchNorm's *large-batch* accuracy; a batch-64
        # BatchNorm below the same model at batch 2 (or below GN + WS at 64) has not converged in the
        # equal-epoch budget (batch 64 takes 32x fewer steps), so beating it tests nothing.
        verdict = (f"not a test of the claim: the BatchNorm baseline at batch 64 is under-trained ({100 * bn64:.1f}% "
                   f"vs {100 * bn2:.1f}% at batch 2; equal epochs give batch 64 32x fewer steps); {ws_gain}")
    elif claim:
        verdict = ("the paper's claim reproduces: WS lifts GroupNorm to BatchNorm's large-batch accuracy at "
                   "micro-batches")
    elif ws2 > gn2 + 0.01:
        verdict = (f"WS helps GroupNorm at batch 2 ({100 * (ws2 - gn2):+.1f} points) but does not reach BatchNorm "
                   f"at 64 ({100 * (best_ws_small - bn64):+.1f}) at this scale")
    else:
        verdict = (f"the claim does not reproduce at this scale: {ws_gain} (a short run on a small task; the paper "
                   f"trains ImageNet for 90 epochs)")
    return f"{head}; {verdict}; for reference BatchNorm at batch 2 {100 * bn2:.1f}%, GroupNorm at 64 {100 * gn64:.1f}%"


def plot(acc, title, out):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for k, (name, _, _, sizes) in enumerate(RUNS):
        ax.plot(sizes, [100 * acc[name, b] for b in sizes], "o-", color=f"C{k}", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xticks([1, 2, 64])
    ax.set_xticklabels(["1", "2", "64"])
    ax.set_xlabel("batch size")
    ax.set_ylabel("test accuracy (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=10)
    return save_figure(fig, out, "weight-std")
