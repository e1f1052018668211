"""md.Generator: a random number generator object, as torch.Generator.

Each Generator owns a NumPy ``Generator`` (PCG64). The random factories (``md.rand(...,
generator=g)``, randn, randint, randperm, normal, bernoulli, multinomial) and the data
loading (DataLoader, RandomSampler, random_split) draw from it when given one, and from
minidl's global generator otherwise; ``md.default_generator`` is that global one.

``get_state`` returns a uint8 tensor, as PyTorch's does: the PCG64 state, increment and
buffered 32-bit draw in 37 little-endian bytes, which ``set_state`` reads back.
"""
import secrets

import numpy as np

from .. import random as _random

_STATE_BYTES = 37   # state (16) + inc (16) + has_uint32 (1) + uinteger (4)


class Generator:
    def __init__(self, device="cpu"):
        from .device import device as _device
        self.device = _device(device)
        if self.device.type != "cpu":
            raise RuntimeError(f"Generator: minidl draws random numbers on the CPU; expected device 'cpu', "
                               f"got '{self.device}'")
        self._seed = 67280421310721   # PyTorch's default seed for a new Generator
        self._rng = np.random.default_rng(self._seed)

    def manual_seed(self, seed):
        """Reseed with ``seed`` (an int; negative ones wrap as in PyTorch); returns self."""
        seed = _check_seed(seed)
        self._set_rng(np.random.default_rng(seed))
        self._seed = seed
        return self

    def seed(self):
        """Reseed from the operating system's entropy; returns the seed chosen."""
        seed = secrets.randbits(63)
        self.manual_seed(seed)
        return seed

    def initial_seed(self):
        return self._seed

    def get_state(self):
        from .factories import from_numpy
        st = self._rng.bit_generator.state
        if st["bit_generator"] != "PCG64":
            raise RuntimeError(f"Generator.get_state: expected a PCG64 generator, got {st['bit_generator']}")
        raw = (st["state"]["state"].to_bytes(16, "little") + st["state"]["inc"].to_bytes(16, "little")
               + bytes([st["has_uint32"]]) + int(st["uinteger"]).to_bytes(4, "little"))
        return from_numpy(np.frombuffer(raw, dtype=np.uint8).copy())

    def set_state(self, new_state):
        """Restore a state from ``get_state`` (a uint8 tensor of 37 bytes); returns self."""
        from .tensor import Tensor
        if not isinstance(new_state, Tensor) or new_state.dtype.kind != "u":
            what = new_state.dtype if isinstance(new_state, Tensor) else type(new_state).__name__
            raise TypeError(f"RNG state must be a uint8 tensor (PyTorch's ByteTensor) from get_state(), got {what}")
        data = new_state.numpy(force=True)
        if data.shape != (_STATE_BYTES,):
            raise RuntimeError(f"Generator.set_state: expected a uint8 tensor of {_STATE_BYTES} bytes from "
                               f"get_state(), got shape {list(data.shape)}")
        raw = data.tobytes()
        if raw[32] not in (0, 1):
            raise RuntimeError("Generator.set_state: the state is corrupted (its has_uint32 byte is not 0 or 1)")
        bg = np.random.PCG64()
        bg.state = {"bit_generator": "PCG64",
                    "state": {"state": int.from_bytes(raw[:16], "little"), "inc": int.from_bytes(raw[16:32], "little")},
                    "has_uint32": raw[32], "uinteger": int.from_bytes(raw[33:], "little")}
        self._set_rng(np.random.Generator(bg))
        return self

    def _set_rng(self, rng):
        self._rng = rng

    def __repr__(self):
        return f"<minidl.Generator object at {id(self):#x}>"


class _DefaultGenerator(Generator):
    """The global generator (md.default_generator): a view of minidl.random's."""

    def __init__(self):
        from .device import device as _device
        self.device = _device("cpu")
        self._seed = 0                  # minidl.random starts seeded with 0

    @property
    def _rng(self):
        return _random.generator()

    def _set_rng(self, rng):
        _random._generator = rng

    def manual_seed(self, seed):
        return _random.manual_seed(seed)   # which records the seed here and returns self


def _check_seed(seed):
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        try:
            seed = int(seed)    # a 0-d integer tensor
        except (TypeError, ValueError):
            raise TypeError(f"manual_seed expected an int, got {type(seed).__name__}") from None
    seed = int(seed)
    if not -2 ** 63 <= seed < 2 ** 64:
        raise RuntimeError(f"Overflow when unpacking long long: seed {seed} is outside [-2**63, 2**64)")
    return seed % 2 ** 64


default_generator = _DefaultGenerator()


def numpy_generator(generator):
    """The NumPy Generator to draw from: ``generator``'s (an md.Generator or a NumPy Generator),
    or minidl's global one (looked up at each draw, so md.manual_seed takes effect) for None."""
    if generator is None:
        return _random.generator()
    if isinstance(generator, Generator):
        return generator._rng
    if isinstance(generator, np.random.Generator):
        return generator
    raise TypeError(f"generator must be None, a minidl.Generator or a numpy.random.Generator, "
                    f"got {type(generator).__name__}")
