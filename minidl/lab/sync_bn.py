"""Lab ``sync-bn``: BatchNorm per device vs SyncBatchNorm vs GroupNorm at 2 images per device,
and ghost batches inside a large batch.

Data-parallel training splits each batch across devices. With BatchNorm per device, each
device normalizes with the statistics of its own few images: at 2 images per device that
estimate is very noisy, which Wu & He (2018, Group Normalization, Section 4) show costs
accuracy, and which synchronized BatchNorm (statistics over the whole global batch) or a
per-sample norm (GroupNorm) avoid. Goyal et al. (2017) keep the per-device BN batch fixed
(n = 32) when scaling out, because it is part of the loss being optimised. Conversely,
Hoffer et al. (2017, "Train longer, generalize better") normalize a *large* batch in small
"ghost" batches of 16-64 and find it generalizes better than full-batch statistics.

Part 1. ResNet-8 on the digits, data parallel over 4 ranks with 2 images each (global batch
8; in quick mode the ranks are simulated in one process by minidl.distributed.testing.run_ranks,
the same collectives as under mpiexec), DistributedDataParallel averaging the gradients: BatchNorm2d
per rank, the same model converted with nn.SyncBatchNorm.convert_sync_batchnorm, and GroupNorm.
Two identities are measured first, on one step: SyncBatchNorm over the 4 x 2 images gives
BatchNorm's gradients over the 8, and per-rank BatchNorm gives ghost BatchNorm's with ghost
batches of 2 (the bridge to part 2).

Part 2. The same ResNet-8 trained in one process at a large batch, BatchNorm statistics over
ghost batches of 16, 32, 64 images or over the whole batch (GhostBatchNorm2d below: the
running estimates fold in every ghost batch, as Hoffer et al.'s implementation does).

SGD with momentum 0.9, weight decay 1e-4, lr 0.1 x batch / 64 with cosine decay (the
batch-size experiment's protocol); test accuracy in eval mode on the 360 test images (quick:
width 4, 150 steps, batch 128 for 60 steps; full: width 16, 900 steps = 5 epochs, batch 256 for
300 steps); the per-rank BatchNorm's running estimates are rank 0's, which
DistributedDataParallel broadcasts before each forward, as PyTorch's.

The quick mode simulates the ranks in one process. The full mode runs part 1 on real
processes, ``mpiexec -n 2`` each holding 4 images (sync_bn_mpi.py says why that computes the
4 x 2 protocol: per-rank BatchNorm becomes BatchNorm per pair of images), measures the
identities there too, and gathers the curves and rank 0's accuracy in this process; without
mpi4py or mpiexec it says so and simulates the ranks instead.
"""
import numpy as np

from .. import distributed as dist
from .. import nn, optim, random
from ..data.digits import digits_arrays
from ..nn import functional as F
from ..tensor.factories import tensor
from ..ops.join import cat
from ..zoo.resnet import ResNet
from ._common import LabResult, Table, classifier_step, eval_accuracy, out_dir, progress, pyplot, save_figure, smooth

RANKS, PER_RANK = 4, 2
# width, data-parallel steps, the large batch, its steps, the ghost batches inside it
SIZES = {True: (4, 150, 128, 60, (16, 32, 64)), False: (16, 900, 256, 300, (16, 32, 64))}
SETUPS = (("bn", "BatchNorm per rank (2 images)"), ("sync", "SyncBatchNorm (8 images)"),
          ("group", "GroupNorm"))
WEIGHT_DECAY = 1e-4
BASE_LR = 0.1


class GhostBatchNorm2d(nn.BatchNorm2d):
    """BatchNorm2d whose training statistics come from consecutive "ghost" batches of ``ghost``
    samples (Hoffer et al. 2017); each ghost batch also updates the running estimates. Eval
    mode, or a batch no larger than ``ghost``, is BatchNorm2d."""

    def __init__(self, num_features, ghost, **kwargs):
        super().__init__(num_features, **kwargs)
        self.ghost = int(ghost)

    def forward(self, x):
        if not self.training or x.shape[0] <= self.ghost:
            return super().forward(x)
        return cat([super(GhostBatchNorm2d, self).forward(x[i:i + self.ghost])
                    for i in range(0, x.shape[0], self.ghost)], 0)

    def extra_repr(self):
        return super().extra_repr() + f", ghost={self.ghost}"


def ghost_batchnorm(module, ghost, cls=GhostBatchNorm2d):
    """``module`` with every BatchNorm2d replaced by a ``cls`` (GhostBatchNorm2d, or another
    BatchNorm2d taking the chunk size second) holding its parameters."""
    if type(module) is nn.BatchNorm2d:
        g = cls(module.num_features, ghost, eps=module.eps, momentum=module.momentum)
        g.load_state_dict(module.state_dict())
        return g
    for name, child in list(module._modules.items()):
        if child is not None:
            module.add_module(name, ghost_batchnorm(child, ghost, cls))
    return module


def _model(norm, width, seed):
    random.manual_seed(seed)
    model = ResNet(depth=8, in_channels=1, num_classes=10, norm="group" if norm == "group" else "batch", width=width)
    return nn.SyncBatchNorm.convert_sync_batchnorm(model) if norm == "sync" else model


def _batches(n_train, batch, steps, seed):
    """The global batch of every step: epochs of permutations drawn from (seed, epoch)."""
    per_epoch = n_train // batch
    out = []
    for s in range(steps):
        epoch, i = divmod(s, per_epoch)
        perm = np.random.default_rng((seed, epoch)).permutation(n_train)
        out.append(perm[i * batch:(i + 1) * batch])
    return out


def ddp_step(model, opt, sched, x, y):
    """One training step of every rank on its own images; returns the loss averaged over ranks."""
    mean = tensor(np.array([classifier_step(model, opt, sched, x, y)]))
    dist.all_reduce(mean, op=dist.ReduceOp.AVG)
    return float(mean.item())


def _sgd(params, batch, steps):
    opt = optim.SGD(params, lr=BASE_LR * batch / 64, momentum=0.9, weight_decay=WEIGHT_DECAY)
    return opt, optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)


def train_data_parallel(norm, steps, width, seed, xtr, ytr, xte, yte):
    """Train on RANKS simulated ranks of PER_RANK images with DistributedDataParallel; returns
    (the mean of the ranks' losses per step, test accuracy of rank 0's model)."""
    from ..distributed.testing import run_ranks
    from ..nn.parallel import DistributedDataParallel
    models = [_model(norm, width, seed) for _ in range(RANKS)]   # built here: the generator is shared by the ranks
    batches = _batches(len(xtr), RANKS * PER_RANK, steps, seed)

    def rank(r):
        model = DistributedDataParallel(models[r])
        opt, sched = _sgd(model.parameters(), RANKS * PER_RANK, steps)
        losses = []
        for s in (progress(range(steps), f"{norm}, {RANKS} ranks x {PER_RANK}") if r == 0 else range(steps)):
            idx = batches[s][r * PER_RANK:(r + 1) * PER_RANK]
            losses.append(ddp_step(model, opt, sched, xtr[idx], ytr[idx]))
        return losses, (eval_accuracy(models[r], xte, yte) if r == 0 else None)

    losses, acc = run_ranks(RANKS, rank, timeout=600.0)[0]
    return losses, acc


def train_ghost(ghost, batch, steps, width, seed, xtr, ytr, xte, yte):
    """One process, batch ``batch``, BatchNorm over ghost batches of ``ghost``: (losses, test accuracy)."""
    model = ghost_batchnorm(_model("bn", width, seed), ghost)
    opt, sched = _sgd(model.parameters(), batch, steps)
    losses = []
    for idx in progress(_batches(len(xtr), batch, steps, seed), f"ghost {ghost} in {batch}"):
        losses.append(classifier_step(model, opt, sched, xtr[idx], ytr[idx]))
    return losses, eval_accuracy(model, xte, yte)


def _grads(model):
    return np.concatenate([p.grad.numpy().ravel() for p in model.parameters()])


def identities(width, seed, xtr, ytr):
    """One step's gradients: (max |SyncBN over RANKS x PER_RANK - BN over the whole batch|,
    max |per-rank BN - ghost BN of PER_RANK|), relative to the largest gradient; float64."""
    from ..distributed.testing import run_ranks
    from ..nn.parallel import DistributedDataParallel
    idx = np.arange(RANKS * PER_RANK)
    x, y = xtr[idx].astype(np.float64), ytr[idx]

    def single(model):
        model.double()
        F.cross_entropy(model(tensor(x)), tensor(y)).backward()
        return _grads(model)

    def ranks(norm):
        models = [_model(norm, width, seed).double() for _ in range(RANKS)]

        def rank(r):
            model = DistributedDataParallel(models[r])
            part = slice(r * PER_RANK, (r + 1) * PER_RANK)
            F.cross_entropy(model(tensor(x[part])), tensor(y[part])).backward()
            return _grads(models[r])
        return run_ranks(RANKS, rank)[0]

    whole = single(_model("bn", width, seed))
    ghost = single(ghost_batchnorm(_model("bn", width, seed), PER_RANK))
    scale = np.abs(whole).max()
    return (float(np.abs(ranks("sync") - whole).max() / scale),
            float(np.abs(ranks("bn") - ghost).max() / np.abs(ghost).max()))


def mpiexec_path():
    """The mpiexec to run the full mode's ranks with, or None without mpi4py or mpiexec."""
    from ..distributed.testing import mpiexec_path as find
    return find()


def data_parallel(steps, width, seed, data, real, norms=None):
    """Part 1 for the setups ``norms`` (default all): on ``sync_bn_mpi.PROCESSES`` processes under
    mpiexec when ``real`` and mpiexec is there, else on simulated ranks. Returns (curves, test
    accuracies, where: a description of the ranks, the real ranks' identities or None, the
    mpiexec job's results or None); when ``real`` but MPI is missing, prints why it simulates."""
    from . import sync_bn_mpi
    from ._common import _PROGRESS
    norms = [k for k, _ in SETUPS] if norms is None else list(norms)
    launcher = mpiexec_path() if real else None
    if launcher is None:
        if real:
            print(f"sync-bn full mode: mpi4py or mpiexec is missing (pip install -e '.[distributed]'), so the "
                  f"{RANKS} ranks are simulated in one process instead of run under mpiexec -n "
                  f"{sync_bn_mpi.PROCESSES}", flush=True)
        curves, acc = {}, {}
        for key in norms:
            curves[key], acc[key] = train_data_parallel(key, steps, width, seed, *data)
        where = f"{RANKS} simulated ranks x {PER_RANK} images" + (" (mpiexec unavailable)" if real else "")
        return curves, acc, where, None, None
    job = sync_bn_mpi.launch(launcher, norms, steps, width, seed, show_progress=_PROGRESS[0])
    where = (f"{RANKS} ranks x {PER_RANK} images as {job['processes']} mpiexec processes x {job['share']} "
             f"(per-rank BatchNorm per pair)")
    return job["curves"], job["acc"], where, tuple(job["identities"]), job


def run(quick=True, out=None, seed=0):
    out = out_dir("sync-bn", out)
    width, steps, big, big_steps, ghosts = SIZES[bool(quick)]
    ghosts = tuple(g for g in ghosts if g < big) + (big,)
    xtr, ytr = digits_arrays("train")
    xte, yte = digits_arrays("test")
    sync_gap, ghost_gap = identities(width, seed, xtr, ytr)
    curves, acc, where, real_gaps, job = data_parallel(steps, width, seed, (xtr, ytr, xte, yte), real=not quick)
    ident = Table("Identities, one step in float64 (largest gradient difference / largest gradient)",
                  ["compared", "max relative difference"])
    ident.add(**{"compared": f"SyncBatchNorm over {RANKS} ranks x {PER_RANK} vs BatchNorm over {RANKS * PER_RANK}",
                 "max relative difference": sync_gap})
    ident.add(**{"compared": f"BatchNorm per rank ({RANKS} x {PER_RANK}) vs ghost BatchNorm of {PER_RANK} in "
                             f"{RANKS * PER_RANK}", "max relative difference": ghost_gap})
    if real_gaps is not None:
        k, share = job["processes"], job["share"]
        ident.add(**{"compared": f"SyncBatchNorm over {k} mpiexec processes x {share} vs BatchNorm over "
                                 f"{RANKS * PER_RANK}", "max relative difference": real_gaps[0]})
        ident.add(**{"compared": f"BatchNorm per pair on {k} mpiexec processes x {share} vs ghost BatchNorm of "
                                 f"{PER_RANK} in {RANKS * PER_RANK}", "max relative difference": real_gaps[1]})
        sync_gap, ghost_gap = max(sync_gap, real_gaps[0]), max(ghost_gap, real_gaps[1])

    epochs = steps * RANKS * PER_RANK / len(xtr)
    small = Table(f"ResNet-8 (width {width}) on digits, {where}, {steps} steps ({epochs:.1f} epochs), "
                  "DistributedDataParallel", ["norm", "test acc", "final train loss"])
    for key, name in SETUPS:
        small.add(**{"norm": name, "test acc": acc[key], "final train loss": float(np.mean(curves[key][-20:]))})

    big_epochs = big_steps * big / len(xtr)
    large = Table(f"ResNet-8 (width {width}), batch {big}, {big_steps} steps ({big_epochs:.1f} epochs): BatchNorm "
                  "statistics over ghost batches", ["ghost batch", "test acc", "final train loss"])
    ghost_acc, ghost_curves = {}, {}
    for g in ghosts:
        ghost_curves[g], ghost_acc[g] = train_ghost(g, big, big_steps, width, seed, xtr, ytr, xte, yte)
        large.add(**{"ghost batch": g if g < big else f"{g} (whole batch)", "test acc": ghost_acc[g],
                     "final train loss": float(np.mean(ghost_curves[g][-10:]))})

    path = plot(curves, acc, ghost_acc, ghosts, big, width, out, job)
    conclusion = conclude(sync_gap, ghost_gap, acc, ghost_acc, ghosts, big, real=job is not None)
    return LabResult("sync-bn", [ident, small, large], path, conclusion, quick,
                     {"curves": curves, "acc": acc, "ghost_acc": ghost_acc, "identities": (sync_gap, ghost_gap),
                      "ranks": where, "mpiexec": job})


def conclude(sync_gap, ghost_gap, acc, ghost_acc, ghosts, big, n_test=360, real=False):
    """The one-line verdict from the measured numbers: an effect counts when it exceeds 2 points
    (per-rank BN vs SyncBN) or 1 point (ghost batches); one test image is 100 / n_test points.
    ``real``: the gaps include the mpiexec processes' and the training ran there."""
    exact = sync_gap < 1e-10 and ghost_gap < 1e-10
    on = " on simulated ranks and on mpiexec processes" if real else ""
    first = (f"SyncBatchNorm over {RANKS}x{PER_RANK} images reproduces BatchNorm over {RANKS * PER_RANK} "
             f"(gradients to {sync_gap:.0e}{on}) and per-rank BatchNorm is ghost BatchNorm of {PER_RANK} "
             f"(to {ghost_gap:.0e})" if exact else
             f"the identities did not hold (SyncBN vs BN {sync_gap:.1e}, per-rank BN vs ghost BN {ghost_gap:.1e})")
    gain = acc["sync"] - acc["bn"]
    accs = (f"{100 * acc['sync']:.1f}% vs {100 * acc['bn']:.1f}%; GroupNorm {100 * acc['group']:.1f}%")
    if gain > 0.02:
        second = (f"at {PER_RANK} images per rank SyncBatchNorm beats per-rank BatchNorm by {100 * gain:.1f} points "
                  f"({accs})")
    else:
        second = (f"at {PER_RANK} images per rank SyncBatchNorm and per-rank BatchNorm end within 2 points "
                  f"({100 * gain:+.1f}: {accs}; one test image is {100 / n_test:.2f} points): on the easy 8x8 "
                  "digits, trained long enough, the noisy 2-image statistics cost little")
    small = [g for g in ghosts if g < big]
    best = max(small, key=lambda g: ghost_acc[g])
    diff = ghost_acc[best] - ghost_acc[big]
    if diff > 0.01:
        third = (f"inside batch {big}, ghost batches of {best} beat whole-batch statistics by {100 * diff:.1f} points "
                 "(Hoffer et al.'s effect)")
    else:
        third = (f"inside batch {big}, the best ghost batch ({best}: {100 * ghost_acc[best]:.1f}%) is within 1 point "
                 f"of whole-batch statistics ({100 * ghost_acc[big]:.1f}%): Hoffer et al.'s gain does not show "
                 "clearly at this scale")
    return f"{first}; {second}; {third}"


def plot(curves, acc, ghost_acc, ghosts, big, width, out, job=None):
    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for k, (key, name) in enumerate(SETUPS):
        a.plot(smooth(curves[key], 15), color=f"C{k}", label=f"{name}: test {100 * acc[key]:.1f}%")
    a.set_xlabel("step (global batch of 8)")
    a.set_ylabel("training loss (mean over ranks, smoothed)")
    how = f"as {job['processes']} mpiexec processes x {job['share']}" if job else "simulated"
    a.set_title(f"{RANKS} ranks x {PER_RANK} images ({how}), ResNet-8 width {width}", fontsize=10)
    a.grid(alpha=0.3)
    a.legend(fontsize=8)
    xs = np.arange(len(ghosts))
    b.bar(xs[:-1], [100 * ghost_acc[g] for g in ghosts[:-1]], color="C0", label="ghost batches")
    b.bar(xs[-1:], [100 * ghost_acc[big]], color="C7", label="whole-batch statistics")
    b.set_xticks(xs)
    b.set_xticklabels([str(g) for g in ghosts[:-1]] + [f"{big}\n(whole batch)"])
    lo = min(ghost_acc.values())
    b.set_ylim(max(0.0, 100 * lo - 10), 100)
    b.set_xlabel(f"BatchNorm statistics over ghost batches of (batch {big})")
    b.set_ylabel("test accuracy (%)")
    b.set_title("ghost batch normalization inside a large batch", fontsize=10)
    b.grid(alpha=0.3, axis="y")
    b.legend(fontsize=8, loc="lower right")
    fig.suptitle("Small per-device batches: BatchNorm vs SyncBatchNorm vs GroupNorm; ghost batches", fontsize=11)
    return save_figure(fig, out, "sync-bn")
