"""GPU benchmark for the "cuda" device (numba.cuda), for when a GPU machine is lent.

    python benchmarks/bench_gpu.py            # on a machine with an NVIDIA GPU, under 5 minutes
    python benchmarks/bench_gpu.py --quick    # 3 repeats (under the simulator: --tiny)
    NUMBA_ENABLE_CUDASIM=1 python benchmarks/bench_gpu.py --tiny    # smoke test, no GPU needed

Measures with CUDA events after warm-up (medians):
1. the device's copy bandwidth (device-to-device copy of a large buffer);
2. each norm's forward and forward+backward through the user-facing path (cuda tensor in,
   ``backward(gradient=...)``, gradients out), with the bytes each pass must move and the
   achieved fraction of the copy bandwidth (target >= 50%);
3. the matmul rate (TFLOP/s) of the tiled matmul kernel;
4. GPT and ResNet-8 training-step throughput on the GPU beside the same step on the CPU
   (target: GPT at least 10x the 2-core CPU).
Prints one table at the end. Without a GPU (or under the simulator without ``--tiny`` or
``--quick``, whose full sizes would take hours there) it says why and exits with status
SKIPPED (77, the test harnesses' "skipped"), which ``minidl bench`` reports as skipped.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import minidl as md  # noqa: E402
import minidl.nn as nn  # noqa: E402
import minidl.nn.functional as F  # noqa: E402
from minidl import optim  # noqa: E402
from minidl.zoo import GPT, resnet8  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tiny", action="store_true", help="tiny shapes and few repeats (simulator smoke test)")
    p.add_argument("--repeat", type=int, default=None)
    p.add_argument("--no-cpu", action="store_true", help="skip the CPU side of the training-step comparison")
    p.add_argument("--quick", action="store_true", help="3 repeats (under the simulator: --tiny)")
    args = p.parse_args()
    if args.quick:
        args.repeat = args.repeat or 3
        args.tiny = args.tiny or SIMULATED
    return args


SKIPPED = 77


SIMULATED = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


def gpu_median_ms(fn, repeat, warmup=2):
    """Median time of fn() in ms, measured with CUDA events around each call (host clock
    in the simulator, whose events all read 0)."""
    from numba import cuda
    if SIMULATED:
        return cpu_median_ms(fn, repeat, warmup)
    for _ in range(warmup):
        fn()
    cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, end = cuda.event(), cuda.event()   # timing events by default
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return float(np.median(times))


def cpu_median_ms(fn, repeat, warmup=1):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


def copy_bandwidth(n, repeat):
    """GB/s of a device-to-device copy of n float32 (read n*4 bytes + write n*4 bytes)."""
    from numba import cuda
    a = cuda.to_device(np.ones(n, np.float32))
    b = cuda.device_array_like(a)
    ms = gpu_median_ms(lambda: b.copy_to_device(a), repeat)
    return 2 * 4 * n / (ms * 1e-3) / 1e9


NORMS = {
    # name: (module factory, input shape, bytes moved per element of x: forward, forward+backward)
    "LayerNorm": (lambda s: nn.LayerNorm(s[-1]), (8192, 768)),
    "RMSNorm": (lambda s: nn.RMSNorm(s[-1]), (8192, 768)),
    "BatchNorm2d": (lambda s: nn.BatchNorm2d(s[1]), (32, 64, 32, 32)),
    "GroupNorm(32)": (lambda s: nn.GroupNorm(32, s[1]), (32, 64, 32, 32)),
    "InstanceNorm2d": (lambda s: nn.InstanceNorm2d(s[1], affine=True), (32, 64, 32, 32)),
}
TINY_NORM_SHAPES = {"LayerNorm": (4, 8), "RMSNorm": (4, 8), "BatchNorm2d": (2, 4, 3, 3),
                    "GroupNorm(32)": (2, 32, 2, 2), "InstanceNorm2d": (2, 4, 3, 3)}


def bench_norm(name, tiny, repeat, bandwidth):
    make, shape = NORMS[name]
    if tiny:
        shape = TINY_NORM_SHAPES[name]
    layer = make(shape).to("cuda")
    x = md.randn(*shape).to("cuda").requires_grad_()
    g = md.randn(*shape).to("cuda")

    def forward():
        with md.no_grad():
            layer(x)

    def forward_backward():
        x.grad = None
        layer(x).backward(g)

    fwd = gpu_median_ms(forward, repeat)
    fb = gpu_median_ms(forward_backward, repeat)
    nbytes = 4 * int(np.prod(shape))
    # the floor: forward reads x and writes y; backward reads x and dy and writes dx
    floor_ms = 5 * nbytes / (bandwidth * 1e9) * 1e3
    return {"case": name, "shape": "x".join(map(str, shape)), "fwd_ms": fwd, "fb_ms": fb,
            "floor_ms": floor_ms, "floor_pct": 100 * floor_ms / fb}


def bench_matmul(n, repeat):
    a = md.randn(n, n).to("cuda")
    b = md.randn(n, n).to("cuda")
    with md.no_grad():
        ms = gpu_median_ms(lambda: a @ b, repeat)
    return 2 * n ** 3 / (ms * 1e-3) / 1e12, ms


def gpt_step(device, tiny):
    cfg = dict(vocab_size=96, block_size=8 if tiny else 64, n_layer=1 if tiny else 4, n_head=2 if tiny else 4,
               d_model=16 if tiny else 128)
    batch = 2 if tiny else 32
    md.manual_seed(0)
    model = GPT(**cfg).to(device)
    opt = optim.AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)

    def step():
        x = md.tensor(rng.integers(0, 96, (batch, cfg["block_size"]))).to(device)
        y = md.tensor(rng.integers(0, 96, (batch, cfg["block_size"]))).to(device)
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()   # the one host round trip per step
    return step, batch * cfg["block_size"]


def resnet_step(device, tiny):
    batch = 2 if tiny else 64
    size = 4 if tiny else 32
    md.manual_seed(0)
    model = resnet8(in_channels=3, num_classes=10, norm="batch", width=2 if tiny else 16).to(device)
    opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x = md.randn(batch, 3, size, size).to(device)
    y = md.tensor(np.arange(batch) % 10).to(device)

    def step():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()
    return step, batch


def main():
    args = parse_args()
    from numba import cuda
    if not cuda.is_available():
        print("bench_gpu: skipped, no CUDA GPU here (NUMBA_ENABLE_CUDASIM=1 with --tiny runs a smoke test)")
        sys.exit(SKIPPED)
    if SIMULATED and not args.tiny:
        print("bench_gpu: skipped, the CUDA simulator runs only --tiny (or --quick) sizes")
        sys.exit(SKIPPED)
    repeat = args.repeat or (1 if args.tiny else 20)
    t_start = time.perf_counter()
    rows = []
    bw = copy_bandwidth(1 << 12 if args.tiny else 1 << 28, repeat)
    rows.append(("copy bandwidth", f"{bw:,.1f} GB/s", ""))
    for name in NORMS:
        r = bench_norm(name, args.tiny, repeat, bw)
        print(f"  ... {name} done", flush=True)
        rows.append((f"{r['case']} {r['shape']}", f"fwd {r['fwd_ms']:.3f} ms, f+b {r['fb_ms']:.3f} ms",
                     f"{r['floor_pct']:.0f}% of floor ({r['floor_ms']:.3f} ms; target >= 50%)"))
    tflops, ms = bench_matmul(16 if args.tiny else 4096, repeat)
    rows.append(("matmul", f"{ms:.3f} ms", f"{tflops:.2f} TFLOP/s"))
    for name, make, unit in (("GPT step", gpt_step, "tokens/s"), ("ResNet-8 step", resnet_step, "img/s")):
        step, items = make("cuda", args.tiny)
        n, w = (1, 0) if args.tiny else (max(2, repeat // 2), 1)
        gpu_ms = gpu_median_ms(step, n, warmup=w)
        line = f"{items / gpu_ms * 1e3:,.0f} {unit} on cuda ({gpu_ms:.1f} ms)"
        extra = ""
        if not args.no_cpu:
            cstep, _ = make("cpu", args.tiny)
            cpu_ms = cpu_median_ms(cstep, n, warmup=w)
            extra = f"cpu {items / cpu_ms * 1e3:,.0f} {unit}: {cpu_ms / gpu_ms:.1f}x faster on cuda"
        rows.append((name, line, extra))
        print(f"  ... {name} done", flush=True)
    print(f"\nbench_gpu ({'SIMULATOR, numbers meaningless' if SIMULATED else cuda.get_current_device().name}), "
          f"medians of {repeat}, {time.perf_counter() - t_start:.0f} s in all")
    width = max(len(r[0]) for r in rows)
    for r in rows:
        print(f"  {r[0]:<{width}}  {r[1]:<44} {r[2]}")


if __name__ == "__main__":
    main()
