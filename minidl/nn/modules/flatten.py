"""Flatten: merge dims start_dim..end_dim (by default all but the batch dim); Unflatten: split one dim."""
import numpy as np

from .module import Module


class Flatten(Module):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dim ``dim`` into ``unflattened_size`` (one entry may be -1, inferred), a tuple or
    list of ints kept as given (its repr shows which), as PyTorch's."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError(f"unflattened_size must be a tuple of ints, but found type "
                            f"{type(unflattened_size).__name__}")
        for i, size in enumerate(unflattened_size):
            if not isinstance(size, int):
                raise TypeError(f"unflattened_size must be tuple of ints, but found element of type "
                                f"{type(size).__name__} at pos {i}")
        self.dim, self.unflattened_size = dim, unflattened_size

    def forward(self, input):
        d = self.dim % input.ndim if -input.ndim <= self.dim < input.ndim else None
        if d is None:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-input.ndim}, {input.ndim - 1}], "
                             f"but got {self.dim})")
        sizes, n = list(self.unflattened_size), input.shape[d]
        known = int(np.prod([s for s in sizes if s != -1]))
        if sizes.count(-1) > 1 or (-1 not in sizes and known != n) or (-1 in sizes and (known == 0 or n % known)):
            raise RuntimeError(f"unflatten: Provided sizes {sizes} don't multiply up to the size of dim {d} ({n}) "
                               "in the input tensor")
        return input.reshape(*input.shape[:d], *sizes, *input.shape[d + 1:])

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
