"""Autograd overhead: what one small op costs end to end, and how a very deep graph backpropagates.

    python benchmarks/bench_autograd.py [--repeats 7] [--iters 2000] [--chain 100000] [--quick]

1. Per-op overhead: forward + backward of one op on 4x4 float32 tensors, in microseconds.
   On tensors this small the arithmetic is negligible, so the number is the framework's
   bookkeeping: building the Tensor, recording the node, walking the graph, accumulating
   the leaf gradient. Each iteration clears the leaves' ``.grad`` (as ``zero_grad`` would)
   and backpropagates a fixed cotangent of the output's shape. The median over repeats
   is reported; minidl's and PyTorch's loops take turns within each repeat, so that load
   from elsewhere on the machine affects both alike.
2. Deep chain: 100,000 alternating ``y * c`` / ``y + c`` ops; forward and backward times.
   In minidl the backward is iterative, so the depth costs time but never recursion.

PyTorch's numbers are printed alongside (with the ratio minidl / PyTorch) when ``torch``
imports; otherwise that column is skipped. The target is a per-op ratio of at most 3.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

import _peer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import minidl as md  # noqa: E402

torch = _peer.import_torch()   # optional: an oracle for the benchmark, never a dependency
if torch is not None:
    torch.set_num_threads(1)


def _cases(lib):
    """name -> (make inputs, op). ``lib`` is minidl or torch; both take the same calls."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 4)).astype(np.float32)
    b = rng.standard_normal((4, 4)).astype(np.float32)
    v = rng.standard_normal(4).astype(np.float32)
    idx = np.array([0, 2, 2, 3])

    def leaf(x):
        return lib.tensor(x.copy(), requires_grad=True)

    def const(x):
        return lib.tensor(x.copy())

    return {
        "add": (lambda: (leaf(a), leaf(b)), lambda x, y: x + y),
        "add (broadcast)": (lambda: (leaf(a), leaf(v)), lambda x, y: x + y),
        "mul": (lambda: (leaf(a), leaf(b)), lambda x, y: x * y),
        "mul by constant": (lambda: (leaf(a), const(b)), lambda x, y: x * y),
        "matmul": (lambda: (leaf(a), leaf(b)), lambda x, y: x @ y),
        "exp": (lambda: (leaf(a),), lambda x: x.exp()),
        "tanh": (lambda: (leaf(a),), lambda x: x.tanh()),
        "relu": (lambda: (leaf(a),), lambda x: x.relu()),
        "sum": (lambda: (leaf(a),), lambda x: x.sum()),
        "sum(dim=1)": (lambda: (leaf(a),), lambda x: x.sum(dim=1)),
        "mean": (lambda: (leaf(a),), lambda x: x.mean()),
        "reshape": (lambda: (leaf(a),), lambda x: x.reshape(2, 8)),
        "transpose": (lambda: (leaf(a),), lambda x: x.transpose(0, 1)),
        "getitem slice": (lambda: (leaf(a),), lambda x: x[1:3]),
        "getitem int array": (lambda: (leaf(a),), lambda x: x[idx]),
        "softmax": (lambda: (leaf(a),), lambda x: x.softmax(-1)),
    }


def _step(lib, make, op):
    """One training-like step for the op: clear the leaves' grads, forward, backward."""
    inputs = make()
    out = op(*inputs)
    cot = lib.tensor(np.random.default_rng(1).standard_normal(tuple(out.shape)).astype(np.float32))
    scalar = out.ndim == 0

    def once():
        for t in inputs:
            t.grad = None
        y = op(*inputs)
        if scalar:
            y.backward()
        else:
            y.backward(cot)
    return once


def _time_steps(steps, iters, repeats):
    """Median microseconds per call of each step. The steps take turns within every repeat,
    so that a noisy neighbour on the machine slows all of them alike and ratios stay fair."""
    for step in steps:
        for _ in range(max(iters // 10, 10)):  # warm-up (caches, lazy imports)
            step()
    samples = [[] for _ in steps]
    for _ in range(repeats):
        for step, out in zip(steps, samples):
            t0 = time.perf_counter()
            for _ in range(iters):
                step()
            out.append((time.perf_counter() - t0) / iters * 1e6)
    return [statistics.median(s) for s in samples]


def _time_chain(lib, n):
    x = lib.tensor(np.ones(4, np.float32), requires_grad=True)
    t0 = time.perf_counter()
    y = x
    for _ in range(n // 2):
        y = y * 1.0001
        y = y + 0.001
    loss = y.sum()
    t1 = time.perf_counter()
    loss.backward()
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--chain", type=int, default=100_000)
    p.add_argument("--quick", action="store_true", help="a short run: 3 x 200 iterations, a 10,000-op chain")
    args = p.parse_args(argv)
    if args.quick:   # explicit flags still win
        p.set_defaults(repeats=3, iters=200, chain=10_000)
        args = p.parse_args(argv)

    libs = [("minidl", md)] + ([("torch", torch)] if torch is not None else [])
    if torch is not None:
        print(f"minidl {md.__version__} vs PyTorch {torch.__version__} (1 thread), numpy {np.__version__}\n")

    print("Per-op overhead: forward + backward on 4x4 float32, microseconds (median of "
          f"{args.repeats} x {args.iters} iterations)")
    header = f"{'op':<20}{'minidl':>10}" + (f"{'torch':>10}{'ratio':>8}" if torch else "")
    print(header)
    print("-" * len(header))
    ratios = []
    cases = {lib_name: _cases(lib) for lib_name, lib in libs}
    for name in cases["minidl"]:
        steps = [_step(lib, *cases[lib_name][name]) for lib_name, lib in libs]
        times = _time_steps(steps, args.iters, args.repeats)
        line = f"{name:<20}{times[0]:>10.1f}"
        if torch:
            ratios.append(times[0] / times[1])
            line += f"{times[1]:>10.1f}{ratios[-1]:>8.2f}"
        print(line)
    if ratios:
        geo = float(np.exp(np.mean(np.log(ratios))))
        print(f"{'geometric mean':<40}{geo:>8.2f}   (max {max(ratios):.2f}; target <= 3)")

    print(f"\nDeep chain: {args.chain:,} ops (y*c, y+c alternating) on a 4-vector, seconds")
    header = f"{'':<20}{'forward':>10}{'backward':>10}"
    print(header)
    print("-" * len(header))
    chain = {}
    for name, lib in libs:
        chain[name] = _time_chain(lib, args.chain)
        print(f"{name:<20}{chain[name][0]:>10.3f}{chain[name][1]:>10.3f}")
    if torch:
        (f0, b0), (f1, b1) = chain["minidl"], chain["torch"]
        print(f"{'ratio':<20}{f0 / f1:>10.2f}{b0 / b1:>10.2f}")


if __name__ == "__main__":
    main()
