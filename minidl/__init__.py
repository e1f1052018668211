"""minidl: a deep-learning framework small enough to read, built on NumPy and Numba.

    import minidl as md
    x = md.randn(3, 4, requires_grad=True)
    (x.tanh() ** 2).sum().backward()
    x.grad
"""
from . import autograd, backends, ops, random
from .backends.blas_threads import shorten_blas_spin as _shorten_blas_spin
from .backends.host_memory import keep_freed_memory as _keep_freed_memory
from .autograd import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
                       set_grad_enabled)
from .ops import cat, stack, where
from .random import get_rng_state, manual_seed, set_rng_state
from .tensor import Tensor
from .tensor.dtype import bool_ as bool  # noqa: A001  (md.bool, as torch.bool)
from .tensor.dtype import float16, float32, float64, int32, int64, uint8
from .tensor.factories import (arange, as_tensor, empty, eye, from_numpy, full, full_like, linspace, ones,
                               ones_like, rand, rand_like, randint, randn, randn_like, randperm, tensor, zeros,
                               zeros_like)

half, float, double, long = float16, float32, float64, int64  # noqa: A001

_keep_freed_memory()     # freed arrays stay with the process for the next step (see backends.host_memory)
_shorten_blas_spin()     # OpenBLAS's idle workers sleep at once, leaving the cores to Numba (backends.blas_threads)

__version__ = "0.1.0"


def is_tensor(obj):
    return isinstance(obj, Tensor)


def _lazy(name):
    import importlib
    return importlib.import_module(f"minidl.{name}")


def __getattr__(name):
    # submodules that pull in more (numba kernels, matplotlib) load on first use
    if name in ("nn", "optim", "data", "zoo", "io", "testing", "kernels", "utils"):
        return _lazy(name)
    if name in ("save", "load"):
        return getattr(_lazy("io"), name)
    raise AttributeError(f"module 'minidl' has no attribute {name!r}")
