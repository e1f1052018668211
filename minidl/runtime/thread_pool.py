"""Numba's thread pool, started with a bounded spin so that it shares the cores with BLAS.

A training step alternates NumPy's BLAS (OpenBLAS, its own pthread pool) with minidl's Numba
kernels (an OpenMP pool, libgomp). Both pools keep their idle workers spinning for a while
after each call, so that the next call starts without a wake-up. libgomp spins for 300,000
iterations by default (several milliseconds: an iteration took about 25 ns on a Zen 4 VM): on a
2-core machine a Numba worker still spinning after a norm kernel takes the core from the BLAS
worker or the block worker of the next op, and vice versa. A short spin hands the core over
soon after; too short a spin makes a parallel region after a gap pay a futex wake-up, which on
a virtual machine can cost 50-90 us (a trivial kernel's launch: 2 us awake, 80 us woken).
How long to spin depends on what else runs between the kernels. When OpenBLAS's pool and the
block workers ran much of a step (conv2d's shares, attention's heads, the linear layers'
products), 3,000 spins served best: on a Zen 4 VM 10,000 held a core those threads needed.
Since the linear layers', attention's and Winograd's products run inside Numba's own regions,
between two kernels there is mostly Python, and a worker that has gone to sleep costs each
region a wake-up: on an Intel Xeon VM a linear layer's forward took 50 us longer after a few
microseconds of Python than right after the previous region, and GPT steps ran 4-9% faster at
30,000 spins (about 0.4 ms of spinning there, 13 ns a spin; 0.75 ms on the Zen 4 VM, where it
was not measured again), the CNN steps as fast or a little faster (docs/performance.md,
"Numba's pool spins longer").

libgomp reads GOMP_SPINCOUNT once, when it is loaded, which for Numba is when its pool
starts (the first parallel kernel or ``numba.get_num_threads()``). ``start`` sets the
variable just for that moment and removes it again, so it neither reaches child processes
nor a libgomp loaded later by another library. When the user sets GOMP_SPINCOUNT or
OMP_WAIT_POLICY, theirs stands; when libgomp was already loaded (PyTorch imported first, which
brings its own), the spin count is whatever that load read.
"""
import os

import numba

SPIN_COUNT = 30000
_USER_KNOBS = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")


def start():
    """Start Numba's thread pool (idempotent), with SPIN_COUNT unless the user chose otherwise."""
    if any(k in os.environ for k in _USER_KNOBS):
        numba.get_num_threads()
        return
    os.environ["GOMP_SPINCOUNT"] = str(SPIN_COUNT)
    try:
        numba.get_num_threads()      # loads the threading layer; libgomp reads the variable now
    finally:
        del os.environ["GOMP_SPINCOUNT"]
