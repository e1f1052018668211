"""The normalization layer a zoo CNN puts after each convolution, chosen by name.

    make_norm("batch", C)     BatchNorm2d(C): statistics over (N, H, W) per channel
    make_norm("group", C)     GroupNorm(G, C): over (C/G channels, H, W) per sample, G = gcd(C, 8) by default
    make_norm("layer", C)     LayerNorm over the C channels of each pixel (ConvNeXt's "LayerNorm2d"),
                              i.e. nn.LayerNorm(C) applied channels-last
    make_norm("instance", C)  InstanceNorm2d(C, affine=True): over (H, W) per sample and channel
    make_norm("none", C)      Identity

Only "batch" depends on the other samples of the batch (and keeps running statistics for
eval); the others behave the same in train and eval mode.

``norm_relu(norm, x)`` is relu(norm(x)), the step after each convolution of a block: for a
BatchNorm2d or a GroupNorm one op (``F.batch_norm_relu``, ``F.group_norm_relu``, which on the CPU
fold the ReLU into the norm's passes), for any other norm, or a module with hooks (which a fused
op would skip), the two. ``norm_add_relu(norm, x, residual)`` is relu(norm(x) + residual), a
block's last step, the same way (``F.batch_norm_add_relu``, ``F.group_norm_add_relu``; otherwise
the norm and ``F.add_relu``).
"""
import math

from .. import nn
from ..nn import functional as F

NORMS = ("batch", "group", "layer", "instance", "none")


try:
    from ..nn import Identity
except ImportError:  # pragma: no cover  (nn without Identity)
    class Identity(nn.Module):
        def forward(self, x):
            return x


class LayerNorm2d(nn.Module):
    """nn.LayerNorm over the channel dimension of (N, C, H, W) inputs, one affine per channel."""

    def __init__(self, num_channels, eps=1e-5):
        super().__init__()
        self.norm = nn.LayerNorm(num_channels, eps=eps)

    def forward(self, x):
        return self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


def make_norm(norm, num_channels, num_groups=8):
    """A fresh normalization layer for ``num_channels`` channels (see the module docstring)."""
    if norm == "batch":
        return nn.BatchNorm2d(num_channels)
    if norm == "group":
        return nn.GroupNorm(math.gcd(num_channels, num_groups), num_channels)
    if norm == "layer":
        return LayerNorm2d(num_channels)
    if norm == "instance":
        return nn.InstanceNorm2d(num_channels, affine=True)
    if norm in ("none", None):
        return Identity()
    raise ValueError(f"unknown norm {norm!r}; expected one of {', '.join(NORMS)}")


def hooked(module):
    """Does ``module`` have forward or backward hooks (which an op fused across it would skip)?"""
    d = module.__dict__
    return bool(d.get("_forward_pre_hooks") or d.get("_forward_hooks") or d.get("_backward_hooks"))


def fuses_relu(norm):
    """Does ``norm`` take the ReLU after it into one op (an exact BatchNorm2d or GroupNorm without hooks)?"""
    return type(norm) in (nn.BatchNorm2d, nn.GroupNorm) and not hooked(norm)


def norm_relu(norm, x):
    """relu(norm(x)) (see the module docstring)."""
    if not fuses_relu(norm):
        return F.relu(norm(x))
    if type(norm) is nn.BatchNorm2d:
        return norm._relu_forward(x)
    norm._check_input(x)
    return F.group_norm_relu(x, norm.num_groups, norm.weight, norm.bias, norm.eps)


def norm_add_relu(norm, x, residual):
    """relu(norm(x) + residual) (see the module docstring)."""
    if not fuses_relu(norm):
        return F.add_relu(norm(x), residual)
    if type(norm) is nn.BatchNorm2d:
        return norm._add_relu_forward(x, residual)
    norm._check_input(x)
    return F.group_norm_add_relu(x, residual, norm.num_groups, norm.weight, norm.bias, norm.eps)
