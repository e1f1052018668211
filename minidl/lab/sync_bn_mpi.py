"""The ``sync-bn`` experiment's data-parallel training on real MPI processes (``mpiexec -n 2``).

The protocol is 4 ranks of 2 images (a global batch of 8). Two processes hold 4 images each,
and what each setup computes is the 4 x 2 protocol's, not an approximation of it:

- GroupNorm normalizes each sample by itself: nothing depends on the split.
- SyncBatchNorm's statistics span the global batch of 8 however it is split.
- BatchNorm per rank of 2 images: each process's BatchNorm normalizes every consecutive pair
  of its 4 images by that pair's statistics (``PerRankBatchNorm2d``), i.e. as the two ranks of
  2 images it stands for. Forward and backward are per pair, so the gradients are the 4 x 2
  ones (the experiment measures this on one step, in float64). The running estimates fold in
  the first pair only: under DistributedDataParallel the simulated run's running estimates are
  rank 0's (broadcast before each forward), and rank 0 is the first pair of process 0.
- The loss of a process is the mean over its 4 images, and DistributedDataParallel averages
  the gradients over the 2 processes: the gradient of the mean loss over the 8 images, as 4
  ranks of 2 averaged give. The reported loss is the all-reduced mean, the same quantity.

So the real run differs from the simulated one only in floating-point summation order (the
all-reduce adds 2 partial sums instead of 4). ``launch`` runs ``rank_main`` under
``mpiexec -n 2`` (one Numba/BLAS thread per process): every rank trains its share, rank 0
evaluates and writes the results (JSON), which the launching process reads back.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from .. import nn
from ..nn import functional as F

PROCESSES = 2

_SCRIPT = "import sys\nfrom minidl.lab.sync_bn_mpi import rank_main\nrank_main(sys.argv[1], sys.argv[2])\n"


class PerRankBatchNorm2d(nn.BatchNorm2d):
    """BatchNorm2d over a process's batch that stands for several ranks of ``per_rank`` samples:
    training statistics per consecutive chunk of ``per_rank`` (each chunk's forward and
    backward is BatchNorm2d's over that chunk alone); the running estimates fold in the first
    chunk only (the first rank's). Eval mode, or a batch no larger than ``per_rank``, is BatchNorm2d."""

    def __init__(self, num_features, per_rank, **kwargs):
        super().__init__(num_features, **kwargs)
        self.per_rank = int(per_rank)

    def forward(self, x):
        if not self.training or x.shape[0] <= self.per_rank:
            return super().forward(x)
        from ..ops.join import cat
        k = self.per_rank
        first = super().forward(x[:k])      # counts the batch and updates the running estimates
        rest = [F.batch_norm(x[i:i + k], None, None, self.weight, self.bias, True, 0.0, self.eps)
                for i in range(k, x.shape[0], k)]
        return cat([first] + rest, 0)

    def extra_repr(self):
        return super().extra_repr() + f", per_rank={self.per_rank}"


def _setup_model(norm, width, seed, share):
    from .sync_bn import PER_RANK, _model, ghost_batchnorm
    model = _model(norm, width, seed)
    if norm == "bn" and share > PER_RANK:
        model = ghost_batchnorm(model, PER_RANK, cls=PerRankBatchNorm2d)
    return model


def _identities(width, seed, xtr, ytr, rank, share):
    """One step in float64 on the real ranks: (max |SyncBN - BN over the 8|, max |per-rank BN -
    ghost BN of PER_RANK over the 8|), relative to the largest gradient; rank 0's gradients."""
    from ..nn.parallel import DistributedDataParallel
    from ..tensor.factories import tensor
    from .sync_bn import PER_RANK, RANKS, _grads, _model, ghost_batchnorm
    n = RANKS * PER_RANK
    x, y = xtr[:n].astype(np.float64), ytr[:n]

    def real(norm):
        model = _setup_model(norm, width, seed, share).double()
        ddp = DistributedDataParallel(model)     # held: its gradient hooks reach the reducer weakly
        part = slice(rank * share, (rank + 1) * share)
        F.cross_entropy(ddp(tensor(x[part])), tensor(y[part])).backward()
        return _grads(model)

    sync, per_rank = real("sync"), real("bn")
    if rank != 0:
        return None
    whole = _model("bn", width, seed).double()
    F.cross_entropy(whole(tensor(x)), tensor(y)).backward()
    ghost = ghost_batchnorm(_model("bn", width, seed), PER_RANK).double()
    F.cross_entropy(ghost(tensor(x)), tensor(y)).backward()
    whole, ghost = _grads(whole), _grads(ghost)
    return (float(np.abs(sync - whole).max() / np.abs(whole).max()),
            float(np.abs(per_rank - ghost).max() / np.abs(ghost).max()))


def _train(norm, steps, width, seed, data, rank, share, show_progress):
    """This rank's share of the training; (mean loss over the 8 images per step, rank 0's test
    accuracy or None, the largest parameter difference across ranks at the end)."""
    from .. import distributed as dist
    from ..nn.parallel import DistributedDataParallel
    from ..tensor.factories import tensor
    from ._common import eval_accuracy, progress
    from .sync_bn import PER_RANK, RANKS, _batches, _sgd, ddp_step
    xtr, ytr, xte, yte = data
    batch = RANKS * PER_RANK
    net = _setup_model(norm, width, seed, share)
    model = DistributedDataParallel(net)
    opt, sched = _sgd(model.parameters(), batch, steps)
    batches = _batches(len(xtr), batch, steps, seed)
    losses = []
    k = dist.get_world_size()
    label = f"{norm}, {k} processes x {share} (mpiexec)"
    for s in (progress(range(steps), label) if show_progress else range(steps)):
        idx = batches[s][rank * share:(rank + 1) * share]
        losses.append(ddp_step(model, opt, sched, xtr[idx], ytr[idx]))
    params = np.concatenate([p.detach().numpy().ravel() for p in net.parameters()]).astype(np.float64)
    lo, hi = tensor(params.copy()), tensor(params.copy())
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    spread = float((hi.numpy() - lo.numpy()).max())
    return losses, (eval_accuracy(net, xte, yte) if rank == 0 else None), spread


def rank_main(config_path, result_path):
    """The program each MPI process runs: the setups of ``config_path`` (JSON), rank 0 writing
    the results to ``result_path`` (JSON)."""
    import time

    from .. import distributed as dist
    from ..data.digits import digits_arrays
    from ._common import progress_bars
    from .sync_bn import PER_RANK, RANKS
    with open(config_path) as f:
        cfg = json.load(f)
    dist.init_process_group("mpi")
    rank, k = dist.get_rank(), dist.get_world_size()
    if RANKS % k:
        raise RuntimeError(f"sync-bn: {RANKS} ranks of {PER_RANK} images need a number of processes dividing "
                           f"{RANKS}, got {k}")
    share = RANKS * PER_RANK // k
    xtr, ytr = digits_arrays("train")
    xte, yte = digits_arrays("test")
    out = {"processes": k, "share": share, "curves": {}, "acc": {}, "spread": {}, "seconds": {}}
    out["identities"] = _identities(cfg["width"], cfg["seed"], xtr, ytr, rank, share)
    with progress_bars(cfg["progress"] and rank == 0):
        for norm in cfg["norms"]:
            start = time.perf_counter()
            losses, acc, spread = _train(norm, cfg["steps"], cfg["width"], cfg["seed"], (xtr, ytr, xte, yte), rank,
                                         share, rank == 0)
            out["curves"][norm], out["acc"][norm], out["spread"][norm] = losses, acc, spread
            out["seconds"][norm] = time.perf_counter() - start
    if rank == 0:
        with open(result_path, "w") as f:
            json.dump(out, f)
    dist.barrier()
    dist.destroy_process_group()


def launch(launcher, norms, steps, width, seed, processes=PROCESSES, timeout=None, show_progress=False):
    """Run the setups ``norms`` under ``launcher -n processes`` and return rank 0's results (a
    dict: curves, acc, identities, spread, seconds, processes, share). Rank 0's progress bars
    and every rank's errors appear on this process's stderr as they happen; past ``timeout``
    seconds (default: generous for ``steps``) the job is killed and RuntimeError raised."""
    from ..distributed.testing import ONE_THREAD
    timeout = 300.0 + 10.0 * steps * len(norms) if timeout is None else timeout
    with tempfile.TemporaryDirectory(prefix="minidl-sync-bn-") as tmp:
        config, result, script = (os.path.join(tmp, n) for n in ("config.json", "result.json", "rank.py"))
        with open(config, "w") as f:
            json.dump({"norms": list(norms), "steps": int(steps), "width": int(width), "seed": int(seed),
                       "progress": bool(show_progress)}, f)
        with open(script, "w") as f:
            f.write(_SCRIPT)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ, **ONE_THREAD)
        env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in [env.get("PYTHONPATH")] if p])
        cmd = [launcher, "-n", str(processes), sys.executable, script, config, result]
        # stdout is collected for the error message; stderr (progress bars, tracebacks) streams
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env, start_new_session=True)
        try:
            stdout, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            import signal
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise RuntimeError(f"sync-bn: the mpiexec job ({' '.join(cmd)}) ran past {timeout:.0f} s and was "
                               "killed") from None
        if proc.returncode != 0 or not os.path.exists(result):
            raise RuntimeError(f"sync-bn: the mpiexec job failed (exit status {proc.returncode}; its tracebacks are "
                               f"on stderr above): {' '.join(cmd)}\n{stdout[-2000:]}")
        with open(result) as f:
            return json.load(f)
