"""Checkpoints: ``md.save(obj, path)`` / ``md.load(path)``, safe to load and atomic to write.

Format: an ordinary .npz (a zip of .npy files) that holds no pickle.
- every array (a Tensor is saved as its NumPy values) is a member ``a0``, ``a1``, ...;
- the structure around them (dicts, lists, tuples, ints of any size, floats, bools,
  strings, None) is a JSON *manifest*, stored as a uint8 array under ``__minidl__``:
  ``{"format": "minidl-checkpoint", "version": 1, "root": node}`` where a node is a
  tagged list such as ``["dict", [[key_node, value_node], ...]]``, ``["array", "a0"]``
  or ``["int", 3]``, so int dict keys (optimizer state) and tuples come back as they were.

Saving writes a temporary file in the target's directory, flushes and fsyncs it, then
``os.replace``s it over ``path`` (atomic on POSIX and Windows) and fsyncs the directory:
a crash or error at any moment leaves either the old checkpoint or the new one, never a
mix. Everything is validated before the file is opened, and the temporary file is removed
on failure.

Loading never unpickles: it checks the file is a zip, reads the manifest, refuses a member
whose dtype would need pickle (object arrays) by reading the .npy headers only, and loads
the arrays with ``allow_pickle=False``. A truncated, foreign or pickle-bearing file raises
``CheckpointError`` naming the file and what is wrong with it.
"""
import json
import os
import tempfile
import zipfile

import numpy as np

from ..tensor.tensor import Tensor

MANIFEST_KEY = "__minidl__"
FORMAT = "minidl-checkpoint"
VERSION = 1
_ARRAY_KINDS = "biufcUS"   # bool, ints, floats, complex, fixed-width strings: none need pickle


class CheckpointError(ValueError):
    """A file that is not a readable minidl checkpoint."""


# encoding ----------------------------------------------------------------------------------
def _encode(obj, arrays, where):
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
        return _encode_array(obj.numpy(), arrays, where, "array")
    if isinstance(obj, np.ndarray):
        return _encode_array(obj, arrays, where, "array")
    if isinstance(obj, np.generic):
        return _encode_array(np.asarray(obj), arrays, where, "scalar")
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if isinstance(k, (np.integer, np.floating, np.bool_)):
                k = k.item()
            if not isinstance(k, (str, int, float, bool)) and k is not None:
                raise TypeError(f"md.save: {where} has a key {k!r} of type {type(k).__name__}; "
                                "keys must be str, int, float, bool or None")
            items.append([_encode(k, arrays, where), _encode(v, arrays, f"{where}[{k!r}]")])
        return ["dict", items]
    if isinstance(obj, (list, tuple)):
        tag = "list" if isinstance(obj, list) else "tuple"
        return [tag, [_encode(v, arrays, f"{where}[{i}]") for i, v in enumerate(obj)]]
    raise TypeError(f"md.save: cannot save {where} of type {type(obj).__name__}; a checkpoint holds dicts, "
                    "lists, tuples, Tensors, arrays, numbers, strings and None")


def _encode_array(a, arrays, where, tag):
    if a.dtype.hasobject or a.dtype.kind not in _ARRAY_KINDS:
        raise TypeError(f"md.save: {where} is an array of dtype {a.dtype}, which cannot be stored without "
                        "pickle; use a numeric, bool or string dtype")
    name = f"a{len(arrays)}"
    arrays[name] = a
    return [tag, name]


def save(obj, path):
    """Write ``obj`` (nested dicts/lists/tuples of Tensors, arrays, numbers, strings, None)
    to exactly ``path`` (no extension is added), atomically."""
    path = os.fspath(path)
    arrays = {}
    root = _encode(obj, arrays, "obj")
    manifest = json.dumps({"format": FORMAT, "version": VERSION, "root": root}, allow_nan=True)
    arrays[MANIFEST_KEY] = np.frombuffer(manifest.encode("utf-8"), dtype=np.uint8)

    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, allow_pickle=False, **arrays)
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
    _fsync_directory(directory)


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
def load(path):
    """Read a checkpoint written by ``save``; Tensors come back as np.ndarrays, everything
    else as it was saved. Raises CheckpointError for anything else, without unpickling."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        head = f.read(8)
    if not head:
        raise CheckpointError(f"cannot load {path!r}: the file is empty (0 bytes)")
    if not head.startswith(b"PK"):
        raise CheckpointError(f"cannot load {path!r}: {_describe_foreign(head)}; a minidl checkpoint is a .npz "
                              "(zip) archive written by md.save. Nothing was unpickled.")
    try:
        with zipfile.ZipFile(path) as zf:
            members = zf.namelist()
            _refuse_pickled_members(path, zf, members)
    except zipfile.BadZipFile as exc:
        raise CheckpointError(f"cannot load {path!r}: the file is truncated or corrupt "
                              f"(not a complete zip archive: {exc})") from None
    if MANIFEST_KEY + ".npy" not in members:
        shown = ", ".join(m for m in members[:8]) + (", ..." if len(members) > 8 else "")
        raise CheckpointError(f"cannot load {path!r}: not a minidl checkpoint (a zip/.npz without the "
                              f"{MANIFEST_KEY!r} manifest; it holds: {shown or 'nothing'})")
    try:
        with np.load(path, allow_pickle=False) as npz:
            manifest = _read_manifest(path, npz)
            return _decode(manifest["root"], npz, path)
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(f"cannot load {path!r}: the file is truncated or corrupt ({exc})") from None


def _describe_foreign(head):
    if head.startswith(b"\x80") or head[:1] in (b"(", b"]", b"}"):
        return "it is a pickle file (such as torch.save or pickle.dump write), which is refused"
    if head.startswith(b"\x93NUMPY"):
        return "it is a single .npy array, not a checkpoint archive"
    if head.startswith(b"\x89HDF"):
        return "it is an HDF5 file"
    return f"it does not start like a zip archive (first bytes {head!r})"


def _refuse_pickled_members(path, zf, members):
    """Read each .npy member's header (not its data): a dtype with Python objects means the
    member is a pickle, and the whole file is refused."""
    for name in members:
        if name.endswith(".pkl") or name.endswith("/data.pkl"):
            raise CheckpointError(f"cannot load {path!r}: member {name!r} is a pickle (the file looks like a "
                                  "torch.save archive); refused, since unpickling can run arbitrary code")
        if not name.endswith(".npy"):
            raise CheckpointError(f"cannot load {path!r}: not a minidl checkpoint (unexpected member {name!r})")
        with zf.open(name) as f:
            try:
                version = np.lib.format.read_magic(f)
                if version == (1, 0):
                    _, _, dtype = np.lib.format.read_array_header_1_0(f)
                else:
                    _, _, dtype = np.lib.format.read_array_header_2_0(f)
            except (ValueError, EOFError) as exc:
                raise CheckpointError(f"cannot load {path!r}: member {name!r} is not a valid .npy array ({exc})") \
                    from None
        if dtype.hasobject:
            raise CheckpointError(f"cannot load {path!r}: member {name!r} holds pickled Python objects "
                                  f"(dtype {dtype}); refused, since unpickling can run arbitrary code")


def _read_manifest(path, npz):
    raw = npz[MANIFEST_KEY]
    try:
        manifest = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"cannot load {path!r}: its manifest is not valid JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or "root" not in manifest:
        raise CheckpointError(f"cannot load {path!r}: its manifest does not describe a minidl checkpoint")
    if manifest.get("version", 0) > VERSION:
        raise CheckpointError(f"cannot load {path!r}: checkpoint format version {manifest['version']} is newer "
                              f"than this minidl understands ({VERSION}); upgrade minidl")
    return manifest


def _decode(node, npz, path):
    try:
        tag = node[0]
        if tag == "none":
            return None
        if tag in ("bool", "int", "float", "str"):
            return node[1]
        if tag == "array":
            return npz[node[1]]
        if tag == "scalar":
            return npz[node[1]][()]
        if tag == "dict":
            return {_decode(k, npz, path): _decode(v, npz, path) for k, v in node[1]}
        if tag == "list":
            return [_decode(v, npz, path) for v in node[1]]
        if tag == "tuple":
            return tuple(_decode(v, npz, path) for v in node[1])
    except (KeyError, IndexError, TypeError) as exc:
        raise CheckpointError(f"cannot load {path!r}: its manifest is inconsistent with its arrays ({exc!r})") \
            from None
    raise CheckpointError(f"cannot load {path!r}: unknown manifest entry {str(node)[:80]}")
