"""Turning what a training script logs (minidl tensors, NumPy arrays, Python and NumPy numbers,
matplotlib figures) into the NumPy arrays the summary builders encode.

Tensors leave the graph and the device here (``detach().cpu().numpy()``), so logging never keeps
an autograd graph alive and works the same for cuda tensors. bfloat16 becomes float32 (exact),
because PIL, ``np.histogram`` and TensorBoard's tensor protos do not know the ml_dtypes type.
Malformed images raise AssertionError, the type PyTorch's writer raises for them.
"""
import numpy as np

from ...tensor.tensor import Tensor


def make_np(x):
    """``x`` as a NumPy array: arrays as they are, a number as a 1-element array, a tensor through
    ``detach().cpu().numpy()``. Anything else is a NotImplementedError, as in PyTorch."""
    if isinstance(x, np.ndarray):
        return _widen_bfloat16(x)
    if np.isscalar(x):
        return np.array([x])
    if isinstance(x, Tensor):
        return _widen_bfloat16(x.detach().cpu().numpy())
    raise NotImplementedError(f"Got {type(x)}, but a numpy array or a minidl tensor was expected.")


def _widen_bfloat16(a):
    return a.astype(np.float32) if a.dtype.name == "bfloat16" else a


def make_grid(images, ncols=8):
    """Tile ``images`` (N, C, H, W with C 1 or 3) into one (3, rows*H, cols*W) image, ``ncols`` per
    row; a grey image (C = 1) is repeated into the three channels."""
    if images.ndim != 4:
        raise AssertionError(f"expected a 4-D N,C,H,W batch of images, got shape {images.shape}")
    if images.shape[1] == 1:
        images = np.concatenate([images, images, images], 1)
    if images.shape[1] != 3:
        raise AssertionError(f"a batch of images needs 1 or 3 channels, got shape {images.shape}")
    n, _, h, w = images.shape
    ncols = min(n, ncols)
    nrows = -(-n // ncols)
    canvas = np.zeros((3, h * nrows, w * ncols), dtype=images.dtype)
    for i in range(n):
        y, x = divmod(i, ncols)
        canvas[:, y * h:(y + 1) * h, x * w:(x + 1) * w] = images[i]
    return canvas


def convert_to_HWC(tensor, input_format):  # noqa: N802 (PyTorch's name)
    """Reorder an image array described by ``input_format`` (letters N, C, H, W) to H, W, C with
    three or four channels: a batch (N) is tiled into a grid, a 2-D or one-channel image made grey RGB."""
    if len(set(input_format)) != len(input_format):
        raise AssertionError(f"You can not use the same dimension shorthand twice. input_format: {input_format}")
    if tensor.ndim != len(input_format):
        raise AssertionError(f"size of input tensor and input format are different. tensor shape: {tensor.shape}, "
                         f"input_format: {input_format}")
    input_format = input_format.upper()
    if len(input_format) == 4:
        grid = make_grid(tensor.transpose([input_format.find(c) for c in "NCHW"]))
        return grid.transpose(1, 2, 0)
    if len(input_format) == 3:
        hwc = tensor.transpose([input_format.find(c) for c in "HWC"])
        return np.concatenate([hwc, hwc, hwc], 2) if hwc.shape[2] == 1 else hwc
    if len(input_format) == 2:
        hw = tensor.transpose([input_format.find(c) for c in "HW"])
        return np.stack([hw, hw, hw], 2)
    raise AssertionError(f"dataformats must have 2, 3 or 4 letters from N, C, H, W; got {input_format!r}")


def figure_to_image(figures, close=True):
    """Render a matplotlib figure to a uint8 C,H,W RGB array (a list of figures to N,C,H,W), closing
    each one when ``close``."""
    import matplotlib.backends.backend_agg as backend_agg
    import matplotlib.pyplot as plt

    def render(figure):
        canvas = backend_agg.FigureCanvasAgg(figure)
        canvas.draw()
        rgba = np.frombuffer(canvas.buffer_rgba(), dtype=np.uint8)
        w, h = figure.canvas.get_width_height()
        chw = np.moveaxis(rgba.reshape(h, w, 4)[:, :, :3], 2, 0)
        if close:
            plt.close(figure)
        return chw

    if isinstance(figures, list):
        return np.stack([render(f) for f in figures])
    return render(figures)
