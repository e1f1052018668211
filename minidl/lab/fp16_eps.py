"""Lab ``fp16-eps``: float16 training with autocast and GradScaler, the norms' eps, and where
their statistics are kept.

The practical advice this lab tests: in float16 training a too-small eps can make a norm's
gradients inf/NaN, and mixed-precision implementations therefore keep the normalization's
statistics in float32 (Micikevicius et al. 2018, "Mixed Precision Training", Section 3: float32
master weights, loss scaling, and reductions such as the norms' statistics accumulated in float32).

Two models are trained in float16 with ``md.autocast("cpu", dtype=md.float16)`` around the forward
pass and loss and ``md.amp.GradScaler``: a small Pre-LN GPT (LayerNorm) on the bundled text and a
small CNN (GroupNorm) on the 8x8 digits. Each runs at eps 1e-5, 1e-4 and 1e-3 with its norms in
one of two ways:

- float32 statistics: minidl's own layers (nn.LayerNorm, nn.GroupNorm), whose kernels read the
  float16 (or float32) input, keep the mean and 1/std in float32, apply eps in float32 and use
  the closed-form backward in float32 (what mixed-precision frameworks do);
- float16 statistics: the same normalization written with float16 ops only, as a naive half
  precision implementation would be: the input cast to float16, the squared deviations, the
  variance, ``var + eps`` and ``(var + eps) ** -0.5`` all float16 values (NumPy's float16 mean
  keeps float32 intermediates within one sum, then rounds), and the backward taken by autograd
  through those float16 ops. Its hazard is the derivative of ``(var + eps) ** -0.5``, which is
  ``-0.5 (var + eps) ** -1.5``: the power is above float16's largest value (65504) once
  var + eps < 65504 ** (-2/3) = 6.1e-4, whatever the loss scale. eps = 1e-3 keeps it finite for
  every row; 1e-4 and 1e-5 only for rows whose variance is large enough (``OVERFLOW_BELOW`` below).

Every run records, step by step: the training loss, the loss scale S before the step, whether the
scaler skipped it (an inf/NaN gradient), whether any norm's forward output was non-finite
("forward statistics"), and whether a norm's backward produced a non-finite input gradient from a
finite output gradient ("the norm's backward": a hook on the gradient entering and leaving each
norm). A float32 run of each model (eps 1e-5, no autocast) is the reference: a setting "trains"
when its final loss (mean of the last 10 steps) achieves at least 90% of the float32 run's loss
decrease. The scaler's ``growth_interval`` is shortened (quick: 20, full: 50 steps, PyTorch's
default is 2000) so that the trajectory shows both backing off and growing within a short run.
"""
import math

import numpy as np

from .. import nn, optim, random
from ..amp import GradScaler, autocast
from ..data.digits import digits_arrays
from ..nn import functional as F
from ..tensor import dtype as dtypes
from ..tensor.factories import tensor
from ._common import LabResult, Table, out_dir, progress, pyplot, save_figure
from ._gpt import corpus, make_gpt

EPS = (1e-5, 1e-4, 1e-3)
OVERFLOW_BELOW = 65504.0 ** (-2 / 3)    # var + eps below this: (var + eps) ** -1.5 is inf in float16
STATS = ("float32", "float16")


# the two ways to normalize ------------------------------------------------------------------------
def _half_normalize(h, eps):
    """Normalize float16 ``h`` over its last axis with float16 statistics (see the module docstring)."""
    mu = h.mean(-1, keepdim=True)
    d = h - mu
    var = (d * d).mean(-1, keepdim=True)
    return d * (var + eps) ** -0.5


class HalfStatsLayerNorm(nn.Module):
    """LayerNorm over the last axis computed in float16 ops only (the lab's naive variant)."""

    def __init__(self, d, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(tensor(np.ones(d, np.float32)))
        self.bias = nn.Parameter(tensor(np.zeros(d, np.float32)))

    def forward(self, x):
        with autocast("cpu", enabled=False):
            y = _half_normalize(x.to(dtypes.float16), self.eps)
            return y * self.weight.to(dtypes.float16) + self.bias.to(dtypes.float16)


class HalfStatsGroupNorm(nn.Module):
    """GroupNorm of (N, C, H, W) computed in float16 ops only (the lab's naive variant)."""

    def __init__(self, groups, channels, eps):
        super().__init__()
        self.groups, self.eps = groups, eps
        self.weight = nn.Parameter(tensor(np.ones(channels, np.float32)))
        self.bias = nn.Parameter(tensor(np.zeros(channels, np.float32)))

    def forward(self, x):
        N, C, H, W = x.shape
        with autocast("cpu", enabled=False):
            h = x.to(dtypes.float16).reshape(N, self.groups, -1)
            y = _half_normalize(h, self.eps).reshape(N, C, H, W)
            return y * self.weight.to(dtypes.float16).reshape(1, C, 1, 1) + \
                self.bias.to(dtypes.float16).reshape(1, C, 1, 1)


class Watched(nn.Module):
    """A norm with its non-finite values recorded: its forward output, and, in backward, whether
    the gradient it passes back is non-finite while the gradient it received was finite."""

    def __init__(self, inner, recorder):
        super().__init__()
        self.inner = inner
        self._recorder = recorder

    def forward(self, x):
        rec = self._recorder
        if x.requires_grad:
            x = x * 1          # a tensor of its own, so its gradient is the norm's alone
        rows = _rows(self.inner, x.detach().numpy().astype(np.float64))
        rec.min_var = min(rec.min_var, float(rows.var(-1).min())) if rows.size else rec.min_var
        y = self.inner(x)
        if not bool(np.isfinite(y.detach().numpy()).all()):
            rec.forward_bad = True
        if y.requires_grad:
            seen = {}

            def out_hook(g):
                seen["out"] = bool(np.isfinite(g.numpy()).all())

            def in_hook(g):
                if seen.get("out", True) and not np.isfinite(g.numpy()).all():
                    rec.norm_backward_bad = True
            y.register_hook(out_hook)
            if x.requires_grad:
                x.register_hook(in_hook)
        return y


def _rows(norm, x):
    """``x`` as the rows ``norm`` takes its statistics over: (rows, elements per row)."""
    groups = getattr(norm, "groups", None) or getattr(norm, "num_groups", None)
    if groups:
        return x.reshape(x.shape[0] * groups, -1)
    return x.reshape(-1, x.shape[-1])


class Recorder:
    """What one training step saw (reset before each step): non-finite values, and the smallest
    variance of a row any norm normalized."""

    def __init__(self):
        self.forward_bad = self.norm_backward_bad = False
        self.min_var = math.inf


# models --------------------------------------------------------------------------------------------
def _with_hook(module):
    module.register_forward_hook(lambda *a: None)   # a hooked SeqNorm is called as a module (no fused add)
    return module


def gpt_model(cfg, stats, eps, recorder, seed):
    model = make_gpt(seed, norm="layer", norm_position="pre", **cfg)
    for m in model.modules():
        if type(m).__name__ == "SeqNorm":
            d = m.norm.normalized_shape[-1]
            inner = nn.LayerNorm(d, eps=eps) if stats == "float32" else HalfStatsLayerNorm(d, eps)
            m.norm = Watched(inner, recorder)
            _with_hook(m)
    return model


class SmallCNN(nn.Module):
    def __init__(self, width, norm):
        super().__init__()
        self.conv1 = nn.Conv2d(1, width, 3, padding=1, bias=False)
        self.norm1 = norm(width)
        self.conv2 = nn.Conv2d(width, 2 * width, 3, stride=2, padding=1, bias=False)
        self.norm2 = norm(2 * width)
        self.head = nn.Linear(2 * width * 16, 10)

    def forward(self, x):
        x = F.relu(self.norm1(self.conv1(x)))
        x = F.relu(self.norm2(self.conv2(x)))    # (N, 2w, 4, 4) for the 8x8 digits
        return self.head(x.flatten(1))


def cnn_model(width, stats, eps, recorder, seed):
    random.manual_seed(seed)

    def norm(c):
        g = 4
        inner = nn.GroupNorm(g, c, eps=eps) if stats == "float32" else HalfStatsGroupNorm(g, c, eps)
        return Watched(inner, recorder)
    return SmallCNN(width, norm)


# training ------------------------------------------------------------------------------------------
def train(kind, model, recorder, steps, seed, lr, batch, growth_interval, mixed=True, desc=""):
    """Train with autocast + GradScaler (``mixed``) or in float32; per-step records."""
    if kind == "gpt":
        data, T = corpus(), model.block_size
        opt = optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.99), weight_decay=0.0)

        def loss_of(t):
            x, y = data.batch("train", batch, T, generator=np.random.default_rng((seed, t)))
            return model(x, y)[1]
    else:
        xs, ys = digits_arrays("train")
        opt = optim.SGD(model.parameters(), lr=lr, momentum=0.9)

        def loss_of(t):
            idx = np.random.default_rng((seed, t)).choice(len(xs), batch, replace=False)
            return F.cross_entropy(model(tensor(xs[idx])), tensor(ys[idx]))
    scaler = GradScaler("cpu", growth_interval=growth_interval, enabled=mixed)
    rec = {"loss": [], "scale": [], "skipped": [], "forward_bad": [], "norm_backward_bad": [], "min_var": []}
    model.train()
    for t in progress(range(steps), desc):
        recorder.__init__()
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):   # float16 overflow is measured here
            with autocast("cpu", dtype=dtypes.float16, enabled=mixed):
                loss = loss_of(t)
            opt.zero_grad()
            before = scaler.get_scale()
            scaler.scale(loss).backward()
            scaler.unscale_(opt)   # inf/NaN survive unscaling: the step is skipped exactly when one is left
            skipped = mixed and not all(bool(np.isfinite(p.grad.numpy()).all()) for p in model.parameters()
                                        if p.grad is not None)
            scaler.step(opt)
            scaler.update()
        rec["loss"].append(float(loss.item()))
        rec["scale"].append(before)
        rec["skipped"].append(skipped)
        rec["forward_bad"].append(recorder.forward_bad)
        rec["norm_backward_bad"].append(recorder.norm_backward_bad)
        rec["min_var"].append(recorder.min_var)
    return rec


def _lowest_scale_at_norm_inf(rec):
    """The smallest loss scale S at which a norm's backward still produced inf/NaN (None: never).
    Far below 1, loss scaling cannot be the cause: the norm overflows on its own."""
    hit = [s for s, bad in zip(rec["scale"], rec["norm_backward_bad"]) if bad]
    return min(hit) if hit else None


def _or_dash(value):
    return "-" if value is None else value


def _first(flags):
    for i, f in enumerate(flags):
        if f:
            return i + 1
    return None


def _final(losses, k=10):
    tail = [v for v in losses[-k:]]
    return float(np.mean(tail)) if tail and all(math.isfinite(v) for v in tail) else float("nan")


def run(quick=True, out=None, seed=0):
    out = out_dir("fp16-eps", out)
    if quick:
        gcfg, gsteps, gbatch, glr = dict(block_size=32, n_layer=2, n_head=2, d_model=32), 60, 8, 3e-3
        width, csteps, cbatch, clr, growth = 8, 60, 32, 0.05, 20
    else:
        gcfg, gsteps, gbatch, glr = dict(block_size=64, n_layer=3, n_head=4, d_model=64), 200, 8, 3e-3
        width, csteps, cbatch, clr, growth = 16, 200, 64, 0.05, 50
    setups = {"gpt": (lambda stats, eps, r: gpt_model(gcfg, stats, eps, r, seed), gsteps, glr, gbatch,
                      f"GPT d{gcfg['d_model']} L{gcfg['n_layer']}"),
              "cnn": (lambda stats, eps, r: cnn_model(width, stats, eps, r, seed), csteps, clr, cbatch,
                      f"CNN w{width} GroupNorm")}
    runs, refs = {}, {}
    for kind, (make, steps, lr, batch, label) in setups.items():
        r = Recorder()
        refs[kind] = train(kind, make("float32", 1e-5, r), r, steps, seed, lr, batch, growth, mixed=False,
                           desc=f"{label} float32 reference")
        for stats in STATS:
            for eps in EPS:
                r = Recorder()
                runs[kind, stats, eps] = train(kind, make(stats, eps, r), r, steps, seed, lr, batch, growth,
                                               desc=f"{label} fp16, {stats} statistics, eps {eps:g}")
    table = Table("float16 training (autocast + GradScaler): norms with float32 vs float16 statistics",
                  ["model", "statistics", "eps", "first loss", "final loss", "trains", "skipped steps",
                   "first skip", "norm-backward inf steps", "first norm-backward inf", "forward inf steps",
                   "lowest S at norm inf", "final scale", "min row var"])
    verdict = {}
    for kind, (_, steps, _, _, label) in setups.items():
        ref = refs[kind]
        ref_first, ref_final = ref["loss"][0], _final(ref["loss"])
        table.add(**{"model": label, "statistics": "float32 run (no autocast)", "eps": 1e-5,
                     "first loss": ref_first, "final loss": ref_final, "trains": True, "skipped steps": 0,
                     "first skip": "-", "norm-backward inf steps": 0, "first norm-backward inf": "-",
                     "forward inf steps": 0, "lowest S at norm inf": "-", "final scale": "-",
                     "min row var": min(ref["min_var"])})
        target = ref_final + 0.1 * (ref_first - ref_final)
        for stats in STATS:
            for eps in EPS:
                rec = runs[kind, stats, eps]
                final = _final(rec["loss"])
                trains = math.isfinite(final) and final <= target
                verdict[kind, stats, eps] = trains
                table.add(**{"model": label, "statistics": stats, "eps": eps, "first loss": rec["loss"][0],
                             "final loss": final, "trains": trains, "skipped steps": int(sum(rec["skipped"])),
                             "first skip": _first(rec["skipped"]) or "-",
                             "norm-backward inf steps": int(sum(rec["norm_backward_bad"])),
                             "first norm-backward inf": _first(rec["norm_backward_bad"]) or "-",
                             "forward inf steps": int(sum(rec["forward_bad"])),
                             "lowest S at norm inf": _or_dash(_lowest_scale_at_norm_inf(rec)),
                             "final scale": rec["scale"][-1], "min row var": min(rec["min_var"])})
    path = _figure(out, setups, runs, refs)
    conclusion = _conclusion(setups, runs, verdict)
    return LabResult("fp16-eps", [table], path, conclusion, quick,
                     {"runs": {f"{k[0]}/{k[1]}/{k[2]:g}": v for k, v in runs.items()}, "refs": refs})


def _figure(out, setups, runs, refs):
    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex="col")
    for col, (kind, (*_, label)) in enumerate(setups.items()):
        top, bottom = axes[0, col], axes[1, col]
        top.plot(_smooth_finite(refs[kind]["loss"]), color="black", lw=1.5, label="float32 run (no autocast)")
        for k, eps in enumerate(EPS):
            for stats, style in zip(STATS, ("-", "--")):
                rec = runs[kind, stats, eps]
                lbl = f"fp16, {stats} stats, eps {eps:g}"
                top.plot(_smooth_finite(rec["loss"]), style, color=f"C{k}", label=lbl)
                bottom.semilogy(np.arange(1, len(rec["scale"]) + 1), rec["scale"], style, color=f"C{k}", label=lbl)
        top.set_title(f"{label}: training loss")
        top.set_ylabel("loss (5-step mean)")
        top.grid(alpha=0.3)
        bottom.set_title(f"{label}: loss scale S before each step")
        bottom.set_xlabel("step")
        bottom.set_ylabel("loss scale S (log)")
        bottom.grid(alpha=0.3, which="both")
    axes[0, 0].legend(fontsize=7)
    axes[1, 1].legend(fontsize=7)
    fig.suptitle("float16 training with autocast + GradScaler: norm eps and the precision of its statistics")
    return save_figure(fig, out, "fp16_eps")


def _smooth_finite(values, k=5):
    """Trailing k-step mean of the finite values (NaN where a window holds none: a gap in the plot)."""
    v = np.asarray(values, dtype=np.float64)
    out = np.full(len(v), np.nan)
    for i in range(len(v)):
        w = v[max(0, i - k + 1):i + 1]
        w = w[np.isfinite(w)]
        if len(w):
            out[i] = w.mean()
    return out


def _conclusion(setups, runs, verdict):
    parts = []
    for kind, (*_, label) in setups.items():
        f32 = [eps for eps in EPS if verdict[kind, "float32", eps]]
        f16 = [eps for eps in EPS if verdict[kind, "float16", eps]]
        failed = [eps for eps in EPS if not verdict[kind, "float16", eps]]
        low = min(min(runs[kind, st, eps]["min_var"]) for st in STATS for eps in EPS)
        text = f"{label}: float32 statistics train at {_eps_list(f32)}; float16 statistics at {_eps_list(f16)}"
        for eps in failed:
            rec = runs[kind, "float16", eps]
            first, lowest = _first(rec["norm_backward_bad"]), _lowest_scale_at_norm_inf(rec)
            text += f"; at eps {eps:.0e}".replace("e-0", "e-") + ": "
            if first:
                text += (f"the norm's backward gave inf/NaN in {int(sum(rec['norm_backward_bad']))} steps from step "
                         f"{first}, at scales down to S = {lowest:.2g}")
                text += " (no loss scale avoids it)" if lowest < 1 else ""
            else:
                text += "inf/NaN came from outside the norms"
            text += (f", {int(sum(rec['skipped']))} of {len(rec['skipped'])} steps skipped, final S "
                     f"{rec['scale'][-1]:.2g}, final loss {_final(rec['loss']):.3g}")
            fwd = _first(rec["forward_bad"])
            if fwd:
                text += f", forward statistics non-finite from step {fwd}"
        for eps in f16:
            rec = runs[kind, "float16", eps]
            lowest = _lowest_scale_at_norm_inf(rec)
            if lowest is not None:
                ref = runs[kind, "float32", eps]["scale"][-1]
                text += (f"; at eps {eps:.0e}".replace("e-0", "e-") + " the float16 statistics' backward overflowed "
                         f"at scales down to S = {lowest:.2g} (final S {rec['scale'][-1]:.2g} vs {ref:.2g} with "
                         "float32 statistics)")
        text += (f". Smallest row variance seen: {low:.2g}, " + ("below" if low < OVERFLOW_BELOW else "above")
                 + f" the {OVERFLOW_BELOW:.2g} under which (var + eps) ** -1.5 overflows float16")
        if not failed and low >= OVERFLOW_BELOW:
            text += ", so the claim cannot show on this model"
        parts.append(text + ".")
    return " ".join(parts)


def _eps_list(values):
    if list(values) == list(EPS):
        return "every eps"
    if not values:
        return "no eps"
    return "eps " + ", ".join(f"{v:.0e}".replace("e-0", "e-") for v in values)
