"""Lab 8, ``precision``: float16 LayerNorm on low-variance tokens, float16 vs float32 accumulation.

Tokens are x = 1 + s z (z standard normal, D features), rounded to float16: an offset with a
small spread, as in a residual stream. Two ways to normalize the same float16 tokens:

- float16 accumulation (what a naive half-precision kernel does; simulated here in NumPy):
  the sums for the mean and the variance run sequentially in float16, so once the running
  sum reaches ~D its spacing (0.5 at 768) swamps the small deviations, and squares below
  6e-5 fall into float16's subnormals; eps is added in float16 too.
- minidl's ``F.layer_norm`` on the float16 tensor: statistics accumulated in float32 or
  wider, output rounded to float16 (the mixed-precision practice).

Both are compared with float64 LayerNorm of the *same* rounded tokens and the same eps; the
output's spread (std) is reported too, since an eps near s^2 shrinks the output (y's std is
sqrt(var / (var + eps))) whatever the precision.
"""
import numpy as np

from ..nn import functional as F
from ..tensor.factories import tensor
from ._common import LabResult, Table, out_dir, pyplot, save_figure


def layer_norm_f16_accumulate(x, eps):
    """LayerNorm over the last axis with every sum accumulated sequentially in float16."""
    x = x.astype(np.float16)
    D = np.float16(x.shape[-1])
    mean = np.add.accumulate(x, axis=-1, dtype=np.float16)[..., -1:] / D
    xc = (x - mean).astype(np.float16)
    var = np.add.accumulate(xc * xc, axis=-1, dtype=np.float16)[..., -1:] / D
    return (xc / np.sqrt(var + np.float16(eps))).astype(np.float16)


def layer_norm_f64(x, eps):
    x = x.astype(np.float64)
    xc = x - x.mean(-1, keepdims=True)
    return xc / np.sqrt((xc * xc).mean(-1, keepdims=True) + eps)


def run(quick=True, out=None, seed=0):
    out = out_dir("precision", out)
    rows, D = (64, 768) if quick else (1024, 768)
    spreads = [1.0, 0.1, 0.03, 0.01] if quick else [1.0, 0.3, 0.1, 0.03, 0.01, 0.003]
    epss = [1e-6, 1e-5, 1e-3]
    rng = np.random.default_rng(seed)
    table = Table(f"LayerNorm of ({rows}, {D}) float16 tokens 1 + s*z: max |error| vs float64 on the same tokens",
                  ["token std s", "eps", "f16 accumulation", "minidl (f32 acc.)", "output std"])
    err16, err32 = {}, {}
    for eps in epss:
        for s in spreads:
            x = (1.0 + s * rng.standard_normal((rows, D))).astype(np.float16)
            truth = layer_norm_f64(x, eps)
            e16 = float(np.abs(layer_norm_f16_accumulate(x, eps).astype(np.float64) - truth).max())
            y = F.layer_norm(tensor(x), (D,), eps=eps).numpy()
            assert y.dtype == np.float16
            e32 = float(np.abs(y.astype(np.float64) - truth).max())
            err16[eps, s], err32[eps, s] = e16, e32
            table.add(**{"token std s": s, "eps": eps, "f16 accumulation": e16, "minidl (f32 acc.)": e32,
                         "output std": float(truth.std(-1).mean())})
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for k, eps in enumerate(epss):
        ax.loglog(spreads, [err16[eps, s] for s in spreads], "o--", color=f"C{k}", label=f"f16 accum, eps={eps:g}")
        ax.loglog(spreads, [err32[eps, s] for s in spreads], "s-", color=f"C{k}", label=f"f32 accum, eps={eps:g}")
    ax.invert_xaxis()
    ax.set_xlabel("token standard deviation s (tokens 1 + s z, float16)")
    ax.set_ylabel("max |y - y_float64|")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, ncol=2)
    ax.set_title(f"float16 LayerNorm (D={D}): accumulation precision")
    path = save_figure(fig, out, "precision")
    lo = min(spreads)
    ratio = min(err16[e, lo] / max(err32[e, lo], 1e-12) for e in epss)
    worst32 = max(err32.values())
    big_eps_std = [r["output std"] for r in table.rows if r["eps"] == max(epss) and r["token std s"] == lo][0]
    conclusion = (f"at token std {lo:g}, float16 accumulation is off by up to "
                  f"{max(err16[e, lo] for e in epss):.2g} (>= {ratio:.0f}x the float32-accumulated error), "
                  f"while minidl's float32 accumulation stays within {worst32:.1e} of float64 everywhere "
                  f"(float16 output rounding); eps={max(epss):g} shrinks the output std to {big_eps_std:.2f} "
                  f"at that spread in any precision")
    return LabResult("precision", [table], path, conclusion, quick, {"err16": err16, "err32": err32})
