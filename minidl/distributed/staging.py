"""The host arrays MPI reads and writes for a Tensor, and how results get back into it.

MPI moves host memory. A CPU tensor whose array is C-contiguous, in a dtype MPI knows, is
handed over as it is (in-place collectives write straight into it). Any other tensor is
staged: a contiguous host copy is made, in the wire dtype, and copied back once the collective
is done (``write_back``). That covers
- cuda tensors, staged through the host: device -> host copy, the collective on the host
  copy, host -> device copy (minidl does not use a CUDA-aware MPI);
- float16 and bfloat16, which MPI has no type for: they travel and are reduced as float32
  and rounded back once, the same on every rank;
- non-contiguous views.
"""
import numpy as np

from .. import backends
from ..autograd import versions

_WIDENED = {"float16", "bfloat16"}


def wire_dtype(dtype):
    return np.dtype(np.float32) if np.dtype(dtype).name in _WIDENED else np.dtype(dtype)


class Staged:
    """A tensor's host buffer for one collective (``array``), and its ``write_back``."""

    def __init__(self, tensor, shape=None, copy_in=True):
        data = tensor._data
        wire = wire_dtype(data.dtype)
        self.tensor = tensor
        self.direct = type(data) is np.ndarray and data.flags.c_contiguous and data.dtype == wire
        if self.direct:
            array = data
        elif copy_in:
            host = backends.get(tensor.device.type).to_host(data)
            array = np.ascontiguousarray(host, dtype=wire)
        else:
            array = np.empty(data.shape, wire)
        self.array = array if shape is None else array.reshape(shape)

    def write_back(self):
        """Put the collective's result into the tensor (nothing to do for a direct buffer)."""
        if self.direct:
            return
        data = self.tensor._data
        result = self.array.reshape(data.shape).astype(data.dtype, copy=False)
        if type(data) is np.ndarray:
            data[...] = result
        else:
            data[...] = backends.get(self.tensor.device.type).from_host(np.ascontiguousarray(result))


def mark_written(tensor):
    """Count a collective's write into ``tensor`` as an in-place write, as PyTorch does, so a
    backward that saved the tensor notices."""
    versions.bump(tensor._version_counter)
