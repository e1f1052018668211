"""The Tensor type, its dtypes and the functions that create tensors."""
from .tensor import Tensor

__all__ = ["Tensor"]
