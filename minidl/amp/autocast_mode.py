"""``md.autocast``: regions of a program whose ops run in mixed precision, as ``torch.autocast``.

    with md.autocast("cpu", dtype=md.bfloat16):     # or device_type="cuda" (float16 by default)
        loss = F.cross_entropy(model(x), y)          # linear/conv in bfloat16, the loss in float32
    loss.backward()                                  # float32 gradients for the float32 parameters

A context manager and a decorator; regions nest (an inner ``enabled=False`` region turns
autocast off inside it, an inner region may change the dtype), and every setting is per thread
(``autograd/autocast_state.py``): a thread starts with autocast off and its regions never
change another thread's ops. Which op runs in which dtype is ``policy.py``'s table.

The defaults are PyTorch's: bfloat16 on the CPU, float16 on cuda. The CPU accepts float16 and
bfloat16; any other dtype warns and disables the region, as PyTorch does (a dtype that is not
a minidl dtype, a string say, and flags that are not bools are a TypeError). On cuda, a region
is disabled with a warning when no GPU (nor the simulator) is there; it takes float16 and
bfloat16 (kept on the device as its 16 bits: minidl/backends/cuda/array.py), float32/float64 as
PyTorch does (every cast a no-op or a widening), and refuses a non-floating dtype.
"""
import functools
import warnings

from .. import cuda as _cuda
from ..autograd import autocast_state
from ..tensor import dtype as dtypes
from . import policy  # (fills the rules and the seam's entry point on import)

_DEFAULT_DTYPE = policy.DEFAULT_DTYPE
_state = autocast_state.state


def _check_device(device_type, who):
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if device_type not in _DEFAULT_DTYPE:
        raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'" if who is None
                           else f"{who}: unsupported autocast device_type '{device_type}'; expected 'cpu' or 'cuda'")
    return device_type


def _check_bool(value, what, who):
    """PyTorch's flags are Python bools: 1, None or a NumPy bool are refused, not read as truthy."""
    if not isinstance(value, bool):
        raise TypeError(f"{who}: expected {what} to be a bool, got {type(value).__name__}")
    return value


def _check_dtype(dtype, who):
    """A minidl dtype (md.bfloat16, md.float16, ...); a string or NumPy dtype is refused, as PyTorch
    refuses anything but a torch.dtype."""
    if not isinstance(dtype, dtypes.DType):
        raise TypeError(f"{who}: expected dtype to be a minidl dtype such as minidl.bfloat16, got "
                        f"{type(dtype).__name__}")
    return dtype


def is_autocast_available(device_type):
    """True for the devices autocast knows: "cpu" and "cuda"."""
    return device_type in _DEFAULT_DTYPE


def is_autocast_enabled(device_type=None):
    """Whether autocast is enabled for ``device_type`` in this thread (cuda when not given, as
    PyTorch's no-argument form)."""
    return _state.enabled[_check_device("cuda" if device_type is None else device_type, "is_autocast_enabled")]


def set_autocast_enabled(device_type, enabled):
    _check_bool(enabled, "enabled", "set_autocast_enabled()")
    _state.enabled[_check_device(device_type, "set_autocast_enabled")] = enabled
    autocast_state.refresh()


def get_autocast_dtype(device_type):
    """The low dtype autocast uses for ``device_type`` in this thread (bfloat16 for "cpu" and
    float16 for "cuda" unless a region or set_autocast_dtype says otherwise)."""
    d = _state.dtype[_check_device(device_type, "get_autocast_dtype")]
    return dtypes.by_name(_DEFAULT_DTYPE[device_type]) if d is None else d


def set_autocast_dtype(device_type, dtype):
    _check_dtype(dtype, "set_autocast_dtype()")
    _state.dtype[_check_device(device_type, "set_autocast_dtype")] = dtype


def is_autocast_cache_enabled():
    return _state.cache_enabled


def set_autocast_cache_enabled(enabled):
    _state.cache_enabled = _check_bool(enabled, "enabled", "set_autocast_cache_enabled()")


def clear_autocast_cache():
    """Forget the cast weights of this thread (the outermost region's exit does it)."""
    _state.cache.clear()


def autocast_increment_nesting():
    _state.nesting += 1
    return _state.nesting


def autocast_decrement_nesting():
    _state.nesting -= 1
    return _state.nesting


class autocast:   # noqa: N801  (PyTorch's name)
    """``autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``: see the module
    docstring. ``dtype=None`` takes ``get_autocast_dtype(device_type)``; ``cache_enabled=None``
    keeps the thread's current setting (True unless changed)."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        _check_device(device_type, None)
        _check_bool(enabled, "enabled", "autocast")
        self.device = device_type
        self.fast_dtype = get_autocast_dtype(device_type) if dtype is None else _check_dtype(dtype, "autocast")
        self._cache_enabled = (is_autocast_cache_enabled() if cache_enabled is None
                               else _check_bool(cache_enabled, "cache_enabled", "autocast"))
        supported = [dtypes.bfloat16, dtypes.float16]
        if enabled:
            if device_type == "cuda":
                if not self.fast_dtype.is_floating_point:
                    # PyTorch accepts it here and fails in the first cast op ("not implemented for 'Int'");
                    # minidl would compute integer GEMMs instead, so it refuses at the region
                    raise RuntimeError(f"autocast: expected a floating-point dtype for device_type 'cuda' "
                                       f"(float16 or bfloat16), got {self.fast_dtype}")
                if not _cuda.is_available():
                    warnings.warn("CUDA is not available. Disabling autocast.", stacklevel=2)
                    enabled = False
            elif self.fast_dtype not in supported:
                warnings.warn("In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                              "CPU Autocast only supports dtypes of " + ", ".join(map(str, supported)) +
                              " currently.", stacklevel=2)
                enabled = False
        self._enabled = bool(enabled)

    def __enter__(self):
        self.prev_cache_enabled = is_autocast_cache_enabled()
        self.prev = _state.enabled[self.device]
        self.prev_fastdtype = _state.dtype[self.device]
        _state.enabled[self.device] = self._enabled
        _state.dtype[self.device] = self.fast_dtype
        autocast_increment_nesting()
        _state.cache_enabled = self._cache_enabled
        autocast_state.refresh()
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        if autocast_decrement_nesting() == 0:
            clear_autocast_cache()
        _state.enabled[self.device] = self.prev
        _state.dtype[self.device] = self.prev_fastdtype
        _state.cache_enabled = self.prev_cache_enabled
        autocast_state.refresh()
        return False

    def __call__(self, func):
        if not callable(func):
            raise TypeError(f"autocast()(func) requires a callable, but got {type(func).__name__}. "
                            f"Did you mean to use autocast as a context manager? For example:\n"
                            f"    with minidl.autocast(device_type=...):\n"
                            f"        output = model(input)")
        settings = (self.device, self.fast_dtype, self._enabled, self._cache_enabled)

        def region():
            # a fresh manager per call: a decorated function may run reentrantly or in threads
            manager = autocast.__new__(autocast)
            manager.device, manager.fast_dtype, manager._enabled, manager._cache_enabled = settings
            return manager

        @functools.wraps(func)
        def decorate_autocast(*args, **kwargs):
            with region():
                return func(*args, **kwargs)
        return decorate_autocast

    def __repr__(self):
        return (f"autocast(device_type={self.device!r}, dtype={self.fast_dtype}, enabled={self._enabled}, "
                f"cache_enabled={self._cache_enabled})")


class _DeviceAutocast(autocast):
    """``md.cpu.amp.autocast`` / ``md.cuda.amp.autocast``: PyTorch's deprecated per-device
    spellings, which warn (FutureWarning) and are ``autocast(device, ...)``."""

    device_type = None

    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        warnings.warn(f"`minidl.{self.device_type}.amp.autocast(args...)` is deprecated. Please use "
                      f"`minidl.amp.autocast('{self.device_type}', args...)` instead.", FutureWarning, stacklevel=2)
        dtype = dtypes.by_name(_DEFAULT_DTYPE[self.device_type]) if dtype is None else dtype
        super().__init__(self.device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class cpu_autocast(_DeviceAutocast):   # noqa: N801
    device_type = "cpu"


class cuda_autocast(_DeviceAutocast):   # noqa: N801
    device_type = "cuda"
