"""Numba CPU kernels, one op family per file; each is tested against the NumPy reference of its op.

Two settings hold for every kernel here:
- importing any of them first starts Numba's thread pool with short spinning
  (see minidl.runtime.thread_pool);
- every kernel compiles with ``error_model="numpy"``: a float division by zero gives inf or NaN,
  as in NumPy, instead of raising ZeroDivisionError. Under Numba's default each division checks
  its divisor, and that branch stops LLVM from vectorising the loop around it.
"""
from ...runtime import thread_pool

thread_pool.start()
