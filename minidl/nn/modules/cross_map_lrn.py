"""CrossMapLRN2d: the legacy (Lua Torch) cross-channel local response normalization over 4-D
input, as ``torch.nn.CrossMapLRN2d``; its channel window differs from LocalResponseNorm's
(see ``minidl.ops.cross_map_lrn``)."""
from ...ops.cross_map_lrn import CrossMapLRN
from ...tensor.tensor import Tensor
from .module import Module


class CrossMapLRN2d(Module):
    def __init__(self, size, alpha=1e-4, beta=0.75, k=1):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        if not isinstance(input, Tensor):
            raise TypeError(f"CrossMapLRN2d: expected a Tensor input, got {type(input).__name__}")
        if input.ndim != 4:
            raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.ndim}D instead.")
        if input.numel() == 0:
            return input
        return CrossMapLRN.apply(input, int(self.size), float(self.alpha), float(self.beta), float(self.k))

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
