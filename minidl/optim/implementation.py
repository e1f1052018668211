"""Which implementation the optimizers' updates run: one fused kernel per parameter on the
parameter's device (default: ``kernels/cpu/optim.py``, ``kernels/cuda/optim.py``) or the generic
path of array operations written out in ``adam.py`` / ``sgd.py`` (the readable reference);
``MINIDL_OPTIM_IMPL=reference`` at import, ``set_implementation("reference")`` or
``with implementation("reference"):`` (tests run both). See minidl.kernels.switch."""
from .. import backends
from ..kernels.switch import ImplementationSwitch

UPDATES = ImplementationSwitch("optim", "MINIDL_OPTIM_IMPL")
IMPLEMENTATIONS = UPDATES.choices
set_implementation, get_implementation, implementation = UPDATES.set, UPDATES.get, UPDATES.use


def fused(array, name):
    """The device's fused update ``name`` ("fused_adam", "fused_sgd") for ``array``, or None (generic path)."""
    if UPDATES.get() == "reference":
        return None
    return getattr(backends.get(backends.device_of(array)), name)
