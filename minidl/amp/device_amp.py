"""``md.cpu.amp`` and ``md.cuda.amp``: PyTorch's per-device spellings of the amp API.

``autocast`` there is the deprecated ``torch.cpu.amp.autocast(enabled, dtype, cache_enabled)``
(and the cuda one): it warns and is ``md.amp.autocast(device, ...)``; ``GradScaler`` likewise is
the deprecated per-device GradScaler (``grad_scaler.DEVICE_GRAD_SCALERS``), and
``md.cuda.amp.custom_fwd`` / ``custom_bwd`` the deprecated ones for ``device_type="cuda"``
(``custom_function.py``; torch.cpu.amp has none). Other names are looked up in ``minidl.amp``."""
import importlib

from .autocast_mode import cpu_autocast, cuda_autocast


class DeviceAmp:
    def __init__(self, device, autocast):
        self.device = device
        self.autocast = autocast

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if name == "GradScaler":   # the deprecated per-device class: GradScaler(init_scale, ...) for this device
            from .grad_scaler import DEVICE_GRAD_SCALERS
            return DEVICE_GRAD_SCALERS[self.device]
        if name in ("custom_fwd", "custom_bwd"):   # PyTorch has them (deprecated) in torch.cuda.amp only
            if self.device != "cuda":
                raise AttributeError(f"module 'minidl.{self.device}.amp' has no attribute {name!r}")
            from . import custom_function
            return getattr(custom_function, "cuda_" + name)
        amp = importlib.import_module("minidl.amp")
        try:
            return getattr(amp, name)
        except AttributeError:
            raise AttributeError(f"module 'minidl.{self.device}.amp' has no attribute {name!r}") from None

    def __repr__(self):
        return f"<module 'minidl.{self.device}.amp'>"


cpu = DeviceAmp("cpu", cpu_autocast)
cuda = DeviceAmp("cuda", cuda_autocast)
