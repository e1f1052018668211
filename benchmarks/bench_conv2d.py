"""conv2d forward+backward time, minidl beside PyTorch CPU (when installed), on the shapes a
CIFAR ResNet at batch 64 uses, plus the 64x64x32x32 3x3 reference case. minidl's time is that of
the path conv2d picks (Winograd F(2x2, 3x3) for 3x3 stride-1 convolutions of 8 or more input
channels, im2col + GEMM otherwise); the im2col column times the im2col path on every case.

    python benchmarks/bench_conv2d.py            # wall-clock, all threads
    python benchmarks/bench_conv2d.py --quick    # one repeat of the smallest case
    python benchmarks/bench_conv2d.py --cpu-time # process CPU time (robust on a shared machine;
                                                 # most meaningful with NUMBA_NUM_THREADS=1
                                                 # OPENBLAS_NUM_THREADS=1 --threads 1)
"""
import argparse
import time

import numpy as np

import _peer
import minidl as md
import minidl.nn.functional as F
from minidl.ops import conv_winograd as wino_ops

CASES = [
    # N, C, O, H, kernel, stride, padding
    (64, 64, 64, 32, 3, 1, 1),
    (64, 3, 16, 32, 3, 1, 1),
    (64, 16, 16, 32, 3, 1, 1),
    (64, 16, 32, 32, 3, 2, 1),
    (64, 16, 32, 32, 1, 2, 0),
    (64, 32, 32, 16, 3, 1, 1),
    (64, 64, 64, 8, 3, 1, 1),
]


def timeit(fn, reps, clock):
    fn()
    times = []
    for _ in range(reps):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return min(times), float(np.median(times))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--cpu-time", action="store_true", help="measure process CPU time instead of wall-clock")
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    ap.add_argument("--quick", action="store_true", help="one repeat of the smallest case")
    args = ap.parse_args()
    if args.quick:   # explicit flags still win
        ap.set_defaults(reps=1)
        args = ap.parse_args()
    clock = time.process_time if args.cpu_time else time.perf_counter
    torch = _peer.import_torch()
    if torch is not None and args.threads:
        torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    print(f"{'case':32s} {'path':>9s} {'minidl ms':>10s} {'im2col ms':>10s} {'torch ms':>10s} {'torch/minidl':>12s}   "
          f"(min of {args.reps}, "
          f"{'CPU time' if args.cpu_time else 'wall-clock'})")
    for N, C, O, H, k, s, p in CASES[-1:] if args.quick else CASES:
        x = rng.standard_normal((N, C, H, H)).astype(np.float32)
        w = (rng.standard_normal((O, C, k, k)) * 0.1).astype(np.float32)
        b = rng.standard_normal(O).astype(np.float32)
        OH = (H + 2 * p - k) // s + 1
        g = rng.standard_normal((N, O, OH, OH)).astype(np.float32)
        mx, mw, mb = (md.tensor(a, requires_grad=True) for a in (x, w, b))

        def ours():
            mx.grad = mw.grad = mb.grad = None
            F.conv2d(mx, mw, mb, stride=s, padding=p).backward(g)
        t_ours = timeit(ours, args.reps, clock)[0]
        path = "winograd" if wino_ops.use_winograd(x, w, (s, s), (1, 1), 1) else "im2col"
        wino_ops.USE_WINOGRAD = False
        try:
            t_im2col = timeit(ours, args.reps, clock)[0]
        finally:
            wino_ops.USE_WINOGRAD = True
        t_torch = float("nan")
        if torch is not None:
            tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
            tg = torch.tensor(g)

            def theirs():
                tx.grad = tw.grad = tb.grad = None
                torch.nn.functional.conv2d(tx, tw, tb, stride=s, padding=p).backward(tg)
            t_torch = timeit(theirs, args.reps, clock)[0]
        name = f"N{N} C{C}->{O} {H}x{H} k{k} s{s} p{p}"
        print(f"{name:32s} {path:>9s} {t_ours * 1e3:10.1f} {t_im2col * 1e3:10.1f} {t_torch * 1e3:10.1f} "
              f"{t_torch / t_ours:12.2f}")


if __name__ == "__main__":
    main()
