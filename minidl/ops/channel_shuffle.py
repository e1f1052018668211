"""F.channel_shuffle (ShuffleNet, Zhang et al. 2017), as PyTorch's: the C channels (dim 1) of an
(N, C, *) input, seen as g groups of C/g, are interleaved, out[:, k g + i] = in[:, i (C/g) + k]
(channel c = i (C/g) + k, group i, moves to k g + i). It only rearranges elements, so it is
written with reshape and transpose, whose backwards (the inverse rearrangement) autograd has."""
from ..tensor.tensor import Tensor


def channel_shuffle(input, groups):
    """(N, C, *) -> (N, C, *) with the channels of the g groups interleaved; see the module docstring."""
    if not isinstance(input, Tensor):
        raise TypeError(f"channel_shuffle: expected input to be a Tensor, got {type(input).__name__}")
    if isinstance(groups, bool) or not isinstance(groups, int):
        raise TypeError(f"channel_shuffle(): argument 'groups' (position 2) must be int, not {type(groups).__name__}")
    if input.ndim <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with sizes "
                           f"{list(input.shape)}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    n, c, *rest = input.shape
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    x = input.reshape(n, groups, c // groups, *rest).transpose(1, 2)
    return x.reshape(n, c, *rest)
