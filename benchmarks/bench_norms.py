"""Benchmark every normalization layer: NumPy reference vs Numba kernels vs PyTorch CPU.

    python benchmarks/bench_norms.py [--out runs/bench] [--repeat 20] [--only LayerNorm,RMSNorm] [--quick]

For each norm, in float32 at transformer and CNN sizes, times the user-facing path:

    forward:            y = layer(x)                        (x requires grad, training mode)
    forward+backward:   y = layer(x); y.backward(gradient=g); the grads are then in x.grad etc.

for minidl with the NumPy reference (``minidl.ops.normalization.implementation("reference")``),
minidl with the Numba kernels (the default), and PyTorch CPU when it is installed (in a process
of its own, see _peer), with the same number of threads as Numba, twice: as shipped ("pt"), and
at its best ("pt*"), with the allocator setting minidl makes at import (glibc's mmap and trim
thresholds raised by mallopt, minidl/runtime/host_memory.py) made in PyTorch's process too, so
that its fresh outputs do not page-fault either. The fused residual rows ("Add+LayerNorm",
"Add+RMSNorm") time (s, y) = (x + r, norm(x + r)) with both outputs used (the cotangent flows into
s and y, as in a Pre-LN Transformer's residual stream): minidl's ``F.add_layer_norm`` /
``F.add_rms_norm`` against PyTorch's ``s = x + r; y = norm(s)``, and minidl's own unfused
composition beside them ("unfused", same process, same rounds). Each time is the median of
``--repeat`` runs after warm-up (``--threads 1 --cpu-time`` counts only the working thread's CPU
time, steadier on a busy shared machine). The two frameworks are measured alternately in
``--rounds`` rounds (per norm: PyTorch's process, then minidl, with freshly allocated inputs): a shared
machine's speed drifts over minutes and from one process (one placement in memory) to the
next, by 10-30%, for both alike. Reported times are the medians over the rounds, and each
ratio is the median of the rounds' ratios.

The memory-bandwidth floor of a pass is the bytes it must move (forward: read x, write y;
backward: read dy and x, write dx; plus the small parameter and statistics arrays; the fused
residual ops: read x and r, write s and y; read dy, ds and s, write dx) divided by
the copy bandwidth (bytes read + written by np.copyto of a 50 MB array) measured in the same
run, next to that norm's runs; "floor%" is floor / measured time for the Numba path. Prints
one table and saves ``bench_norms.png`` (bar chart), ``bench_norms.txt`` (the table) and
``bench_norms.json`` under ``--out`` (default runs/bench; the run quoted in docs/results.md is in
benchmarks/out). ``--quick``: 3 runs after 1 in one round, 1 for the reference.

Targets (the "target" column, against PyTorch at its best): fwd+bwd at least as fast as PyTorch
for every norm, <= 0.7 for the fused residual ops; >= 90% of the floor.
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
import minidl.nn.functional as F  # noqa: E402
from minidl.ops.normalization import implementation  # noqa: E402
from minidl.runtime import host_memory  # noqa: E402

ROW = (8192, 768)
IMAGE = (32, 64, 32, 32)

# name, input shape, minidl constructor (by name in minidl.nn or in LOCAL, built lazily), torch constructor,
# target ratio against PyTorch at its best
CASES = [
    ("LayerNorm", ROW, ("LayerNorm", (768,)), lambda t: t.nn.LayerNorm(768), 1.0),
    ("RMSNorm", ROW, ("RMSNorm", (768,)), lambda t: t.nn.RMSNorm(768), 1.0),
    ("ScaleNorm", ROW, ("ScaleNorm", (768,)), lambda t: _TorchScaleNorm(t, 768, learn=True), 1.0),
    ("FixNorm", ROW, ("FixNorm", (768,)), lambda t: _TorchScaleNorm(t, 768, learn=False), 1.0),
    ("BatchNorm1d", ROW, ("BatchNorm1d", (768,)), lambda t: t.nn.BatchNorm1d(768), 1.0),
    ("BatchNorm2d", IMAGE, ("BatchNorm2d", (64,)), lambda t: t.nn.BatchNorm2d(64), 1.0),
    ("GroupNorm(32)", IMAGE, ("GroupNorm", (32, 64)), lambda t: t.nn.GroupNorm(32, 64), 1.0),
    ("InstanceNorm2d", IMAGE, ("InstanceNorm2d", (64,)), lambda t: t.nn.InstanceNorm2d(64), 1.0),
    ("Add+LayerNorm", ROW, ("AddLayerNorm", (768,)), lambda t: _TorchAddNorm(t, "layer", 768), 0.7),
    ("Add+RMSNorm", ROW, ("AddRMSNorm", (768,)), lambda t: _TorchAddNorm(t, "rms", 768), 0.7),
]


# how many (mean, rstd) pairs each norm saves, for the floor's small-array bytes
STATS_PER = {"LayerNorm": lambda s: s[0], "RMSNorm": lambda s: s[0], "ScaleNorm": lambda s: s[0],
             "FixNorm": lambda s: s[0], "BatchNorm1d": lambda s: s[1], "BatchNorm2d": lambda s: s[1],
             "GroupNorm": lambda s: s[0] * 32, "InstanceNorm2d": lambda s: s[0] * s[1],
             "AddLayerNorm": lambda s: s[0], "AddRMSNorm": lambda s: s[0]}
# the (N, D)-sized arrays each pass must move, (forward, backward), where not (2, 3)
BIG_ARRAYS = {"AddLayerNorm": (4, 4), "AddRMSNorm": (4, 4)}


def _residual(shape):
    """The residual r of the fused cases, the same in both processes."""
    return np.random.default_rng(1).standard_normal(shape).astype(np.float32)


class _MinidlAddNorm(nn.Module):
    """x -> (x + r, norm(x + r)) with r a leaf that requires grad: fused (F.add_layer_norm /
    F.add_rms_norm) or as the add and the norm module."""

    def __init__(self, kind, d, fused=True):
        super().__init__()
        self.kind, self.fused = kind, fused
        self.norm = nn.LayerNorm(d) if kind == "layer" else nn.RMSNorm(d)
        self.r = nn.Parameter(_residual(ROW))

    def norm_parameters(self):
        return self.norm.parameters()

    def forward(self, x):
        n = self.norm
        if not self.fused:
            s = x + self.r
            return s, n(s)
        if self.kind == "layer":
            return F.add_layer_norm(x, self.r, n.normalized_shape, n.weight, n.bias, n.eps)
        return F.add_rms_norm(x, self.r, n.normalized_shape, n.weight, n.eps)


LOCAL = {"AddLayerNorm": lambda d: _MinidlAddNorm("layer", d), "AddRMSNorm": lambda d: _MinidlAddNorm("rms", d)}
UNFUSED = {"AddLayerNorm": lambda d: _MinidlAddNorm("layer", d, fused=False),
           "AddRMSNorm": lambda d: _MinidlAddNorm("rms", d, fused=False)}


def _TorchAddNorm(torch, kind, d):
    """PyTorch's add + norm, both outputs returned."""
    class AddNorm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(d) if kind == "layer" else torch.nn.RMSNorm(d)
            self.r = torch.nn.Parameter(torch.from_numpy(_residual(ROW)))

        def norm_parameters(self):
            return self.norm.parameters()

        def forward(self, x):
            s = x + self.r
            return s, self.norm(s)
    return AddNorm()


def set_minidl_allocator():
    """In PyTorch's process: glibc's mmap and trim thresholds as minidl sets them at import
    (host_memory.keep_freed_memory, here called whatever MINIDL_KEEP_FREED_MEMORY says)."""
    import ctypes
    mallopt = ctypes.CDLL("libc.so.6").mallopt
    return (bool(mallopt(host_memory._M_TRIM_THRESHOLD, host_memory.TRIM_BYTES))
            and bool(mallopt(host_memory._M_MMAP_THRESHOLD, host_memory.MMAP_BYTES)))


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


def floor_bytes(shape, n_params, n_stats, itemsize=4, arrays=(2, 3)):
    """(forward, forward+backward) bytes that must move: ``arrays`` (forward, backward) arrays of
    x's size (a norm: x in, y out; then dy, x in, dx out) and the small ones."""
    big = int(np.prod(shape)) * itemsize
    small = n_params * itemsize + n_stats * 8
    fwd = arrays[0] * big + small
    bwd = arrays[1] * big + 2 * small
    return fwd, fwd + bwd


def runner(layer, xt, gt, backward):
    """(forward, forward+backward) closures for a layer on input xt (requiring grad) and
    cotangent gt (for each output, when the layer returns several): the same code drives
    minidl and PyTorch, whose APIs agree here (``backward``: their autograd.backward)."""
    params = list(layer.parameters())

    def fwd():
        layer(xt)

    def fwdbwd():
        xt.grad = None
        for p in params:
            p.grad = None
        out = layer(xt)
        outs = list(out) if isinstance(out, tuple) else [out]
        backward(outs, [gt] * len(outs))
        return xt.grad
    return fwd, fwdbwd


def minidl_runner(layer, x, g):
    return runner(layer, md.tensor(x, requires_grad=True), md.tensor(g), md.autograd.backward)


def torch_runner(torch, layer, x, g):
    return runner(layer, torch.from_numpy(x).requires_grad_(True), torch.from_numpy(g), torch.autograd.backward)


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
    allocator = set_minidl_allocator() if args.peer_allocator == "minidl" else False
    times = {}
    for name, shape, _, torch_ctor, _ in selected_cases(args):
        fwd, fwdbwd = torch_runner(torch, torch_ctor(torch), *case_inputs(name, shape))
        times[name] = (median_time(fwd, args.repeat, args.warmup), median_time(fwdbwd, args.repeat, args.warmup))
    _peer.write(args.peer_json, {"version": torch.__version__, "threads": torch.get_num_threads(), "times": times,
                                 "minidl_allocator": allocator})


def build_minidl(spec, table=None):
    cls_name, args = spec
    cls = (table or LOCAL).get(cls_name) or getattr(nn, cls_name, None)
    return None if cls is None else cls(*args)


def measure_minidl(name, shape, spec, copy, args, reference):
    """One round of a case in minidl: the Numba path's times, each next to a copy timing for its
    floor (and, when ``reference``, the NumPy reference's times under "reference"); None when
    the layer is missing."""
    layer = build_minidl(spec)
    if layer is None:
        return None
    x, g = case_inputs(name, shape)
    n_params = sum(p.numel() for p in getattr(layer, "norm_parameters", layer.parameters)())
    fb, fbb = floor_bytes(shape, n_params, 2 * STATS_PER[spec[0]](shape), arrays=BIG_ARRAYS.get(spec[0], (2, 3)))
    fwd, fwdbwd = minidl_runner(layer, x, g)
    out = {}
    if spec[0] in UNFUSED:   # minidl's own add + norm, alternated with the fused op in the same round
        _, unfused = minidl_runner(build_minidl(spec, UNFUSED), x, g)
        with implementation("numba"):
            out["unfused_fwdbwd"] = median_time(unfused, args.repeat, args.warmup)
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
    ap.add_argument("--peer-allocator", choices=("shipped", "minidl"), default="shipped", help=argparse.SUPPRESS)
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
        md.set_num_threads(args.threads)   # minidl starts Numba's pool with its short spin first
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
            # each case's PyTorch processes (as shipped, then at its best) right before its minidl
            # measurement: the three are seconds apart, not a whole table apart. Neither lets
            # minidl's import touch malloc; the second sets minidl's thresholds itself.
            peers = {}
            for key, extra in (("torch", []), ("torch_best", ["--peer-allocator", "minidl"])):
                if not args.no_torch:
                    peers[key] = _peer.run(__file__, base_argv + ["--only", name] + extra,
                                           env={"MINIDL_KEEP_FREED_MEMORY": "0"})
                if peers.get(key):
                    version = peers[key]["version"]
                    row.setdefault("peer_minidl_allocator", {})[key] = peers[key]["minidl_allocator"]
            measured = measure_minidl(name, shape, spec, copy, args, reference=(r == 0))
            if measured is None:
                row["missing"] = True
                continue
            if r == 0:
                row.update(measured.pop("reference"))
            for key, peer in peers.items():
                if peer:
                    measured[f"{key}_fwd"], measured[f"{key}_fwdbwd"] = peer["times"][name]
            for key, value in measured.items():
                samples.setdefault((name, key), []).append(value)
        print(f"round {r + 1} of {rounds} done")
    print(f"torch {version + ' (own process)' if version else '-'}")
    for row in rows:
        if row.get("missing"):
            continue
        values = {key: v for (name, key), v in samples.items() if name == row["norm"]}
        for key in ("numba_fwd", "numba_fwdbwd", "torch_fwd", "torch_fwdbwd", "torch_best_fwd", "torch_best_fwdbwd",
                    "unfused_fwdbwd", "floor_fwd", "floor_fwdbwd", "copy_bandwidth"):
            if key in values:
                row[key] = float(np.median(values[key]))
                row[key + "_range"] = [float(np.min(values[key])), float(np.max(values[key]))]
        for peer, tag in (("torch", ""), ("torch_best", "best_")):
            for part in ("fwd", "fwdbwd"):
                if f"{peer}_{part}" in values:
                    ratios = np.divide(values[f"numba_{part}"], values[f"{peer}_{part}"])
                    row[f"ratio_{tag}{part}"] = float(np.median(ratios))
                    row[f"ratio_{tag}{part}_range"] = [float(ratios.min()), float(ratios.max())]
        if "unfused_fwdbwd" in values:
            row["fused_over_unfused"] = float(np.median(np.divide(values["numba_fwdbwd"], values["unfused_fwdbwd"])))
        floor = np.divide(values["floor_fwdbwd"], values["numba_fwdbwd"])
        row["floor_fraction"] = float(np.median(floor))
        row["floor_fraction_range"] = [float(floor.min()), float(floor.max())]

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


FLOOR_TARGET = 0.9


def _ratio(v):
    return ('%6.2f' % v) if v else '     -'


def format_table(rows):
    head = (f"{'norm':15s} {'shape':12s} {'ref f+b':>8s} {'nb fwd':>8s} {'nb f+b':>8s} "
            f"{'pt fwd':>8s} {'pt f+b':>8s} {'pt* f+b':>8s} {'f+b/pt':>6s} {'/pt*':>6s} {'target':>6s} "
            f"{'floor':>8s} {'floor%':>6s}  met")
    lines = [head, "-" * len(head)]
    for r in rows:
        shape = "x".join(map(str, r["shape"]))
        if r.get("missing"):
            lines.append(f"{r['norm']:15s} {shape:12s} missing (not in minidl.nn)")
            continue
        rfb, rbest, floor_frac = r.get("ratio_fwdbwd"), r.get("ratio_best_fwdbwd"), r["floor_fraction"]
        met = []
        if rbest is not None:
            met.append("yes" if rbest <= r["target"] else "NO")
        met.append("yes" if floor_frac >= FLOOR_TARGET else "NO")
        lines.append(
            f"{r['norm']:15s} {shape:12s} {_ms(r['ref_fwdbwd'])} {_ms(r['numba_fwd'])} "
            f"{_ms(r['numba_fwdbwd'])} {_ms(r.get('torch_fwd'))} {_ms(r.get('torch_fwdbwd'))} "
            f"{_ms(r.get('torch_best_fwdbwd'))} {_ratio(rfb)} {_ratio(rbest)} {r['target']:6.2f} "
            f"{_ms(r['floor_fwdbwd'])} {100 * floor_frac:5.0f}%  {'/'.join(met)}")
    lines.append("times: medians over the rounds; ratios (minidl(numba)/PyTorch) and floor%: medians of the "
                 "rounds' ratios; floor and floor% are for forward+backward; pt = PyTorch as shipped, pt* = PyTorch "
                 "with minidl's allocator setting; met = ratio target against pt* / floor% >= "
                 f"{100 * FLOOR_TARGET:.0f}")
    for r in rows:
        if "fused_over_unfused" in r:
            lines.append(f"{r['norm']}: minidl's unfused add + norm f+b {_ms(r['unfused_fwdbwd']).strip()} ms; "
                         f"fused / unfused {r['fused_over_unfused']:.2f} (median of the rounds' ratios)")
    return "\n".join(lines)


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if not r.get("missing")]
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(rows)), 4.5))
    xs = np.arange(len(rows))
    series = [("ref_fwdbwd", "NumPy reference", "#bbbbbb"), ("numba_fwdbwd", "minidl (Numba)", "#1f77b4"),
              ("torch_fwdbwd", "PyTorch CPU, as shipped", "#ff7f0e"),
              ("torch_best_fwdbwd", "PyTorch CPU, minidl's allocator setting", "#d62728")]
    w = 0.2
    for k, (key, label, color) in enumerate(series):
        vals = [r.get(key, np.nan) or np.nan for r in rows]
        ax.bar(xs + (k - 1.5) * w, np.array(vals) * 1e3, w, label=label, color=color)
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
