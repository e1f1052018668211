"""``assert_close``: PyTorch's comparison of (possibly nested) results, for tests written against
``torch.testing``.

Two inputs are walked together: sequences (not strings) item by item, mappings key by key (the
key sets must agree), and at the leaves None with None, bools with bools, numbers with numbers
and Tensors (or NumPy arrays, read as Tensors) with Tensors. Everything is paired up first, so a
leaf of the wrong type is reported before any value. Two values are close where

    |actual - expected| <= atol + rtol * |expected|

with, unless both are given, the loosest default of the two dtypes:

    float16 (1e-3, 1e-5), bfloat16 (1.6e-2, 1e-5), float32 (1.3e-6, 1e-5), float64 (1e-7, 1e-7),
    complex64 as float32, complex128 as float64; integers and bools (0, 0): exact.

Python floats count as float64, ints as int64. Shape always has to agree; dtype, device and (if
asked) stride too, or else the values are compared after promotion to a common dtype on the CPU.
A failure is an AssertionError in PyTorch's words: how many elements differ, and the greatest
absolute and relative difference with its index.
"""
import cmath
from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["assert_close"]

_PRECISIONS = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
               "float64": (1e-7, 1e-7), "complex64": (1.3e-6, 1e-5), "complex128": (1e-7, 1e-7)}
_PYTHON_NUMBER_DTYPES = {bool: "int64", int: "int64", float: "float64", complex: "complex128"}


class _Failure(Exception):
    """A mismatch found while pairing or comparing: the exception type to raise, its message and
    the path of keys and indices down to the failing item."""

    def __init__(self, kind, message, path):
        super().__init__(message)
        self.kind, self.message, self.path = kind, message, path

    def error(self, msg=None):
        if isinstance(msg, str):
            return self.kind(msg)
        text = self.message
        if self.path:
            text += f"\n\nThe failure occurred for item {''.join(str([p]) for p in self.path)}"
        return self.kind(msg(text) if callable(msg) else text)


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None, equal_nan=False,
                 check_device=True, check_dtype=True, check_layout=True, check_stride=False, msg=None):
    """Raise AssertionError unless ``actual`` and ``expected`` are close (see the module's
    docstring). ``msg`` replaces the message of a value mismatch, or (a callable) rewrites it."""
    __tracebackhide__ = True
    options = dict(allow_subclasses=allow_subclasses, rtol=rtol, atol=atol, equal_nan=equal_nan,
                   check_device=check_device, check_dtype=check_dtype, check_stride=check_stride)
    try:
        comparisons = _pair(actual, expected, (), options)
    except _Failure as failure:
        raise failure.error() from None
    for compare in comparisons:
        try:
            compare()
        except _Failure as failure:
            raise failure.error(msg) from None


def _pair(actual, expected, path, options):
    """The comparisons of every leaf pair, in order; raises _Failure if the structures differ or
    a leaf pair has no comparison."""
    if _is_sequence(actual) and _is_sequence(expected):
        if len(actual) != len(expected):
            raise _Failure(AssertionError, f"The length of the sequences mismatch: {len(actual)} != {len(expected)}",
                           path)
        return [c for i in range(len(actual)) for c in _pair(actual[i], expected[i], (*path, i), options)]
    if isinstance(actual, Mapping) and isinstance(expected, Mapping):
        keys, other = set(actual.keys()), set(expected.keys())
        if keys != other:
            raise _Failure(AssertionError, "The keys of the mappings do not match:\n"
                           f"Missing keys in the actual mapping: {sorted(other - keys)}\n"
                           f"Additional keys in the actual mapping: {sorted(keys - other)}", path)
        try:
            keys = sorted(keys)
        except TypeError:
            keys = list(keys)
        return [c for k in keys for c in _pair(actual[k], expected[k], (*path, k), options)]
    for leaf in (_none_pair, _bool_pair, _number_pair, _tensor_pair):
        compare = leaf(actual, expected, path, options)
        if compare is not None:
            return [compare]
    raise _Failure(TypeError, f"No comparison pair was able to handle inputs of type {type(actual)} and "
                   f"{type(expected)}.", path)


def _is_sequence(value):
    return isinstance(value, Sequence) and not isinstance(value, str)


def _none_pair(actual, expected, path, options):
    if actual is not None and expected is not None:
        return None

    def compare():
        if not (actual is None and expected is None):
            raise _Failure(AssertionError, f"None mismatch: {actual} is not {expected}", path)
    return compare


def _bool_pair(actual, expected, path, options):
    if not all(isinstance(v, (bool, np.bool_)) for v in (actual, expected)):
        return None
    actual, expected = bool(actual), bool(expected)

    def compare():
        if actual is not expected:
            raise _Failure(AssertionError, f"Booleans mismatch: {actual} is not {expected}", path)
    return compare


def _number_pair(actual, expected, path, options):
    kinds = (int, float, complex, np.number)
    if not all(isinstance(v, kinds) for v in (actual, expected)):
        return None
    actual, expected = (v.item() if isinstance(v, np.number) else v for v in (actual, expected))
    rtol, atol = _tolerances([_PYTHON_NUMBER_DTYPES[type(v)] for v in (actual, expected)], options, path)

    def compare():
        if options["check_dtype"] and type(actual) is not type(expected):
            raise _Failure(AssertionError, f"The (d)types do not match: {type(actual)} != {type(expected)}.", path)
        if actual == expected or (options["equal_nan"] and cmath.isnan(actual) and cmath.isnan(expected)):
            return
        difference = abs(actual - expected)
        if cmath.isfinite(difference) and difference <= atol + rtol * abs(expected):
            return
        raise _Failure(AssertionError, _scalar_message(actual, expected, rtol, atol), path)
    return compare


def _tensor_pair(actual, expected, path, options):
    from ..tensor.tensor import Tensor
    if not (isinstance(actual, type(expected)) or isinstance(expected, type(actual))):
        return None
    if not options["allow_subclasses"] and type(actual) is not type(expected):
        return None
    try:
        actual, expected = (v if isinstance(v, Tensor) else _as_tensor(v) for v in (actual, expected))
    except (TypeError, ValueError, RuntimeError):
        return None
    rtol, atol = _tolerances([str(t.dtype).split(".")[-1] for t in (actual, expected)], options, path)

    def compare():
        _compare_tensors(actual, expected, rtol, atol, options, path)
    return compare


def _as_tensor(value):
    from ..tensor import factories
    if isinstance(value, (str, bytes)):
        raise TypeError(f"a {type(value).__name__} is not tensor-like")
    return factories.as_tensor(value)


def _tolerances(dtype_names, options, path):
    rtol, atol = options["rtol"], options["atol"]
    if (rtol is None) != (atol is None):   # one alone could pass by the other: refused
        raise _Failure(ValueError, "Both 'rtol' and 'atol' must be either specified or omitted, "
                       f"but got no {'rtol' if rtol is None else 'atol'}.", path)
    if rtol is not None:
        return rtol, atol
    pairs = [_PRECISIONS.get(name, (0.0, 0.0)) for name in dtype_names]
    return max(r for r, _ in pairs), max(a for _, a in pairs)


def _compare_tensors(actual, expected, rtol, atol, options, path):
    from .._namespace_arrange import promote_types

    def mismatch(attribute, a, e):
        raise _Failure(AssertionError, f"The values for attribute '{attribute}' do not match: {a} != {e}.", path)

    if actual.shape != expected.shape:
        mismatch("shape", actual.shape, expected.shape)
    if options["check_stride"] and actual.stride() != expected.stride():
        mismatch("stride()", actual.stride(), expected.stride())
    if options["check_device"] and actual.device != expected.device:
        mismatch("device", actual.device, expected.device)
    if options["check_dtype"] and actual.dtype != expected.dtype:
        mismatch("dtype", actual.dtype, expected.dtype)
    actual, expected = actual.detach(), expected.detach()
    if actual.device != expected.device:
        actual, expected = actual.cpu(), expected.cpu()
    if actual.dtype != expected.dtype:
        common = promote_types(actual.dtype, expected.dtype)
        actual, expected = actual.to(common), expected.to(common)
    matches = actual.isclose(expected, rtol=rtol, atol=atol, equal_nan=options["equal_nan"])
    if bool(matches.all()):
        return
    if actual.dim() == 0:
        raise _Failure(AssertionError, _scalar_message(actual.item(), expected.item(), rtol, atol), path)
    raise _Failure(AssertionError, _tensor_message(actual, expected, matches, rtol, atol), path)


def _scalar_message(actual, expected, rtol, atol):
    difference = abs(actual - expected)
    relative = float("inf") if expected == 0 else difference / abs(expected)
    return _message("Scalars", f"Expected {expected} but got {actual}.", rtol, atol,
                    (difference, None), (relative, None))


def _tensor_message(actual, expected, matches, rtol, atol):
    """The count of mismatches and, among them only, the greatest absolute and relative
    difference (computed in the compared dtype, integers as int64, as PyTorch) with its index."""
    from ..tensor import dtype as dtypes
    total = matches.numel()
    wrong = total - int(matches.sum())
    a, e, ok = actual.flatten(), expected.flatten(), matches.flatten()
    if not (a.is_floating_point() or a.is_complex()):
        a, e = a.to(dtypes.int64), e.to(dtypes.int64)
    difference = (a - e).abs()
    difference[ok] = 0
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = difference / e.abs()
    relative[ok] = 0
    shape = tuple(matches.shape)
    worst = [(v.item(), tuple(int(i) for i in np.unravel_index(int(k), shape)))
             for v, k in (difference.max(0), relative.max(0))]
    extra = f"Mismatched elements: {wrong} / {total} ({wrong / total:.1%})"
    return _message("Tensor-likes", extra, rtol, atol, *worst)


def _message(identifier, extra, rtol, atol, absolute, relative):
    exact = rtol == 0 and atol == 0
    lines = [f"{identifier} are not {'equal' if exact else 'close'}!", "", extra]
    for name, (value, index), tol in (("absolute", absolute, atol), ("relative", relative, rtol)):
        line = f"{name.title()} difference: {value}" if index is None else \
            f"Greatest {name} difference: {value} at index {index}"
        lines.append(line if exact else f"{line} (up to {tol} allowed)")
    return "\n".join(lines)
