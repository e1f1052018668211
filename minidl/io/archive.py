"""Reading a checkpoint's .npz (zip) archive without trusting a byte of it.

A zip's directory declares each member's compressed and uncompressed size, and each .npy
member's header declares a dtype and shape; a forged or damaged file can lie in all of
them, and a zip bomb declares, or inflates to, far more than the file holds. So before any
array data is read:

- the members' compressed sizes together must fit in the file (members that overlap, the
  other way to make a small file inflate to a large one, do not);
- a stored (uncompressed) member's two sizes must agree, and all members together may
  declare at most ``MAX_COMPRESSION_RATIO`` times the file's size uncompressed, plus
  ``SMALL_INFLATE_ALLOWANCE`` so that small, very compressible archives still load
  (an array of zeros deflates about 1000:1; md.save itself never compresses);
- only stored and deflated members are read (zipfile's bzip2 and lzma readers do not
  bound their output), and no encrypted ones;
- each .npy header, read with bounded reads, must declare a dtype that needs no pickle and
  a shape whose byte count is exactly the member's declared size.

Array data is then read in bounded chunks into an array allocated for the declared size.
zipfile never hands out more than a member's declared size, and data that ends early or
fails its CRC is reported as corrupt, so however the file lies, memory use is bounded by
the declared sizes, which are bounded by the file's size. Every failure is a
``CheckpointError`` naming the file and what is wrong.
"""
import io
import math
import os
import struct
import zipfile
import zlib

import numpy as np

from .errors import CheckpointError

MAX_COMPRESSION_RATIO = 100          # declared uncompressed bytes per byte of file, all members together
SMALL_INFLATE_ALLOWANCE = 64 << 20   # bytes any archive may inflate to, whatever its ratio
MAX_NPY_HEADER = 10000               # numpy's own limit on a .npy header it parses safely
MAX_NDIM = 64                        # numpy's limit on dimensions
ARRAY_KINDS = "biufcUS"              # bool, ints, floats, complex, fixed-width strings: none need pickle
_CHUNK = 4 << 20
_NPY_MAGIC = b"\x93NUMPY"
_HEADER_LENGTH = {(1, 0): "<H", (2, 0): "<I"}
# what zipfile and zlib raise on damaged data (RuntimeError: an encrypted member)
_DAMAGE = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError, ValueError, struct.error,
           NotImplementedError, RuntimeError, OverflowError, UnicodeDecodeError)


class Member:
    """One checked .npy member: where its data starts and what it declares."""
    __slots__ = ("info", "shape", "fortran_order", "dtype", "data_offset", "nbytes")

    def __init__(self, info, shape, fortran_order, dtype, data_offset, nbytes):
        self.info, self.shape, self.fortran_order, self.dtype = info, shape, fortran_order, dtype
        self.data_offset, self.nbytes = data_offset, nbytes


class Archive:
    """An open, checked .npz: ``members`` maps each member's name to its ``Member``;
    ``read(name)`` returns its array. Use as a context manager."""

    def __init__(self, path, fileobj=None):
        """Open ``path``, or read ``fileobj`` (a seekable binary file positioned at the archive's
        first byte, left open) and name it ``path`` in messages."""
        self.path = path
        self._owned = fileobj is None
        f = open(path, "rb") if fileobj is None else fileobj   # FileNotFoundError etc. pass through
        try:
            head = f.read(8)
            if not isinstance(head, bytes):
                raise TypeError(f"md.load: expected a binary file whose read() returns bytes, got "
                                f"{type(head).__name__} from {path!r}")
            size = f.seek(0, os.SEEK_END)
            if not head:
                self.fail("the file is empty (0 bytes)")
            if not head.startswith(b"PK"):
                self.fail(f"{_describe_foreign(head)}; a minidl checkpoint is a .npz (zip) archive written by "
                          "md.save. Nothing was unpickled.")
            f.seek(0)
            try:
                self._zf = zipfile.ZipFile(f)
            except _DAMAGE as exc:
                self.fail(f"the file is truncated or corrupt (not a complete zip archive: {exc})")
            self._file = f
            infos = self._check_directory(size)
            self.members = {info.filename: self._check_header(info) for info in infos}
        except BaseException:
            if self._owned:
                f.close()
            raise

    def fail(self, what):
        raise CheckpointError(f"cannot load {self.path!r}: {what}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._zf.close()
        if self._owned:
            self._file.close()

    # checks ------------------------------------------------------------------------
    def _check_directory(self, size):
        infos = self._zf.infolist()
        seen = set()
        for info in infos:
            name = info.filename
            if name in seen:
                self.fail(f"the archive holds two members named {name!r} (a forged or corrupt file)")
            seen.add(name)
            if name.endswith(".pkl") or name.endswith("/data.pkl"):
                self.fail(f"member {name!r} is a pickle (the file looks like a torch.save archive); refused, "
                          "since unpickling can run arbitrary code")
            if not name.endswith(".npy"):
                self.fail(f"not a minidl checkpoint (unexpected member {name!r})")
            if info.flag_bits & 0x1:
                self.fail(f"member {name!r} is encrypted")
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                self.fail(f"member {name!r} uses zip compression method {info.compress_type}; only stored and "
                          "deflated members are read")
            if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
                self.fail(f"member {name!r} is stored uncompressed but declares {info.compress_size} bytes in "
                          f"the file and {info.file_size} bytes of data (a forged or corrupt header)")
            if info.header_offset + info.compress_size > size:
                self.fail(f"the file is truncated or corrupt (member {name!r} declares {info.compress_size} "
                          f"bytes at offset {info.header_offset}, past the end of the {size}-byte file)")
        packed = sum(info.compress_size for info in infos)
        if packed > size:
            self.fail(f"its members declare {packed} compressed bytes, more than the whole file's {size} bytes "
                      "(overlapping or forged members, as in a zip bomb); refused")
        unpacked = sum(info.file_size for info in infos)
        allowed = size * MAX_COMPRESSION_RATIO + SMALL_INFLATE_ALLOWANCE
        if unpacked > allowed:
            self.fail(f"its members would inflate to {unpacked} bytes from a {size}-byte file (a compression "
                      f"ratio of {unpacked / size:.0f}:1; at most {MAX_COMPRESSION_RATIO}:1 beyond "
                      f"{SMALL_INFLATE_ALLOWANCE >> 20} MiB is accepted); refused as a possible zip bomb")
        return infos

    def _check_header(self, info):
        """Parse the member's .npy header, reading nothing past it."""
        name = info.filename
        try:
            with self._zf.open(info) as f:
                magic = _read_exact(f, 8)
                version = (magic[6], magic[7]) if len(magic) == 8 else None
                if not magic.startswith(_NPY_MAGIC) or version not in _HEADER_LENGTH:
                    self.fail(f"member {name!r} is not a .npy array of a version this reader knows "
                              f"(it starts {magic!r})")
                fmt = _HEADER_LENGTH[version]
                length_bytes = _read_exact(f, struct.calcsize(fmt))
                if len(length_bytes) != struct.calcsize(fmt):
                    self.fail(f"member {name!r} ends inside its .npy header")
                (length,) = struct.unpack(fmt, length_bytes)
                if length > MAX_NPY_HEADER:
                    self.fail(f"member {name!r} declares a .npy header of {length} bytes (at most "
                              f"{MAX_NPY_HEADER} are read)")
                header = _read_exact(f, length)
                if len(header) != length:
                    self.fail(f"member {name!r} ends inside its .npy header")
        except _DAMAGE as exc:
            if isinstance(exc, CheckpointError):
                raise
            self.fail(f"the file is truncated or corrupt (member {name!r}: {exc})")
        parse = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        try:
            shape, fortran_order, dtype = parse(io.BytesIO(length_bytes + header), max_header_size=MAX_NPY_HEADER)
        except Exception as exc:   # any failure to parse an untrusted header string is a bad header
            self.fail(f"member {name!r} is not a valid .npy array ({type(exc).__name__}: {exc})")
        if dtype.hasobject:
            self.fail(f"member {name!r} holds pickled Python objects (dtype {dtype}); refused, since unpickling "
                      "can run arbitrary code")
        if dtype.kind not in ARRAY_KINDS or dtype.itemsize == 0 or dtype.subdtype is not None:
            self.fail(f"member {name!r} has dtype {dtype}, which a checkpoint does not hold (numbers, bools and "
                      "fixed-width strings only)")
        if len(shape) > MAX_NDIM or any(d < 0 for d in shape):
            self.fail(f"member {name!r} declares an invalid shape {shape}")
        nbytes = math.prod(shape) * dtype.itemsize
        data_offset = len(magic) + len(length_bytes) + length
        if data_offset + nbytes != info.file_size:
            self.fail(f"member {name!r} declares shape {shape} of {dtype} ({nbytes} bytes) but holds "
                      f"{info.file_size - data_offset} bytes of data (a forged or corrupt member)")
        return Member(info, shape, fortran_order, dtype, data_offset, nbytes)

    # reading -----------------------------------------------------------------------
    def read(self, name):
        """The member's array, read in bounded chunks into memory of its declared size."""
        m = self.members[name]
        data = np.empty(m.nbytes, dtype=np.uint8)
        try:
            with self._zf.open(m.info) as f:
                _read_exact(f, m.data_offset)
                pos = 0
                while pos < m.nbytes:
                    chunk = f.read(min(_CHUNK, m.nbytes - pos))
                    if not chunk:
                        self.fail(f"the file is truncated or corrupt (member {name!r} ends after {pos} of its "
                                  f"{m.nbytes} bytes)")
                    data[pos:pos + len(chunk)] = np.frombuffer(chunk, dtype=np.uint8)
                    pos += len(chunk)
        except _DAMAGE as exc:
            if isinstance(exc, CheckpointError):
                raise
            self.fail(f"the file is truncated or corrupt (member {name!r}: {exc})")
        values = data.view(m.dtype)
        if m.fortran_order:
            return values.reshape(m.shape[::-1]).transpose()
        return values.reshape(m.shape)


def _read_exact(f, n):
    """Up to n bytes (fewer only at the end of the member)."""
    parts, left = [], n
    while left > 0:
        part = f.read(left)
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _describe_foreign(head):
    if head.startswith(b"\x80") or head[:1] in (b"(", b"]", b"}"):
        return "it is a pickle file (such as torch.save or pickle.dump write), which is refused"
    if head.startswith(b"\x93NUMPY"):
        return "it is a single .npy array, not a checkpoint archive"
    if head.startswith(b"\x89HDF"):
        return "it is an HDF5 file"
    return f"it does not start like a zip archive (first bytes {head!r})"
