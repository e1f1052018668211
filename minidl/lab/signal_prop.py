"""Lab, ``signal-prop``: the residual stream at initialisation with BatchNorm, without
normalization, with SkipInit and with Fixup; then ResNet-20 trained with each (Brock et al. 2021,
"Characterizing signal propagation to close the performance gap in unnormalized ResNets",
signal propagation plots; De & Smith 2020, "Batch normalization biases residual blocks towards
the identity function in deep networks" (SkipInit); Zhang et al. 2019, "Fixup initialization").

A residual block adds its branch to its input. Without normalization, and with He-initialised
convolutions (which keep a branch's output variance at its input's), every block adds about as
much variance as it receives: the residual stream's variance doubles per block and explodes with
depth. BatchNorm on the branch fixes the branch's output variance at ~1, so the stream grows only
linearly (by about 1 per block); SkipInit (a zero scalar at the end of every branch) and Fixup
(zero-initialised last convolution, rescaled first convolution) make every block the identity at
initialisation, so the stream keeps the variance it entered with.

Part 1 (the signal propagation plot): a deep zoo ResNet (``init=``, ``norm=``) on one batch of
the colour shapes, the average channel variance and average squared channel mean of every
block's output. "No norm" and SkipInit use He initialisation (kaiming normal, fan_in) for every
convolution, as in the papers; Fixup its own (and a He-initialised stem, as the others);
BatchNorm PyTorch's default. The stride-2 projection shortcuts between stages change the stream's
statistics in every variant, so the growth per block is the geometric mean over all blocks. Part 2: ResNet-20 of
each kind trained on the shapes (SGD with momentum, cosine decay), test accuracy; a run whose
loss becomes NaN or inf is reported as diverged.
"""
import numpy as np

from .. import optim, random
from ..autograd import grad_mode
from ..data.shapes import shapes_arrays
from ..nn import Conv2d
from ..nn import functional as F
from ..nn import init as nn_init
from ..tensor.factories import tensor
from ..zoo.resnet import ResNet
from ._common import LabResult, Table, eval_accuracy, out_dir, progress, pyplot, save_figure, smooth

VARIANTS = (("BatchNorm", "batch", "default"), ("no norm", "none", "default"), ("SkipInit", "none", "skipinit"),
            ("Fixup", "none", "fixup"))
# (probe depth, probe batch, image size, train images, test images, epochs, width) per mode
QUICK = (56, 16, 16, 512, 300, 3, 8)
FULL = (110, 32, 16, 2000, 500, 8, 8)
LR = 0.05
DIFFICULTY = 0.2
FLAT = (0.8, 1.25)    # growth per block counted as flat

NUM_CLASSES = 10
CHANCE = 1 / NUM_CLASSES


def build(norm, init, depth, width, seed):
    random.manual_seed(seed)
    model = ResNet(depth=depth, in_channels=3, num_classes=NUM_CLASSES, norm=norm, width=width, init=init)
    if norm == "none":
        convs = [model.conv1] if init == "fixup" else [m for m in model.modules() if isinstance(m, Conv2d)]
        for m in convs:
            nn_init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
    return model


def stream_statistics(model, x):
    """(average channel variance, average squared channel mean) of every block's output."""
    stats = []

    def hook(module, inputs, output):
        a = output.detach().numpy().astype(np.float64)
        stats.append((float(a.var(axis=(0, 2, 3)).mean()), float((a.mean(axis=(0, 2, 3)) ** 2).mean())))
    handles = [block.register_forward_hook(hook) for block in model.layers]
    with grad_mode.no_grad():
        model.train()(tensor(x))
    for h in handles:
        h.remove()
    return stats


def train(model, xtr, ytr, epochs, seed, desc, batch=32):
    opt = optim.SGD(model.parameters(), lr=LR, momentum=0.9, weight_decay=5e-4)
    per_epoch = len(xtr) // batch
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs * per_epoch)
    rng = np.random.default_rng(seed)
    losses = []
    for step in progress(range(epochs * per_epoch), desc):
        if step % per_epoch == 0:
            perm = rng.permutation(len(xtr))
        idx = perm[(step % per_epoch) * batch:(step % per_epoch + 1) * batch]
        loss = F.cross_entropy(model(tensor(xtr[idx])), tensor(ytr[idx]))
        value = float(loss.item())
        losses.append(value)
        if not np.isfinite(value):
            break
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    return losses


def run(quick=True, out=None, seed=0):
    out = out_dir("signal-prop", out)
    depth, probe, size, n_train, n_test, epochs, width = QUICK if quick else FULL
    (xtr, ytr), (xte, yte) = [shapes_arrays(split, n, 10, DIFFICULTY, size) for split, n in
                              (("train", n_train), ("test", n_test))]
    xtr, xte = (xtr - 0.5) / 0.25, (xte - 0.5) / 0.25
    stats = {name: stream_statistics(build(norm, init, depth, width, seed), xtr[:probe])
             for name, norm, init in VARIANTS}
    blocks = len(stats["BatchNorm"])
    t1 = Table(f"ResNet-{depth} (width {width}) at initialisation, one batch of {probe} shapes ({size}x{size}): "
               f"average channel variance of the residual stream",
               ["variant", "after block 1", f"after block {blocks // 2}", f"after block {blocks}",
                "growth per block (geometric mean)"])
    growth = {}
    for name, _, _ in VARIANTS:
        v = [s[0] for s in stats[name]]
        growth[name] = float((v[-1] / v[0]) ** (1.0 / max(blocks - 1, 1))) if v[0] > 0 else float("nan")
        t1.add(**{"variant": name, "after block 1": v[0], f"after block {blocks // 2}": v[blocks // 2 - 1],
                  f"after block {blocks}": v[-1], "growth per block (geometric mean)": growth[name]})
    t2 = Table(f"ResNet-20 (width {width}) trained {epochs} epochs on {n_train} shapes ({size}x{size}), batch 32, "
               f"lr {LR:g}, cosine decay", ["variant", "test acc", "final train loss", "diverged"])
    acc, curves = {}, {}
    for name, norm, init in VARIANTS:
        model = build(norm, init, 20, width, seed)
        curves[name] = train(model, xtr, ytr, epochs, seed, name)
        diverged = not np.isfinite(curves[name][-1])
        acc[name] = float("nan") if diverged else eval_accuracy(model, xte, yte, chunk=250, nan_if_diverged=True)
        t2.add(**{"variant": name, "test acc": acc[name], "final train loss": float(np.mean(curves[name][-10:])),
                  "diverged": diverged})
    path = plot(stats, curves, depth, out)
    return LabResult("signal-prop", [t1, t2], path, conclude(stats, growth, acc, depth), quick,
                     {"stats": stats, "growth": growth, "acc": acc, "losses": curves})


def conclude(stats, growth, acc, depth):
    last = {name: s[-1][0] for name, s in stats.items()}
    first = {name: s[0][0] for name, s in stats.items()}
    parts = []
    if growth["no norm"] > 1.3 and last["no norm"] > 100 * last["BatchNorm"]:
        parts.append(f"without normalization the residual stream's variance grows {growth['no norm']:.2f}x per block "
                     f"(to {last['no norm']:.1e} after ResNet-{depth}'s last block), with BatchNorm only "
                     f"{growth['BatchNorm']:.2f}x ({last['BatchNorm']:.3g})")
    else:
        parts.append(f"the unnormalized stream did not explode here (growth {growth['no norm']:.2f}x per block vs "
                     f"BatchNorm's {growth['BatchNorm']:.2f}x)")
    flat = [n for n in ("SkipInit", "Fixup") if FLAT[0] < growth[n] < FLAT[1]]
    parts.append(f"{' and '.join(flat) or 'neither SkipInit nor Fixup'} keep{'s' if len(flat) == 1 else ''} it "
                 f"flat (growth per block SkipInit {growth['SkipInit']:.2f}x, {first['SkipInit']:.3g} -> "
                 f"{last['SkipInit']:.3g}; Fixup {growth['Fixup']:.2f}x, {first['Fixup']:.3g} -> {last['Fixup']:.3g})")
    shown = ", ".join(f"{n} {'diverged' if acc[n] != acc[n] else f'{100 * acc[n]:.1f}%'}" for n in acc)
    best = max((a, n) for n, a in acc.items() if a == a)[1] if any(a == a for a in acc.values()) else "none"
    finite = [a for a in acc.values() if a == a]
    if not finite or max(finite) < 0.25:
        parts.append(f"ResNet-20 test accuracy: {shown}: all near chance (10%), the training runs are too short to "
                     f"rank the variants (quick mode only checks that they run)")
    else:
        failed = [n for n in ("SkipInit", "Fixup") if n in acc and (not acc[n] == acc[n] or acc[n] < CHANCE + 0.05)]
        parts.append(f"ResNet-20 test accuracy: {shown} (best: {best})")
        if failed:
            parts.append(f"{' and '.join(failed)} did not train (within 5 points of chance): the claim that "
                         f"{'they train' if len(failed) > 1 else 'it trains'} without normalization does not "
                         f"reproduce at this learning rate and length")
    return "; ".join(parts)


def plot(stats, curves, depth, out):
    plt = pyplot()
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4))
    for k, (name, s) in enumerate(stats.items()):
        blocks = np.arange(1, len(s) + 1)
        ax0.semilogy(blocks, [v for v, _ in s], "-", color=f"C{k}", label=f"{name}: channel variance")
        ax0.semilogy(blocks, np.maximum([m for _, m in s], 1e-12), ":", color=f"C{k}", label=f"{name}: squared mean")
    ax0.set_xlabel("residual block")
    ax0.set_ylabel("average over channels")
    ax0.set_title(f"residual stream at initialisation, ResNet-{depth}", fontsize=10)
    ax0.grid(alpha=0.3, which="both")
    ax0.legend(fontsize=6, ncol=2)
    for k, (name, losses) in enumerate(curves.items()):
        finite = np.array([v if np.isfinite(v) else np.nan for v in losses])
        ax1.plot(np.arange(1, len(finite) + 1), smooth(np.nan_to_num(finite, nan=np.nanmax(finite)
                                                                     if np.isfinite(finite).any() else 0.0), 10),
                 color=f"C{k}", label=name + (" (diverged)" if not np.isfinite(losses[-1]) else ""))
    ax1.set_xlabel("training step")
    ax1.set_ylabel("training loss (moving average of 10)")
    ax1.set_title("ResNet-20 training", fontsize=10)
    ax1.grid(alpha=0.3)
    ax1.legend(fontsize=8)
    fig.suptitle("Signal propagation: BatchNorm vs no normalization vs SkipInit vs Fixup", fontsize=11)
    return save_figure(fig, out, "signal-prop")
