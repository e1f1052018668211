"""``md.cpu``: PyTorch's torch.cpu pieces that scripts use: ``md.cpu.amp.autocast``."""


def __getattr__(name):
    if name == "amp":
        from .amp import device_amp
        return device_amp.cpu
    raise AttributeError(f"module 'minidl.cpu' has no attribute {name!r}")
