"""Training-step throughput (images/s) of minidl's CNNs beside PyTorch CPU, in one run.

    python benchmarks/bench_cnn.py                 # all cores
    python benchmarks/bench_cnn.py --threads 1 --steps 10

Cases: ResNet-8 with BatchNorm, batch 64 of 3x32x32 random images, and LeNet-5
on 1x28x28. A training step is forward, cross-entropy, backward and an SGD (momentum)
update. Each framework gets the same thread count (BLAS, Numba, torch intra-op), a few
warm-up steps (Numba compiles, caches fill), then the median over --steps timed steps.
PyTorch runs equivalent models built here (same layers, shapes and optimizer) when it is
installed, in a process of its own started by this script (see _peer). Finally a cProfile of minidl's ResNet-8 steps shows where the time goes.
"""
import argparse
import os
import sys

import _peer


def parse_args():
    p = argparse.ArgumentParser(description="CNN training-step throughput, minidl vs PyTorch CPU")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--steps", type=int, default=15)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--profile-steps", type=int, default=5)
    p.add_argument("--no-torch", action="store_true")
    p.add_argument("--cases", default="resnet8_bn,lenet")
    p.add_argument("--quick", action="store_true", help="a short run: 3 steps after 1, no profile")
    _peer.add_argument(p)
    args = p.parse_args()
    if args.quick:   # explicit flags still win
        p.set_defaults(steps=3, warmup=1, profile_steps=0)
        args = p.parse_args()
    return args


ARGS = parse_args()
# thread counts must be fixed before NumPy / BLAS / Numba start their pools
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[var] = str(ARGS.threads)

if ARGS.peer_json:
    import torch  # noqa: F401,E402  (first, so its thread runtime loads with its own defaults; see _peer)
import cProfile  # noqa: E402
import io  # noqa: E402
import pstats  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import minidl as md  # noqa: E402
import minidl.nn.functional as F  # noqa: E402
from minidl import optim  # noqa: E402
from minidl.zoo import LeNet, resnet8  # noqa: E402


# minidl ------------------------------------------------------------------------------------
def minidl_case(name, bs):
    md.manual_seed(0)
    if name == "resnet8_bn":
        model, shape = resnet8(in_channels=3, num_classes=10, norm="batch"), (bs, 3, 32, 32)
    else:
        model, shape = LeNet(in_channels=1, num_classes=10, input_size=28), (bs, 1, 28, 28)
    opt = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(0)
    x = md.from_numpy(rng.standard_normal(shape).astype(np.float32))
    y = md.from_numpy(rng.integers(0, 10, bs).astype(np.int64))

    def step():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return step


# PyTorch equivalents -----------------------------------------------------------------------
def torch_case(name, bs):
    import torch
    from torch import nn
    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self, cin, c, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, c, 3, stride, 1, bias=False)
            self.norm1 = nn.BatchNorm2d(c)
            self.conv2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
            self.norm2 = nn.BatchNorm2d(c)
            self.shortcut = None
            if stride != 1 or cin != c:
                self.shortcut = nn.Sequential(nn.Conv2d(cin, c, 1, stride, bias=False), nn.BatchNorm2d(c))

        def forward(self, x):
            out = torch.relu(self.norm1(self.conv1(x)))
            out = self.norm2(self.conv2(out))
            return torch.relu(out + (x if self.shortcut is None else self.shortcut(x)))

    if name == "resnet8_bn":
        model = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                              Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2),
                              nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
        shape = (bs, 3, 32, 32)
    else:
        model = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
        shape = (bs, 1, 28, 28)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 10, bs).astype(np.int64))

    def step():
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return step


def time_steps(step, warmup, steps):
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def peer_main():
    """The PyTorch half, in its own process (see _peer)."""
    import torch
    torch.set_num_threads(ARGS.threads)
    _peer.write(ARGS.peer_json, {"version": torch.__version__,
                                 "step_s": {name: time_steps(torch_case(name, ARGS.batch_size), ARGS.warmup,
                                                             ARGS.steps) for name in ARGS.cases.split(",")}})


def main():
    if ARGS.peer_json:
        return peer_main()
    bs = ARGS.batch_size
    peer = None if ARGS.no_torch else _peer.run(__file__)
    try:
        import numba
        numba.set_num_threads(min(ARGS.threads, numba.config.NUMBA_NUM_THREADS))
    except ImportError:
        pass
    cases = ARGS.cases.split(",")
    print(f"threads {ARGS.threads}, batch {bs}, median of {ARGS.steps} steps after {ARGS.warmup} warm-up; "
          f"numpy {np.__version__}" + (f", torch {peer['version']} (own process)" if peer else ", no torch"))
    rows = []
    for name in cases:
        t_md = time_steps(minidl_case(name, bs), ARGS.warmup, ARGS.steps)
        t_pt = peer["step_s"][name] if peer else None
        rows.append((name, bs / t_md, None if t_pt is None else bs / t_pt))
        print(f"  {name}: minidl {1e3 * t_md:.1f} ms/step" +
              ("" if t_pt is None else f", torch {1e3 * t_pt:.1f} ms/step"), flush=True)

    print()
    print(f"{'case':<14}{'minidl img/s':>14}{'torch img/s':>14}{'minidl/torch':>14}")
    for name, a, b in rows:
        bt = "-" if b is None else f"{b:.0f}"
        ratio = "-" if b is None else f"{a / b:.2f}"
        print(f"{name:<14}{a:>14.0f}{bt:>14}{ratio:>14}")

    if ARGS.profile_steps:
        step = minidl_case(cases[0], bs)
        step()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(ARGS.profile_steps):
            step()
        prof.disable()
        out = io.StringIO()
        stats = pstats.Stats(prof, stream=out).sort_stats("tottime")
        stats.print_stats(18)
        print(f"\ncProfile of {ARGS.profile_steps} minidl {cases[0]} training steps (sorted by own time):")
        print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:6000])


if __name__ == "__main__":
    main()
