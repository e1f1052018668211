"""F.adaptive_max_pool2d: the largest value of each of an oh x ow grid of windows, as
``torch.nn.functional.adaptive_max_pool2d``. Output cell (i, j) covers rows
[floor(i H / oh), ceil((i + 1) H / oh)) and likewise columns (windows may overlap).

    y[n, c, i, j] = x[n, c, a_ij],  a_ij the argmax in the window (the first, on ties);
    dL/dx[n, c, p] = sum over the cells (i, j) whose argmax is p of g[n, c, i, j].
"""
from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.tensor import Tensor
from ._higher_order import scatter_to_indices


def adaptive_windows(n, out):
    return [(i * n // out, -(-(i + 1) * n // out)) for i in range(out)]


class AdaptiveMaxPool2d(Function):
    """See the module docstring. Returns the values and the flat h W + w argmax indices."""

    @staticmethod
    def forward(ctx, x, output_size):
        xp = namespace_of(x)
        N, C, H, W = x.shape
        oh, ow = output_size
        y = xp.empty((N, C, oh, ow), dtype=x.dtype)
        idx = xp.empty((N, C, oh, ow), dtype=xp.int64)
        for i, (h0, h1) in enumerate(adaptive_windows(H, oh)):
            for j, (w0, w1) in enumerate(adaptive_windows(W, ow)):
                win = x[:, :, h0:h1, w0:w1].reshape(N, C, (h1 - h0) * (w1 - w0))
                a = win.argmax(axis=2)
                y[:, :, i, j] = xp.take_along_axis(win, a[..., None], axis=2)[..., 0]
                idx[:, :, i, j] = (h0 + a // (w1 - w0)) * W + w0 + a % (w1 - w0)
        ctx.save_for_backward(idx)
        ctx.shape = x.shape
        return y, idx

    @staticmethod
    def backward(ctx, g, _gidx):
        (idx,) = ctx.saved_tensors
        N, C, H, W = ctx.shape
        xp = namespace_of(g)
        dx = xp.zeros((N * C, H * W), dtype=g.dtype)
        rows = xp.arange(N * C)[:, None]
        cells = idx.shape[2] * idx.shape[3]
        xp.add.at(dx, (rows, idx.reshape(N * C, cells)), g.reshape(N * C, cells))
        return dx.reshape(N, C, H, W), None

    @staticmethod
    def differentiable_backward(ctx, inputs, g, _gidx):
        (idx,) = ctx.saved_tensors
        return scatter_to_indices(g, idx, ctx.shape[2:]), None


def _output_size(output_size, spatial, op):
    if isinstance(output_size, int) or output_size is None:
        output_size = (output_size,) * len(spatial)
    out = tuple(int(n if o is None else o) for o, n in zip(output_size, spatial))
    if len(out) != len(spatial) or len(tuple(output_size)) != len(spatial):
        raise RuntimeError(f"{op}: output_size must have {len(spatial)} elements, got {output_size!r}")
    if min(out) < 0:
        raise RuntimeError(f"{op}: expected a non-negative output_size, got {output_size!r}")
    return out


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """As ``torch.nn.functional.adaptive_max_pool2d`` over (N, C, H, W) or (C, H, W)."""
    if not isinstance(input, Tensor) or input.ndim not in (3, 4):
        raise RuntimeError(f"adaptive_max_pool2d(): Expected 3D or 4D tensor, but got "
                           f"{list(getattr(input, 'shape', [])) or type(input).__name__}")
    x = input if input.ndim == 4 else input.unsqueeze(0)
    oh, ow = _output_size(output_size, x.shape[2:], "adaptive_max_pool2d")
    if 0 in x.shape[1:]:
        raise RuntimeError(f"adaptive_max_pool2d(): Expected input to have non-zero size for non-batch dimensions, "
                           f"but input has sizes {list(x.shape)}")
    if oh == 0 or ow == 0:
        out = Tensor._wrap(namespace_of(x._data).zeros(x.shape[:2] + (oh, ow), x.dtype), None, 0)
        idx = Tensor._wrap(namespace_of(x._data).zeros(x.shape[:2] + (oh, ow), "int64"), None, 0)
    else:
        out, idx = AdaptiveMaxPool2d.apply(x, (oh, ow))
        if return_indices and idx.grad_fn is not None:   # backward reads the saved indices: the caller gets a copy
            idx = idx.clone()
    if input.ndim == 3:
        out, idx = out.squeeze(0), idx.squeeze(0)
    return (out, idx) if return_indices else out
