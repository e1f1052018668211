"""Data-parallel training throughput: one process with 2 threads vs ``mpiexec -n 2`` with 1 thread each.

    python benchmarks/bench_distributed.py            # ResNet-8 and the GPT, every configuration
    python benchmarks/bench_distributed.py --quick    # a short run (3 timed steps after 1)
    python benchmarks/bench_distributed.py --models resnet8 --norm syncbatch

Each configuration runs in processes of its own, with every thread pool (BLAS, Numba) set
before it starts:

    1 x 1   one process, 1 thread, the per-rank batch             (the unit of scaling)
    1 x 2   one process, 2 threads, the global batch (2 x per-rank)
    2 x 1   mpiexec -n 2, 1 thread each, DistributedDataParallel, the per-rank batch on each rank

Models: ResNet-8 (width 16) on random 3x32x32 images, batch 64 per rank, SGD; the zoo's GPT
(d_model 128, 4 layers, 4 heads, context 64, vocab 96) on random tokens, batch 16 per rank,
AdamW. Reported: images or tokens per second over the global batch (median step time),
scaling efficiency = rate(2 x 1) / (2 x rate(1 x 1)) and rate(2 x 1) / rate(1 x 2); for 2 x 1
the all-reduce time per step (the gradient buckets' all-reduces timed alone, blocking, on the
same ranks), the time the end of backward waited for them (DistributedDataParallel's
``last_reduction["wait_s"]``: the part backward did not hide) and the fraction hidden.
Without mpiexec (the ``[distributed]`` extra: mpi4py, mpich) the 2 x 1 rows are skipped.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")
MODELS = ("resnet8", "gpt")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    p.add_argument("--norm", choices=("batch", "syncbatch"), default="batch", help="ResNet-8's norm")
    p.add_argument("--steps", type=int, default=10, help="timed steps per configuration")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="3 timed steps after 1 warm-up")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per configuration")
    p.add_argument("--worker", choices=MODELS, help=argparse.SUPPRESS)      # one measurement, in this process
    p.add_argument("--batch-size", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.warmup = 3, 1
    return args


# the measurement (one process of one configuration) ---------------------------------------------------
def _build(model_name, norm):
    import numpy as np
    import minidl as md
    from minidl import optim, zoo
    md.manual_seed(0)
    rng = np.random.default_rng(0)
    if model_name == "resnet8":
        model = zoo.get_model("resnet8", in_channels=3, num_classes=10, norm="batch", width=16)
        if norm == "syncbatch":
            model = md.nn.SyncBatchNorm.convert_sync_batchnorm(model)
        return model, optim.SGD(model.parameters(), lr=0.05, momentum=0.9), rng, "img", 64
    model = zoo.GPT(vocab_size=96, block_size=64, n_layer=4, n_head=4, d_model=128, dropout=0.0)
    return model, optim.AdamW(model.parameters(), lr=1e-3), rng, "tok", 16


def _loss_fn(model_name, net, rng, batch):
    import minidl as md
    import minidl.nn.functional as F
    if model_name == "resnet8":
        x = md.tensor(rng.standard_normal((batch, 3, 32, 32)).astype("float32"))
        y = md.tensor(rng.integers(0, 10, batch))
        return lambda: F.cross_entropy(net(x), y), batch
    x = rng.integers(0, 96, (batch, 64))
    y = rng.integers(0, 96, (batch, 64))
    return lambda: net(x, y)[1], batch * 64


def worker(args):
    """Time ``args.steps`` training steps here (under mpiexec: on every rank, DDP); rank 0 prints a
    JSON line with the median step time and, with several ranks, the all-reduce timings."""
    import numpy as np
    import minidl.distributed as dist
    ranks = 1
    if dist.process_group._launched_by_mpi():
        dist.init_process_group("mpi")
        ranks = dist.get_world_size()
    model, opt, rng, unit, per_rank = _build(args.worker, args.norm)
    batch = args.batch_size or per_rank
    net = model
    if ranks > 1:
        from minidl.nn.parallel import DistributedDataParallel
        net = DistributedDataParallel(model)
    loss, items = _loss_fn(args.worker, net, rng, batch)
    times, waits = [], []
    for i in range(args.warmup + args.steps):
        if ranks > 1:
            dist.barrier()
        t0 = time.perf_counter()
        value = loss()
        opt.zero_grad()
        value.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if i >= args.warmup:
            times.append(dt)
            if ranks > 1:
                waits.append(net.last_reduction.get("wait_s", float("nan")))
    out = {"model": args.worker, "ranks": ranks, "threads": int(os.environ.get("NUMBA_NUM_THREADS", "0")),
           "batch": batch, "unit": unit, "items": items * ranks, "step_s": float(np.median(times)),
           "step_range": [float(min(times)), float(max(times))]}
    if ranks > 1:
        out.update(allreduce_s=_allreduce_time(model, args.steps), wait_s=float(np.median(waits)),
                   grad_mb=sum(p.numel() * p.dtype.itemsize for p in model.parameters()) / 2 ** 20)
    if ranks == 1 or dist.get_rank() == 0:
        print("RESULT " + json.dumps(out), flush=True)


def _allreduce_time(model, steps):
    """The median time of one all-reduce of every gradient (one flat float32 buffer), blocking:
    what one step's communication costs when nothing overlaps it."""
    import numpy as np
    import minidl as md
    import minidl.distributed as dist
    flat = md.from_numpy(np.zeros(sum(p.numel() for p in model.parameters()), np.float32))
    ts = []
    for _ in range(max(3, steps)):
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(flat)
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


# the driver -------------------------------------------------------------------------------------------
def _mpiexec():
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return here if os.path.exists(here) else shutil.which("mpiexec")


def _launch(args, model, procs, threads, batch):
    env = dict(os.environ, **{v: str(threads) for v in THREAD_VARIABLES})
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", model, "--norm", args.norm, "--steps",
           str(args.steps), "--warmup", str(args.warmup), "--batch-size", str(batch)]
    if procs > 1:
        cmd = [_mpiexec(), "-n", str(procs)] + cmd
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {args.timeout:g} s"}
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    return {"error": f"exit status {done.returncode}: {(done.stderr or done.stdout).strip().splitlines()[-1:]}"}


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    mpi = _mpiexec()
    print(f"data-parallel throughput, {args.steps} timed steps after {args.warmup} (median step time); "
          f"{os.cpu_count()} cores; ResNet-8 norm: {args.norm}")
    if mpi is None:
        print("no mpiexec found (pip install 'minidl[distributed]'): the 2 x 1 configuration is skipped")
    header = (f"{'model':8s} {'procs x threads':>15s} {'global batch':>12s} {'step ms':>9s} {'rate':>12s} "
              f"{'efficiency':>10s} {'vs 1x2':>7s} {'all-reduce ms':>13s} {'exposed ms':>10s} {'hidden':>7s}")
    print(header)
    print("-" * len(header))
    failed = False
    for model in args.models:
        per_rank = 64 if model == "resnet8" else 16
        configs = [(1, 1, per_rank), (1, 2, 2 * per_rank)] + ([(2, 1, per_rank)] if mpi else [])
        rates = {}
        for procs, threads, batch in configs:
            r = _launch(args, model, procs, threads, batch)
            if "error" in r:
                failed = True
                print(f"{model:8s} {procs:>7d} x {threads:<5d}  {r['error']}")
                continue
            rate = r["items"] / r["step_s"]
            rates[procs, threads] = rate
            eff = vs = comm = exposed = hidden = ""
            if procs > 1:
                if (1, 1) in rates:
                    eff = f"{rate / (procs * rates[1, 1]):.2f}"
                if (1, 2) in rates:
                    vs = f"{rate / rates[1, 2]:.2f}x"
                comm, exposed = f"{1e3 * r['allreduce_s']:.2f}", f"{1e3 * r['wait_s']:.2f}"
                hidden = f"{max(0.0, 1 - r['wait_s'] / r['allreduce_s']):.0%}" if r["allreduce_s"] > 0 else ""
            lo, hi = r["step_range"]
            print(f"{model:8s} {procs:>7d} x {threads:<5d} {procs * batch if procs > 1 else batch:>12d} "
                  f"{1e3 * r['step_s']:>9.1f} {rate:>8,.0f} {r['unit']}/s {eff:>8s} {vs:>7s} {comm:>13s} "
                  f"{exposed:>10s} {hidden:>7s}   (step {1e3 * lo:.0f}-{1e3 * hi:.0f} ms)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
