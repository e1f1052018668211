"""Data types.

A minidl dtype (``md.float32``) is a ``DType``: a small object that prints as PyTorch's do
(``minidl.float32``) and wraps the NumPy dtype its arrays are stored in. It compares equal
to that NumPy dtype, to the NumPy scalar type and to NumPy's name for it (``x.dtype ==
np.float32``, ``x.dtype == "float32"``), hashes like it, and NumPy accepts it wherever it
takes a dtype (``np.zeros(3, md.float32)``, ``a.astype(x.dtype)``), so nothing has to be
translated at the boundary with NumPy. Arrays themselves always carry plain NumPy dtypes;
``to_dtype`` gives that storage dtype, ``wrap`` the DType of a storage dtype.

bfloat16 is stored as ``ml_dtypes.bfloat16`` (NumPy has no such type); it is a storage
format here: tensors hold it and convert to and from it, while the ops compute in the
IEEE types.
"""
import numpy as np

from ..autograd import autocast_state

try:
    import ml_dtypes as _ml_dtypes
except ImportError:          # bfloat16 is then unavailable; everything else works
    _ml_dtypes = None


class DType:
    """One of minidl's dtypes; see the module docstring."""

    __slots__ = ("dtype", "_name", "is_floating_point", "is_signed", "itemsize")

    def __init__(self, name, storage, floating):
        self.dtype = storage                    # NumPy reads this attribute: np.dtype(md.float32)
        self._name = name
        self.is_floating_point = floating
        self.is_signed = floating or storage.kind == "i"
        self.itemsize = storage.itemsize

    @property
    def kind(self):
        """NumPy's kind letter, "f" also for bfloat16 (which NumPy files under "V")."""
        return "f" if self.is_floating_point else self.dtype.kind

    @property
    def name(self):
        return self._name

    @property
    def is_complex(self):
        return False

    def __getattr__(self, attr):               # the rest of NumPy's dtype API (type, char, str...)
        if attr in DType.__slots__:            # a slot not yet set (mid-copy): no recursion
            raise AttributeError(attr)
        return getattr(self.dtype, attr)

    def __eq__(self, other):
        if isinstance(other, DType):
            return other is self
        if other is None or isinstance(other, (bool, int, float)):   # np.dtype(None) would be float64
            return False
        try:
            return self.dtype == np.dtype(other)
        except (TypeError, ValueError):
            return False

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash(self.dtype)

    def __repr__(self):
        return f"minidl.{self._name}"

    __str__ = __repr__

    def __reduce__(self):                      # pickles as the module-level singleton
        return (by_name, (self._name,))

    def to_real(self):
        return self

    def to_complex(self):
        raise NotImplementedError("complex dtypes are not supported by minidl")


def _make(name, storage, floating):
    return DType(name, np.dtype(storage), floating)


float16 = _make("float16", "float16", True)
float32 = _make("float32", "float32", True)
float64 = _make("float64", "float64", True)
int8 = _make("int8", "int8", False)
int16 = _make("int16", "int16", False)
int32 = _make("int32", "int32", False)
int64 = _make("int64", "int64", False)
uint8 = _make("uint8", "uint8", False)
bool_ = _make("bool", "bool", False)
bfloat16 = _make("bfloat16", _ml_dtypes.bfloat16, True) if _ml_dtypes is not None else None

ALL = tuple(d for d in (float16, bfloat16, float32, float64, int8, int16, int32, int64, uint8, bool_)
            if d is not None)
_BY_STORAGE = {d.dtype: d for d in ALL}
_BY_NAME = {d.name: d for d in ALL}

_LOW = tuple(d for d in (float16, bfloat16) if d is not None)   # the 2-byte floating dtypes
SUPPORTED = tuple(d.dtype for d in ALL)          # storage dtypes
FLOATING = tuple(d.dtype for d in ALL if d.is_floating_point)
DEFAULT_FLOAT = float32.dtype                    # storage dtype of md.get_default_dtype()


def by_name(name):
    return _BY_NAME[name]


def wrap(storage):
    """The DType of a NumPy storage dtype (a DType for any dtype NumPy has, so that a
    from_numpy of an unusual array still has one)."""
    d = _BY_STORAGE.get(storage)
    if d is None:
        storage = np.dtype(storage)
        d = _BY_STORAGE.get(storage)
        if d is None:
            d = _BY_STORAGE.setdefault(storage, DType(storage.name, storage, storage.kind == "f"))
    return d


def name_of(dtype):
    """The short name ("float32") of a DType or NumPy dtype, for messages."""
    return dtype.name if isinstance(dtype, DType) else np.dtype(dtype).name


# PyTorch's legacy per-dtype tensor class names, as in "minidl.FloatTensor"
LEGACY_TYPE_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
                     "int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
                     "bool": "Bool"}


def legacy_type_name(dtype):
    """``FloatTensor`` for float32 and so on (the dtype's own name for any other)."""
    name = np.dtype(dtype).name if not hasattr(dtype, "name") else dtype.name
    return f"{LEGACY_TYPE_NAMES.get(name, name)}Tensor"


def to_dtype(dtype):
    """Turn anything NumPy accepts as a dtype (md.float32, "float32", float, np.int64)
    into the NumPy storage dtype of one of minidl's dtypes, or raise a TypeError listing
    the supported ones."""
    if dtype is float:
        return DEFAULT_FLOAT
    if dtype is int:
        return int64.dtype
    if dtype is bool:
        return bool_.dtype
    if isinstance(dtype, DType):
        return dtype.dtype
    if isinstance(dtype, str) and dtype == "bfloat16" and bfloat16 is not None:
        return bfloat16.dtype
    try:   # a big-endian ">f4" is float32 too: arrays are kept in the machine's byte order
        dt = np.dtype(dtype).newbyteorder("=")
    except TypeError:
        dt = None
    # (tested with "is None" first: None in SUPPORTED is True, as np.dtype("float64") == None)
    if dt is None or dt not in SUPPORTED:
        names = ", ".join(d.name for d in ALL)
        raise TypeError(f"unsupported dtype {dtype!r}; minidl supports {names}")
    return dt


def native(array):
    """``array`` in the machine's byte order: itself, or a copy of a big-endian (say) array.
    The compiled kernels and minidl's dtypes know only native storage; a ">f4" array kept as
    it is would report float32 yet match neither md.float32 nor a kernel's signature."""
    return array if array.dtype.isnative else array.astype(array.dtype.newbyteorder("="))


def is_floating(dtype):
    return np.dtype(dtype) in FLOATING


def holds_numbers(dtype, kinds="biufc"):
    """True for a NumPy dtype of numbers: one of NumPy's ``kinds`` or bfloat16 (which NumPy
    files under kind "V", beside structured and raw-bytes dtypes)."""
    dt = np.dtype(dtype)
    return dt.kind in kinds or (bfloat16 is not None and dt == bfloat16.dtype)


def default_dtype_for(array, from_ndarray):
    """The dtype md.tensor picks when none is given, as torch.tensor does: Python floats
    become float32, while an ndarray keeps its own floating dtype (a float64 array stays
    float64); integers become int64 unless an ndarray says otherwise."""
    kind, native_dtype = array.dtype.kind, array.dtype.newbyteorder("=")   # ">f4" is float32 too
    if kind == "f":
        return native_dtype if from_ndarray else DEFAULT_FLOAT
    if kind in "iu":
        return native_dtype if (from_ndarray and native_dtype in SUPPORTED) else int64
    if kind == "b":
        return bool_
    return to_dtype(array.dtype)  # raises for complex, object, strings


def check_floating(op, dtype, what="input"):
    """Raise NotImplementedError unless ``dtype`` is a floating one: the op exists for
    floating types only, as PyTorch's kernels do ("GeluKernelImpl" not implemented for 'Long'),
    where NumPy would silently truncate the result to integers or promote it to float64."""
    if not is_floating(dtype):
        raise NotImplementedError(f"{op}: not implemented for dtype {wrap(np.dtype(dtype))}; expected a floating "
                                  f"point {what}")


class DtypeMismatchError(RuntimeError, TypeError):
    """The operands of one op come in different dtypes. A RuntimeError, as PyTorch raises
    ("expected scalar type Float but found Double", "mixed dtype (CPU)"), and a TypeError,
    since a wrong dtype is a wrong type of operand."""


class DtypeNotImplementedError(NotImplementedError, TypeError):
    """An op has no version for an operand's dtype (bitwise logic on floats, abs of bools). A
    NotImplementedError, as PyTorch raises ('"bitwise_and_cpu" not implemented for 'Float''), and
    a TypeError, since a wrong dtype is a wrong type of operand."""


def _device_type(x):
    """"cpu" or "cuda" for an array or a Tensor (only these two devices exist)."""
    return "cpu" if isinstance(getattr(x, "_data", x), np.ndarray) else "cuda"


def check_same_dtype(op, operands, float16_with_float32=False):
    """Raise DtypeMismatchError unless the operands share the first one's dtype.

    ``operands`` holds (name, array or Tensor or None) pairs, the input first; None (an absent
    bias, say) is skipped. Nothing is promoted silently: a float64 batch through a float32
    layer is an error, as in PyTorch, not a float64 result. ``float16_with_float32`` is the
    norms' exception (PyTorch's too): a float16 or bfloat16 input may come with float32
    parameters, all of them, since the norms accumulate in float32 anyway. Under autocast, the
    operands of an op that autocast brings to one dtype (its rule in minidl/amp/policy.py) pass.
    """
    (first, x), rest = operands[0], [(n, p) for n, p in operands[1:] if p is not None]
    if all(p.dtype == x.dtype for _, p in rest):
        return
    if float16_with_float32 and x.dtype in _LOW and all(p.dtype == float32 for _, p in rest):
        return
    if autocast_state.state.on and autocast_state.casts(op, _device_type(x)):
        return   # autocast casts the operands to one dtype at the op (minidl/amp/policy.py)
    name, p = next((n, p) for n, p in rest if p.dtype != x.dtype)
    also = " (or float32 parameters for a float16 or bfloat16 input)" if float16_with_float32 else ""
    xn, pn = name_of(x.dtype), name_of(p.dtype)
    fix = f"{first}.to(md.{pn})" + (f" or the module's .to(md.{xn})" if x.dtype.kind == "f" else "")
    raise DtypeMismatchError(f"{op}: dtypes differ: {first} is {xn} but {name} is {pn}; expected "
                             f"every operand in the {first}'s dtype{also}, e.g. {fix}")
