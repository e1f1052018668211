"""Lab 9, ``axes``: which axes of an (N, C, H, W) batch each of BN, LN, IN, GN reduces over,
measured from the layers themselves rather than drawn from a textbook.

Probe: run each layer (training mode, float64) on a random batch, add a small perturbation to
one element x[n0, c0, h0, w0] and record which outputs change. An output changes exactly when
it shares a normalization group (the set its mean and variance are taken over) with the
perturbed element, so the set of changed outputs *is* the group. The figure draws it as the
familiar N x C x (H*W) cube (Wu & He 2018, Figure 2), one cube per layer.
"""
import numpy as np

from .. import nn
from ..tensor.factories import tensor
from ..autograd import grad_mode
from ._common import LabResult, Table, out_dir, pyplot, save_figure

AXES = ("N", "C", "H", "W")


def layers(C, H, W, groups):
    return {
        "BatchNorm2d": nn.BatchNorm2d(C),
        "LayerNorm((C,H,W))": nn.LayerNorm((C, H, W)),
        "InstanceNorm2d": nn.InstanceNorm2d(C),
        f"GroupNorm({groups}, {C})": nn.GroupNorm(groups, C),
    }


def probe(layer, x, where, delta=1e-3, tol=1e-12):
    """Boolean array of x's shape: True where the output moved when x[where] moved by delta."""
    layer.double().train()
    with grad_mode.no_grad():
        y0 = layer(tensor(x)).numpy()
        xp = x.copy()
        xp[where] += delta
        y1 = layer(tensor(xp)).numpy()
    return np.abs(y1 - y0) > tol


def reduced_axes(changed):
    """The axes along which the changed set extends beyond one index (the reduction axes)."""
    idx = np.nonzero(changed)
    return tuple(a for a, i in zip(AXES, idx) if len(np.unique(i)) > 1)


def _span(changed, axis):
    idx = sorted(int(i) for i in set(np.nonzero(changed)[axis]))
    return ",".join(map(str, idx))


def run(quick=True, out=None, seed=0):
    out = out_dir("axes", out)
    N, C, H, W, G = 4, 6, 3, 3, 3
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, C, H, W)) * rng.uniform(0.5, 2, (1, C, 1, 1)) + rng.standard_normal((1, C, 1, 1))
    where = (1, 2, 1, 1)
    table = Table(f"outputs that change when x{list(where)} of an (N={N}, C={C}, H={H}, W={W}) batch changes",
                  ["layer", "reduces over", "group size", "samples n", "channels c"])
    masks = {}
    for name, layer in layers(C, H, W, G).items():
        changed = probe(layer, x, where)
        masks[name] = changed
        ax = reduced_axes(changed)
        table.add(**{"layer": name, "reduces over": ",".join(ax) or "-", "group size": int(changed.sum()),
                     "samples n": _span(changed, 0), "channels c": _span(changed, 1)})
    fig = draw(masks, (N, C, H * W), plt=pyplot(), probe_at=(where[0], where[1], where[2] * W + where[3]))
    path = save_figure(fig, out, "axes")
    got = {r["layer"].split("(")[0]: r["reduces over"] for r in table.rows}
    expected = {"BatchNorm2d": "N,H,W", "LayerNorm": "C,H,W", "InstanceNorm2d": "H,W", "GroupNorm": "C,H,W"}
    ok = all(got[k] == v for k, v in expected.items())
    gn_size = table.rows[3]["group size"]
    conclusion = (f"probing the layers shows BN normalizes over (N,H,W) per channel, LN over (C,H,W) per sample, "
                  f"IN over (H,W) per sample and channel, and GN over (H,W) and a group of {gn_size // (H * W)} "
                  f"channels per sample" if ok else f"unexpected reduction sets: {got}")
    return LabResult("axes", [table], path, conclusion, quick, {"masks": masks})


def draw(masks, shape, plt, probe_at):
    """One 3-D cube per layer: N, C and H*W on the axes, the probed element dark, its group blue."""
    N, C, S = shape
    fig = plt.figure(figsize=(4 * len(masks), 4.2))
    for k, (name, changed) in enumerate(masks.items()):
        ax = fig.add_subplot(1, len(masks), k + 1, projection="3d")
        m = changed.reshape(N, C, S)
        colors = np.empty((N, C, S), object)
        colors[m] = "#4a90d9e0"
        n0, c0, s0 = probe_at
        colors[n0, c0, s0] = "#1f3a93ff"
        ax.voxels(m, facecolors=colors, edgecolor="#ffffff", linewidth=0.4)
        _wire_box(ax, N, C, S)
        ax.set_xlim(0, N)
        ax.set_ylim(0, C)
        ax.set_zlim(0, S)
        ax.set_box_aspect((N, C, S))
        ax.set_xlabel("N")
        ax.set_ylabel("C")
        ax.set_zlabel("H*W")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_zticks([])
        ax.set_title(name, fontsize=10)
        ax.view_init(elev=22, azim=-58)
    fig.suptitle("measured normalization groups: outputs that move when one input element moves", fontsize=11)
    return fig


def _wire_box(ax, *size):
    """The outline of the whole (N, C, H*W) batch, with a light grid on its three back faces."""
    N, C, S = size
    for a, b in [((0, 0), (N, 0)), ((0, C), (N, C))]:
        for z in (0, S):
            ax.plot([a[0], b[0]], [a[1], b[1]], [z, z], color="#777777", lw=0.7)
    for x in (0, N):
        for z in (0, S):
            ax.plot([x, x], [0, C], [z, z], color="#777777", lw=0.7)
        for y in (0, C):
            ax.plot([x, x], [y, y], [0, S], color="#777777", lw=0.7)
    for i in range(N + 1):
        ax.plot([i, i], [C, C], [0, S], color="#cccccc", lw=0.4)
        ax.plot([i, i], [0, C], [0, 0], color="#cccccc", lw=0.4)
    for j in range(C + 1):
        ax.plot([N, N], [j, j], [0, S], color="#cccccc", lw=0.4)
        ax.plot([0, N], [j, j], [0, 0], color="#cccccc", lw=0.4)
