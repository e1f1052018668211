"""Test-session defaults. CI has no GPU: the cuda device runs in numba's CUDA simulator.
Set before numba.cuda is first imported (conftest.py is imported before the test modules);
an explicit NUMBA_ENABLE_CUDASIM=0 on a GPU machine is respected."""
import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
