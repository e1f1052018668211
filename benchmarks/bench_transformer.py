"""GPT training-step throughput, minidl vs PyTorch CPU, plus attention and a profile.

    python benchmarks/bench_transformer.py                 # 2 threads, the benchmark config
    python benchmarks/bench_transformer.py --threads 1 --steps 20 --no-profile
    python benchmarks/bench_transformer.py --quick         # a short run
    python benchmarks/bench_transformer.py --rounds 5 --write-results   # also docs/results.md

1. One training step (forward, cross-entropy, backward, AdamW) of the same GPT in minidl and,
   when importable, in PyTorch (vocab 96, 4 layers, 4 heads, d_model 128, context 64,
   batch 32; pre-LN, learned positions, tanh-GELU MLP, causal attention), with the same number of
   threads (BLAS, Numba and torch; PyTorch in a process of its own, see _peer). PyTorch's process
   imports this script, hence minidl, whose import raises glibc's mmap and trim thresholds
   (minidl/runtime/host_memory.py): PyTorch runs with minidl's allocator setting, at its best.
   Median over ``--steps`` after ``--warmup`` steps; tokens/s = batch * context / step time; the
   ratio minidl/PyTorch has a target of >= 1.2. The two are measured alternately in
   ``--rounds`` rounds (PyTorch's process, then minidl), and the reported ratio is the median of
   the rounds' ratios, each from two measurements taken back to back: a shared machine's speed
   drifts by 10-30% over minutes, for both frameworks alike.
2. Causal attention forward+backward at the model's shape (B=32, H=4, T=64, D=32): the fused
   op (NumPy reference, BLAS matmuls with the Numba softmax kernels, and the Numba row
   kernel), the same attention composed from minidl's generic ops (matmul, masked_fill,
   softmax, matmul; autograd through each), a plain NumPy composition (forward and
   hand-written backward, no framework) and torch's SDPA.
3. The step's accounting against the machine (``_step_accounting``, one instrumented step, the
   same table as bench_cnn's): its FLOPs (the GEMMs of the projections, the MLP, attention and
   the head, forward and backward), the time in GEMMs and the rate they reach, the other op
   work (norms, GELU, softmax, embedding, loss, AdamW) and the bytes it moves against the copy
   bandwidth, and the time in neither (Python, autograd bookkeeping); with ``--write-results``
   the throughput and accounting tables replace this benchmark's block of docs/results.md.
4. A cProfile of minidl's training steps: the functions with the most own time.
"""
import os
import sys

import _peer
import _results
import _runner
from _runner import median_time


def parse_args():
    p = _runner.step_parser(__doc__)
    p.add_argument("--vocab", type=int, default=96)
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--block-size", type=int, default=64)
    p.add_argument("--no-accounting", action="store_true")
    p.add_argument("--write-results", action="store_true",
                   help="write the throughput and accounting tables into docs/results.md")
    return _runner.parse(p)


args = parse_args()
_runner.set_threads(args.threads)  # before NumPy / Numba / torch start their thread pools
if args.peer_json:
    import torch  # noqa: F401  (first, so its thread runtime loads with its own defaults; see _peer)

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import minidl as md  # noqa: E402
import minidl.nn.functional as F  # noqa: E402
from minidl import optim  # noqa: E402
from minidl.ops import attention as A  # noqa: E402
from minidl.zoo.gpt import GPT  # noqa: E402


# ------------------------------------------------------------------------------ minidl GPT
def minidl_step_fn():
    md.manual_seed(0)
    model = GPT(args.vocab, args.block_size, args.n_layer, args.n_head, args.d_model)
    opt = optim.AdamW(model.parameters(), lr=1e-3)
    return _runner.language_model_step(model, opt, args.vocab, (args.batch_size, args.block_size)), opt


# ------------------------------------------------------------------------------ PyTorch GPT
def torch_step_fn():
    import torch
    import torch.nn as tnn
    import torch.nn.functional as TF
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    V, T, L, H, D = args.vocab, args.block_size, args.n_layer, args.n_head, args.d_model

    class Block(tnn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = tnn.LayerNorm(D), tnn.LayerNorm(D)
            self.qkv, self.proj = tnn.Linear(D, 3 * D), tnn.Linear(D, D)
            self.fc1, self.fc2 = tnn.Linear(D, 4 * D), tnn.Linear(4 * D, D)

        def forward(self, x):
            B, T_, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).reshape(B, T_, 3, H, D // H).permute(2, 0, 3, 1, 4)
            a = TF.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(B, T_, D))
            return x + self.fc2(TF.gelu(self.fc1(self.ln2(x)), approximate="tanh"))

    class TGPT(tnn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = tnn.Embedding(V, D), tnn.Parameter(torch.zeros(T, D))
            self.blocks = tnn.ModuleList([Block() for _ in range(L)])
            self.ln_f, self.head = tnn.LayerNorm(D), tnn.Linear(D, V, bias=False)

        def forward(self, idx, tgt):
            x = self.tok(idx) + self.pos[:idx.shape[1]]
            for b in self.blocks:
                x = b(x)
            logits = self.head(self.ln_f(x))
            return TF.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1))

    model = TGPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return _runner.torch_language_model_step(model, opt, V, (args.batch_size, T))


# ------------------------------------------------------------------------------ attention
def numpy_attention_fwd_bwd(q, k, v, g, scale):
    """Plain NumPy causal attention: forward and the hand-written backward, no framework."""
    T = q.shape[-2]
    s = q @ k.swapaxes(-1, -2) * scale
    s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
    s -= s.max(-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(-1, keepdims=True)
    o = p @ v
    dv = p.swapaxes(-1, -2) @ g
    dp = g @ v.swapaxes(-1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    return o, ds @ k * scale, ds.swapaxes(-1, -2) @ q * scale, dv


def bench_attention():
    B, H, T, Dh = args.batch_size, args.n_head, args.block_size, args.d_model // args.n_head
    rng = np.random.default_rng(0)
    q, k, v, g = (rng.standard_normal((B, H, T, Dh)).astype(np.float32) for _ in range(4))
    scale = 1.0 / np.sqrt(Dh)
    causal_out = ~np.tril(np.ones((T, T), bool))
    results = {}

    def fused(impl):
        def run():
            ts = [md.tensor(a, requires_grad=True) for a in (q, k, v)]
            with A.implementation(impl):
                F.scaled_dot_product_attention(*ts, is_causal=True).backward(g)
        return run

    def composed():
        tq, tk, tv = (md.tensor(a, requires_grad=True) for a in (q, k, v))
        s = (tq @ tk.transpose(-2, -1)) * scale
        (s.masked_fill(causal_out, -np.inf).softmax(-1) @ tv).backward(g)

    results["minidl fused op, NumPy reference"] = median_time(fused("reference"), args.steps * 2, 2)
    results["minidl fused op, BLAS + Numba softmax"] = median_time(fused("fused-softmax"), args.steps * 2, 2)
    results["minidl fused op, Numba row kernel"] = median_time(fused("numba"), args.steps * 2, 2)
    results["minidl composed from generic ops"] = median_time(composed, args.steps * 2, 2)
    results["plain NumPy composition"] = median_time(lambda: numpy_attention_fwd_bwd(q, k, v, g, scale),
                                                     args.steps * 2, 2)
    return (B, H, T, Dh), results


def torch_sdpa_time():
    import torch
    B, H, T, Dh = args.batch_size, args.n_head, args.block_size, args.d_model // args.n_head
    rng = np.random.default_rng(0)
    tq, tk, tv = (torch.tensor(rng.standard_normal((B, H, T, Dh)).astype(np.float32), requires_grad=True)
                  for _ in range(3))
    tg = torch.tensor(rng.standard_normal((B, H, T, Dh)).astype(np.float32))

    def run():
        torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True).backward(tg)
    return median_time(run, args.steps * 2, 2)


def peer_main():
    """The PyTorch half, in its own process (see _peer)."""
    import torch
    _peer.write(args.peer_json, {"version": torch.__version__,
                                 "step_s": median_time(torch_step_fn(), args.steps, args.warmup),
                                 "sdpa_s": torch_sdpa_time()})


def main():
    if args.peer_json:
        return peer_main()
    tokens = args.batch_size * args.block_size
    model = (f"GPT, {args.n_layer} layers, {args.n_head} heads, d_model {args.d_model}, context {args.block_size}, "
             f"batch {args.batch_size}")
    from minidl.kernels.cpu import _cblas
    print(f"threads={args.threads}; {model}, vocab {args.vocab}, AdamW; "
          f"median of {args.steps} steps after {args.warmup} warm-up, {args.rounds} alternating rounds; "
          f"the kernels' GEMMs: {_cblas.PROVIDER}")
    step, opt = minidl_step_fn()
    rounds = _runner.compare_rounds(step, args, __file__, tokens, target=1.2,
                                    note=f"attention impl: {A.get_implementation()}; ")

    shape, res = bench_attention()
    if rounds.peer:
        res["torch SDPA (CPU, own process)"] = rounds.peer["sdpa_s"]
    print(f"\ncausal attention forward+backward, (B, H, T, D) = {shape}, float32:")
    for name, t in res.items():
        print(f"  {name:36s} {1e3 * t:8.2f} ms")

    acc_text = []
    if not args.no_accounting:
        import _step_accounting as acc
        from minidl.autograd.op_function import Function
        acc.CLOCK = _runner.CLOCK
        bandwidth, peak = acc.copy_bandwidth(), acc.gemm_rate()
        a = acc.account(step, opt, Function, model_flops=step_flops())
        acc_text = [acc.machine_note(bandwidth, peak), "", *acc.HEADER, *acc.table(model, a, bandwidth, peak)]
        print("\n" + "\n".join(acc_text))
        print("\nthe ops' own time outside GEMMs, ms (calls, MB moved)")
        print("\n".join(acc.op_lines(a)))

    if not args.no_profile:
        import cProfile
        import io
        import pstats
        prof = cProfile.Profile(_runner.CLOCK)   # the same clock as the timings (--cpu-time)
        prof.enable()
        for _ in range(args.steps):
            step()
        prof.disable()
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(18)
        print(f"\ncProfile of {args.steps} minidl training steps, the functions with the most own time:")
        print("\n".join(line for line in s.getvalue().splitlines()[6:] if line.strip()))

    if args.write_results:
        write_results(model, tokens, rounds, acc_text)


def write_results(model, tokens, rounds, acc_text):
    """This benchmark's block of docs/results.md: the run's command, the throughput row and the
    accounting table."""
    row = f"| {model} | {1e3 * rounds.md_s:.1f} "
    if rounds.ratios:
        row += (f"| {1e3 * rounds.torch_s:.1f} | {tokens / rounds.md_s:,.0f} | {tokens / rounds.torch_s:,.0f} "
                f"| {_results.ratio_cell(rounds.ratios)} |")
    else:
        row += f"| - | {tokens / rounds.md_s:,.0f} | - | - |"
    text = [_results.run_header("bench_transformer", args, rounds.peer and rounds.peer["version"]), "",
            "| model | minidl ms/step | PyTorch ms/step | minidl tokens/s | PyTorch tokens/s "
            "| ratio: median (range) over rounds |", "|---|---|---|---|---|---|", row]
    if acc_text:
        text += ["", *acc_text]
    _results.write_block("bench_transformer", "\n".join(text))


def step_flops():
    """FLOPs of one training step: every GEMM forward (2 m n k) and backward (twice that)."""
    B, T, d, L, V = args.batch_size, args.block_size, args.d_model, args.n_layer, args.vocab
    M = B * T
    per_layer = 2 * M * d * (3 * d + d + 4 * d + 4 * d)     # qkv, proj, fc1, fc2
    attention = 2 * 2 * B * T * T * d                        # q k^T and p v over all heads
    return 3 * (L * (per_layer + attention) + 2 * M * d * V)


if __name__ == "__main__":
    main()
