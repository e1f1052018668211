"""A zoo CNN's feature stack (an ``nn.Sequential``) run with the pairs of layers that have one
fused op taken as that op:

    norm, ReLU          -> ``norms.norm_relu``: F.batch_norm_relu / F.group_norm_relu
    ReLU, MaxPool2d     -> F.relu_max_pool2d: max_pool2d(relu(x)) in one pass over x

Each fused op gives the values and gradients of the two layers in turn; only plain layers
fuse (exactly the nn classes, no hooks, MaxPool2d without ``return_indices``), and a stack
with hooks of its own runs as the Sequential it is, so a hook always sees what it expects.
"""
from .. import nn
from ..nn import functional as F
from .norms import fuses_relu, hooked, norm_relu


def _plain(module, cls):
    return type(module) is cls and not hooked(module)


def run(stack, x):
    """stack(x) for an ``nn.Sequential``, with the fusions above."""
    if type(stack) is not nn.Sequential or hooked(stack):
        return stack(x)
    layers = list(stack)
    i = 0
    while i < len(layers):
        m = layers[i]
        after = layers[i + 1] if i + 1 < len(layers) else None
        if fuses_relu(m) and _plain(after, nn.ReLU):
            x = norm_relu(m, x)
            i += 2
        elif _plain(m, nn.ReLU) and _plain(after, nn.MaxPool2d) and not after.return_indices:
            x = F.relu_max_pool2d(x, after.kernel_size, after.stride, after.padding, after.dilation, after.ceil_mode)
            i += 2
        else:
            x = m(x)
            i += 1
    return x
