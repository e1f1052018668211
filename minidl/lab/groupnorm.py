"""Lab 7, ``groupnorm``: GroupNorm sweeps from LayerNorm (G = 1) to InstanceNorm (G = C).

GroupNorm(G, C) normalizes each sample over (C/G channels, H, W). With one group that is the
whole (C, H, W) of the sample, LayerNorm's set; with C groups it is one channel's (H, W),
InstanceNorm's set. The experiment runs the real layers (float64, no affine) on a batch whose
channels have different means and scales and measures, for every G dividing C, the largest
difference from LayerNorm over (C, H, W) and from InstanceNorm2d.
"""
import numpy as np

from .. import nn
from ..autograd import grad_mode
from ..tensor.factories import tensor
from ._common import LabResult, Table, out_dir, pyplot, save_figure


def run(quick=True, out=None, seed=0):
    out = out_dir("groupnorm", out)
    N, C, H, W = (4, 16, 6, 6) if quick else (8, 64, 16, 16)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, C, H, W)) * rng.uniform(0.2, 5, (1, C, 1, 1)) + 3 * rng.standard_normal((1, C, 1, 1))
    xt = tensor(x)
    with grad_mode.no_grad():
        ln = nn.LayerNorm((C, H, W), elementwise_affine=False).double()(xt).numpy()
        inn = nn.InstanceNorm2d(C).double()(xt).numpy()
        groups = [g for g in range(1, C + 1) if C % g == 0]
        table = Table(f"GroupNorm(G, {C}) on an (N={N}, C={C}, H={H}, W={W}) float64 batch, no affine",
                      ["groups G", "channels/group", "max |GN - LN|", "max |GN - IN|"])
        d_ln, d_in = [], []
        for g in groups:
            y = nn.GroupNorm(g, C, affine=False).double()(xt).numpy()
            d_ln.append(float(np.abs(y - ln).max()))
            d_in.append(float(np.abs(y - inn).max()))
            table.add(**{"groups G": g, "channels/group": C // g, "max |GN - LN|": d_ln[-1],
                         "max |GN - IN|": d_in[-1]})
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    floor = 1e-17  # exact zeros on a log axis
    ax.semilogy(groups, np.maximum(d_ln, floor), "o-", label="max |GroupNorm - LayerNorm(C,H,W)|")
    ax.semilogy(groups, np.maximum(d_in, floor), "s-", label="max |GroupNorm - InstanceNorm|")
    ax.set_xscale("log", base=2)
    ax.set_xticks(groups)
    ax.set_xticklabels([str(g) for g in groups])
    ax.set_xlabel("number of groups G  (1 = LayerNorm ... C = InstanceNorm)")
    ax.set_ylabel("largest output difference")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    ax.set_title(f"GroupNorm interpolates between LN and IN (C = {C})")
    path = save_figure(fig, out, "groupnorm")
    ok = d_ln[0] < 1e-10 and d_in[-1] < 1e-10 and min(d_ln[1:]) > 1e-3 and min(d_in[:-1]) > 1e-3
    conclusion = (f"GroupNorm with G=1 equals LayerNorm over (C,H,W) (max diff {d_ln[0]:.1e}) and with G=C={C} "
                  f"equals InstanceNorm (max diff {d_in[-1]:.1e}); every G in between differs from both "
                  f"(by >= {min(min(d_ln[1:]), min(d_in[:-1])):.2f})" if ok else
                  f"the expected endpoints did not match: |GN(1)-LN|={d_ln[0]:.2e}, |GN(C)-IN|={d_in[-1]:.2e}")
    return LabResult("groupnorm", [table], path, conclusion, quick, {"groups": groups, "d_ln": d_ln, "d_in": d_in})
