"""Lab, ``renorm``: non-i.i.d. mini-batches break BatchNorm at test time; Batch Renormalization
does not (Ioffe 2017, "Batch Renormalization"; Wu & Johnson 2021, "Rethinking
'Batch' in BatchNorm", on population statistics).

When every training batch holds only a few classes, BatchNorm's batch statistics describe those
classes, not the data: the network learns to work with features normalized per such batch, and
at test time the running averages (an average over many batches' means and variances) normalize
differently, so eval-mode accuracy falls although train-mode accuracy on batches drawn the same
way is high. Batch Renormalization trains with the running statistics through its correction
(r, d) and so is tested as it was trained.

Protocol: a small VGG (3x3 convolutions, norm, ReLU, max-pools; ``zoo.vgg``) on the colour shapes
of ``minidl.data.shapes`` (10 classes), SGD with momentum; batches of 32 drawn i.i.d., or
non-i.i.d. with all 32 images from CLASSES_PER_BATCH classes (Ioffe's setting, at this scale).
Trained: BatchNorm on i.i.d. batches (the reference), BatchNorm on non-i.i.d. batches, and
BatchRenorm2d on non-i.i.d. batches (r_max 1 -> 3, d_max 0 -> 5 ramped in after a BatchNorm
warm-up, as in the paper). Measured on the test set, eval mode, with: the moving averages; precise
population statistics recomputed after training from the training set in i.i.d. batches (Wu &
Johnson's "precise BN": the exact average over many batches instead of an exponential moving
average of a changing network); and the same recomputed from non-i.i.d. batches (what the
training batches averaged to). Also the train-mode accuracy on non-i.i.d. test batches, the
normalization the network was trained with (a diagnostic: it uses the test labels to group).
"""
import numpy as np

from .. import nn, optim, random
from ..autograd import grad_mode
from ..data.shapes import shapes_arrays
from ..tensor.factories import tensor
from ..zoo.vgg import VGG
from ._common import LabResult, Table, classifier_step, eval_accuracy, out_dir, progress, pyplot, save_figure, smooth
from ._state import buffers_restored

CLASSES_PER_BATCH = 2
LR = 0.02
BATCH = 32
NUM_CLASSES = 10
DIFFICULTY = 0.2
# (train images, test images, image size, steps, VGG cfg) per mode
QUICK = (1000, 300, 16, 300, (16, "M", 32, "M", 64))
FULL = (3000, 1000, 16, 1500, (32, "M", 64, "M", 128))
MODELS = (("BatchNorm, i.i.d. batches", "batch", False), ("BatchNorm, non-i.i.d. batches", "batch", True),
          ("BatchRenorm, non-i.i.d. batches", "renorm", True))


def batches(y, steps, non_iid, rng, classes_per_batch=None, batch=BATCH):
    """Index arrays of ``batch`` images: i.i.d. draws, or (non_iid) ``batch / classes_per_batch``
    images of each of ``classes_per_batch`` (default CLASSES_PER_BATCH) distinct classes chosen at random."""
    classes_per_batch = classes_per_batch or CLASSES_PER_BATCH
    by_class = [np.flatnonzero(y == c) for c in range(int(y.max()) + 1)]
    for _ in range(steps):
        if not non_iid:
            yield rng.choice(len(y), batch, replace=False)
            continue
        classes = rng.choice(len(by_class), classes_per_batch, replace=False)
        per = batch // classes_per_batch
        yield np.concatenate([rng.choice(by_class[c], per, replace=False) for c in classes])


def make_model(kind, cfg, steps, seed):
    random.manual_seed(seed)
    if kind == "batch":
        norm = "batch"
    else:   # BatchNorm for the first 10% of the steps, then the limits ramp in over the next 30%
        warmup, ramp = steps // 10, (3 * steps) // 10

        def norm(c):
            return nn.BatchRenorm2d(c, momentum=0.05, r_max=3.0, d_max=5.0, warmup_steps=warmup, ramp_steps=ramp)
    return VGG(cfg, in_channels=3, num_classes=NUM_CLASSES, norm=norm)


def train(model, xtr, ytr, steps, non_iid, seed, desc):
    opt = optim.SGD(model.parameters(), lr=LR, momentum=0.9, weight_decay=5e-4)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    rng = np.random.default_rng((seed, int(non_iid)))
    losses = []
    model.train()
    for idx in progress(batches(ytr, steps, non_iid, rng), desc):
        losses.append(classifier_step(model, opt, sched, xtr[idx], ytr[idx]))
    return losses


def train_mode_accuracy(model, x, y, non_iid, seed):
    """Accuracy with batch statistics on test batches drawn as in training (no estimate moves)."""
    rng = np.random.default_rng((seed, 99))
    correct = total = 0
    with grad_mode.no_grad(), buffers_restored(model):
        model.train()
        for idx in batches(y, max(1, len(y) // BATCH), non_iid, rng):
            correct += int((model(tensor(x[idx])).numpy().argmax(1) == y[idx]).sum())
            total += len(idx)
    return correct / total


def precise_statistics(model, x, y, non_iid, seed, num_batches):
    """Replace every BatchNorm's running estimates by the exact average of ``num_batches``
    training batches' statistics (cumulative average, momentum None), weights fixed."""
    norms = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    saved = [m.momentum for m in norms]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None
    rng = np.random.default_rng((seed, 7, int(non_iid)))
    with grad_mode.no_grad():
        model.train()
        for idx in batches(y, num_batches, non_iid, rng):
            model(tensor(x[idx]))
    for m, momentum in zip(norms, saved):
        m.momentum = momentum


def run(quick=True, out=None, seed=0):
    out = out_dir("renorm", out)
    n_train, n_test, size, steps, cfg = QUICK if quick else FULL
    (xtr, ytr), (xte, yte) = [shapes_arrays(split, n, NUM_CLASSES, DIFFICULTY, size) for split, n in
                              (("train", n_train), ("test", n_test))]
    xtr, xte = (xtr - 0.5) / 0.25, (xte - 0.5) / 0.25
    table = Table(f"VGG {cfg} on shapes ({size}x{size}, {NUM_CLASSES} classes), {steps} steps of batch {BATCH}; "
                  f"non-i.i.d.: {CLASSES_PER_BATCH} classes per batch. Test accuracy",
                  ["model", "eval: moving averages", "eval: precise (i.i.d.)", "eval: precise (non-i.i.d.)",
                   "train mode, non-i.i.d. test batches", "final train loss"])
    acc, curves = {}, {}
    precise_batches = 50 if quick else 200
    for label, kind, non_iid in MODELS:
        model = make_model(kind, cfg, steps, seed)
        curves[label] = train(model, xtr, ytr, steps, non_iid, seed, label)
        row = {"model": label, "eval: moving averages": eval_accuracy(model, xte, yte),
               "train mode, non-i.i.d. test batches": train_mode_accuracy(model, xte, yte, True, seed),
               "final train loss": float(np.mean(curves[label][-20:]))}
        if kind == "batch":
            for name, flag in (("eval: precise (i.i.d.)", False), ("eval: precise (non-i.i.d.)", True)):
                with buffers_restored(model):
                    precise_statistics(model, xtr, ytr, flag, seed, precise_batches)
                    row[name] = eval_accuracy(model, xte, yte)
        else:
            row["eval: precise (i.i.d.)"] = row["eval: precise (non-i.i.d.)"] = "-"
        acc[label] = row
        table.add(**row)
    path = plot(acc, curves, steps, out)
    conclusion = conclude(acc)
    return LabResult("renorm", [table], path, conclusion, quick, {"acc": acc, "losses": curves})


def conclude(acc):
    iid, bn, rn = (acc[label] for label, _, _ in MODELS)
    key = "eval: moving averages"
    drop = iid[key] - bn[key]
    closed = rn[key] - bn[key]
    precise_gain = bn["eval: precise (i.i.d.)"] - bn[key]
    if iid[key] < 2.5 / NUM_CLASSES:
        return (f"the i.i.d. BatchNorm reference stayed near chance ({100 * iid[key]:.1f}%, chance "
                f"{100 / NUM_CLASSES:.0f}%): too little training to test the claim (quick mode only checks that the "
                f"protocol runs)")
    parts = []
    if drop > 0.05:
        parts.append(f"non-i.i.d. batches ({CLASSES_PER_BATCH} classes each) cost BatchNorm {100 * drop:.1f} points "
                     f"of eval accuracy ({100 * iid[key]:.1f}% -> {100 * bn[key]:.1f}%; in train mode on test batches "
                     f"drawn as in training {100 * bn['train mode, non-i.i.d. test batches']:.1f}%)")
    else:
        parts.append(f"non-i.i.d. batches did not clearly hurt BatchNorm's eval accuracy here ({100 * iid[key]:.1f}% "
                     f"i.i.d. vs {100 * bn[key]:.1f}% non-i.i.d.)")
    if drop <= 0.05:
        parts.append(f"with no gap to close, Batch Renormalization reaches {100 * rn[key]:.1f}% "
                     f"({100 * closed:+.1f} points vs BatchNorm on the same batches)")
    elif closed > 0.05 and rn[key] >= iid[key] - max(0.5 * drop, 0.03):
        parts.append(f"Batch Renormalization closes most of the gap ({100 * rn[key]:.1f}%, "
                     f"{100 * closed:+.1f} points over BatchNorm)")
    elif closed > 0.02:
        parts.append(f"Batch Renormalization recovers part of it ({100 * rn[key]:.1f}%, {100 * closed:+.1f} points)")
    else:
        parts.append(f"Batch Renormalization did not recover accuracy at this scale ({100 * rn[key]:.1f}%, "
                     f"{100 * closed:+.1f} points; the short run leaves little time after its warm-up and ramp)")
    parts.append(f"recomputing BatchNorm's population statistics precisely from i.i.d. batches changes its "
                 f"eval accuracy by {100 * precise_gain:+.1f} points (non-i.i.d.-trained) and "
                 f"{100 * (iid['eval: precise (i.i.d.)'] - iid[key]):+.1f} (i.i.d.-trained)"
                 + ("" if drop <= 0.05 else ": precise statistics do not repair a train/test normalization mismatch"
                    if precise_gain < max(0.5 * drop, 0.03) else ": here they repair much of it"))
    return "; ".join(parts)


def plot(acc, curves, steps, out):
    plt = pyplot()
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4))
    labels = [label for label, _, _ in MODELS]
    cols = ["eval: moving averages", "eval: precise (i.i.d.)", "eval: precise (non-i.i.d.)",
            "train mode, non-i.i.d. test batches"]
    width = 0.2
    for k, col in enumerate(cols):
        vals = [100 * acc[m][col] if isinstance(acc[m][col], float) else 0.0 for m in labels]
        ax0.bar(np.arange(len(labels)) + (k - 1.5) * width, vals, width, label=col.replace("eval: ", "eval, "))
    ax0.set_xticks(np.arange(len(labels)))
    ax0.set_xticklabels([m.replace(", ", "\n") for m in labels], fontsize=8)
    ax0.set_ylabel("test accuracy (%)")
    ax0.set_ylim(0, 100)
    ax0.legend(fontsize=7, loc="upper right")
    ax0.set_title("test accuracy by the statistics used", fontsize=10)
    for k, m in enumerate(labels):
        ax1.plot(np.arange(1, steps + 1), smooth(curves[m], 20), color=f"C{k}", label=m)
    ax1.set_xlabel("training step")
    ax1.set_ylabel("training loss (moving average of 20)")
    ax1.set_title("training loss", fontsize=10)
    ax1.grid(alpha=0.3)
    ax1.legend(fontsize=8)
    fig.suptitle(f"Non-i.i.d. batches ({CLASSES_PER_BATCH} classes per batch of {BATCH}): BatchNorm vs "
                 f"Batch Renormalization", fontsize=11)
    return save_figure(fig, out, "renorm")
