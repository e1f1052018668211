"""The GPU's random state, as torch.cuda.random.

minidl's GPU has no generator of its own: its draws (dropout masks) take their seeds from the
global generator (minidl/random.py), so these functions read and set that generator, the one
``md.get_rng_state`` / ``md.default_generator`` are. A state saved here and restored later
therefore also restores the CPU's draws, and ``initial_seed`` is ``md.initial_seed()``.
The seeding functions (``manual_seed``, ``seed`` and their ``_all`` forms, in the package)
change nothing: ``md.manual_seed`` already makes the GPU's draws reproducible.
"""
from . import _device


def get_rng_state(device="cuda"):
    """The global generator's state as a uint8 tensor on the CPU (``md.default_generator.get_state()``)."""
    _device.checked_index(device, "get_rng_state")
    from ..tensor.generator import default_generator
    return default_generator.get_state()


def set_rng_state(new_state, device="cuda"):
    """Restore a state from ``get_rng_state`` into the global generator (without a device,
    nothing happens, as PyTorch defers it to a start that never comes)."""
    if not _device.is_available():
        return
    _device.checked_index(device, "set_rng_state")
    from ..tensor.generator import default_generator
    default_generator.set_state(new_state)


def get_rng_state_all():
    """One state per device ([] without a device)."""
    return [get_rng_state(i) for i in range(_device.device_count())]


def set_rng_state_all(new_states):
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def initial_seed():
    """The global generator's initial seed (``md.initial_seed()``)."""
    _device.lazy_init("initial_seed")
    from ..tensor.generator import default_generator
    return default_generator.initial_seed()
