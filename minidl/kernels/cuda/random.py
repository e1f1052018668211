"""Random numbers drawn on the device: the dropout keep mask, with no host copy.

The generator is numba.cuda.random's xoroshiro128+, one stream per thread. Its states are
seeded *on the device* in the same kernel that draws: thread t seeds its state with
SplitMix64(seed + t) (numba's ``init_xoroshiro128p_state``; SplitMix64 scatters adjacent
seeds, so the streams are decorrelated) and then draws elements t, t + S, t + 2S, ... of the
output, S = number of streams. numba's own ``create_xoroshiro128p_states`` would instead seed
on the host and copy the states up, a host -> device transfer per draw.

``seed`` comes from minidl's generator (``minidl.random``) on the host, as a launch argument:
``md.manual_seed(s)`` therefore reproduces the masks run after run. The masks are not the
CPU's (a different generator), and S (hence the stream of each element) is fixed per device
kind: the simulator uses fewer streams than a GPU, so the two draw different masks.

Under the simulator numba runs these uint64 functions as NumPy scalars, whose wrap-around
multiplications warn ("overflow encountered"); that wrap-around is the algorithm, so the
warning is silenced for the launch (a GPU does not warn).
"""
import warnings

import numpy as np
from numba import cuda

from ._common import SIMULATOR, grid_for

with warnings.catch_warnings():   # the simulator's numba.cuda.random warns about its own jit options
    warnings.simplefilter("ignore")
    from numba.cuda.random import init_xoroshiro128p_state, xoroshiro128p_dtype, xoroshiro128p_uniform_float32

STREAMS = 16 if SIMULATOR else 65536
_STATES = {}   # number of streams -> the device buffer holding their states (allocated, never copied)


@cuda.jit(cache=True)
def _keep_mask(out, states, seed, p, scale, n):
    t = cuda.grid(1)
    if t < states.shape[0]:
        init_xoroshiro128p_state(states, t, seed + t)
        i = t
        while i < n:
            u = xoroshiro128p_uniform_float32(states, t)
            out[i] = scale if u >= p else 0
            i += states.shape[0]


def _states(n):
    s = _STATES.get(n)
    if s is None:
        s = _STATES[n] = cuda.device_array(n, dtype=xoroshiro128p_dtype)
    return s


def keep_mask(out, p, seed):
    """Fill the contiguous device buffer ``out`` with 1/(1-p) (probability 1 - p) or 0: the
    scaled dropout mask. ``seed`` is a non-negative int below 2**62."""
    n = out.size
    if n == 0:
        return
    scale = out.dtype.type(0.0 if p >= 1.0 else 1.0 / (1.0 - p))
    streams = min(n, STREAMS)
    args = (out, _states(streams), np.int64(seed), np.float32(p), scale, n)
    if SIMULATOR:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning)
            _keep_mask[grid_for(streams)](*args)
    else:
        _keep_mask[grid_for(streams)](*args)
