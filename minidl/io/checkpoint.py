"""Checkpoints: ``md.save(obj, f)`` / ``md.load(f)``, safe to load and atomic to write.

``f`` is a path (str or os.PathLike) or a binary file object (see ``files``); ``md.load``'s
``map_location`` is torch.load's (see ``locations``).

Format: an ordinary .npz (a zip of .npy files).
- every stored array is a member ``a0``, ``a1``, ...;
- the structure around them (dicts, lists, tuples, ints of any size, floats, bools,
  strings, None) is a JSON *manifest*, stored as a uint8 array under ``__minidl__``:
  ``{"format": "minidl-checkpoint", "version": 2, "root": node}`` where a node is a
  tagged list such as ``["dict", [[key_node, value_node], ...]]``, ``["array", "a0"]``
  or ``["int", 3]``, so int dict keys (optimizer state) and tuples come back as they were.
- a NumPy array is ``["array", "a0"]`` and comes back as an array; a bfloat16 one (a type
  NumPy lacks; ml_dtypes provides it) is stored as its uint16 bits under
  ``["bfloat16", "a0"]`` and comes back as bfloat16; a NumPy scalar is ``["scalar", "a0"]``.
- a Tensor is ``["tensor", "a0", {"id": 0, "requires_grad": false, "parameter": false, ...}]``
  and comes back as a Tensor, an nn.Parameter as a Parameter, one object saved twice as one
  object, and tensors that shared memory as views of one stored buffer (see ``tensors``).
Objects may nest at most ``MAX_DEPTH`` levels deep. Such a checkpoint holds no pickle and is
written as version 2. An object the manifest cannot describe (a whole model, an optimizer, a
set, an argparse.Namespace, a namedtuple, nesting deeper, a cycle) is pickled instead, its
tensors and arrays stored as above, and written as version 3 (see ``pickled``). Version 1
(before tensor nodes) stored a Tensor as an ``array`` node; such files still load, and their
arrays come back as arrays.

Saving to a path writes a temporary file in the target's directory, flushes and fsyncs it, then
``os.replace``s it over ``path`` (atomic on POSIX and Windows) and fsyncs the directory:
a crash or error at any moment leaves either the old checkpoint or the new one, never a
mix. Everything is validated before any file is touched, the temporary is removed on
failure, and the temporaries that saves killed outright left behind are removed by the
next save to the same path (see ``temporaries``: only those no live writer holds). Saving to a
file object writes the archive straight into it (from its current position) and flushes it;
the caller owns it and closes it.

Loading never trusts the file (see ``archive``: sizes, compression ratio and .npy headers are
checked before any data is read, and reads are bounded), and unpickles only a version-3
checkpoint's pickle, by default only with the globals ``pickled`` allows (torch.load's
``weights_only=True``). The
manifest is checked node by node (tags, value types, nesting depth, at most
``MAX_MANIFEST_BYTES``, every array it names present and named once, save the buffer that
tensors sharing memory view; each tensor's description and view bounds: see ``tensors``)
before any array is read. Anything wrong raises ``CheckpointError`` naming the file and what is wrong with it.
"""
import io
import json
import os
import pickle
import reprlib
from collections import OrderedDict

import numpy as np

from .. import backends
from ..tensor import dtype as _dtypes
from ..tensor.tensor import Tensor
from . import files, locations, pickled, temporaries, tensors
from .archive import ARRAY_KINDS, Archive
from .errors import CheckpointError

MANIFEST_KEY = "__minidl__"
FORMAT = "minidl-checkpoint"
VERSION = 3                     # the newest this reads; a save writes the oldest that holds its object
DATA_VERSION = 2                # no pickle
PICKLE_TAG = "pickle"
MAX_DEPTH = 100                 # nesting of dicts/lists/tuples, far beyond any real state
MAX_MANIFEST_BYTES = 32 << 20   # a model with 100k tensors needs about 5 MB
_BFLOAT16 = _dtypes.bfloat16.dtype if _dtypes.bfloat16 is not None else None
_ARRAY_TAGS = ("array", "scalar", "bfloat16")

__all__ = ["CheckpointError", "MANIFEST_KEY", "MAX_DEPTH", "MAX_MANIFEST_BYTES", "get_unsafe_globals_in_checkpoint",
           "load", "save"]


# encoding ----------------------------------------------------------------------------------
class _NeedsPickle(Exception):
    """``obj`` holds something the manifest cannot describe: the checkpoint pickles it."""


def _encode(obj, arrays, saver, where, depth=0):
    if obj is None:
        return ["none"]
    if isinstance(obj, bool):
        return ["bool", obj]
    if isinstance(obj, int):
        return ["int", int(obj)]
    if isinstance(obj, float):
        return ["float", obj]
    if isinstance(obj, str):
        return ["str", obj]
    if isinstance(obj, Tensor):
        return saver.node(obj)
    node = _leaf_node(obj, arrays, saver)
    if node is not None:
        return node
    if type(obj) not in _DESCRIBED or depth >= MAX_DEPTH:   # a subclass (namedtuple, defaultdict) keeps its type
        raise _NeedsPickle
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if isinstance(k, (np.integer, np.floating, np.bool_)):
                k = k.item()
            if not isinstance(k, (str, int, float, bool)) and k is not None:
                raise _NeedsPickle
            items.append([_encode(k, arrays, saver, where), _encode(v, arrays, saver, f"{where}[{k!r}]", depth + 1)])
        return ["dict", items]
    tag = "list" if isinstance(obj, list) else "tuple"
    return [tag, [_encode(v, arrays, saver, f"{where}[{i}]", depth + 1) for i, v in enumerate(obj)]]


_DESCRIBED = (dict, OrderedDict, list, tuple)   # what the manifest describes (an OrderedDict as a dict)
_PLAIN = (type(None), bool, int, float, str, dict, OrderedDict, list, tuple)


def _leaf_node(obj, arrays, saver):
    """The manifest node of a Tensor (or Parameter), a numeric array or scalar, or a device
    array (an optimizer's state on cuda, stored as its values); None for anything else, or an
    array that needs pickle (dtype object). Tensor subclasses other than Parameter are left to
    pickle, which keeps what they add."""
    if type(obj) in _PLAIN:
        return None
    if isinstance(obj, Tensor):
        return saver.node(obj) if type(obj) in (Tensor, _parameter_class()) else None
    if type(obj) is np.ndarray:
        return _encode_array(obj, arrays, "array")
    if isinstance(obj, np.generic):
        return _encode_array(np.asarray(obj), arrays, "scalar")
    device = backends.device_of(obj)
    if device != "cpu":
        return _encode_array(backends.get(device).to_host(obj), arrays, "array")
    return None


def _parameter_class():
    from ..nn.parameter import Parameter
    return Parameter


def _encode_array(a, arrays, tag):
    if a.dtype == _BFLOAT16:
        a, tag = a.view(np.uint16), "bfloat16"
    if a.dtype.hasobject or a.dtype.kind not in ARRAY_KINDS:
        return None
    name = f"a{len(arrays)}"
    arrays[name] = a
    return [tag, name]


def save(obj, f, pickle_module=pickle, pickle_protocol=2, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False):
    """Write ``obj`` to exactly the path ``f`` (no extension is added), atomically, or into the
    binary file object ``f``. Nested dicts/lists/tuples of Tensors, arrays, numbers, strings and
    None are stored without pickle; anything else (a whole model, an optimizer, a set) is
    pickled with ``pickle_module`` and ``pickle_protocol``, its tensors and arrays stored beside
    the pickle (see ``pickled``). pickle's own errors (a lambda cannot be pickled) pass through,
    before any file is touched. The last two arguments are torch.save's and change nothing."""
    if not files.is_path(f):
        files.check_writable(f)
    arrays, saver = {}, tensors.Saver()
    try:
        root, version = _encode(obj, arrays, saver, "obj"), DATA_VERSION
    except _NeedsPickle:
        root = None
    if root is None:     # (outside the except: pickle's own errors are not shown as raised while handling it)
        arrays, saver = {}, tensors.Saver()
        data, refs = pickled.dump(obj, lambda o: _leaf_node(o, arrays, saver), pickle_module, pickle_protocol)
        name = f"a{len(arrays)}"
        arrays[name] = np.frombuffer(data, dtype=np.uint8)
        root, version = [PICKLE_TAG, name, refs], VERSION
    saver.store(arrays)
    manifest = json.dumps({"format": FORMAT, "version": version, "root": root}, allow_nan=True)
    arrays[MANIFEST_KEY] = np.frombuffer(manifest.encode("utf-8"), dtype=np.uint8)
    if not files.is_path(f):
        _write_npz(f, arrays)
        if callable(getattr(f, "flush", None)):
            f.flush()
        return
    path = os.fspath(f)
    directory = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    temporaries.remove_abandoned(directory, base)   # before writing: frees their space first
    fd, tmp, lock = temporaries.create(directory, base)
    try:
        with os.fdopen(fd, "wb") as f:
            _write_npz(f, arrays)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _file_mode(path))
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    finally:
        temporaries.release(lock)
    _fsync_directory(directory)


def _write_npz(f, arrays):
    usable = hasattr(f, "read") and hasattr(f, "flush")
    np.savez(f if usable else _WriteOnly(f), allow_pickle=False, **arrays)


class _WriteOnly:
    """A bare binary sink as np.savez takes it (it wants a ``read`` attribute to tell a file
    from a path, zipfile a ``flush``); zipfile copes with the rest, seekable or not."""

    def __init__(self, f):
        self._f = f

    def __getattr__(self, name):
        return getattr(self._f, name)

    def read(self, *args):
        raise io.UnsupportedOperation("read")

    def flush(self):
        if callable(getattr(self._f, "flush", None)):
            self._f.flush()


def _file_mode(path):
    """Keep an existing checkpoint's permissions; a new one gets 0o666 minus the umask
    (mkstemp would leave it private, 0o600)."""
    try:
        return os.stat(path).st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _fsync_directory(directory):
    # makes the rename itself durable; not possible (nor needed) on Windows
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# decoding ----------------------------------------------------------------------------------
def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **pickle_load_args):
    """Read a checkpoint written by ``save`` from the path or binary file object ``f``.
    Tensors come back as Tensors (on the CPU, or where ``map_location`` says: see
    ``locations``), Parameters as Parameters, sharing memory as they did when saved; NumPy
    arrays as arrays (as Tensors where a ``map_location`` is given); everything else as it was
    saved. A file that is not a minidl checkpoint (a torch.save file, a bare pickle) or is
    damaged raises CheckpointError, without unpickling.

    ``weights_only`` is torch.load's: None means True, unless a ``pickle_module`` is given. A
    checkpoint without pickle loads either way. One holding a pickled object (see ``pickled``)
    loads with weights_only=True only if every global its pickle names is allowed (else
    ``pickled.WeightsOnlyError``, a pickle.UnpicklingError naming the global and the way to
    allow it); with weights_only=False it is unpickled with ``pickle_module``'s Unpickler
    (pickle's by default), given ``pickle_load_args``: only for files from a trusted source.
    ``mmap`` would need a mapped file and is refused with a ValueError."""
    if weights_only not in (True, False, None):
        raise TypeError(f"md.load: weights_only must be a bool or None, got {type(weights_only).__name__}")
    if pickle_module is not None:
        if weights_only:
            raise RuntimeError("Can not safely load weights when explicit pickle_module is specified")
        if not hasattr(pickle_module, "Unpickler"):
            raise ValueError(f"md.load: pickle_module must be None or a module with an Unpickler (as pickle), got "
                             f"{pickle_module!r}")
    if weights_only is None:
        weights_only = pickle_module is None
    if mmap:
        raise ValueError("md.load: mmap=True is not supported; arrays are read into memory after checking")
    place = locations.resolve(map_location)
    with _open(f) as archive:
        manifest = _read_manifest(archive)
        names, checker = {}, tensors.Checker(archive)
        refs = _check_root(manifest, archive, names, checker)
        arrays = {name: archive.read(name + ".npy") for name in names}
    for name, tag in names.items():
        if tag == "bfloat16" or name in checker.bfloat16:
            arrays[name] = arrays[name].view(_BFLOAT16)
        if tag in ("array", "bfloat16"):
            arrays[name] = place.array(arrays[name])
    builder = tensors.Builder(arrays, place)
    if refs is None:
        return _build(manifest["root"], arrays, builder)
    data = arrays[manifest["root"][1]].tobytes()
    return pickled.load(data, [_build(r, arrays, builder) for r in refs], archive.path, weights_only,
                        pickle_module, pickle_load_args)


def get_unsafe_globals_in_checkpoint(f):
    """The globals (``"module.name"``) the pickle in checkpoint ``f`` names that
    ``md.load(f, weights_only=True)`` would refuse, found without unpickling; [] for a
    checkpoint without pickle."""
    with _open(f) as archive:
        manifest = _read_manifest(archive)
        names = {}
        if _check_root(manifest, archive, names, tensors.Checker(archive)) is None:
            return []
        data = archive.read(manifest["root"][1] + ".npy").tobytes()
    try:
        return pickled.unsafe_globals(data)
    except CheckpointError as exc:
        archive.fail(str(exc))


def _open(f):
    """The checked Archive of the checkpoint ``f`` (a path or a binary file object)."""
    if files.is_path(f):
        path, source = os.fspath(f), None
    else:
        path, source = files.describe(f), files.readable(f)
    archive = Archive(path, source)
    try:
        if MANIFEST_KEY + ".npy" not in archive.members:
            names = list(archive.members)
            shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
            archive.fail(f"not a minidl checkpoint (a zip/.npz without the {MANIFEST_KEY!r} manifest; it holds: "
                         f"{shown or 'nothing'})")
    except BaseException:
        archive.__exit__(None, None, None)
        raise
    return archive


def _check_root(manifest, archive, names, checker):
    """Check the manifest's root (see ``_check``); for a pickled object's root
    ``["pickle", name, refs]`` (version 3), return ``refs``, its tensor and array nodes, after
    checking them and that ``name`` is a 1-d uint8 member (its tag in ``names`` is "pickle");
    None for any other root."""
    root, version = manifest["root"], manifest["version"]
    if version < 3 or not (isinstance(root, list) and root[:1] == [PICKLE_TAG]):
        _check(root, archive, names, 0, checker if version >= 2 else None)
        return None
    if len(root) != 3 or not isinstance(root[1], str) or not isinstance(root[2], list):
        archive.fail(f"its manifest has a malformed pickle entry (expected [\"pickle\", member, refs]): {_show(root)}")
    name, refs = root[1], root[2]
    member = archive.members.get(name + ".npy")
    if name == MANIFEST_KEY or member is None or member.dtype != np.uint8 or len(member.shape) != 1:
        archive.fail(f"its manifest's pickle entry does not name a byte string member: {_show(name)}")
    names[name] = PICKLE_TAG
    for ref in refs:
        if not (isinstance(ref, list) and ref and ref[0] in (tensors.TAG, *_ARRAY_TAGS)):
            archive.fail(f"its manifest's pickle entry refers to something other than a tensor or array: {_show(ref)}")
        _check(ref, archive, names, 1, checker)
    return refs


def _read_manifest(archive):
    member = archive.members[MANIFEST_KEY + ".npy"]
    if member.dtype != np.uint8 or len(member.shape) != 1:
        archive.fail(f"its manifest is not a byte string (dtype {member.dtype}, shape {member.shape})")
    if member.nbytes > MAX_MANIFEST_BYTES:
        archive.fail(f"its manifest is {member.nbytes} bytes, more than the {MAX_MANIFEST_BYTES} a checkpoint's "
                     "manifest may be")
    raw = archive.read(MANIFEST_KEY + ".npy")
    try:
        manifest = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:   # ValueError: bad JSON, or an int of too many digits
        archive.fail(f"its manifest is not valid JSON ({exc})")
    except RecursionError:
        archive.fail(f"its manifest is nested too deeply to parse (a checkpoint nests at most {MAX_DEPTH} levels)")
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or "root" not in manifest:
        archive.fail("its manifest does not describe a minidl checkpoint")
    version = manifest.get("version")
    if type(version) is not int or version < 1:
        archive.fail(f"its manifest has an invalid format version {version!r}")
    if version > VERSION:
        archive.fail(f"checkpoint format version {version} is newer than this minidl understands ({VERSION}); "
                     "upgrade minidl")
    return manifest


_SCALAR_TYPES = {"none": (), "bool": (bool,), "int": (int,), "float": (float, int), "str": (str,)}
_CONTAINERS = ("dict", "list", "tuple")


def _check(node, archive, names, depth, checker):
    """Check a manifest node and everything under it (without reading any array); maps the
    name of each array it refers to to its tag ("array", "bfloat16", "scalar" or "tensor") in
    the dict ``names``. ``checker`` checks tensor nodes (None in a version-1 manifest, which
    has none)."""
    def bad(what):
        archive.fail(f"its manifest {what}: {_show(node)}")

    if not isinstance(node, list) or not node or not isinstance(node[0], str):
        bad("has a malformed entry (a node is a list starting with a tag string)")
    tag = node[0]
    if tag == tensors.TAG and checker is not None:
        checker.check(node, names, bad)
        return
    if tag not in _SCALAR_TYPES and tag not in _CONTAINERS and tag not in _ARRAY_TAGS:
        bad(f"has an unknown manifest entry {tag[:40]!r}")
    if len(node) != (1 if tag == "none" else 2):
        bad(f"has a {tag!r} entry with {len(node) - 1} values instead of {0 if tag == 'none' else 1}")
    if tag in _SCALAR_TYPES:
        if tag != "none" and (type(node[1]) not in _SCALAR_TYPES[tag]):
            bad(f"has a {tag!r} entry holding a {type(node[1]).__name__}")
        return
    if tag in _ARRAY_TAGS:
        name = node[1]
        if not isinstance(name, str) or name == MANIFEST_KEY:
            bad(f"has an {tag!r} entry that does not name an array member")
        member = archive.members.get(name + ".npy")
        if member is None:
            bad(f"is inconsistent with its arrays: it refers to {name!r}, which the file does not hold")
        if name in names:
            bad(f"refers to the array {name!r} twice")
        if tag == "scalar" and member.shape != ():
            bad(f"has a scalar entry whose array {name!r} has shape {member.shape}")
        if tag == "bfloat16" and (member.dtype != np.uint16 or _BFLOAT16 is None):
            bad(f"has a bfloat16 entry whose array {name!r} is not uint16 bits (dtype {member.dtype}), or "
                f"ml_dtypes, which bfloat16 needs, is not installed")
        names[name] = tag
        return
    if depth >= MAX_DEPTH:
        archive.fail(f"its manifest is nested more than {MAX_DEPTH} levels deep")
    if not isinstance(node[1], list):
        bad(f"has a {tag!r} entry whose items are not a list")
    if tag != "dict":
        for child in node[1]:
            _check(child, archive, names, depth + 1, checker)
        return
    keys = set()
    for item in node[1]:
        if not isinstance(item, list) or len(item) != 2:
            bad("has a dict item that is not a [key, value] pair")
        key, value = item
        if not isinstance(key, list) or not key or not isinstance(key[0], str) or key[0] not in _SCALAR_TYPES:
            bad("has a dict key that is not None, a bool, a number or a string")
        _check(key, archive, names, depth + 1, checker)
        k = _build(key, None, None)
        if k in keys:
            bad(f"has the key {k!r} twice in one dict")
        keys.add(k)
        _check(value, archive, names, depth + 1, checker)


def _build(node, arrays, builder):
    """The object a checked node describes (``builder`` makes the tensors)."""
    tag = node[0]
    if tag == "none":
        return None
    if tag == "float":
        return float(node[1])
    if tag in ("bool", "int", "str"):
        return node[1]
    if tag in ("array", "bfloat16"):
        return arrays[node[1]]
    if tag == tensors.TAG:
        return builder.build(node)
    if tag == "scalar":
        return arrays[node[1]][()]
    if tag == "dict":
        return {_build(k, arrays, builder): _build(v, arrays, builder) for k, v in node[1]}
    if tag == "list":
        return [_build(v, arrays, builder) for v in node[1]]
    return tuple(_build(v, arrays, builder) for v in node[1])


_SHOW = reprlib.Repr()
_SHOW.maxlevel, _SHOW.maxlist, _SHOW.maxstring, _SHOW.maxother = 4, 4, 40, 40


def _show(node):
    """A short rendering of a node, however large or deep."""
    return _SHOW.repr(node)
