"""F.grid_sample on volumetric (5-D) input, as ``torch.nn.functional.grid_sample``'s.

out[n, c, d, h, w] = input[n, c] read at the grid point grid[n, d, h, w] = (x, y, z), x along
the width W, y along the height H, z along the depth D. Each coordinate is taken to voxel units
and padded exactly as in 2-D (``grid_sample.source_index``: ix, iy, iz and their slopes
d ix/dx, d iy/dy, d iz/dz, which carry the unnormalizing scale and the padding's folds/clips).

bilinear (trilinear here, PyTorch's name): with x0 = floor(ix), tx = ix - x0 (and y0, ty, z0,
tz), the eight taps (x0 + a, y0 + b, z0 + c), a, b, c in {0, 1}, have the weights

    w_abc = f_a(tx) f_b(ty) f_c(tz),    f_0(t) = 1 - t,  f_1(t) = t,  f_0' = -1,  f_1' = +1

and out = sum over the taps inside the volume of w_abc * input[tap] (taps outside read 0).
The derivatives (within a cell each t moves with its coordinate at slope 1; the floor's jumps
are measure zero):

    dL/dinput[tap] += w_abc g                                       (a scatter-add over the taps)
    dL/dix = sum_c g sum_taps input[tap] f_a'(tx) f_b(ty) f_c(tz)   (iy, iz alike)
    dL/dx  = dL/dix * d ix/dx                                       (y, z alike)

nearest: the one tap (rint(ix), rint(iy), rint(iz)) (half to even, as PyTorch); the grid gets
no gradient (the output is piecewise constant in it). bicubic is 2-D only, as in PyTorch.
"""
import itertools

import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of
from .grid_sample import _floor, _rint, source_index


def _taps3d(ix, iy, iz, D, H, W, mode):
    """Per tap (8 for trilinear, 1 for nearest): the flat position (clipped into the volume),
    whether it lies inside, its weight and the weight's derivatives in tx, ty and tz."""
    xp = namespace_of(ix)
    if mode == "nearest":
        corners = [((_rint(ix, xp), _rint(iy, xp), _rint(iz, xp)), xp.ones_like(ix), None)]
    else:
        low = (_floor(ix, xp), _floor(iy, xp), _floor(iz, xp))
        t = (ix - low[0], iy - low[1], iz - low[2])
        corners = []
        for bits in itertools.product((0, 1), repeat=3):      # (a, b, c) for (x, y, z)
            f = [t[k] if b else 1 - t[k] for k, b in enumerate(bits)]
            df = [1.0 if b else -1.0 for b in bits]
            grads = (df[0] * f[1] * f[2], f[0] * df[1] * f[2], f[0] * f[1] * df[2])
            corners.append((tuple(low[k] + b for k, b in enumerate(bits)), f[0] * f[1] * f[2], grads))
    taps = []
    for (xs, ys, zs), w, grads in corners:
        inside = (xs >= 0) & (xs <= W - 1) & (ys >= 0) & (ys <= H - 1) & (zs >= 0) & (zs <= D - 1)
        xi = xp.clip(xp.where(inside, xs, 0), 0, W - 1).astype(np.int64)
        yi = xp.clip(xp.where(inside, ys, 0), 0, H - 1).astype(np.int64)
        zi = xp.clip(xp.where(inside, zs, 0), 0, D - 1).astype(np.int64)
        taps.append(((zi * H + yi) * W + xi, inside, w, grads))
    return taps


class GridSample3d(Function):
    """See the module docstring. x (N, C, D, H, W), grid (N, OD, OH, OW, 3) -> (N, C, OD, OH, OW)."""

    @staticmethod
    def forward(ctx, x, grid, mode, padding_mode, align_corners):
        xp = namespace_of(x)
        N, C, D, H, W = x.shape
        out_shape = tuple(grid.shape[1:4])
        P = out_shape[0] * out_shape[1] * out_shape[2]
        points = [source_index(grid[..., k], n, padding_mode, align_corners) for k, n in enumerate((W, H, D))]
        ix, iy, iz = (p[0].reshape(N, 1, P) for p in points)
        taps = _taps3d(ix, iy, iz, D, H, W, mode)
        flat_x = x.reshape(N, C, D * H * W)
        out = xp.zeros((N, C, P), dtype=x.dtype)
        zero = xp.zeros((), dtype=x.dtype)
        for pos, inside, w, _ in taps:
            v = xp.take_along_axis(flat_x, xp.broadcast_to(pos, (N, C, P)), axis=2)
            out = out + xp.where(inside, v, zero) * w    # a NaN point has NaN weights: NaN, as PyTorch
        ctx.save_for_backward(x)
        ctx.taps, ctx.slopes, ctx.mode = taps, tuple(p[1] for p in points), mode
        return out.reshape((N, C) + out_shape)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        xp = namespace_of(g)
        N, C, D, H, W = x.shape
        out_shape = tuple(g.shape[2:])
        P = out_shape[0] * out_shape[1] * out_shape[2]
        gm = g.reshape(N, C, P)
        zero = xp.zeros((), dtype=g.dtype)
        dx, dgrid = None, None
        if ctx.needs_input_grad[0]:
            dx = xp.zeros((N * C * D * H * W,), dtype=g.dtype)
            plane = (xp.arange(N * C, dtype=np.int64) * (D * H * W)).reshape(N, C, 1)
            for pos, inside, w, _ in ctx.taps:
                xp.add.at(dx, (plane + pos).reshape(-1), xp.where(inside, gm * w, zero).reshape(-1))
            dx = dx.reshape(N, C, D, H, W)
        if ctx.needs_input_grad[1]:
            if ctx.mode == "nearest":
                dgrid = xp.zeros((N,) + out_shape + (3,), dtype=g.dtype)
            else:
                flat_x = x.reshape(N, C, D * H * W)
                gi = [xp.zeros((N, 1, P), dtype=g.dtype) for _ in range(3)]
                for pos, inside, _, grads in ctx.taps:
                    v = xp.take_along_axis(flat_x, xp.broadcast_to(pos, (N, C, P)), axis=2)
                    gv = xp.where(inside, gm * v, zero).sum(axis=1, keepdims=True)
                    gi = [acc + gv * dw for acc, dw in zip(gi, grads)]
                dgrid = xp.stack([acc.reshape((N,) + out_shape) * s for acc, s in zip(gi, ctx.slopes)], axis=-1)
        return dx, dgrid, None, None, None
