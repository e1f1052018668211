"""The global random number generator behind md.randn, md.rand, dropout and shuffling.

One NumPy Generator, reseeded by ``md.manual_seed``; its state can be saved and restored
(``get_rng_state`` / ``set_rng_state``) so a resumed run draws the same numbers.
"""
import numpy as np

_generator = np.random.default_rng(0)


def manual_seed(seed):
    global _generator
    _generator = np.random.default_rng(int(seed))
    return _generator


def generator():
    return _generator


def get_rng_state():
    return _generator.bit_generator.state


def set_rng_state(state):
    _generator.bit_generator.state = state
