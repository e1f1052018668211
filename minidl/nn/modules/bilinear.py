"""Bilinear: y = x1^T A x2 + b with A (out, in1, in2), b (out,) ~ U(-1/sqrt(in1), 1/sqrt(in1)), as PyTorch."""
import math

from ...ops.bilinear import bilinear
from ...tensor.size import check_sizes
from .. import init
from .linear import _add_weight_and_bias
from .module import Module


class Bilinear(Module):
    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in1_features, self.in2_features = int(in1_features), int(in2_features)
        self.out_features = int(out_features)
        check_sizes("Bilinear", in1_features=self.in1_features, in2_features=self.in2_features,
                    out_features=self.out_features)
        _add_weight_and_bias(self, (self.out_features, self.in1_features, self.in2_features), bias,
                             self.out_features, dtype, device)

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.in1_features) if self.in1_features else 0.0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
