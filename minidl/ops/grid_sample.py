"""F.affine_grid and F.grid_sample: spatial transformers, as ``torch.nn.functional``'s.

affine_grid(theta, size): the sampling grid of an affine map. Output position (h, w) of an
(H, W) image has normalized coordinates (x_w, y_h) in [-1, 1] (the linspace of W and H
points; with align_corners=False shrunk by (W - 1)/W, (H - 1)/H to the pixel centers; a
size of 1 is the coordinate 0), and

    grid[n, h, w] = theta[n] @ (x_w, y_h, 1)          (theta: (N, 2, 3); 3-D alike, (N, 3, 4))

A matrix product B theta[n]^T with the base B (H W, 3), so dL/dtheta[n] = g[n]^T B.

grid_sample(input, grid): out[n, c, h, w] = input[n, c] read at the grid point
grid[n, h, w] = (x, y) (x along the width). The point is first taken to pixel units,

    ix = (x + 1)/2 (W - 1)              (align_corners=True;  d ix/dx = (W - 1)/2)
    ix = ((x + 1) W - 1)/2              (align_corners=False; d ix/dx = W/2)

then, by padding_mode: 'zeros' leaves it (taps outside the image read 0); 'border' clips it
to [0, W - 1] (slope 0 where it clipped, including at the borders themselves, as PyTorch);
'reflection' folds it into the span [0, W - 1] (align_corners) or [-1/2, W - 1/2] and clips
(slope +-1: -1 on each fold). Likewise iy with H.

bilinear: with x0 = floor(ix), tx = ix - x0 (and y0, ty), the four taps and weights

    nw (x0, y0): (1 - tx)(1 - ty)     ne (x0 + 1, y0): tx (1 - ty)
    sw (x0, y0 + 1): (1 - tx) ty      se (x0 + 1, y0 + 1): tx ty

out = sum over the taps inside the image of weight * input[tap]. The derivatives:

    dL/dinput[tap] += weight g                              (a scatter-add over the taps)
    dL/dix = sum_c g sum_taps input[tap] d weight/dtx,  d weight/dtx = -(1 - ty), (1 - ty), -ty, ty
    dL/diy = sum_c g sum_taps input[tap] d weight/dty,  d weight/dty = -(1 - tx), -tx, (1 - tx), tx

(within a cell tx moves with ix at slope 1; the floor's jumps are measure zero), and
dL/dx = dL/dix * d ix/dx (the unnormalizing scale times the padding slope), likewise y.

nearest: the one tap (rint(ix), rint(iy)) (half to even, as PyTorch); the grid gets no
gradient (the output is piecewise constant in it).

bicubic: the 16 taps (x0 - 1 + i, y0 - 1 + j), i, j in 0..3, weighted by c_i(tx) c_j(ty), the
cubic convolution coefficients of interpolate's bicubic (A = -0.75). As PyTorch, the point is
only unnormalized (no padding applied to ix, iy, so the slope is the scale alone) and the
padding_mode maps each tap's integer position instead: 'border' clips it into the image,
'reflection' folds it as above then clips; 'zeros' reads 0 outside. The tap positions are
piecewise constant in ix, so dL/dix = sum_c g sum_taps input[tap] c_i'(tx) c_j(ty).
"""
import warnings

import numpy as np

from ..autograd import autocast_state
from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.tensor import Tensor

_MODES = ("bilinear", "nearest", "bicubic")
_PADDING = ("zeros", "border", "reflection")


# affine_grid ----------------------------------------------------------------------------

def _linspace(n, align_corners):
    """PyTorch's linspace_from_neg_one: n points over [-1, 1] (pixel centers without align_corners)."""
    if n <= 1:
        return np.zeros(max(n, 1))
    r = np.linspace(-1.0, 1.0, n)
    return r if align_corners else r * (n - 1) / n


def affine_base(spatial, align_corners):
    """The base B (prod(spatial), k + 1): per output position its coordinates (x, y[, z]) and a 1,
    x varying fastest (the last spatial axis)."""
    axes = [_linspace(n, align_corners) for n in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")                 # (D,) H, W
    coords = [m.reshape(-1) for m in reversed(mesh)]          # x, y[, z]
    return np.stack(coords + [np.ones(mesh[0].size)], axis=1)


class AffineGrid(Function):
    """grid[n] = B theta[n]^T;  dL/dtheta[n] = g[n]^T B (module docstring)."""

    @staticmethod
    def forward(ctx, theta, spatial, align_corners):
        xp = namespace_of(theta)
        base = xp.asarray(affine_base(spatial, align_corners).astype(theta.dtype))
        ctx.base = base
        grid = xp.matmul(base[None], theta.transpose(0, 2, 1))      # (N, P, k)
        return grid.reshape((theta.shape[0],) + tuple(spatial) + (theta.shape[1],))

    @staticmethod
    def backward(ctx, g):
        xp = namespace_of(g)
        base = ctx.base
        gm = g.reshape(g.shape[0], base.shape[0], g.shape[-1])
        return xp.matmul(gm.transpose(0, 2, 1), base[None]), None, None


def _default_align_corners(align_corners):
    if align_corners is None:
        warnings.warn("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. "
                      "Please specify align_corners=True if the old behavior is desired. See the documentation of "
                      "grid_sample for details.", stacklevel=3)
        return False
    return bool(align_corners)


def affine_grid(theta, size, align_corners=None):
    """As ``torch.nn.functional.affine_grid``: the (N, H, W, 2) grid (or (N, D, H, W, 3)) of the
    affine maps theta (N, 2, 3) (or (N, 3, 4)) for an output of ``size`` (N, C, H, W) (or 5-D)."""
    align_corners = _default_align_corners(align_corners)
    if not isinstance(theta, Tensor):
        raise TypeError(f"affine_grid(): argument 'theta' must be a Tensor, got {type(theta).__name__}")
    if theta.dtype.kind != "f":
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = tuple(int(s) for s in size)
    if len(size) == 4:
        if theta.ndim != 3 or tuple(theta.shape[-2:]) != (2, 3):
            raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {size}. "
                             f"Got {list(theta.shape)}.")
    elif len(size) == 5:
        if theta.ndim != 3 or tuple(theta.shape[-2:]) != (3, 4):
            raise ValueError(f"Expected a batch of 3D affine matrices of shape Nx3x4 for size {size}. "
                             f"Got {list(theta.shape)}.")
    else:
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {size}.")
    spatial = size[2:]
    if align_corners and min(spatial) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
                      "align_corners=True. This is not an intended use case of affine_grid. See the documentation "
                      "of affine_grid for details.", stacklevel=2)
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    if theta.shape[0] != size[0]:
        raise RuntimeError(f"affine_grid: expected theta of batch size {size[0]} (size[0]), got theta of shape "
                           f"{list(theta.shape)}")
    return AffineGrid.apply(theta, spatial, align_corners)


# grid_sample ----------------------------------------------------------------------------

def _floor(v, xp):
    """floor(v) with the ops every device's namespace offers (floor division by 1 is floor)."""
    return xp.floor_divide(v, 1)


def _rint(v, xp):
    """v rounded half to even, as PyTorch's nearbyint: floor, then up past a half, and at a
    half up only from an odd floor."""
    f = _floor(v, xp)
    d = v - f
    return xp.where(d > 0.5, f + 1, xp.where(d < 0.5, f, f + xp.remainder(f, 2)))


def _clip(ix, n, xp):
    """ix clipped to [0, n - 1] (a NaN to 0, as PyTorch), and the slope: 0 where it clipped or
    lay on a border."""
    inside = (ix > 0) & (ix < n - 1)
    return xp.clip(xp.where(ix != ix, xp.zeros((), dtype=ix.dtype), ix), 0, n - 1), inside


def _reflect(ix, twice_low, twice_high, xp):
    """ix folded into [twice_low/2, twice_high/2], and the slope (+1 or -1)."""
    if twice_low == twice_high:
        return xp.zeros_like(ix), xp.zeros_like(ix)
    lo, span = twice_low / 2, (twice_high - twice_low) / 2
    v = ix - lo
    sign = xp.where(v < 0, -1.0, 1.0).astype(ix.dtype)
    v = xp.abs(v)
    extra = xp.remainder(v, span)   # v >= 0: the same as fmod
    even = xp.remainder(_floor(v / span, xp), 2) == 0
    return xp.where(even, extra + lo, span - extra + lo), xp.where(even, sign, -sign)


def source_index(coord, n, padding_mode, align_corners):
    """The pixel coordinate of a normalized grid coordinate along an axis of n pixels, and
    d(pixel)/d(coord) (module docstring)."""
    xp = namespace_of(coord)
    if align_corners:
        ix, slope = (coord + 1) / 2 * (n - 1), (n - 1) / 2
    else:
        ix, slope = ((coord + 1) * n - 1) / 2, n / 2
    slope = xp.full(ix.shape, slope, dtype=ix.dtype)
    if padding_mode == "border":
        ix, inside = _clip(ix, n, xp)
        slope = xp.where(inside, slope, 0)
    elif padding_mode == "reflection":
        ix, refl = _reflect(ix, 0, 2 * (n - 1), xp) if align_corners else _reflect(ix, -1, 2 * n - 1, xp)
        ix, inside = _clip(ix, n, xp)
        slope = xp.where(inside, slope * refl, 0)
    return ix.astype(coord.dtype, copy=False), slope.astype(coord.dtype, copy=False)


def _taps(ix, iy, H, W, mode):
    """Per tap (the 4 of bilinear, the 1 of nearest): the flat position (clipped into the
    image), whether it lies inside, its weight and the weight's derivatives in tx and ty."""
    xp = namespace_of(ix)
    if mode == "nearest":
        xs, ys = _rint(ix, xp), _rint(iy, xp)
        one = xp.ones_like(ix)
        corners = [(xs, ys, one, None, None)]
    else:
        x0, y0 = _floor(ix, xp), _floor(iy, xp)
        tx, ty = ix - x0, iy - y0
        ux, uy = 1 - tx, 1 - ty
        corners = [(x0, y0, ux * uy, -uy, -ux), (x0 + 1, y0, tx * uy, uy, -tx),
                   (x0, y0 + 1, ux * ty, -ty, ux), (x0 + 1, y0 + 1, tx * ty, ty, tx)]
    taps = []
    for xs, ys, w, dwx, dwy in corners:
        inside = (xs >= 0) & (xs <= W - 1) & (ys >= 0) & (ys <= H - 1)
        xi = xp.clip(xp.where(inside, xs, 0), 0, W - 1).astype(np.int64)
        yi = xp.clip(xp.where(inside, ys, 0), 0, H - 1).astype(np.int64)
        taps.append((yi * W + xi, inside, w, dwx, dwy))
    return taps


def _cubic(t):
    """The four cubic convolution coefficients at fraction t (A = -0.75) and their derivatives in t."""
    A = -0.75
    near = lambda d: ((A + 2) * d - (A + 3)) * d * d + 1          # noqa: E731  (d <= 1)
    far = lambda d: ((A * d - 5 * A) * d + 8 * A) * d - 4 * A     # noqa: E731  (1 < d < 2)
    dnear = lambda d: (3 * (A + 2) * d - 2 * (A + 3)) * d         # noqa: E731
    dfar = lambda d: (3 * A * d - 10 * A) * d + 8 * A             # noqa: E731
    return ((far(t + 1), near(t), near(1 - t), far(2 - t)),
            (dfar(t + 1), dnear(t), -dnear(1 - t), -dfar(2 - t)))


def _bounded(v, n, padding_mode, align_corners, xp):
    """A bicubic tap's integer position mapped by the padding mode (module docstring)."""
    if padding_mode == "border":
        v = _clip(v, n, xp)[0]
    elif padding_mode == "reflection":
        v = _reflect(v, 0, 2 * (n - 1), xp)[0] if align_corners else _reflect(v, -1, 2 * n - 1, xp)[0]
        v = _clip(v, n, xp)[0]
    return _floor(v, xp)


def _bicubic_taps(ix, iy, H, W, padding_mode, align_corners):
    """_taps's five arrays for the 16 bicubic taps (module docstring)."""
    xp = namespace_of(ix)
    x0, y0 = _floor(ix, xp), _floor(iy, xp)
    (cx, dcx), (cy, dcy) = _cubic(ix - x0), _cubic(iy - y0)
    taps = []
    for j in range(4):
        ys = _bounded(y0 - 1 + j, H, padding_mode, align_corners, xp)
        for i in range(4):
            xs = _bounded(x0 - 1 + i, W, padding_mode, align_corners, xp)
            inside = (xs >= 0) & (xs <= W - 1) & (ys >= 0) & (ys <= H - 1)
            xi = xp.clip(xp.where(inside, xs, 0), 0, W - 1).astype(np.int64)
            yi = xp.clip(xp.where(inside, ys, 0), 0, H - 1).astype(np.int64)
            taps.append((yi * W + xi, inside, cx[i] * cy[j], dcx[i] * cy[j], cx[i] * dcy[j]))
    return taps


class GridSample2d(Function):
    """See the module docstring. x (N, C, H, W), grid (N, OH, OW, 2) -> (N, C, OH, OW)."""

    @staticmethod
    def forward(ctx, x, grid, mode, padding_mode, align_corners):
        xp = namespace_of(x)
        N, C, H, W = x.shape
        OH, OW = grid.shape[1:3]
        unpadded = "zeros" if mode == "bicubic" else padding_mode    # bicubic pads each tap instead
        ix, sx = source_index(grid[..., 0], W, unpadded, align_corners)
        iy, sy = source_index(grid[..., 1], H, unpadded, align_corners)
        ix, iy = ix.reshape(N, 1, OH * OW), iy.reshape(N, 1, OH * OW)
        taps = (_bicubic_taps(ix, iy, H, W, padding_mode, align_corners) if mode == "bicubic"
                else _taps(ix, iy, H, W, mode))
        flat_x = x.reshape(N, C, H * W)
        out = xp.zeros((N, C, OH * OW), dtype=x.dtype)
        zero = xp.zeros((), dtype=x.dtype)
        for pos, inside, w, _, _ in taps:
            v = xp.take_along_axis(flat_x, xp.broadcast_to(pos, (N, C, OH * OW)), axis=2)
            out = out + xp.where(inside, v, zero) * w    # a NaN point has NaN weights: NaN, as PyTorch
        ctx.save_for_backward(x)
        ctx.taps, ctx.slopes, ctx.mode = taps, (sx, sy), mode
        return out.reshape(N, C, OH, OW)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        xp = namespace_of(g)
        N, C, H, W = x.shape
        OH, OW = g.shape[2:]
        gm = g.reshape(N, C, OH * OW)
        zero = xp.zeros((), dtype=g.dtype)
        dx, dgrid = None, None
        if ctx.needs_input_grad[0]:
            dx = xp.zeros((N * C * H * W,), dtype=g.dtype)
            plane = (xp.arange(N * C, dtype=np.int64) * (H * W)).reshape(N, C, 1)
            for pos, inside, w, _, _ in ctx.taps:
                xp.add.at(dx, (plane + pos).reshape(-1), xp.where(inside, gm * w, zero).reshape(-1))
            dx = dx.reshape(N, C, H, W)
        if ctx.needs_input_grad[1]:
            if ctx.mode == "nearest":
                dgrid = xp.zeros((N, OH, OW, 2), dtype=g.dtype)
            else:
                flat_x = x.reshape(N, C, H * W)
                gx = xp.zeros((N, 1, OH * OW), dtype=g.dtype)
                gy = xp.zeros((N, 1, OH * OW), dtype=g.dtype)
                for pos, inside, _, dwx, dwy in ctx.taps:
                    v = xp.take_along_axis(flat_x, xp.broadcast_to(pos, (N, C, OH * OW)), axis=2)
                    gv = xp.where(inside, gm * v, zero).sum(axis=1, keepdims=True)
                    gx, gy = gx + gv * dwx, gy + gv * dwy
                sx, sy = ctx.slopes
                dgrid = xp.stack([gx.reshape(N, OH, OW) * sx, gy.reshape(N, OH, OW) * sy], axis=-1)
        return dx, dgrid, None, None, None


def _autocast_casts(input, grid):
    """True when autocast brings input and grid to float32 before the op (grid_sampler's rule in
    minidl/amp/policy.py): float16, bfloat16 and float32 operands only, since a float64 one is never
    cast and would still meet a float32 one, PyTorch's error too."""
    device = "cpu" if type(input._data) is np.ndarray else "cuda"
    if not (autocast_state.state.on and autocast_state.casts("grid_sampler", device)):
        return False
    return all(t.dtype.name in ("float16", "bfloat16", "float32") for t in (input, grid))


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """As ``torch.nn.functional.grid_sample``: 4-D input with modes 'bilinear', 'nearest' and
    'bicubic' (see the module docstring); 5-D (volumetric) input with 'bilinear' (trilinear) and
    'nearest' (minidl.ops.grid_sample3d)."""
    if mode not in _MODES:
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', "
                         f"but got: '{mode}'")
    if padding_mode not in _PADDING:
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    align_corners = _default_align_corners(align_corners)
    for name, t in (("input", input), ("grid", grid)):
        if not isinstance(t, Tensor):
            raise TypeError(f"grid_sample(): argument '{name}' must be a Tensor, got {type(t).__name__}")
    if input.ndim not in (4, 5) or grid.ndim != input.ndim:
        raise RuntimeError(f"grid_sampler(): expected 4D or 5D input and grid with same number of dimensions, but "
                           f"got input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, but got input with "
                           f"sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    if grid.shape[-1] != input.ndim - 2:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {input.ndim - 2} in last dimension, but got "
                           f"grid with sizes {list(grid.shape)}")
    for d in range(2, input.ndim):
        if input.shape[d] == 0:
            raise RuntimeError(f"grid_sampler(): expected input to have non-empty spatial dimensions, but input has "
                               f"sizes {list(input.shape)} with dimension {d} being empty")
    if mode == "bicubic" and input.ndim == 5:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    if input.dtype.kind != "f" or grid.dtype.kind != "f":
        raise NotImplementedError(f"grid_sample: expected floating point input and grid, got {input.dtype} and "
                                  f"{grid.dtype}")
    if input.dtype != grid.dtype and not _autocast_casts(input, grid):
        raise RuntimeError(f"grid_sampler(): expected input and grid to have the same dtype, but got input of "
                           f"dtype {input.dtype} and grid of dtype {grid.dtype}")
    if input.ndim == 5:
        from .grid_sample3d import GridSample3d
        return GridSample3d.apply(input, grid, mode, padding_mode, align_corners)
    return GridSample2d.apply(input, grid, mode, padding_mode, align_corners)
