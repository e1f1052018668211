"""The global random number generator behind md.randn, md.rand, dropout and shuffling, as
``torch.random``.

One NumPy Generator, reseeded by ``md.manual_seed``; its state can be saved and restored
(``get_rng_state`` / ``set_rng_state``) so a resumed run draws the same numbers. The GPU has
no generator of its own: its draws (dropout masks) take their seeds from this one, so saving
or forking this state covers them too.

``seed``, ``initial_seed``, ``Generator`` and ``default_generator`` are the very objects
``md.seed``, ``md.initial_seed``, ``md.Generator`` and ``md.default_generator`` are (looked up
on first use: the tensor package that defines them imports this module).
"""
import contextlib
import threading

import numpy as np

__all__ = ["default_generator", "fork_rng", "get_rng_state", "initial_seed", "manual_seed", "seed",
           "set_rng_state", "Generator"]

_generator = np.random.default_rng(0)
_guard = threading.local()      # .message: set while draws are forbidden (vmap's randomness="error")
_FROM_TOP_LEVEL = ("seed", "initial_seed", "Generator", "default_generator")


def manual_seed(seed):
    """Seed the global generator (md.rand, dropout, shuffling, and the GPU's draws; negative
    seeds wrap modulo 2**64, as in PyTorch); returns md.default_generator. ``md.manual_seed``
    is this function."""
    from .tensor.generator import _check_seed, default_generator
    global _generator
    seed = _check_seed(seed)
    _generator = np.random.default_rng(seed)
    default_generator._seed = seed
    return default_generator


def generator():
    """The NumPy Generator every draw from the global state goes through."""
    message = getattr(_guard, "message", None)
    if message is not None:
        raise RuntimeError(message)
    return _generator


def get_rng_state():
    """The global generator's state: the NumPy bit generator's state dict (checkpoints store it as
    is; ``md.default_generator.get_state()`` gives it as PyTorch's uint8 tensor)."""
    return _generator.bit_generator.state


def set_rng_state(new_state):
    """Restore a state from ``get_rng_state``, or a uint8 tensor from a Generator's ``get_state``
    (what PyTorch's get_rng_state returns)."""
    if isinstance(new_state, dict):
        _generator.bit_generator.state = new_state
        return
    from .tensor.generator import default_generator
    default_generator.set_state(new_state)


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, device_type=None):
    """Run the body with the global generator's state saved and restored on exit (also when the
    body raises): the draws inside do not change what is drawn after, and a ``manual_seed``
    inside (the initial seed included) is undone.

    ``devices`` (PyTorch: the CUDA devices whose generators to fork as well) is read and
    otherwise ignored: minidl's GPU draws take their seeds from the global generator, which is
    always forked. ``enabled=False`` runs the body without forking."""
    if devices is not None:
        devices = list(devices)     # an iterator is read once, as PyTorch does
    if not enabled or device_type == "meta":
        yield
        return
    from .tensor.generator import default_generator
    global _generator
    saved_generator, saved_state, saved_seed = _generator, _generator.bit_generator.state, default_generator._seed
    try:
        yield
    finally:
        _generator = saved_generator
        _generator.bit_generator.state = saved_state
        default_generator._seed = saved_seed


@contextlib.contextmanager
def _draws_forbidden(message):
    """Make every draw from the global generator raise RuntimeError(message) in this thread for
    the body's duration (used by minidl.func.vmap and jacfwd with randomness="error")."""
    previous = getattr(_guard, "message", None)
    _guard.message = message
    try:
        yield
    finally:
        _guard.message = previous


def __getattr__(name):
    if name in _FROM_TOP_LEVEL:
        import minidl
        return getattr(minidl, name)
    raise AttributeError(f"module 'minidl.random' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_FROM_TOP_LEVEL))
