"""F.conv1d: a 1-D convolution is a 2-D one on a height-1 image, so (N, C, L) becomes
(N, C, 1, L), the (O, C/G, k) weight becomes (O, C/G, 1, k), and conv2d (``minidl.ops.conv``:
im2col + GEMM, with its hand-written backward) does the rest. The reshapes are views whose
gradients autograd already knows."""
import numpy as np

from ..tensor.tensor import Tensor
from .conv import conv2d


def _widen(v, trivial):
    """A 1-D option (int or 1-tuple) as the pair (trivial, v) of the height-1 image."""
    if isinstance(v, str):
        return v
    if np.ndim(v) == 0:
        return (trivial, int(v))
    if len(v) != 1:
        raise RuntimeError(f"conv1d: expected an int or a 1-tuple, got {v!r}")
    return (trivial, int(v[0]))


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """As ``torch.nn.functional.conv1d`` over (N, C, L) or unbatched (C, L) input;
    ``padding`` may also be "valid" or "same"."""
    if not isinstance(input, Tensor) or input.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2D (unbatched) or 3D (batched) input to conv1d, but got input of size: "
                           f"{list(getattr(input, 'shape', [])) or type(input).__name__}")
    if not isinstance(weight, Tensor) or weight.ndim != 3:
        raise RuntimeError(f"conv1d: expected a 3-D weight (out_channels, in_channels/groups, k), got "
                           f"{list(getattr(weight, 'shape', [])) or type(weight).__name__}")
    out = conv2d(input.unsqueeze(-2), weight.unsqueeze(-2), bias, _widen(stride, 1), _widen(padding, 0),
                 _widen(dilation, 1), groups)
    return out.squeeze(-2)
