"""Training-step throughput (images/s) of minidl's CNNs beside PyTorch CPU, and where the step's
time goes.

    python benchmarks/bench_cnn.py --threads 2 --rounds 5
    python benchmarks/bench_cnn.py --threads 2 --rounds 5 --write-results   # also docs/results.md
    python benchmarks/bench_cnn.py --quick
    python benchmarks/bench_cnn.py --threads 2 --rounds 5 --no-torch --block-workers ab   # in-process A/B

Cases: ResNet-8 with BatchNorm and with GroupNorm, batch 64 of 3x32x32 random images, and
LeNet-5 on 1x28x28. A training step is forward, cross-entropy, backward and an SGD (momentum)
update. Each framework gets the same thread count (BLAS, Numba, torch intra-op) and a few
warm-up steps (Numba compiles, caches fill); PyTorch runs equivalent models built here (same
layers, shapes and optimizer) in a process of its own started by this script (see _peer).
A shared machine's speed drifts by 10-30% over minutes, so the two are measured alternately
over ``--rounds`` rounds (PyTorch's process, then minidl, each case the median of ``--steps``
steps), and each ratio is the median of the rounds' ratios.

Then, per case, the step's accounting (``_step_accounting``): its FLOPs and the GEMM rate,
the other op work and the bytes it moves against the copy bandwidth, and the time in neither;
and, with ``--profile-steps``, a cProfile of minidl's first case.
"""
import os
import sys

import _peer
import _results
import _runner


def parse_args():
    p = _runner.step_parser("CNN training-step throughput, minidl vs PyTorch CPU")
    p.set_defaults(batch_size=64, steps=15, rounds=3)
    p.add_argument("--profile-steps", type=int, default=0, help="cProfile this many steps of the first case")
    p.add_argument("--cases", default="resnet8_bn,resnet8_gn,lenet")
    p.add_argument("--no-accounting", action="store_true")
    p.add_argument("--block-workers", choices=("on", "off", "ab"), default="on",
                   help="conv2d's image blocks on the block workers (minidl.ops.conv_blocks.BLOCK_WORKERS); ab: minidl "
                        "measured both ways in each round, in alternating order, and both reported")
    p.add_argument("--write-results", action="store_true",
                   help="write the throughput and accounting tables into docs/results.md")
    args = _runner.parse(p)
    if args.quick:
        args.profile_steps = 0
    return args


ARGS = parse_args()
_runner.set_threads(ARGS.threads)   # before NumPy / BLAS / Numba / torch start their pools

if ARGS.peer_json:
    import torch  # noqa: F401,E402  (first, so its thread runtime loads with its own defaults; see _peer)
import statistics  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

CASES = {   # name: (description, input shape without the batch)
    "resnet8_bn": ("ResNet-8 + BatchNorm, 3x32x32", (3, 32, 32)),
    "resnet8_gn": ("ResNet-8 + GroupNorm(8), 3x32x32", (3, 32, 32)),
    "lenet": ("LeNet-5, 1x28x28", (1, 28, 28)),
}
CLOCK = _runner.CLOCK   # wall-clock, or the process's CPU time with --cpu-time (see _runner)
median_time = _runner.median_time


def _data(name, bs):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((bs, *CASES[name][1])).astype(np.float32)
    y = rng.integers(0, 10, bs).astype(np.int64)
    return x, y


# minidl ------------------------------------------------------------------------------------
def minidl_case(name, bs):
    """(step, optimizer) for one case."""
    import minidl as md
    import minidl.nn.functional as F
    from minidl import optim
    from minidl.zoo import LeNet, resnet8
    md.manual_seed(0)
    if name.startswith("resnet8"):
        model = resnet8(in_channels=3, num_classes=10, norm="batch" if name == "resnet8_bn" else "group")
    else:
        model = LeNet(in_channels=1, num_classes=10, input_size=28)
    opt = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    xa, ya = _data(name, bs)
    x, y = md.from_numpy(xa), md.from_numpy(ya)

    def step():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return step, opt


# PyTorch equivalents -----------------------------------------------------------------------
def torch_case(name, bs):
    import torch
    from torch import nn
    torch.manual_seed(0)

    def norm(c):
        return nn.BatchNorm2d(c) if name == "resnet8_bn" else nn.GroupNorm(8, c)

    class Block(nn.Module):
        def __init__(self, cin, c, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, c, 3, stride, 1, bias=False)
            self.norm1 = norm(c)
            self.conv2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
            self.norm2 = norm(c)
            self.shortcut = None
            if stride != 1 or cin != c:
                self.shortcut = nn.Sequential(nn.Conv2d(cin, c, 1, stride, bias=False), norm(c))

        def forward(self, x):
            out = torch.relu(self.norm1(self.conv1(x)))
            out = self.norm2(self.conv2(out))
            return torch.relu(out + (x if self.shortcut is None else self.shortcut(x)))

    if name.startswith("resnet8"):
        model = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), norm(16), nn.ReLU(),
                              Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2),
                              nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
    else:
        model = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    xa, ya = _data(name, bs)
    x, y = torch.from_numpy(xa), torch.from_numpy(ya)

    def step():
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return step


def peer_main():
    """The PyTorch half, in its own process (see _peer)."""
    import torch
    torch.set_num_threads(ARGS.threads)
    _peer.write(ARGS.peer_json, {"version": torch.__version__,
                                 "step_s": {name: median_time(torch_case(name, ARGS.batch_size), ARGS.steps,
                                                                      ARGS.warmup)
                                            for name in ARGS.cases.split(",")}})


AB = {}   # (case, block workers on) -> minidl seconds per round, with --block-workers ab


def ab_lines(cases):
    """Block workers off vs on: medians and ranges of the rounds, and the median ratio."""
    lines = []
    for name in cases:
        off, on = (sorted(1e3 * t for t in AB[name, v]) for v in (False, True))
        ratios = [a / b for a, b in zip(AB[name, False], AB[name, True])]
        lines.append(f"{name}: block workers off {statistics.median(off):.1f} ms ({off[0]:.1f}-{off[-1]:.1f}), "
                     f"on {statistics.median(on):.1f} ms ({on[0]:.1f}-{on[-1]:.1f}); off/on median "
                     f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}), {len(ratios)} rounds")
    return lines


def measure_rounds(cases, steps):
    """{case: [minidl seconds per round]}, {case: [torch seconds per round]} (empty without
    PyTorch), the torch version or None."""
    t_md = {n: [] for n in cases}
    t_pt = {n: [] for n in cases}
    version = None
    from minidl.ops import conv_blocks
    for r in range(max(ARGS.rounds, 1)):
        peer = None if ARGS.no_torch else _peer.run(__file__)
        line = [f"round {r + 1}:"]
        for name in cases:
            if ARGS.block_workers == "ab":   # minidl's time below is the "on" one
                for on in ((False, True) if r % 2 == 0 else (True, False)):
                    conv_blocks.BLOCK_WORKERS = on
                    AB[name, on].append(median_time(steps[name][0], ARGS.steps, ARGS.warmup))
                line.append(f"{name} block workers off {1e3 * AB[name, False][-1]:.1f},")
                t = AB[name, True][-1]
            else:
                conv_blocks.BLOCK_WORKERS = ARGS.block_workers == "on"
                t = median_time(steps[name][0], ARGS.steps, ARGS.warmup)
            t_md[name].append(t)
            part = f"{name} minidl {1e3 * t:.1f}"
            if peer:
                version = peer["version"]
                t_pt[name].append(peer["step_s"][name])
                part += f" torch {1e3 * peer['step_s'][name]:.1f} ms ({peer['step_s'][name] / t:.2f})"
            line.append(part)
        print("  ".join(line), flush=True)
    return t_md, {n: v for n, v in t_pt.items() if v}, version


def throughput_lines(cases, bs, t_md, t_pt):
    lines = ["| model, batch %d | minidl ms/step | PyTorch ms/step | minidl img/s | PyTorch img/s "
             "| ratio: median (range) over rounds |" % bs, "|---|---|---|---|---|---|"]
    for name in cases:
        md_s = statistics.median(t_md[name])
        row = f"| {CASES[name][0]} | {1e3 * md_s:.1f} "
        if name in t_pt:
            pt_s = statistics.median(t_pt[name])
            ratios = [p / m for p, m in zip(t_pt[name], t_md[name])]
            row += f"| {1e3 * pt_s:.1f} | {bs / md_s:,.0f} | {bs / pt_s:,.0f} | {_results.ratio_cell(ratios)} |"
        else:
            row += f"| - | {bs / md_s:,.0f} | - | - |"
        lines.append(row)
    return lines


def _gemm_provider():
    from minidl.kernels.cpu import _cblas
    return _cblas.PROVIDER


def main():
    if ARGS.peer_json:
        return peer_main()
    import numba

    import minidl  # noqa: F401  (process tuning before anything is measured)
    import _step_accounting as acc
    from minidl.autograd.op_function import Function
    acc.CLOCK = CLOCK
    # through minidl, which starts Numba's pool with its short spin first: numba.set_num_threads
    # as the first call would start it with libgomp's default spin (docs/performance.md)
    minidl.set_num_threads(min(ARGS.threads, numba.config.NUMBA_NUM_THREADS))
    bs = ARGS.batch_size
    cases = ARGS.cases.split(",")
    steps = {name: minidl_case(name, bs) for name in cases}
    print(f"threads {ARGS.threads}, batch {bs}, median of {ARGS.steps} steps after {ARGS.warmup} warm-up in each of "
          f"{ARGS.rounds} alternating rounds; numpy {np.__version__}; the kernels' GEMMs: {_gemm_provider()}; "
          f"{'CPU time' if ARGS.cpu_time else 'wall-clock'}", flush=True)
    for name in cases:
        AB[name, False], AB[name, True] = [], []
    t_md, t_pt, version = measure_rounds(cases, steps)
    lines = throughput_lines(cases, bs, t_md, t_pt)
    print()
    print("\n".join(lines))
    if ARGS.block_workers == "ab":
        print()
        print("\n".join(ab_lines(cases)))

    acc_lines = []
    if not ARGS.no_accounting:
        bandwidth, peak = acc.copy_bandwidth(), acc.gemm_rate()
        acc_lines = acc.HEADER[:]
        rows = {}
        for name in cases:
            step, opt = steps[name]
            rows[name] = a = acc.account(step, opt, Function)
            acc_lines += acc.table(CASES[name][0], a, bandwidth, peak)
        print(f"\nstep accounting (one instrumented step; copy bandwidth {bandwidth / 1e9:.1f} GB/s read+write, "
              f"one 1536^3 SGEMM {peak / 1e9:.0f} GFLOP/s):")
        print("\n".join(acc_lines))
        for name in cases:
            print(f"\n{name}: the ops' own time outside GEMMs, ms (calls, MB moved)")
            print("\n".join(acc.op_lines(rows[name])))

    if ARGS.profile_steps:
        import cProfile
        import io
        import pstats
        step = steps[cases[0]][0]
        step()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(ARGS.profile_steps):
            step()
        prof.disable()
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(18)
        print(f"\ncProfile of {ARGS.profile_steps} minidl {cases[0]} training steps (sorted by own time):")
        print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:6000])

    if ARGS.write_results:
        text = [_results.run_header("bench_cnn", ARGS, version), "", *lines]
        if acc_lines:
            text += ["", acc.machine_note(bandwidth, peak), "", *acc_lines]
        _results.write_block("bench_cnn", "\n".join(text))


if __name__ == "__main__":
    main()
