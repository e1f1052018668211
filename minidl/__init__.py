"""minidl: a deep-learning framework small enough to read, built on NumPy and Numba.

    import minidl as md
    x = md.randn(3, 4, requires_grad=True)
    (x.tanh() ** 2).sum().backward()
    x.grad
"""
import math

from . import accelerator, autograd, backends, cuda, ops, random, runtime
from .cuda import OutOfMemoryError  # noqa: F401  (md.OutOfMemoryError, as torch.OutOfMemoryError)
from . import func  # noqa: F401  (md.func: functional_call, grad, vmap...; loads minidl.nn only when called)
from .func import vmap  # noqa: F401  (md.vmap, as torch.vmap)
from . import distributions  # noqa: F401  (md.distributions, as torch.distributions)
from .autograd.anomaly_mode import is_anomaly_check_nan_enabled, is_anomaly_enabled, set_anomaly_enabled  # noqa: F401
from .autograd import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
                       set_grad_enabled)
from .kernels.switch import get_implementation, implementation, set_implementation
from .ops import cat, stack
from .ops.scatter import index_add, index_fill, scatter, scatter_add
from .ops.scatter_reduce import scatter_reduce
from .random import get_rng_state, manual_seed, set_rng_state
from .tensor import Tensor
from .tensor.dtype import bool_ as bool  # noqa: A001  (md.bool, as torch.bool)
from .tensor.device import device
from .tensor.dtype import DType as dtype
from .tensor.dtype import bfloat16, float16, float32, float64, int8, int16, int32, int64, uint8
from .tensor.dtype_info import finfo, get_default_dtype, iinfo, is_floating_point, set_default_dtype
from .tensor.generator import Generator, default_generator
from .tensor.memory_format import channels_last, channels_last_3d, contiguous_format, memory_format, preserve_format
from .numerics_flags import (are_deterministic_algorithms_enabled, get_deterministic_debug_mode,
                             get_float32_matmul_precision, is_deterministic_algorithms_warn_only_enabled,
                             set_deterministic_debug_mode, set_float32_matmul_precision,
                             use_deterministic_algorithms)
from .tensor.sampling import bernoulli, multinomial, normal
from .tensor.size import Size
from .tensor.legacy import legacy_types as _legacy_types
from .threads import get_num_interop_threads, get_num_threads, set_num_interop_threads, set_num_threads
from .tensor.factories import (arange, as_tensor, empty, eye, from_numpy, full, full_like, linspace, ones,
                               ones_like, rand, rand_like, randint, randn, randn_like, randperm, tensor, zeros,
                               zeros_like)

globals().update(_legacy_types())   # md.FloatTensor, md.LongTensor... (tensor/legacy.py)

half, float, double, long = float16, float32, float64, int64  # noqa: A001
short, int = int16, int32  # noqa: A001

pi, e, inf, nan = math.pi, math.e, math.inf, math.nan

runtime.tune_process()   # freed memory kept, OpenBLAS's idle workers asleep at once (see minidl.runtime)

__version__ = "0.1.0"


def is_tensor(obj):
    return isinstance(obj, Tensor)


def seed():
    """Seed the global generator from the operating system's entropy; returns the seed."""
    return default_generator.seed()


def initial_seed():
    return default_generator.initial_seed()


def compile(model=None, **options):   # noqa: A001  (PyTorch's name)
    """torch.compile without a graph compiler (minidl's speed comes from the kernels every op
    already runs): a module comes back as an ``OptimizedModule`` wrapping it, a function as a
    function calling it; ``@md.compile`` and ``@md.compile(...)`` work too (see compiling.py)."""
    from .compiling import compile as compile_
    return compile_(model, **options)


_AUTOCAST_NAMES = ("autocast", "is_autocast_enabled", "set_autocast_enabled", "get_autocast_dtype",
                   "set_autocast_dtype", "is_autocast_cache_enabled", "set_autocast_cache_enabled",
                   "clear_autocast_cache", "autocast_increment_nesting", "autocast_decrement_nesting")


def _lazy(name):
    import importlib
    return importlib.import_module(f"minidl.{name}")


def __getattr__(name):
    # submodules that pull in more (numba kernels, matplotlib) load on first use
    if name in ("nn", "optim", "data", "zoo", "io", "testing", "kernels", "utils", "amp", "cpu", "distributed",
                "serialization"):
        return _lazy(name)
    if name in _AUTOCAST_NAMES:   # md.autocast and its state functions, as torch.autocast...
        return getattr(_lazy("amp"), name)
    if name in ("save", "load"):
        return getattr(_lazy("io"), name)
    if name == "profiler":        # torch.profiler
        return _lazy("profiler")
    from ._unsupported import raise_for
    raise_for("minidl", name)   # NotImplementedError for what minidl leaves out on purpose


from ._namespace import install as _install_namespace  # noqa: E402  (needs Tensor and the ops)

_install_namespace(globals())
from . import special  # noqa: E402,F401  (md.special, torch.special's namespace; needs the namespace)
