"""Checkpoints of any picklable object (a whole model, an optimizer, an argparse.Namespace, a
set...), and the globals ``md.load`` may meet in them by default (``weights_only=True``).

``md.save`` stores what it can without pickle (see ``checkpoint``). An object holding anything
else is pickled whole (so every object in it keeps its identity, as torch.save's), except its
Tensors and numeric arrays: pickle hands each to ``persistent_id``, which stores it as the
checkpoint's other arrays are (tensors sharing memory still share it, see ``tensors``) and
leaves in the pickle only its position in the manifest's list of them. The manifest's root is
then ``["pickle", name, refs]``: ``name`` the uint8 member holding the pickle, ``refs`` the
tensor and array nodes, in the order the pickle refers to them.

Unpickling runs whatever code the file names, so ``md.load``'s default, ``weights_only=True``
(torch.load's), unpickles with ``find_class`` restricted to an allow-list and imports
nothing: what torch.load allows by default that a minidl checkpoint can hold (set, bytearray,
complex, OrderedDict, Counter, and ``_codecs.encode``, through which pickle writes bytes),
minidl's dtypes, Size and device, and whatever ``add_safe_globals`` or ``safe_globals`` added.
Any other global raises ``WeightsOnlyError`` (a pickle.UnpicklingError, as torch.load's) naming
it and the two ways to load the file: ``weights_only=False``, for a file from a trusted source,
or allowing that global. ``get_unsafe_globals_in_checkpoint`` lists those globals by reading
the pickle's opcodes, without unpickling.
"""
import _codecs
import _compat_pickle
import builtins
import collections
import io
import pickle
import pickletools

from .errors import CheckpointError

__all__ = ["WeightsOnlyError", "add_safe_globals", "clear_safe_globals", "dump", "get_safe_globals",
           "globals_in", "load", "safe_globals", "unsafe_globals"]


class WeightsOnlyError(pickle.UnpicklingError, CheckpointError):
    """A checkpoint that ``weights_only=True`` refuses: its pickle needs a global not allowed."""


def _name(obj):
    return f"{obj.__module__}.{obj.__qualname__}"


def _canonical(module, name):
    """``module.name`` under Python 3's names: pickle's protocols 0-2 write Python 2's
    (``__builtin__.set``) and its unpickler maps them back, as this does."""
    if (module, name) in _compat_pickle.NAME_MAPPING:
        module, name = _compat_pickle.NAME_MAPPING[(module, name)]
    elif module in _compat_pickle.IMPORT_MAPPING:
        module = _compat_pickle.IMPORT_MAPPING[module]
    return f"{module}.{name}"


def _default_globals():
    from ..tensor import device, dtype, size
    allowed = [builtins.set, builtins.bytearray, builtins.complex, collections.OrderedDict, collections.Counter,
               _codecs.encode, dtype.by_name, size.Size, device.device]
    return {_name(obj): obj for obj in allowed}


_user_globals = []   # what add_safe_globals added: objects, or (object, "module.name") pairs


def _entry_name(entry):
    return entry[1] if isinstance(entry, tuple) else _name(entry)


def _check_entries(entries, fn):
    if isinstance(entries, (str, bytes)) or not hasattr(entries, "__iter__"):
        raise TypeError(f"{fn}: expected a list of classes or functions, or of (class or function, "
                        f"'module.name') pairs, got {type(entries).__name__}")
    entries = list(entries)
    for e in entries:
        ok = (isinstance(e, tuple) and len(e) == 2 and isinstance(e[1], str)) or \
             (not isinstance(e, tuple) and hasattr(e, "__module__") and hasattr(e, "__qualname__"))
        if not ok:
            raise TypeError(f"{fn}: expected a class or function, or a (class or function, 'module.name') pair, "
                            f"got {e!r}")
    return entries


def add_safe_globals(safe_globals):
    """Allow these classes and functions in ``md.load(..., weights_only=True)``; an entry may be
    ``(obj, "module.name")`` to allow ``obj`` under the name a file gives it."""
    _user_globals.extend(_check_entries(safe_globals, "add_safe_globals"))


def get_safe_globals():
    """What ``add_safe_globals`` (and any open ``safe_globals``) allowed, beyond the defaults."""
    return list(_user_globals)


def clear_safe_globals():
    _user_globals.clear()


class safe_globals:  # noqa: N801  (torch.serialization.safe_globals)
    """Allow these globals in ``md.load(..., weights_only=True)`` inside a ``with`` block only."""

    def __init__(self, safe_globals):
        self._entries = _check_entries(safe_globals, "safe_globals")

    def __enter__(self):
        self._before = list(_user_globals)
        _user_globals.extend(self._entries)

    def __exit__(self, *exc):
        _user_globals[:] = self._before
        return False


def _allowed():
    allowed = _default_globals()
    for entry in _user_globals:
        allowed[_entry_name(entry)] = entry[0] if isinstance(entry, tuple) else entry
    return allowed


# saving ---------------------------------------------------------------------------------------
def dump(obj, node_of, pickle_module=pickle, protocol=2):
    """``(pickle bytes, refs)``: ``obj`` pickled with ``pickle_module``, each object for which
    ``node_of(o)`` gives a manifest node (a Tensor, an array) stored as that node instead and
    referred to by its index in ``refs``. pickle's own errors (an unpicklable lambda) pass
    through unchanged."""
    refs, index = [], {}
    keep = []     # the objects indexed, alive until the end so that no id is reused meanwhile

    def persistent_id(o):
        pid = index.get(id(o))
        if pid is None:
            node = node_of(o)
            if node is None:
                return None
            pid = index[id(o)] = len(refs)
            refs.append(node)
            keep.append(o)
        return pid

    pickler_type = getattr(pickle_module, "Pickler", None)
    if pickler_type is None:
        raise TypeError(f"md.save: pickle_module must be a module with a Pickler (as pickle), got "
                        f"{type(pickle_module).__name__}")
    buf = io.BytesIO()
    pickler = type("_CheckpointPickler", (pickler_type,), {"persistent_id": staticmethod(persistent_id)})(
        buf, protocol)
    pickler.dump(obj)
    return buf.getvalue(), refs


# loading --------------------------------------------------------------------------------------
def _refusal(path, full_name):
    return WeightsOnlyError(
        f"md.load: weights only load of {path!r} failed: its pickled object needs the global {full_name}, which "
        "is not allowed by default. If you trust the source of the checkpoint, load it with weights_only=False "
        "(unpickling can run arbitrary code); or allow this global with "
        f"minidl.serialization.add_safe_globals([{full_name}]) or inside the "
        f"minidl.serialization.safe_globals([{full_name}]) context manager.")


def load(data, refs, path, weights_only, pickle_module=None, load_args=None):
    """Unpickle ``data``, its persistent ids being indices into ``refs`` (the built tensors and
    arrays); with ``weights_only`` only allowed globals are looked up (see the module's
    docstring). A corrupt pickle raises CheckpointError naming ``path``."""
    def persistent_load(pid):
        if type(pid) is not int or not 0 <= pid < len(refs):
            raise CheckpointError(f"cannot load {path!r}: its pickle refers to a stored tensor {pid!r} that the "
                                  f"checkpoint does not hold (it holds {len(refs)})")
        return refs[pid]

    attrs = {"persistent_load": staticmethod(persistent_load)}
    if weights_only:
        allowed = _allowed()

        def find_class(module, name):
            full = _canonical(module, name)
            if full not in allowed:
                raise _refusal(path, full)
            return allowed[full]
        attrs["find_class"] = staticmethod(find_class)
        base = pickle.Unpickler
    else:
        base = getattr(pickle_module or pickle, "Unpickler", None)
        if base is None:
            raise TypeError(f"md.load: pickle_module must be a module with an Unpickler (as pickle), got "
                            f"{type(pickle_module).__name__}")
    unpickler = type("_CheckpointUnpickler", (base,), attrs)(io.BytesIO(data), **(load_args or {}))
    try:
        return unpickler.load()
    except (pickle.UnpicklingError, EOFError) as exc:
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(f"cannot load {path!r}: its pickled object is truncated or corrupt ({exc})") from None


def globals_in(data):
    """The ``module.name`` of every global the pickle ``data`` names, in order, found by
    reading its opcodes (nothing is unpickled): GLOBAL carries the name; STACK_GLOBAL takes
    the two strings pushed before it, directly or from the memo."""
    found, strings, memo = [], [], {}
    memoized = 0       # MEMOIZE stores under the count of what it stored before
    try:
        for op, arg, _ in pickletools.genops(data):
            name, pushed = op.name, None
            if name == "GLOBAL":
                found.append(_canonical(*arg.split(" ", 1)))
            elif name == "STACK_GLOBAL" and len(strings) >= 2:
                found.append(_canonical(strings[-2], strings[-1]))
            elif name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"):
                pushed = arg
            elif name in ("GET", "BINGET", "LONG_BINGET"):
                pushed = memo.get(arg)
            elif name == "FRAME":
                continue
            elif name in ("MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT"):
                key = memoized if name == "MEMOIZE" else arg
                memoized += name == "MEMOIZE"
                if strings:
                    memo[key] = strings[-1]
                continue     # storing leaves the stack as it was
            if pushed is None:
                strings.clear()
            else:
                strings.append(pushed)
    except ValueError as exc:   # pickletools' report of a malformed pickle
        raise CheckpointError(f"its pickled object is corrupt ({exc})") from None
    return list(dict.fromkeys(found))


def unsafe_globals(data):
    """The globals of the pickle ``data`` that ``weights_only=True`` would refuse."""
    allowed = _allowed()
    return [g for g in globals_in(data) if g not in allowed]
