"""Which implementation the optimizers' updates run: one fused kernel per parameter on the
parameter's device (default: ``kernels/cpu/optim.py``, ``kernels/cuda/optim.py``) or the generic
path of array operations written out in ``adam.py`` / ``sgd.py`` (the readable reference);
the "optim" family of minidl.kernels.switch: ``MINIDL_OPTIM_IMPL=reference`` at import,
``set_implementation("reference")``, ``with implementation("reference"):`` or
``minidl.implementation(optim="reference")`` (tests run both)."""
from .. import backends
from ..kernels.switch import OPTIM

UPDATES = OPTIM
IMPLEMENTATIONS = OPTIM.choices
set_implementation, get_implementation, implementation = OPTIM.set, OPTIM.get, OPTIM.use


def fused(array, name):
    """The device's fused update ``name`` ("fused_adam", "fused_sgd") for ``array``, or None (the
    reference, generic path): the switch's rule, with the device's backend holding the kernel."""
    if OPTIM.reference:
        return None
    return getattr(backends.get(backends.device_of(array)), name)
