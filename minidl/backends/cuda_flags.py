"""``md.backends.cuda``: PyTorch's CUDA switches (TF32 matmuls, attention kernels), accepted
and remembered; minidl's numba.cuda kernels compute in the dtype given and have one attention
implementation, so they change nothing (see flags.py).

The CUDA device itself lives in the package of the same name, ``minidl.backends.cuda``,
which imports these names: whichever of the two ``md.backends.cuda`` is (this module until
the GPU backend is first loaded, that module after), the flags are the same objects, and an
attribute this module lacks (``transfer_log``...) is looked up in the device module.
"""
import importlib

from .flags import _Flags

matmul = _Flags("minidl.backends.cuda.matmul", allow_tf32=False, allow_fp16_reduced_precision_reduction=True,
                allow_bf16_reduced_precision_reduction=True, fp32_precision="ieee")
_sdp = _Flags("minidl.backends.cuda sdp", flash=True, mem_efficient=True, math=True, cudnn=True)


def is_built():
    """True: minidl's CUDA backend is part of it (whether a GPU is present is md.cuda.is_available())."""
    return True


def enable_flash_sdp(enabled): _sdp.flash = bool(enabled)
def enable_mem_efficient_sdp(enabled): _sdp.mem_efficient = bool(enabled)
def enable_math_sdp(enabled): _sdp.math = bool(enabled)
def enable_cudnn_sdp(enabled): _sdp.cudnn = bool(enabled)
def flash_sdp_enabled(): return _sdp.flash
def mem_efficient_sdp_enabled(): return _sdp.mem_efficient
def math_sdp_enabled(): return _sdp.math
def cudnn_sdp_enabled(): return _sdp.cudnn


FLAG_NAMES = ("matmul", "is_built", "enable_flash_sdp", "enable_mem_efficient_sdp", "enable_math_sdp",
              "enable_cudnn_sdp", "flash_sdp_enabled", "mem_efficient_sdp_enabled", "math_sdp_enabled",
              "cudnn_sdp_enabled")


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(importlib.import_module("minidl.backends.cuda"), name)
