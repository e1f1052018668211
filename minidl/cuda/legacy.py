"""``md.cuda.FloatTensor`` and its siblings: PyTorch's legacy per-dtype types of GPU tensors.

Calling one builds a tensor of its dtype on the GPU (from data, or zeros of the given sizes,
as ``md.FloatTensor`` does on the CPU: see minidl/tensor/legacy.py); ``isinstance(x,
md.cuda.FloatTensor)`` asks whether x is a float32 tensor on the GPU.
"""
from ..tensor.legacy import LegacyTensorType, construct, legacy_types


class CudaLegacyTensorType(LegacyTensorType):
    def __instancecheck__(cls, obj):
        from ..tensor.tensor import Tensor
        return isinstance(obj, Tensor) and obj.dtype == cls.dtype and obj.device.type == "cuda"

    def __call__(cls, *args, **kwargs):
        from ..tensor.device import device
        from ..tensor.tensor import Tensor
        dev = device(kwargs.pop("device", "cuda"))
        if dev.type != "cuda":
            raise RuntimeError(f"legacy constructor expects device type: cuda but device type: {dev.type} was passed")
        if len(args) == 1 and isinstance(args[0], Tensor) and not isinstance(args[0], cls):
            raise TypeError(f"expected type minidl.cuda.{cls.__name__} but got {args[0].dtype} tensor on "
                            f"{args[0].device}")
        return construct(cls.dtype, args, dict(kwargs, device=str(dev)))


def cuda_legacy_types():
    """``{"FloatTensor": type, ...}`` for every dtype minidl has."""
    return legacy_types(CudaLegacyTensorType, "minidl.cuda", "md.cuda", "GPU tensor")
