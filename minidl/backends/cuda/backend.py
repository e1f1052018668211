"""The "cuda" Backend: moving arrays to and from the device, deferred device asserts, and the
glue the optimizers and dropout use to run their fused kernels (kernels/cuda/optim.py,
random.py) instead of the generic ops."""
import numpy as np

from ... import random
from ...kernels.cuda import checks as _checks
from ...kernels.cuda import optim as _optim
from ...kernels.cuda import random as _random
from ...kernels.cuda.bfloat16 import is_bfloat16
from .. import Backend
from .array import CudaArray
from .namespace import CUDA_NUMPY


def _fusable(a, w):
    """The fused kernels read their buffers as numbers: bfloat16 (uint16 bits) takes the generic path."""
    return (isinstance(a, CudaArray) and a.dtype == w.dtype and a.shape == w.shape and a._is_whole_buffer()
            and not is_bfloat16(a.dtype))


class CudaBackend(Backend):
    name = "cuda"
    xp = CUDA_NUMPY
    array_type = CudaArray

    def from_host(self, array):
        if isinstance(array, CudaArray):
            return array
        return CudaArray.from_host(array)

    def to_host(self, array):
        return array.copy_to_host()

    def assert_all(self, ok, error, message):
        """``if not ok.all(): raise error(message)``, deferred to the next read from the device."""
        _checks.assert_all(ok, error, message)

    @staticmethod
    def fused_adam(w, g, m, v, vmax, lr, beta1, beta2, eps, wd, step, decoupled, amsgrad, maximize):
        """One Adam(W) kernel for the parameter (kernels/cuda/optim.py); False (use the generic
        path) unless every array is a contiguous whole buffer of w's dtype."""
        arrays = [w, g, m, v] + ([vmax] if amsgrad else [])
        if not all(_fusable(a, w) for a in arrays):
            return False
        _optim.adam(w._buf, g._buf, m._buf, v._buf, (vmax if amsgrad else v)._buf, lr, beta1, beta2, eps, wd,
                    step, decoupled, amsgrad, maximize)
        return True

    @staticmethod
    def fused_sgd(w, g, buf, lr, wd, momentum, dampening, nesterov, maximize):
        """One SGD kernel for the parameter: (True, momentum buffer, allocated on the first step;
        None without momentum), or (False, None) (use the generic path) unless the arrays are
        contiguous whole buffers of w's dtype."""
        first = momentum != 0 and buf is None
        if first:
            buf = CudaArray.empty(w.shape, w.dtype)
        if not all(_fusable(a, w) for a in ([w, g] + ([buf] if momentum != 0 else []))):
            return False, None
        _optim.sgd(w._buf, g._buf, (buf if momentum != 0 else w)._buf, lr, wd, momentum, dampening, first, nesterov,
                   maximize)
        return True, buf

    def dropout_mask(self, shape, p, dtype):
        """The scaled keep mask drawn on the device (kernels/cuda/random.py), seeded from
        minidl's generator: reproducible under md.manual_seed, but not the CPU's mask."""
        if is_bfloat16(dtype):   # drawn in float32, the scale rounded once
            return self.dropout_mask(shape, p, np.float32).astype(dtype)
        out = CudaArray.empty(shape, dtype)
        _random.keep_mask(out._buf, float(p), int(random.generator().integers(0, 2 ** 62)))
        return out
