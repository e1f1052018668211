"""What the training-step benchmarks (bench_rnn, bench_transformer) share: their common flags,
the thread settings, the median timer, and the rounds that alternate minidl's step with the
PyTorch peer's (see _peer).

A shared machine's speed drifts by 10-30% over minutes, for both frameworks alike, so the two
are measured alternately, and the reported ratio is the median of the rounds' ratios, each from
two measurements taken back to back.

Nothing here imports NumPy at import time: a script imports this module before it sets the
thread counts, which must come before NumPy, Numba or torch start their pools.
"""
import argparse
import collections
import os
import time

import _peer

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


def set_threads(n):
    """Every thread pool (BLAS, Numba, torch) to ``n`` threads; call before they start."""
    for var in THREAD_VARIABLES:
        os.environ[var] = str(n)


def step_parser(description):
    """An argument parser with the flags every training-step benchmark takes; the script adds
    its model's own and parses with ``parse``."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3,
                   help="alternate minidl and PyTorch measurements this many times (the machine's speed drifts)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--no-torch", action="store_true")
    p.add_argument("--no-profile", action="store_true")
    p.add_argument("--quick", action="store_true", help="a short run: 3 steps after 1, one round, no profile")
    p.add_argument("--cpu-time", action="store_true",
                   help="with --threads 1: time the process's CPU time instead of the wall clock, so that other "
                        "processes on a loaded machine count less (memory-bandwidth contention still does)")
    _peer.add_argument(p)
    return p


def parse(parser):
    """The parsed arguments; ``--quick`` changes the defaults only, so explicit flags still win."""
    global CLOCK
    args = parser.parse_args()
    if args.quick:
        parser.set_defaults(steps=3, warmup=1, rounds=1, no_profile=True)
        args = parser.parse_args()
    if args.cpu_time:
        if args.threads != 1:
            parser.error("--cpu-time needs --threads 1 (waiting threads' spinning would count as work)")
        CLOCK = time.process_time
    return args


CLOCK = time.perf_counter   # --cpu-time: time.process_time


def median_time(fn, steps, warmup):
    """The median of ``steps`` timed calls of fn, after ``warmup`` untimed ones."""
    import numpy as np
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(steps):
        t0 = CLOCK()
        fn()
        ts.append(CLOCK() - t0)
    return float(np.median(ts))


Rounds = collections.namedtuple("Rounds", "md_s torch_s ratios peer")
Rounds.__doc__ = """What ``compare_rounds`` measured: minidl's and PyTorch's median seconds per step over the
rounds (torch_s None without the peer), the rounds' ratios (PyTorch's time / minidl's, i.e.
minidl's throughput over PyTorch's), and the last peer's results (None without it)."""


def compare_rounds(step, args, script, tokens, target, note=""):
    """Time minidl's ``step`` and the PyTorch half of ``script`` (its ``step_s``) alternately
    over ``args.rounds`` rounds, printing a line per round and then the medians in tokens/s
    (``tokens`` per step) and the median ratio, with its range, against ``target``. Returns
    ``Rounds``."""
    import numpy as np
    t_mds, t_torches, peer = [], [], None
    for r in range(max(args.rounds, 1)):
        got = None if args.no_torch else _peer.run(script)
        t_md = median_time(step, args.steps, args.warmup)
        t_mds.append(t_md)
        line = f"round {r + 1}: minidl {1e3 * t_md:7.1f} ms/step"
        if got:
            peer = got
            t_torches.append(got["step_s"])
            line += f", torch {1e3 * got['step_s']:7.1f} ms/step, ratio {got['step_s'] / t_md:.2f}"
        print(line, flush=True)
    t_md = float(np.median(t_mds))
    print(f"minidl : {1e3 * t_md:8.1f} ms/step  {tokens / t_md:10,.0f} tokens/s ({note}median of the rounds)")
    if not t_torches:
        return Rounds(t_md, None, [], None)
    t_torch = float(np.median(t_torches))
    ratios = [t / m for t, m in zip(t_torches, t_mds)]
    print(f"torch  : {1e3 * t_torch:8.1f} ms/step  {tokens / t_torch:10,.0f} tokens/s "
          f"(torch {peer['version']}, own process)")
    print(f"ratio minidl/torch tokens/s: {float(np.median(ratios)):.2f} ({min(ratios):.2f}-{max(ratios):.2f}), "
          f"the median (range) of the rounds' ratios  (target >= {target})")
    return Rounds(t_md, t_torch, ratios, peer)


def language_model_step(model, opt, vocab, shape):
    """One training step of a minidl language model (``model(x, y)`` -> (logits, loss)) on
    random token ids of ``shape``, drawn from a generator seeded once, so every run sees the
    same batches."""
    import numpy as np
    rng = np.random.default_rng(0)

    def step():
        x = rng.integers(0, vocab, shape)
        y = rng.integers(0, vocab, shape)
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return step


def torch_language_model_step(model, opt, vocab, shape):
    """The same for a PyTorch model whose ``model(x, y)`` returns the loss."""
    import torch
    gen = torch.Generator().manual_seed(0)

    def step():
        x = torch.randint(0, vocab, shape, generator=gen)
        y = torch.randint(0, vocab, shape, generator=gen)
        loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return step
