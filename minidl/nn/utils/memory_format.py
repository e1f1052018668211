"""convert_conv2d_weight_memory_format / convert_conv3d_weight_memory_format: give every
Conv2d/ConvTranspose2d (or Conv3d/ConvTranspose3d) weight of a module tree the requested memory
format, as ``torch.nn.utils``'s.

minidl's kernels pick their own working layout (``minidl.tensor.memory_format``), so the
conversion changes no value and no speed; what it keeps is PyTorch's contract: each weight
Parameter stays the same object (an optimizer holding it is unaffected) and gets a fresh copy
of its data in that format, and a format of the wrong rank (channels_last_3d for a 2-D conv's
4-D weight, channels_last for a 3-D conv's) raises PyTorch's RuntimeError.
"""
from ...tensor import memory_format as _formats
from ..modules.conv import Conv2d
from ..modules.conv3d import Conv3d, ConvTranspose3d
from ..modules.conv_nd import ConvTranspose2d


def _convert(module, memory_format, kinds):
    if isinstance(module, kinds):
        w = module.weight.detach()
        module.weight.data = w.to(memory_format=memory_format) if _formats.copies(w, memory_format) else w.clone()
    for child in module.children():
        _convert(child, memory_format, kinds)
    return module


def convert_conv2d_weight_memory_format(module, memory_format):
    """Convert the weights of the Conv2d and ConvTranspose2d layers in ``module`` (recursively) to
    ``memory_format`` in place; returns ``module``."""
    return _convert(module, memory_format, (Conv2d, ConvTranspose2d))


def convert_conv3d_weight_memory_format(module, memory_format):
    """Convert the weights of the Conv3d and ConvTranspose3d layers in ``module`` (recursively) to
    ``memory_format`` in place; returns ``module``."""
    return _convert(module, memory_format, (Conv3d, ConvTranspose3d))
