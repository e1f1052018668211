"""Where a training step's time goes, measured against the machine.

One instrumented step splits the wall time into
- GEMM: every ``numpy.matmul`` call (conv and linear layers use it through their array
  namespace), timed one by one, with its FLOPs (2 * m * n * k per product) from the shapes.
  The linear layers' GEMM regions (``kernels/cpu/linear.py``: each thread's share of the
  product, then its bias or GELU epilogue; the MLP's backward region, fc2's products with GELU's
  backward on each block of rows) count here too, epilogue included, with their products' FLOPs.
  Other GEMMs that a Numba kernel calls itself (Winograd's shares,
  ``kernels/cpu/winograd_shares.py``; attention's region, ``kernels/cpu/attention_heads.py``)
  are not seen: their time is that kernel's, counted as other op work, and their FLOPs are not
  in the GEMM column;
  Where conv2d's block workers run shares of the images concurrently, each thread its own
  GEMMs, the time counted is the calling thread's (its share's GEMMs run while the workers run
  theirs) and the FLOPs are every thread's, so the rate is that of all threads together;
  beside them the model's FLOPs: 3x the direct convolution's and the linear layers' forward
  multiply-adds x 2 (forward, dx, dW), which Winograd convolutions do with fewer GEMM FLOPs
  (or the caller's count, for a model with other products, such as attention's);
- other op work: the rest of each op's forward and backward (im2col/col2im, norms,
  activations, losses, layout copies, allocation inside ops, and the direct convolutions'
  sums, which run no GEMM), and the optimizer update;
  beside it the bytes these parts must move: each op's array arguments, the arrays its
  backward reads from forward, its results, and every GEMM operand or product the op made or
  read itself (im2col's cols, col2im's input), counted once per op call; the optimizer reads
  each parameter, its gradient and momentum and writes two of them back;
- neither: the step's time outside any op and the optimizer (Python in the modules, autograd
  bookkeeping, the engine, gradient accumulation between nodes).

The machine's side: the copy bandwidth (``np.copyto`` of 64 MiB, bytes read + written per second)
and one large SGEMM's rate, each the best of a few tries. Timing wrappers cost about a microsecond per call, a fraction of a
percent of a step; the instrumented step's own time is reported beside the plain median.
On a loaded machine, one thread and CPU time (``CLOCK = time.process_time``) give figures that
do not count the time the process waited for a core (with more threads the process's CPU time
counts every thread's, so there the split is wall-clock only).
"""
import threading
import time

import numpy as np

CLOCK = time.perf_counter   # the clock every figure is taken with (time.process_time: CPU time)


def copy_bandwidth(nbytes=64 << 20, repeat=7):
    """Bytes read + written per second by ``np.copyto`` of ``nbytes`` (one thread, warm pages),
    from the fastest of ``repeat`` copies: the machine's capability, which a moment when another
    tenant holds the memory bus would understate."""
    a = np.ones(nbytes // 4, dtype=np.float32)
    b = np.empty_like(a)
    np.copyto(b, a)
    ts = []
    for _ in range(repeat):
        t0 = CLOCK()
        np.copyto(b, a)
        ts.append(CLOCK() - t0)
    return 2 * nbytes / float(np.min(ts))


def gemm_rate(n=1536, repeat=5):
    """FLOP/s of one (n, n) @ (n, n) float32 product through NumPy's BLAS (all its threads), from
    the fastest of ``repeat`` products (as copy_bandwidth)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    a @ b
    ts = []
    for _ in range(repeat):
        t0 = CLOCK()
        a @ b
        ts.append(CLOCK() - t0)
    return 2 * n ** 3 / float(np.min(ts))


def _arrays(value):
    if isinstance(value, np.ndarray):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _arrays(v)


def _root(a):
    while isinstance(a.base, np.ndarray):
        a = a.base
    return id(a)


def _matmul_flops(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim == 1 or b.ndim == 1:
        return 2 * a.size * (b.shape[-1] if b.ndim > 1 else 1)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return 2 * int(np.prod(batch, dtype=np.int64)) * a.shape[-2] * a.shape[-1] * b.shape[-1]


class _Recorder:
    """Wraps np.matmul, every Function subclass's forward/backward and an optimizer's step."""

    def __init__(self, function_base, optimizer):
        self.function_base, self.optimizer = function_base, optimizer
        self.gemm_s = self.gemm_flops = 0.0
        self.model_flops = 0      # 3x the forward FLOPs of the conv and linear layers (forward, dx, dW)
        self.ops = {}            # "Class.forward" -> [seconds outside GEMMs, bytes, calls]
        self.depth = 0
        self._op_roots = None    # array roots the current outermost op touches (None: no op running)
        self._gemm_in_op = 0.0
        self._restore = []
        self._lock = threading.Lock()
        self._thread = None

    # np.matmul -------------------------------------------------------------------------------
    def _matmul(self, a, b, *args, **kw):
        t0 = CLOCK()
        r = self._np_matmul(a, b, *args, **kw)
        dt = CLOCK() - t0
        with self._lock:
            self.gemm_flops += _matmul_flops(a, b)
            # a block worker's share (conv2d) runs beside the calling thread's own share, whose
            # GEMMs are the ones that take the step's time: only their time counts, every
            # thread's operands count as bytes
            if threading.get_ident() == self._thread:
                self.gemm_s += dt
                if self._op_roots is not None:
                    self._gemm_in_op += dt
            if self._op_roots is not None:
                for arr in (a, b, r):
                    if isinstance(arr, np.ndarray):
                        self._op_roots.setdefault(_root(arr), arr.nbytes)
        return r

    def _gemm_region(self, fn, flops, *arrays):
        t0 = CLOCK()
        fn()
        dt = CLOCK() - t0
        with self._lock:
            self.gemm_flops += flops
            self.gemm_s += dt
            if self._op_roots is not None:
                self._gemm_in_op += dt
                for arr in arrays:
                    if arr.size:
                        self._op_roots.setdefault(_root(arr), arr.nbytes)

    def _linear_forward(self, x, w, b, epilogue, u, a, k):
        self._gemm_region(lambda: self._linear_kernels[0](x, w, b, epilogue, u, a, k),
                          2 * x.shape[0] * x.shape[1] * w.shape[0], x, w, u, a)

    def _linear_backward(self, g, x, w, dx, want_dx, dw, want_dw, db_part, want_db, k):
        flops = 2 * g.size * ((w.shape[1] if want_dx else 0) + (x.shape[1] if want_dw else 0))
        self._gemm_region(lambda: self._linear_kernels[1](g, x, w, dx, want_dx, dw, want_dw, db_part, want_db, k),
                          flops, g, x, w, dx, dw)

    def _gelu_backward(self, g, a, w, u, b, du, dw, want_dw, db_part, want_db, dub_part, k, tanh):
        flops = 2 * g.size * w.shape[1] * (2 if want_dw else 1)
        self._gemm_region(lambda: self._linear_kernels[2](g, a, w, u, b, du, dw, want_dw, db_part, want_db, dub_part,
                                                          k, tanh), flops, g, a, w, u, du, dw)

    # ops -------------------------------------------------------------------------------------
    def _wrap(self, cls, name):
        fn = cls.__dict__[name].__func__ if isinstance(cls.__dict__[name], staticmethod) else cls.__dict__[name]
        label = f"{cls.__name__}.{name}"
        rec = self

        def timed(ctx, *args):
            if rec.depth:
                return fn(ctx, *args)
            rec.depth += 1
            rec._op_roots, rec._gemm_in_op = {}, 0.0
            t0 = CLOCK()
            try:
                out = fn(ctx, *args)
            finally:
                rec.depth -= 1
            dt = CLOCK() - t0
            roots = rec._op_roots
            rec._op_roots = None
            touched = list(_arrays(args)) + list(_arrays(out))
            if name == "backward":
                touched += list(_arrays(getattr(ctx, "saved_tensors", ())))
            for arr in touched:
                roots.setdefault(_root(arr), arr.nbytes)
            if label == "Conv2d.forward":       # the direct convolution's multiply-adds, whatever the algorithm
                rec.model_flops += 3 * 2 * out.size * args[1][0].size
            elif label == "Linear.forward":
                rec.model_flops += 3 * 2 * out.size * args[1].shape[-1]
            entry = rec.ops.setdefault(label, [0.0, 0, 0])
            entry[0] += dt - rec._gemm_in_op
            entry[1] += sum(roots.values())
            entry[2] += 1
            return out
        setattr(cls, name, staticmethod(timed))

    def _classes(self):
        seen, todo = [], [self.function_base]
        while todo:
            c = todo.pop()
            for s in c.__subclasses__():
                if s not in seen:
                    seen.append(s)
                    todo.append(s)
        return seen

    def __enter__(self):
        self._thread = threading.get_ident()
        self._np_matmul = np.matmul
        np.matmul = self._matmul
        from minidl.kernels.cpu import linear as linear_kernels
        self._linear_kernels = (linear_kernels._forward_shares, linear_kernels._backward_shares,
                                linear_kernels._gelu_backward_shares)
        (linear_kernels._forward_shares, linear_kernels._backward_shares,
         linear_kernels._gelu_backward_shares) = self._linear_forward, self._linear_backward, self._gelu_backward
        restore = []
        for cls in self._classes():
            for name in ("forward", "backward"):
                if name in cls.__dict__:
                    restore.append((cls, name, cls.__dict__[name]))
                    self._wrap(cls, name)
        self._restore = restore
        opt, rec = self.optimizer, self
        self._opt_step = opt.step

        def step(*a, **kw):
            t0 = CLOCK()
            r = rec._opt_step(*a, **kw)
            entry = rec.ops.setdefault("optimizer.step", [0.0, 0, 0])
            entry[0] += CLOCK() - t0
            entry[1] += sum(5 * p.numel() * p.element_size() for g in opt.param_groups for p in g["params"]
                            if p.grad is not None)
            entry[2] += 1
            return r
        opt.step = step
        return self

    def __exit__(self, *exc):
        np.matmul = self._np_matmul
        from minidl.kernels.cpu import linear as linear_kernels
        (linear_kernels._forward_shares, linear_kernels._backward_shares,
         linear_kernels._gelu_backward_shares) = self._linear_kernels
        for cls, name, original in self._restore:
            setattr(cls, name, original)
        del self.optimizer.step     # back to the class's method
        return False


def account(step, optimizer, function_base, repeat=3, model_flops=None):
    """Instrumented runs of ``step`` (after one plain one); the figures of the fastest run:
    dict with step_s, gemm_s, gemm_flops, model_flops, op_s (non-GEMM op time incl. optimizer),
    op_bytes, and per-op rows sorted by time. ``model_flops``: the model's FLOPs per step where
    the caller knows them (a model whose products are not all Conv2d and Linear layers, such as
    attention's); else counted from those two layers as above."""
    step()
    best = None
    for _ in range(repeat):
        with _Recorder(function_base, optimizer) as rec:
            t0 = CLOCK()
            step()
            total = CLOCK() - t0
        if best is None or total < best[0]:
            best = (total, rec)
    total, rec = best
    op_s = sum(v[0] for v in rec.ops.values())
    return {"step_s": total, "gemm_s": rec.gemm_s, "gemm_flops": rec.gemm_flops,
            "model_flops": rec.model_flops if model_flops is None else model_flops,
            "op_s": op_s,
            "op_bytes": sum(v[1] for v in rec.ops.values()),
            "rows": sorted(((k, *v) for k, v in rec.ops.items()), key=lambda r: -r[1])}


def table(name, acc, bandwidth, peak):
    """Markdown lines of one model's accounting."""
    s = acc["step_s"]
    neither = s - acc["gemm_s"] - acc["op_s"]
    floor = acc["op_bytes"] / bandwidth
    return [
        f"| {name} | {1e3 * s:.1f} | {acc['model_flops'] / 1e9:.2f} | {acc['gemm_flops'] / 1e9:.2f} "
        f"| {1e3 * acc['gemm_s']:.1f} "
        f"({100 * acc['gemm_s'] / s:.0f}%) | {acc['gemm_flops'] / max(acc['gemm_s'], 1e-12) / 1e9:.0f} "
        f"({100 * acc['gemm_flops'] / max(acc['gemm_s'], 1e-12) / peak:.0f}% of {peak / 1e9:.0f}) "
        f"| {1e3 * acc['op_s']:.1f} ({100 * acc['op_s'] / s:.0f}%) | {acc['op_bytes'] / 1e6:.0f} MB: "
        f"{1e3 * floor:.1f} ms at copy speed ({100 * floor / max(acc['op_s'], 1e-12):.0f}%) "
        f"| {1e3 * neither:.1f} ({100 * neither / s:.0f}%) |"]


def machine_note(bandwidth, peak):
    """The sentence that introduces the table: what the machine's figures were."""
    return (f"Where one step goes (one instrumented step per model, after the rounds; copy bandwidth "
            f"{bandwidth / 1e9:.1f} GB/s read+write, one 1536^3 SGEMM {peak / 1e9:.0f} GFLOP/s; see "
            f"benchmarks/_step_accounting.py for what each column counts):")


def op_lines(acc, n=14):
    """The ``n`` ops with the most own time outside GEMMs: ms, calls and MB moved, a line each."""
    return [f"  {label:34s} {1e3 * s:7.2f}  ({calls}, {nbytes / 1e6:.0f} MB)"
            for label, s, nbytes, calls in acc["rows"][:n]]


HEADER = ["| model | step ms (instrumented) | model GFLOP (fwd + bwd; convolutions as direct) | GEMM GFLOP done "
          "| GEMM ms (share) | GEMM GFLOP/s (of one large SGEMM) "
          "| other op work ms (share) | bytes it moves: time at copy bandwidth (of that work) "
          "| neither ms (share) |",
          "|---|---|---|---|---|---|---|---|---|"]
