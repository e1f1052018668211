"""F.pixel_shuffle / pixel_unshuffle (sub-pixel convolution, Shi et al. 2016), as PyTorch's.

pixel_shuffle moves channel blocks into space: (*, C r^2, H, W) -> (*, C, H r, W r), with
out[c, h r + i, w r + j] = in[c r^2 + i r + j, h, w]. It only rearranges elements, so it is
written with reshape and permute, whose backwards (the inverse rearrangement) autograd
already has; pixel_unshuffle is its inverse.
"""
from ..tensor.tensor import Tensor


def _check(op, input, factor_name, factor):
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: expected input to be a Tensor, got {type(input).__name__}")
    if input.ndim < 3:
        raise RuntimeError(f"{op} expects input to have at least 3 dimensions, but got input with {input.ndim} "
                           "dimension(s)")
    if not isinstance(factor, int) or factor <= 0:
        raise RuntimeError(f"{op} expects a positive integer {factor_name}, but got {factor!r}")


def pixel_shuffle(input, upscale_factor):
    """(*, C r^2, H, W) -> (*, C, H r, W r); see the module docstring."""
    r = upscale_factor
    _check("pixel_shuffle", input, "upscale_factor", r)
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    k = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(k), k, k + 3, k + 1, k + 4, k + 2)       # (*, C, H, r, W, r)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H r, W r) -> (*, C r^2, H, W), the inverse of pixel_shuffle."""
    r = downscale_factor
    _check("pixel_unshuffle", input, "downscale_factor", r)
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle expects height ({h}) and width ({w}) to be divisible by "
                           f"downscale_factor ({r})")
    k = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(k), k, k + 2, k + 4, k + 1, k + 3)       # (*, C, r, r, H, W)
    return x.reshape(*lead, c * r * r, h // r, w // r)
