"""What ``md.save`` / ``md.load`` take as ``f``, as torch.save / torch.load: a path (str or
os.PathLike) or a binary file object. Checked before anything is read or written, so a
text-mode, closed or unusable file is a clear TypeError/ValueError, never a half-written file."""
import io
import os

_PATH_TYPES = (str, bytes, os.PathLike)


def is_path(f):
    return isinstance(f, _PATH_TYPES)


def describe(f):
    """How error messages name ``f``: its path, or the file object's name, or its type."""
    if is_path(f):
        return os.fsdecode(os.fspath(f))
    name = getattr(f, "name", None)
    return name if isinstance(name, str) else f"<{type(f).__name__}>"


def _check_open_binary(f, fn, method):
    if not callable(getattr(f, method, None)):
        raise TypeError(f"{fn}: f must be a path (str or os.PathLike) or a binary file object with a "
                        f"{method}() method, got {type(f).__name__}")
    if getattr(f, "closed", False):
        raise ValueError(f"{fn}: the file object {describe(f)!r} is closed; expected an open binary file")
    if isinstance(f, io.TextIOBase):
        raise TypeError(f"{fn}: expected a file opened in binary mode ('{method[0]}b'), got a text-mode "
                        f"{type(f).__name__}; a checkpoint is bytes")
    able = getattr(f, "readable" if method == "read" else "writable", None)
    if callable(able) and not able():
        raise ValueError(f"{fn}: the file object {describe(f)!r} is not open for "
                         f"{'reading' if method == 'read' else 'writing'}")


def check_writable(f):
    """``f`` checked as a save target: a binary file object open for writing."""
    _check_open_binary(f, "md.save", "write")
    return f


def readable(f):
    """A seekable binary file positioned at the checkpoint's first byte, for md.load: ``f``
    itself when it is seekable and at its start; otherwise what is left of it, read into
    memory (zip's directory is at the end, so a stream must be read whole; the archive's size
    checks then bound everything by the bytes actually read)."""
    _check_open_binary(f, "md.load", "read")
    try:
        if f.seekable() and f.tell() == 0:
            return f
    except (AttributeError, OSError):
        pass
    data = f.read()
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"md.load: expected a binary file object whose read() returns bytes, got one returning "
                        f"{type(data).__name__}")
    return io.BytesIO(data)
