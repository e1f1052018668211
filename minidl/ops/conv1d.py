"""F.conv1d: a 1-D convolution is a 2-D one on a height-1 image, so (N, C, L) becomes
(N, C, 1, L), the (O, C/G, k) weight becomes (O, C/G, 1, k), and conv2d (``minidl.ops.conv``:
im2col + GEMM, with its hand-written backward) does the rest. The reshapes are views whose
gradients autograd already knows. The checks of the shapes and options come first, here, so
that an error names conv1d and the 1-D shapes, not conv2d's height-1 image."""
from ..tensor.size import as_ints
from ..tensor.tensor import Tensor
from .conv import check_weight_and_groups, conv2d
from .shape_error import ShapeError


def _one(v, name):
    """A 1-D option (an int or a 1-tuple) as an int, or a TypeError naming it (int() would
    truncate a float)."""
    if isinstance(v, str):
        return v
    values = tuple(v) if isinstance(v, (tuple, list)) else (v,)
    if len(values) != 1:
        raise RuntimeError(f"conv1d: expected {name} to be an int or a 1-tuple, got {v!r}")
    return as_ints(values, "conv1d", name)[0]


def _check(input, weight, bias, stride, padding, dilation, groups):
    check_weight_and_groups("conv1d", input.shape, weight.shape, bias, groups)
    k = weight.shape[2]
    if stride < 1 or dilation < 1:
        raise ShapeError(f"conv1d: stride and dilation must be >= 1, got stride={stride}, dilation={dilation}")
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise ShapeError(f"conv1d: padding must be an int, a 1-tuple, 'valid' or 'same', got {padding!r}")
        if padding == "same" and stride != 1:
            raise ShapeError(f"conv1d: padding='same' is not supported for strided convolutions, got stride={stride}")
        return
    if padding < 0:
        raise ShapeError(f"conv1d: padding must be >= 0, got {padding}")
    L = input.shape[-1] + 2 * padding
    if L < dilation * (k - 1) + 1:
        raise ShapeError(f"conv1d: kernel size {k} (dilation {dilation}) is larger than the padded input length "
                         f"{L} (input of shape {list(input.shape)}, padding {padding})")


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """As ``torch.nn.functional.conv1d`` over (N, C, L) or unbatched (C, L) input;
    ``padding`` may also be "valid" or "same"."""
    if not isinstance(input, Tensor) or input.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2D (unbatched) or 3D (batched) input to conv1d, but got input of size: "
                           f"{list(getattr(input, 'shape', [])) or type(input).__name__}")
    if not isinstance(weight, Tensor) or weight.ndim != 3:
        raise RuntimeError(f"conv1d: expected a 3-D weight (out_channels, in_channels/groups, k), got "
                           f"{list(getattr(weight, 'shape', [])) or type(weight).__name__}")
    stride, padding, dilation = _one(stride, "stride"), _one(padding, "padding"), _one(dilation, "dilation")
    _check(input, weight, bias, stride, padding, dilation, groups)
    out = conv2d(input.unsqueeze(-2), weight.unsqueeze(-2), bias, (1, stride),
                 padding if isinstance(padding, str) else (0, padding), (1, dilation), groups)
    return out.squeeze(-2)
