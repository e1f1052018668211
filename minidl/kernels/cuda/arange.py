"""out[i] = start + i * step: ``arange`` computed on the device instead of copied up from the host
(causal masks and index grids are built from it every step)."""
from numba import cuda

from ._common import grid_for


@cuda.jit(cache=True)
def _arange(out, start, step, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = start + i * step


def launch(out, start, step):
    """Fill the contiguous device buffer ``out``; start and step already of out's dtype."""
    n = out.size
    if n:
        _arange[grid_for(n)](out, start, step, n)
