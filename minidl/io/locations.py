"""``map_location`` for ``md.load``, as torch.load's.

A minidl checkpoint holds every tensor's values as a host (NumPy) array and does not record
the device it was saved from, so every stored array's *location* is ``"cpu"``. Without
``map_location`` (None), a saved Tensor comes back as a CPU Tensor (an nn.Parameter as a
Parameter, with its requires_grad; tensors that shared memory still share it: see
``tensors``), as torch.load returns, while a saved NumPy array comes back as an array. With
one, every tensor goes where it says, and every numeric array comes back as a Tensor too:

- a device name or ``md.device`` (``"cpu"``, ``"cuda"``, ``"cuda:0"``): Tensors on it;
- a dict remapping location names (``{"cuda:0": "cpu"}``): the entry for ``"cpu"`` if it
  has one, else the CPU (an unmatched location stays where it was saved, as in PyTorch);
- a callable ``fn(storage, location)``: called once per stored array with a CPU Tensor sharing
  the array's memory and the location ``"cpu"``; it returns the Tensor (or array) to use, or
  None for the CPU Tensor itself. ``lambda storage, loc: storage`` and
  ``lambda storage, loc: storage.cuda()`` work as in PyTorch. Tensors that share memory are
  stored as one 1-d array, their storage: the callable sees it once and they are made as views
  of what it returns, on its device.

Tensors that share memory are moved to another device as their one storage, so they still share
memory there, as torch.load's do.
Fixed-width string arrays have no Tensor form and always stay NumPy arrays.
"""
import numpy as np

from ..tensor import dtype as _dtypes
from ..tensor.device import device as _device
from ..tensor.tensor import Tensor

SAVED_LOCATION = "cpu"


def _device_name(where, what):
    if isinstance(where, _device):
        return str(where)
    if isinstance(where, str):
        return str(_device(where))   # RuntimeError for an unknown device type, as torch.device
    raise TypeError(f"md.load: {what} must be a device name or md.device, got {type(where).__name__}")


class Placement:
    """Where ``md.load`` puts what it reads: ``array(a)`` is the value for a saved array,
    ``storage(a)`` the Tensor a saved tensor (or the tensors sharing a buffer) is made from,
    and ``device`` the device those tensors then move to (None: where their storage is)."""

    def __init__(self, array, storage, device):
        self.array, self.storage, self.device = array, storage, device


def resolve(map_location):
    """The Placement that ``map_location`` asks for."""
    if map_location is None:
        return Placement(lambda a: a, _tensor, None)
    if isinstance(map_location, dict):
        target = map_location.get(SAVED_LOCATION, SAVED_LOCATION)
        return _on_device(_device_name(target, f"map_location[{SAVED_LOCATION!r}]"))
    if isinstance(map_location, (str, _device)):
        return _on_device(_device_name(map_location, "map_location"))
    if callable(map_location):
        through = _through(map_location)
        return Placement(through, lambda a: _as_tensor(through(a)), None)
    raise TypeError(f"md.load: map_location must be None, a device name, an md.device, a dict of location names "
                    f"or a callable (storage, location), got {type(map_location).__name__}")


def _on_device(name):
    return Placement(_to_device(name), _tensor, name)


def _tensor(a):
    from ..tensor.factories import from_numpy
    return from_numpy(a)


def _as_tensor(value):
    return value if isinstance(value, Tensor) else _tensor(value)


def _to_device(name):
    from .. import backends
    backends.get(name)   # a missing backend is an error now, before anything is read

    def move(a):
        if not _dtypes.holds_numbers(a.dtype):
            return a
        t = _tensor(a)
        return t if name == SAVED_LOCATION else t.to(name)
    return move


def _through(fn):
    def call(a):
        if not _dtypes.holds_numbers(a.dtype):
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
