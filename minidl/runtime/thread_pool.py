"""Numba's thread pool, started with short spinning so that it shares the cores with BLAS.

A training step alternates NumPy's BLAS (OpenBLAS, its own pthread pool) with minidl's Numba
kernels (an OpenMP pool, libgomp). Both pools keep their idle workers spinning for a while
after each call, so that the next call starts without a wake-up. libgomp spins for 300,000
iterations by default (several milliseconds: an iteration took about 25 ns on a Zen 4 VM): on a
2-core machine a Numba worker still spinning after a norm kernel takes the core from the BLAS
worker or the block worker of the next op, and vice versa. A short spin hands the core over
soon after; too short a spin makes a parallel region after a gap pay a futex wake-up, which on
a virtual machine can cost 50-90 us (a trivial kernel's launch: 2 us awake, 80 us woken).
SPIN_COUNT is a compromise between two VMs: on one, 10,000 spins held a core long enough to
slow the op after a parallel kernel, and shorter spins ran whole training steps faster; on the
other, a few thousand ran them a little slower than 10,000 (the measurements:
docs/performance.md).

libgomp reads GOMP_SPINCOUNT once, when it is loaded, which for Numba is when its pool
starts (the first parallel kernel or ``numba.get_num_threads()``). ``start`` sets the
variable just for that moment and removes it again, so it neither reaches child processes
nor a libgomp loaded later by another library. When the user sets GOMP_SPINCOUNT or
OMP_WAIT_POLICY, theirs stands; when libgomp was already loaded (PyTorch imported first, which
brings its own), the spin count is whatever that load read.
"""
import os

import numba

SPIN_COUNT = 3000
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
