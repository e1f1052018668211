"""``skip_init``, as ``torch.nn.utils.skip_init``."""
import inspect

from ..modules.module import Module

__all__ = ["skip_init"]


def skip_init(module_cls, *args, **kwargs):
    """Build ``module_cls(*args, **kwargs)`` whose parameters and buffers are to be treated as
    uninitialized (the caller initializes them), as PyTorch's: ``module_cls`` must be a Module
    class taking a ``device`` argument, and the module is put on ``device`` (default "cpu").

    PyTorch builds the module on its "meta" device (no memory, no initialization) and then
    allocates empty tensors; minidl has no meta device, so the module is built normally and its
    values are those of the usual initialization (which is one valid "uninitialized" content;
    the time of initializing is not saved)."""
    if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    kwargs["device"] = kwargs.pop("device", "cpu")
    return module_cls(*args, **kwargs)
