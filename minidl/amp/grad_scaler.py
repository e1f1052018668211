"""GradScaler: dynamic loss scaling for float16 training, with PyTorch's ``torch.amp.GradScaler`` API.

Why scale: float16's smallest normal number is 6.1e-5 and its smallest subnormal 6e-8, so many
activation gradients of a float16 forward pass underflow to zero (Micikevicius et al. 2018,
"Mixed Precision Training", Fig. 3). Backward is linear in its seed, so back-propagating
``S * loss`` instead of ``loss`` multiplies every gradient by S and lifts them into float16's
range; before the optimizer sees them the float32 master gradients are multiplied by 1/S again.
Too large an S overflows some gradient to inf: that step is skipped and S backs off. The largest
S that does not overflow is not known in advance, so it is tracked: every step with a non-finite
gradient multiplies S by ``backoff_factor``, ``growth_interval`` clean steps in a row multiply it
by ``growth_factor``.

    scaler = md.amp.GradScaler("cpu")
    for x, y in batches:
        optimizer.zero_grad()
        with md.autocast("cpu", dtype=md.float16):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)                 # optional: clip the true gradients
        md.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)                     # skipped (returns None) if a gradient is inf/NaN
        scaler.update()

The numbers follow PyTorch's kernels exactly, so a run's scale trajectory and skipped steps are
PyTorch's: S is a float32; ``unscale_`` multiplies each gradient by ``float32(1 / float64(S))``
in the gradient's dtype (float32 * float32 for float32 gradients); the inf/NaN check looks at the
values before that multiplication; ``update`` takes ``S * backoff_factor`` in float64 rounded to
float32, and grows S only when ``S * growth_factor`` is finite in float32. The check and the
multiplication are one pass per gradient (kernels/cpu/grad_scaling.py on the CPU; the device's
array functions elsewhere).

Unlike PyTorch, S and the growth tracker live on the host (a Python float32 and int), not in
device tensors: minidl's step already reads the check's result on the host to decide whether to
step, so a device copy would only add transfers. ``scale`` sends S to the output's device as a
0-d float32 tensor, so the scaled loss has PyTorch's dtype (a 0-d float16 loss becomes float32).
"""
import math
import numbers
import warnings
from enum import Enum

import numpy as np

from .. import backends
from ..autograd import grad_mode

__all__ = ["GradScaler", "OptState"]


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh_optimizer_state():
    return {"stage": OptState.READY, "found_inf_per_device": {}}


def _tensor_type():
    from ..autograd import op_function
    return op_function.Tensor


def _device_type(device):
    if isinstance(device, str):
        return device.split(":")[0]
    kind = getattr(device, "type", None)
    if isinstance(kind, str):
        return kind
    raise TypeError(f"GradScaler: expected device to be a string such as 'cuda' or 'cpu', got "
                    f"{type(device).__name__}")


class GradScaler:
    """Scales the loss so float16 gradients do not underflow, and unscales and checks them before
    the optimizer step (see the module docstring). Arguments and defaults are PyTorch's.

    Args:
        device: "cuda" (default, as PyTorch: disabled with a warning when no GPU is available) or "cpu".
        init_scale: the first scale S (default 2**16).
        growth_factor: S is multiplied by this after ``growth_interval`` steps without inf/NaN (> 1).
        backoff_factor: S is multiplied by this after a step with an inf/NaN gradient (< 1).
        growth_interval: the number of consecutive clean steps before S grows.
        enabled: False makes every method a no-op (``step`` just steps), so one script runs both ways.
    """

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        self._device = _device_type(device)
        self._enabled = bool(enabled)
        if self._device == "cuda" and self._enabled:
            from .. import cuda
            if not cuda.is_available():
                warnings.warn("minidl.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                              stacklevel=2)
                self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
            _check_scale(init_scale, "init_scale")
            _check_interval(growth_interval)
            self._init_scale = init_scale  # as given (get_scale returns it until the first scale())
            self._scale = None             # np.float32 once the first scale() call fixes it
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker = None    # consecutive steps without inf/NaN, since the last change of S
            self._per_optimizer_states = {}

    # the scale ------------------------------------------------------------------------------
    def _check_scale_growth_tracker(self, funcname):
        fix = "This may indicate your script did not use scaler.scale(loss or outputs) earlier in the iteration."
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  " + fix)
        if self._growth_tracker is None:
            raise AssertionError(f"Attempted {funcname} but _growth_tracker is None.  " + fix)

    def _lazy_init_scale_growth_tracker(self):
        self._scale = np.float32(self._init_scale)
        self._growth_tracker = int(self._init_growth_tracker)

    def _scale_on(self, device, cache):
        """S as a 0-d float32 tensor on ``device`` (made once per device per ``scale`` call)."""
        key = str(device)
        if key not in cache:
            from ..tensor.factories import tensor
            s = tensor(np.asarray(self._scale, dtype=np.float32))
            cache[key] = s if device.type == "cpu" else s.to(device)
        return cache[key]

    def scale(self, outputs):
        """``outputs`` (a Tensor, or nested lists/tuples of Tensors) times S; unchanged when disabled."""
        if not self._enabled:
            return outputs
        Tensor = _tensor_type()
        if isinstance(outputs, Tensor):
            if self._scale is None:
                self._lazy_init_scale_growth_tracker()
            return outputs * self._scale_on(outputs.device, {})
        cache = {}

        def apply_scale(val):
            if isinstance(val, Tensor):
                if self._scale is None:
                    self._lazy_init_scale_growth_tracker()
                return val * self._scale_on(val.device, cache)
            if isinstance(val, (list, tuple)):
                return type(val)(apply_scale(v) for v in val)
            if isinstance(val, (str, bytes, dict)) or not hasattr(val, "__iter__"):
                raise ValueError("outputs must be a Tensor or an iterable of Tensors")
            return map(apply_scale, val)
        return apply_scale(outputs)

    # unscaling and stepping -----------------------------------------------------------------
    def _optimizer_state(self, optimizer):
        return self._per_optimizer_states.setdefault(id(optimizer), _fresh_optimizer_state())

    def _unscale_grads_(self, optimizer, inv_scale, allow_fp16):
        """Unscale every gradient of ``optimizer`` in place; {device type: found inf/NaN}."""
        found = {}
        float16 = np.dtype(np.float16)
        grads = []
        for group in optimizer.param_groups:
            for param in group["params"]:
                if param.grad is None:
                    continue
                if not allow_fp16 and param.grad._data.dtype == float16:
                    raise ValueError("Attempting to unscale FP16 gradients.")
                grads.append(param.grad._data)
        with grad_mode.no_grad():
            for g in grads:
                device = backends.device_of(g)
                bad = _unscale_and_check(g, inv_scale)
                found[device] = found.get(device, False) or bad
        return found

    def unscale_(self, optimizer):
        """Divide ``optimizer``'s gradients by S in place (once per step, before ``step``), so they can be
        inspected or clipped; ``step`` then does not unscale them again."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        state = self._optimizer_state(optimizer)
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv_scale = np.float32(1.0 / np.float64(self._scale))
        state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale, False)
        state["stage"] = OptState.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """Unscale the gradients (unless ``unscale_`` did) and ``optimizer.step(*args, **kwargs)`` if all
        are finite; returns its result, or None when the step is skipped."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_growth_tracker("step")
        state = self._optimizer_state(optimizer)
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if not state["found_inf_per_device"]:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        retval = None
        if not any(state["found_inf_per_device"].values()):
            retval = optimizer.step(*args, **kwargs)
        else:   # skipped, but in the right order for an lr scheduler stepped next
            from ..optim.scheduler_base import note_step
            note_step(optimizer)
        state["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale=None):
        """Set the next step's S: back off after a skipped step, grow after ``growth_interval`` clean ones;
        or ``new_scale`` (a float, or a 1-element tensor on the scaler's device) when given."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("update")
        if new_scale is not None:
            self._scale = np.float32(self._new_scale_value(new_scale))
        else:
            found_infs = [f for state in self._per_optimizer_states.values()
                          for f in state["found_inf_per_device"].values()]
            if not found_infs:
                raise AssertionError("No inf checks were recorded prior to update.")
            self._scale, self._growth_tracker = _updated_scale(
                self._scale, self._growth_tracker, any(found_infs), self._growth_factor, self._backoff_factor,
                self._growth_interval)
        self._per_optimizer_states = {}

    def _new_scale_value(self, new_scale):
        if isinstance(new_scale, numbers.Real) and not isinstance(new_scale, bool):
            return float(new_scale)
        reason = ("new_scale should be a float or a 1-element minidl.cuda.FloatTensor or minidl.FloatTensor "
                  "with requires_grad=False.")
        if not isinstance(new_scale, _tensor_type()):
            raise AssertionError(reason)
        if new_scale.device.type != self._device or new_scale.numel() != 1 or new_scale.requires_grad:
            raise AssertionError(reason)
        return float(new_scale.item())

    # getters, setters, state ------------------------------------------------------------------
    def get_scale(self):
        """The current S as a Python float (1.0 when disabled; init_scale before the first ``scale``)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale)

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = new_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = new_factor

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = new_interval

    def _get_growth_tracker(self):
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._growth_tracker is None else int(self._growth_tracker)

    def is_enabled(self):
        return self._enabled

    def state_dict(self):
        """PyTorch's five entries (``scale``, ``growth_factor``, ``backoff_factor``, ``growth_interval``,
        ``_growth_tracker``) as Python numbers; {} when disabled. Take it after ``update``."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict):
        """Continue from ``state_dict()``'s state: the next steps scale and update exactly as the saved
        scaler's would have. A no-op when disabled."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        missing = [k for k in ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker")
                   if k not in state_dict]
        if missing:
            raise KeyError(f"GradScaler.load_state_dict: the state dict lacks {', '.join(map(repr, missing))}")
        # a one-element tensor (as an older PyTorch checkpoint may hold) stands for its number
        sd = {k: _number(state_dict[k]) for k in ("scale", "growth_factor", "backoff_factor", "growth_interval",
                                                  "_growth_tracker")}
        _check_scale(sd["scale"], "the state dict's scale")
        _check_interval(sd["growth_interval"])
        tracker = sd["_growth_tracker"]
        if not _is_int(tracker) or tracker < 0:
            raise ValueError(f"GradScaler.load_state_dict: expected _growth_tracker to be an integer >= 0, "
                             f"got {tracker!r}")
        self._init_scale = sd["scale"]
        if self._scale is not None:
            self._scale = np.float32(self._init_scale)
        self._growth_factor = sd["growth_factor"]
        self._backoff_factor = sd["backoff_factor"]
        self._growth_interval = sd["growth_interval"]
        self._init_growth_tracker = int(tracker)
        if self._growth_tracker is not None:
            self._growth_tracker = int(tracker)

    def __getstate__(self):
        """Pickling (and copy.deepcopy) between iterations only, as PyTorch: mid-iteration the
        per-optimizer unscale/step stages would be carried into a copy that has no optimizers."""
        state = self.__dict__.copy()
        if self._enabled:
            if self._per_optimizer_states:
                raise AssertionError("A GradScaler instance may only be pickled at the beginning of an iteration, "
                                     "or at the end after scaler.update().")
            state["_init_scale"] = self.get_scale()
            state["_init_growth_tracker"] = self._get_growth_tracker()
            state["_scale"] = None
            state["_growth_tracker"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __repr__(self):
        if not self._enabled:
            return f"GradScaler(device={self._device!r}, enabled=False)"
        return (f"GradScaler(device={self._device!r}, scale={self.get_scale():g}, growth_factor="
                f"{self._growth_factor:g}, backoff_factor={self._backoff_factor:g}, growth_interval="
                f"{self._growth_interval})")


class _DeviceGradScaler(GradScaler):
    """The deprecated ``torch.<device>.amp.GradScaler(init_scale, ...)``: a GradScaler for one device."""
    _for_device = None

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 enabled=True):
        d = self._for_device
        warnings.warn(f"`minidl.{d}.amp.GradScaler(args...)` is deprecated. Please use "
                      f"`minidl.amp.GradScaler('{d}', args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__(d, init_scale=init_scale, growth_factor=growth_factor, backoff_factor=backoff_factor,
                         growth_interval=growth_interval, enabled=enabled)


class CpuGradScaler(_DeviceGradScaler):
    """``md.cpu.amp.GradScaler``: see GradScaler."""
    _for_device = "cpu"


class CudaGradScaler(_DeviceGradScaler):
    """``md.cuda.amp.GradScaler``: see GradScaler."""
    _for_device = "cuda"


DEVICE_GRAD_SCALERS = {"cpu": CpuGradScaler, "cuda": CudaGradScaler}


def _number(v):
    """A one-element Tensor as its Python number; anything else as it is."""
    if isinstance(v, _tensor_type()) and v.numel() == 1:
        return v.item()
    return v


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _check_scale(value, what):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"GradScaler: expected {what} to be a positive finite number, got {value!r}")


def _check_interval(value):
    if not _is_int(value) or value < 1:
        raise ValueError(f"GradScaler: expected growth_interval to be a positive integer, got {value!r}")


def _updated_scale(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval):
    """PyTorch's ``_amp_update_scale_``: (new S as float32, new growth tracker)."""
    if found_inf:
        return np.float32(np.float64(scale) * backoff_factor), 0
    successful = growth_tracker + 1
    if successful == growth_interval:
        with np.errstate(over="ignore"):
            grown = np.float32(np.float64(scale) * growth_factor)   # may round to inf: then S stays
        return (grown if np.isfinite(grown) else scale), 0
    return scale, successful


def _unscale_and_check(g, inv_scale):
    """Multiply one gradient array by ``inv_scale`` in place; was any element inf or NaN before?"""
    if type(g) is np.ndarray and g.dtype in (np.float32, np.float64):
        from ..kernels.cpu import grad_scaling
        if grad_scaling.fusable(g):
            return grad_scaling.unscale_and_check(g, inv_scale)
    xp = backends.namespace_of(g)
    bad = not bool(xp.isfinite(g).all())
    if inv_scale != 1:
        if g.dtype in (np.float32, np.float64):
            xp.multiply(g, g.dtype.type(inv_scale), out=g)
        else:   # bfloat16: the product in float32 (PyTorch's opmath type), rounded back
            g[...] = (g.astype(np.float32) * inv_scale).astype(g.dtype)
    return bad
