"""``map_location`` for ``md.load``, as torch.load's.

A minidl checkpoint holds every tensor's values as a host (NumPy) array and does not record
the device it was saved from, so every array's *location* is ``"cpu"``. Without
``map_location`` (None), arrays come back as NumPy arrays (what ``load_state_dict`` and the
optimizers' ``load_state_dict`` take, wherever the model lives). With one, every numeric
array comes back as a Tensor, as torch.load returns:

- a device name or ``md.device`` (``"cpu"``, ``"cuda"``, ``"cuda:0"``): Tensors on it;
- a dict remapping location names (``{"cuda:0": "cpu"}``): the entry for ``"cpu"`` if it
  has one, else the CPU (an unmatched location stays where it was saved, as in PyTorch);
- a callable ``fn(storage, location)``: called once per array with a CPU Tensor sharing the
  array's memory and the location ``"cpu"``; it returns the Tensor (or array) to use, or None
  for the CPU Tensor itself. ``lambda storage, loc: storage`` and
  ``lambda storage, loc: storage.cuda()`` work as in PyTorch.

Fixed-width string arrays have no Tensor form and always stay NumPy arrays.
"""
import numpy as np

from ..tensor.device import device as _device
from ..tensor.tensor import Tensor

SAVED_LOCATION = "cpu"
_TENSOR_KINDS = "biufc"


def _device_name(where, what):
    if isinstance(where, _device):
        return str(where)
    if isinstance(where, str):
        return str(_device(where))   # RuntimeError for an unknown device type, as torch.device
    raise TypeError(f"md.load: {what} must be a device name or md.device, got {type(where).__name__}")


def resolve(map_location):
    """A function array -> loaded value, or None to keep the arrays as they are."""
    if map_location is None:
        return None
    if isinstance(map_location, dict):
        target = map_location.get(SAVED_LOCATION, SAVED_LOCATION)
        return _to_device(_device_name(target, f"map_location[{SAVED_LOCATION!r}]"))
    if isinstance(map_location, (str, _device)):
        return _to_device(_device_name(map_location, "map_location"))
    if callable(map_location):
        return _through(map_location)
    raise TypeError(f"md.load: map_location must be None, a device name, an md.device, a dict of location names "
                    f"or a callable (storage, location), got {type(map_location).__name__}")


def _tensor(a):
    from ..tensor.factories import from_numpy
    return from_numpy(a)


def _to_device(name):
    from .. import backends
    backends.get(name)   # a missing backend is an error now, before anything is read

    def move(a):
        if a.dtype.kind not in _TENSOR_KINDS:
            return a
        t = _tensor(a)
        return t if name == SAVED_LOCATION else t.to(name)
    return move


def _through(fn):
    def call(a):
        if a.dtype.kind not in _TENSOR_KINDS:
            return a
        storage = _tensor(a)
        out = fn(storage, SAVED_LOCATION)
        if out is None:
            return storage
        if not isinstance(out, (Tensor, np.ndarray)):
            raise TypeError(f"md.load: map_location(storage, location) must return a Tensor, an array or None, "
                            f"got {type(out).__name__}")
        return out
    return call
