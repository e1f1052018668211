"""Benchmark every normalization layer: NumPy reference vs Numba kernels vs PyTorch CPU.

    python benchmarks/bench_norms.py [--out runs/bench] [--repeat 20] [--only LayerNorm,RMSNorm] [--quick]

For each norm, in float32 at transformer and CNN sizes, times the user-facing path:

    forward:            y = layer(x)                        (x requires grad, training mode)
    forward+backward:   y = layer(x); y.backward(gradient=g); the grads are then in x.grad etc.

for minidl with the NumPy reference (``minidl.ops.normalization.implementation("reference")``),
minidl with the Numba kernels (the default), and PyTorch CPU when it is installed (in a process
of its own, see _peer), with the same number of threads as Numba. Each time is the median of
``--repeat`` runs after warm-up (``--threads 1 --cpu-time`` counts only the working thread's CPU
time, steadier on a busy shared machine). The two frameworks are measured alternately in
``--rounds`` rounds (per norm: PyTorch's process, then minidl, with freshly allocated inputs): a shared
machine's speed drifts over minutes and from one process (one placement in memory) to the
next, by 10-30%, for both alike. Reported times are the medians over the rounds, and each
ratio is the median of the rounds' ratios.

The memory-bandwidth floor of a pass is the bytes it must move (forward: read x, write y;
backward: read dy and x, write dx; plus the small parameter and statistics arrays) divided by
the copy bandwidth (bytes read + written by np.copyto of a 50 MB array) measured in the same
run, next to that norm's runs; "floor%" is floor / measured time for the Numba path. Prints
one table and saves ``bench_norms.png`` (bar chart), ``bench_norms.txt`` (the table) and
``bench_norms.json`` under ``--out`` (default runs/bench; the run quoted in docs/results.md is in
benchmarks/out). ``--quick``: 3 runs after 1 in one round, 1 for the reference.

Targets: fwd+bwd faster than PyTorch for every norm; minidl/PyTorch <= 0.8 for
LayerNorm and GroupNorm, <= 0.5 for RMSNorm, BatchNorm2d and InstanceNorm2d; >= 50% of the floor.
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np

import _peer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import minidl as md  # noqa: E402
import minidl.nn as nn  # noqa: E402
from minidl.ops.normalization import implementation  # noqa: E402

ROW = (8192, 768)
IMAGE = (32, 64, 32, 32)

# name, input shape, minidl constructor (by name in minidl.nn, built lazily), torch constructor, target ratio
CASES = [
    ("LayerNorm", ROW, ("LayerNorm", (768,)), lambda t: t.nn.LayerNorm(768), 0.8),
    ("RMSNorm", ROW, ("RMSNorm", (768,)), lambda t: t.nn.RMSNorm(768), 0.5),
    ("ScaleNorm", ROW, ("ScaleNorm", (768,)), lambda t: _TorchScaleNorm(t, 768, learn=True), 1.0),
    ("FixNorm", ROW, ("FixNorm", (768,)), lambda t: _TorchScaleNorm(t, 768, learn=False), 1.0),
    ("BatchNorm1d", ROW, ("BatchNorm1d", (768,)), lambda t: t.nn.BatchNorm1d(768), 1.0),
    ("BatchNorm2d", IMAGE, ("BatchNorm2d", (64,)), lambda t: t.nn.BatchNorm2d(64), 0.5),
    ("GroupNorm(32)", IMAGE, ("GroupNorm", (32, 64)), lambda t: t.nn.GroupNorm(32, 64), 0.8),
    ("InstanceNorm2d", IMAGE, ("InstanceNorm2d", (64,)), lambda t: t.nn.InstanceNorm2d(64), 0.5),
]


# how many (mean, rstd) pairs each norm saves, for the floor's small-array bytes
STATS_PER = {"LayerNorm": lambda s: s[0], "RMSNorm": lambda s: s[0], "ScaleNorm": lambda s: s[0],
             "FixNorm": lambda s: s[0], "BatchNorm1d": lambda s: s[1], "BatchNorm2d": lambda s: s[1],
             "GroupNorm": lambda s: s[0] * 32, "InstanceNorm2d": lambda s: s[0] * s[1]}


def _TorchScaleNorm(torch, dim, learn):
    """PyTorch has no ScaleNorm: the same math from its primitives (what a user would write)."""
    class ScaleNorm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            g = torch.full((1,), math.sqrt(dim))
            self.scale = torch.nn.Parameter(g) if learn else g

        def forward(self, x):
            return self.scale * x / x.norm(dim=-1, keepdim=True).clamp_min(1e-5)
    return ScaleNorm()


STAT = np.median   # --stat min: the best run, a steadier figure on a machine shared with other work
CLOCK = time.perf_counter   # --cpu-time: time.thread_time, the CPU time of this thread only


def median_time(fn, repeat, warmup):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = CLOCK()
        fn()
        times.append(CLOCK() - t0)
    return float(STAT(times))


class Copy:
    """A large array copy (into a reused buffer): bytes read + written per second is the copy
    bandwidth. It is also timed right after each norm, so that each norm's floor uses the
    bandwidth of the same moments (the overall figure alone drifts with background load)."""

    def __init__(self):
        self.src = np.random.default_rng(0).standard_normal(ROW[0] * ROW[1] * 2).astype(np.float32)
        self.dst = np.empty_like(self.src)
        self.nbytes = 2 * self.src.nbytes

    def __call__(self):
        np.copyto(self.dst, self.src)


def floor_bytes(shape, n_params, n_stats, itemsize=4):
    """(forward, forward+backward) bytes that must move: x in, y out; then dy, x in, dx out."""
    big = int(np.prod(shape)) * itemsize
    small = n_params * itemsize + n_stats * 8
    fwd = 2 * big + small
    bwd = 3 * big + 2 * small
    return fwd, fwd + bwd


def runner(layer, xt, gt):
    """(forward, forward+backward) closures for a layer on input xt (requiring grad) and
    cotangent gt: the same code drives minidl and PyTorch, whose APIs agree here."""
    params = list(layer.parameters())

    def fwd():
        layer(xt)

    def fwdbwd():
        xt.grad = None
        for p in params:
            p.grad = None
        y = layer(xt)
        y.backward(gradient=gt)
        return xt.grad
    return fwd, fwdbwd


def minidl_runner(layer, x, g):
    return runner(layer, md.tensor(x, requires_grad=True), md.tensor(g))


def torch_runner(torch, layer, x, g):
    return runner(layer, torch.from_numpy(x).requires_grad_(True), torch.from_numpy(g))


def selected_cases(args):
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    return [case for case in CASES if not only or case[0] in only]


def case_inputs(name, shape):
    """x and the cotangent g for a case, the same in both processes."""
    rng = np.random.default_rng([ord(ch) for ch in name])
    return rng.standard_normal(shape).astype(np.float32), rng.standard_normal(shape).astype(np.float32)


def peer_main(args):
    """The PyTorch half, in its own process (see _peer): (fwd, fwd+bwd) seconds per case."""
    import torch
    if args.threads:
        torch.set_num_threads(args.threads)
    times = {}
    for name, shape, _, torch_ctor, _ in selected_cases(args):
        fwd, fwdbwd = torch_runner(torch, torch_ctor(torch), *case_inputs(name, shape))
        times[name] = (median_time(fwd, args.repeat, args.warmup), median_time(fwdbwd, args.repeat, args.warmup))
    _peer.write(args.peer_json, {"version": torch.__version__, "threads": torch.get_num_threads(), "times": times})


def build_minidl(spec):
    cls_name, args = spec
    cls = getattr(nn, cls_name, None)
    return None if cls is None else cls(*args)


def measure_minidl(name, shape, spec, copy, args, reference):
    """One round of a case in minidl: the Numba path's times, each next to a copy timing for its
    floor (and, when ``reference``, the NumPy reference's times under "reference"); None when
    the layer is missing."""
    layer = build_minidl(spec)
    if layer is None:
        return None
    x, g = case_inputs(name, shape)
    n_params = sum(p.numel() for p in layer.parameters())
    fb, fbb = floor_bytes(shape, n_params, 2 * STATS_PER[spec[0]](shape))
    fwd, fwdbwd = minidl_runner(layer, x, g)
    out = {}
    if reference:
        with implementation("reference"):
            out["reference"] = {"ref_fwd": median_time(fwd, args.repeat_reference, 1),
                                "ref_fwdbwd": median_time(fwdbwd, args.repeat_reference, 1)}
    with implementation("numba"):
        out["numba_fwd"] = median_time(fwd, args.repeat, args.warmup)
        copy_fwd = median_time(copy, args.repeat, 1)
        out["numba_fwdbwd"] = median_time(fwdbwd, args.repeat, args.warmup)
        copy_fwdbwd = median_time(copy, args.repeat, 1)
    bw = copy.nbytes / min(copy_fwd, copy_fwdbwd)
    out["copy_bandwidth"] = bw
    out["floor_fwd"], out["floor_fwdbwd"] = fb / bw, fbb / bw
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join("runs", "bench"), help="output directory (default runs/bench)")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--repeat-reference", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3,
                    help="alternate PyTorch's process and minidl this many times (the machine's speed drifts)")
    ap.add_argument("--only", default="", help="comma-separated norm names (default: all)")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--stat", choices=("median", "min"), default="median")
    ap.add_argument("--threads", type=int, default=0, help="threads for Numba and PyTorch (default: Numba's)")
    ap.add_argument("--cpu-time", action="store_true",
                    help="with --threads 1: time the CPU time of the (only) working thread, so that other "
                         "processes on a shared machine do not count (memory-bandwidth contention still does)")
    ap.add_argument("--quick", action="store_true", help="a short run: 3 runs after 1, one round")
    _peer.add_argument(ap)
    args = ap.parse_args(argv)
    if args.quick:   # explicit flags still win
        ap.set_defaults(repeat=3, repeat_reference=1, warmup=1, rounds=1)
        args = ap.parse_args(argv)
    global STAT, CLOCK
    STAT = np.median if args.stat == "median" else np.min
    if args.cpu_time:
        if args.threads != 1:
            ap.error("--cpu-time needs --threads 1 (other threads' CPU time would not be counted)")
        CLOCK = time.thread_time
    if args.peer_json:
        return peer_main(args)
    import numba
    if args.threads:
        numba.set_num_threads(args.threads)
    threads = numba.get_num_threads()

    copy = Copy()
    bandwidth = copy.nbytes / median_time(copy, args.repeat, 3)
    rounds = max(1, args.rounds)
    print(f"threads: {threads} (numba and torch){'; CPU time' if args.cpu_time else ''}; "
          f"copy bandwidth {bandwidth / 1e9:.1f} GB/s; {args.stat} of {args.repeat} runs "
          f"({args.repeat_reference} for the reference) in each of {rounds} alternating rounds, times in ms")

    cases = selected_cases(args)
    rows = [{"norm": name, "shape": list(shape), "target": target} for name, shape, _, _, target in cases]
    samples = {}     # (norm, key) -> one value per round
    version = None
    base_argv = list(sys.argv[1:] if argv is None else argv)
    for r in range(rounds):
        for row, (name, shape, spec, _, _) in zip(rows, cases):
            # each case's PyTorch process right before its minidl measurement: the pair is
            # seconds apart, not a whole table apart
            peer = None if args.no_torch else _peer.run(__file__, base_argv + ["--only", name])
            if peer:
                version = peer["version"]
            measured = measure_minidl(name, shape, spec, copy, args, reference=(r == 0))
            if measured is None:
                row["missing"] = True
                continue
            if r == 0:
                row.update(measured.pop("reference"))
            if peer:
                measured["torch_fwd"], measured["torch_fwdbwd"] = peer["times"][name]
            for key, value in measured.items():
                samples.setdefault((name, key), []).append(value)
        print(f"round {r + 1} of {rounds} done")
    print(f"torch {version + ' (own process)' if version else '-'}")
    for row in rows:
        if row.get("missing"):
            continue
        values = {key: v for (name, key), v in samples.items() if name == row["norm"]}
        for key in ("numba_fwd", "numba_fwdbwd", "torch_fwd", "torch_fwdbwd", "floor_fwd", "floor_fwdbwd",
                    "copy_bandwidth"):
            if key in values:
                row[key] = float(np.median(values[key]))
        for part in ("fwd", "fwdbwd"):
            if f"torch_{part}" in values:
                row[f"ratio_{part}"] = float(np.median(np.divide(values[f"numba_{part}"], values[f"torch_{part}"])))
        row["floor_fraction"] = float(np.median(np.divide(values["floor_fwdbwd"], values["numba_fwdbwd"])))

    table = format_table(rows)
    print(table)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "bench_norms.txt"), "w") as f:
        f.write(table + "\n")
    with open(os.path.join(args.out, "bench_norms.json"), "w") as f:
        json.dump({"threads": threads, "copy_bandwidth": bandwidth, "rows": rows}, f, indent=1)
    png = plot(rows, os.path.join(args.out, "bench_norms.png"))
    print(f"saved {png}")
    return rows


def _ms(v):
    return "-" if v is None else f"{v * 1e3:8.2f}"


def format_table(rows):
    head = (f"{'norm':15s} {'shape':16s} {'ref fwd':>8s} {'ref f+b':>8s} {'nb fwd':>8s} {'nb f+b':>8s} "
            f"{'pt fwd':>8s} {'pt f+b':>8s} {'fwd/pt':>6s} {'f+b/pt':>6s} {'target':>6s} "
            f"{'floor':>8s} {'floor%':>6s}  met")
    lines = [head, "-" * len(head)]
    for r in rows:
        shape = "x".join(map(str, r["shape"]))
        if r.get("missing"):
            lines.append(f"{r['norm']:15s} {shape:16s} missing (not in minidl.nn)")
            continue
        tf, tfb = r.get("torch_fwd"), r.get("torch_fwdbwd")
        rf, rfb, floor_frac = r.get("ratio_fwd"), r.get("ratio_fwdbwd"), r["floor_fraction"]
        met = []
        if rfb is not None:
            met.append("yes" if rfb <= r["target"] and rfb < 1 else "NO")
        met.append("yes" if floor_frac >= 0.5 else "NO")
        lines.append(
            f"{r['norm']:15s} {shape:16s} {_ms(r['ref_fwd'])} {_ms(r['ref_fwdbwd'])} {_ms(r['numba_fwd'])} "
            f"{_ms(r['numba_fwdbwd'])} {_ms(tf)} {_ms(tfb)} "
            f"{('%6.2f' % rf) if rf else '     -'} {('%6.2f' % rfb) if rfb else '     -'} {r['target']:6.2f} "
            f"{_ms(r['floor_fwdbwd'])} {100 * floor_frac:5.0f}%  {'/'.join(met)}")
    lines.append("times: medians over the rounds; ratios (minidl(numba)/PyTorch) and floor%: medians of the "
                 "rounds' ratios; floor and floor% are for forward+backward; met = ratio target / bandwidth target")
    return "\n".join(lines)


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if not r.get("missing")]
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(rows)), 4.5))
    xs = np.arange(len(rows))
    series = [("ref_fwdbwd", "NumPy reference", "#bbbbbb"), ("numba_fwdbwd", "minidl (Numba)", "#1f77b4"),
              ("torch_fwdbwd", "PyTorch CPU", "#ff7f0e")]
    w = 0.27
    for k, (key, label, color) in enumerate(series):
        vals = [r.get(key, np.nan) or np.nan for r in rows]
        ax.bar(xs + (k - 1) * w, np.array(vals) * 1e3, w, label=label, color=color)
    ax.scatter(xs, [r["floor_fwdbwd"] * 1e3 for r in rows], marker="_", s=600, color="k", zorder=3,
               label="bandwidth floor")
    ax.set_yscale("log")
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{r['norm']}\n{'x'.join(map(str, r['shape']))}" for r in rows], fontsize=8)
    ax.set_ylabel("forward + backward, ms (log)")
    ax.set_title(f"Normalization layers, float32, forward+backward ({STAT.__name__.replace('amin', 'min')})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


if __name__ == "__main__":
    main()
