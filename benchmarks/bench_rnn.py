"""Character-level LSTM LM training-step throughput, minidl vs PyTorch CPU, and where the time goes.

    python benchmarks/bench_rnn.py                  # 2 threads, embedding 64, hidden 256, 2 layers
    python benchmarks/bench_rnn.py --threads 1 --rounds 5 --no-profile
    python benchmarks/bench_rnn.py --quick          # a short run

1. One training step (forward, cross-entropy, backward, Adam) of the same model in both
   frameworks: Embedding(vocab 96, 64) -> LSTM(64, 256, 2 layers, batch_first) -> Linear(256, 96),
   sequence 64, batch 32, float32. PyTorch runs in a process of its own (see _peer) with the
   same number of threads; the two are measured alternately over ``--rounds`` rounds and the
   reported ratio is the median of the rounds' ratios (a shared machine drifts by 10-30% over
   minutes, for both alike). tokens/s = batch * sequence / step time; target ratio >= 0.8.
2. The accounting: the step's GEMMs timed alone as NumPy calls of the same shapes (per-step
   hidden projections and their backward, the all-steps input projections, the weight-gradient
   GEMMs, the head), the gate kernels alone, and what is left (framework, embedding, loss, Adam).
3. A cProfile of minidl's steps: the functions with the most own time.

Each round also records both frameworks' CPU time per step (process time, median). On a machine
shared with other jobs the wall clock of a one-thread step measures the load as much as the code,
while its CPU time is what an idle machine's wall clock would show; at 2 threads CPU time also
counts the second thread (and any spinning), so there the wall-clock ratio is the one to read.
"""
import os
import sys
import time

import _peer
import _runner
from _runner import median_time


def parse_args():
    p = _runner.step_parser(__doc__)
    p.add_argument("--vocab", type=int, default=96)
    p.add_argument("--embed", type=int, default=64)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--seq", type=int, default=64)
    return _runner.parse(p)


args = parse_args()
_runner.set_threads(args.threads)   # before NumPy / Numba / torch start their pools
if args.peer_json:
    import torch  # noqa: F401  (first: its thread runtime loads with its own defaults; see _peer)

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import minidl as md  # noqa: E402
from minidl import optim  # noqa: E402
from minidl.kernels.cpu import rnn_gates  # noqa: E402
from minidl.zoo.char_lstm import CharLSTM  # noqa: E402


def minidl_step_fn():
    md.manual_seed(0)
    model = CharLSTM(args.vocab, args.embed, args.hidden, args.layers)
    opt = optim.Adam(model.parameters(), lr=2e-3)
    return _runner.language_model_step(model, opt, args.vocab, (args.batch_size, args.seq))


def torch_step_fn():
    import torch
    import torch.nn as tnn
    import torch.nn.functional as TF
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    class TCharLSTM(tnn.Module):
        def __init__(self):
            super().__init__()
            self.emb = tnn.Embedding(args.vocab, args.embed)
            self.lstm = tnn.LSTM(args.embed, args.hidden, args.layers, batch_first=True)
            self.head = tnn.Linear(args.hidden, args.vocab)

        def forward(self, idx, tgt):
            y, _ = self.lstm(self.emb(idx))
            return TF.cross_entropy(self.head(y).reshape(-1, args.vocab), tgt.reshape(-1))

    model = TCharLSTM()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    return _runner.torch_language_model_step(model, opt, args.vocab, (args.batch_size, args.seq))


def accounting():
    """Seconds per training step of each part, timed alone at the step's shapes (float32)."""
    B, T, E, H, L, V = args.batch_size, args.seq, args.embed, args.hidden, args.layers, args.vocab
    g = np.random.default_rng(0)
    f32 = lambda *s: g.standard_normal(s).astype(np.float32)  # noqa: E731
    N = B * T
    h, w_hh, gates, dg = f32(B, H), f32(4 * H, H), f32(B, 4 * H), f32(B, 4 * H)
    w_hh_t = np.ascontiguousarray(w_hh.T)    # as the layer keeps it for its forward steps
    out_g, out_h = np.empty((B, 4 * H), np.float32), np.empty((B, H), np.float32)
    reps = 50

    def per(fn):
        if args.threads != 1:
            return median_time(fn, reps, 5)
        for _ in range(5):    # one thread: CPU time, which the machine's load does not inflate
            fn()
        ts = []
        for _ in range(reps):
            t0 = time.process_time()
            fn()
            ts.append(time.process_time() - t0)
        return float(np.median(ts))
    hidden_fwd = per(lambda: np.matmul(h, w_hh_t, out=out_g)) * T * L
    hidden_bwd = per(lambda: np.matmul(dg, w_hh, out=out_h)) * T * L
    parts = {"hidden projections h W_hh^T, per step (forward)": hidden_fwd,
             "dh = dG W_hh, per step (backward)": hidden_bwd}
    big = {}
    for k in range(L):
        I = E if k == 0 else H
        x, w_ih, dG, hprev = f32(N, I), f32(4 * H, I), f32(N, 4 * H), f32(N, H)
        big[k] = (per(lambda: np.matmul(x, w_ih.T)) + per(lambda: np.matmul(dG, w_ih))
                  + per(lambda: np.matmul(dG.T, x)) + per(lambda: np.matmul(dG.T, hprev)))
    parts["input projections, dx, dW_ih, dW_hh (one GEMM each, all steps)"] = sum(big.values())
    y, w_o, dl = f32(N, H), f32(V, H), f32(N, V)
    parts["head: logits, d input, d weight"] = (per(lambda: np.matmul(y, w_o.T)) + per(lambda: np.matmul(dl, w_o))
                                                 + per(lambda: np.matmul(dl.T, y)))
    c, cp, cc, hh, dy, dh, dc = (f32(B, H) for _ in range(7))
    hg = f32(B, 4 * H)
    kern_f = per(lambda: rnn_gates.lstm_step_forward(gates.copy(), hg, c, cp, cc, hh))
    kern_b = per(lambda: rnn_gates.lstm_step_backward(gates, cc, cp, dy, dh, dc, dg))
    copy_t = per(lambda: gates.copy())
    parts["gate kernels (forward + backward, per step)"] = (kern_f - copy_t + kern_b) * T * L
    gemm_flops = 2 * 4 * H * (T * L * B * H * 3 + N * (E + H) * 3) + 3 * 2 * N * H * V
    return parts, gemm_flops


class CPUTimed:
    """A step function that records the process time of each call, per round."""

    def __init__(self, step):
        self.step, self.rounds = step, []

    def new_round(self):
        self.rounds.append([])

    def __call__(self):
        t0 = time.process_time()
        out = self.step()
        if self.rounds:
            self.rounds[-1].append(time.process_time() - t0)
        return out

    def round_medians(self, skip):
        return [float(np.median(r[skip:])) for r in self.rounds if len(r) > skip]


def peer_main():
    import torch
    step = CPUTimed(torch_step_fn())
    step.new_round()
    wall = median_time(step, args.steps, args.warmup)
    _peer.write(args.peer_json, {"version": torch.__version__, "step_s": wall,
                                 "cpu_s": step.round_medians(args.warmup)[0]})


def cpu_rounds(step):
    """Wrap ``_peer.run`` so that every round starts a new CPU-time record for minidl's step and
    keeps the peer's answer; returns the list the peers' answers go to."""
    peers, run = [], _peer.run

    def recording_run(*a, **k):
        step.new_round()
        got = run(*a, **k)
        peers.append(got)
        return got
    _peer.run = recording_run
    return peers


def print_cpu_ratio(step, peers):
    md_cpu = step.round_medians(args.warmup)
    pairs = [(p["cpu_s"], m) for p, m in zip(peers, md_cpu) if p and "cpu_s" in p]
    line = f"CPU time per step (process time, median of the rounds): minidl {1e3 * np.median(md_cpu):.1f} ms"
    if pairs:
        line += (f", torch {1e3 * np.median([p for p, _ in pairs]):.1f} ms; ratio minidl/torch tokens per CPU "
                 f"second {np.median([p / m for p, m in pairs]):.2f} (rounds: "
                 + " ".join(f"{p / m:.2f}" for p, m in pairs) + ")")
    print(line)


def main():
    if args.peer_json:
        return peer_main()
    tokens = args.batch_size * args.seq
    print(f"threads={args.threads}; char-LM: embedding {args.embed}, LSTM hidden {args.hidden} x {args.layers} "
          f"layers, vocab {args.vocab}, sequence {args.seq}, batch {args.batch_size}, Adam, float32; median of "
          f"{args.steps} steps after {args.warmup} warm-up, {args.rounds} alternating rounds")
    step = CPUTimed(minidl_step_fn())
    peers = cpu_rounds(step)
    if args.no_torch:
        step.new_round()
    t_md = _runner.compare_rounds(step, args, __file__, tokens, target=0.8).md_s
    print_cpu_ratio(step, peers)

    parts, flops = accounting()
    if args.threads == 1:   # CPU times on both sides of the subtraction
        t_md = float(np.median(step.round_medians(args.warmup)))
    clock = "CPU time" if args.threads == 1 else "wall clock"
    print(f"\nwhere minidl's {1e3 * t_md:.1f} ms go (each part timed alone at the step's shapes, {clock}):")
    for name, t in parts.items():
        print(f"  {name:66s} {1e3 * t:7.1f} ms")
    rest = t_md - sum(parts.values())
    print(f"  {'the rest: framework, embedding, softmax/loss, Adam, copies':66s} {1e3 * rest:7.1f} ms")
    gemm_t = sum(t for n, t in parts.items() if "kernel" not in n)
    print(f"  GEMMs: {flops / 1e9:.2f} GFLOP per step, {flops / gemm_t / 1e9:.1f} GFLOP/s as timed alone "
          f"(the per-step (32 x 256) x (256 x 1024) products are too small to reach BLAS's peak)")

    if not args.no_profile:
        import cProfile
        import pstats
        prof = cProfile.Profile(time.process_time if args.threads == 1 else time.perf_counter)
        prof.enable()
        for _ in range(args.steps):
            step()
        prof.disable()
        print("\nprofile (own time):")
        pstats.Stats(prof).sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    main()
