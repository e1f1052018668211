"""How a tensor prints: ``repr(t)``, ``str(t)`` and ``print(t)`` give, character for character,
what PyTorch gives for the same values (minidl's dtype and grad_fn names aside), under the
options that ``md.set_printoptions`` sets.

The rules, in the order they are applied:

Summarising. A tensor with more than ``threshold`` elements (1000) is summarised: along every
dim longer than ``2 * edgeitems`` only the first and last ``edgeitems`` (3) entries are shown,
with ``...`` between them (``" ..."`` among the numbers of a row, a line ``...`` between
sub-tensors). With ``edgeitems=0`` a summarised tensor prints as ``[...]``, and its shape is
given as a ``size=`` suffix (which ``edgeitems=0`` adds even when nothing is summarised).

One format for all elements. The elements that will be shown choose a single format, and every
element is right-aligned to the widest string that format gives:

- integers print as Python prints them, bools as ``True`` / ``False``;
- floating values look only at their nonzero finite values (nan, inf and zeros never decide).
  When there are none, or all of them are whole numbers, the tensor is in *integer mode*:
  ``1.``, ``-0.``, ``nan`` (no point after nan or inf);
- otherwise, and also for whole numbers, *scientific mode* is chosen when the largest magnitude
  is more than 1000 times the smallest, above 1e8, or the smallest is below 1e-4 (``sci_mode``
  True or False overrides that choice; it has no effect when there are no nonzero finite
  values). Scientific mode writes ``precision`` digits after the point of the mantissa
  (``1.0000e-05``); fixed mode writes ``precision`` decimals (``0.1440``);
- the width is measured on the nonzero finite values only (a point added to each in integer
  mode), so a nan or an inf is padded to it, or sticks out when it is wider.

float16, bfloat16 and float32 values are formatted exactly as their float64 values (Python's
``format`` of the same number), so what prints is the stored value, rounded only by the format.

Layout. The text starts with ``tensor(`` (7 characters: the indent). A 1-D row holds
``floor((linewidth - indent) / (width + 2))`` elements per line (at least one), each element
taking its width plus ``", "``; continuation lines are indented by one more than the row's
``[``. Sub-tensors of a k-dim tensor are separated by ``,`` and k-1 newlines, and indented by
one column per nesting level. A 0-d tensor prints as its single formatted element, an empty
one as ``[]``.

Suffixes, in order: ``device='cuda:0'`` off the CPU; for an empty tensor ``size=(...)`` unless
it is 1-D and ``dtype=`` unless it is the default float dtype; otherwise ``dtype=`` unless it is
the default float dtype, int64 or bool; then ``grad_fn=<...>`` or ``requires_grad=True``. Each
suffix goes after ``", "`` on the last line, or on a new line indented by 7 when that line would
pass ``linewidth`` (measured as PyTorch measures it, two characters longer than it is).

Values on a device other than the CPU are printed from a host copy.
"""
import math
import numbers

import numpy as np

from . import dtype as dtypes

# md.set_printoptions writes these; the defaults are PyTorch's
PRINT_OPTIONS = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80, "sci_mode": None}
_PROFILES = {"default": (4, 1000, 3, 80), "short": (2, 1000, 2, 80), "full": (4, math.inf, 3, 80)}
_PREFIX = "tensor("


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None):
    """How tensors print, as torch.set_printoptions: ``precision`` digits after the point (4),
    more than ``threshold`` elements (1000) summarized by the first and last ``edgeitems`` (3)
    of each dim, lines of at most ``linewidth`` characters (80); ``profile`` ("default",
    "short" or "full") sets those four first; ``sci_mode`` True or False forces scientific
    notation on or off, None (as every call that does not give it) lets the values decide."""
    if profile in _PROFILES:
        keys = ("precision", "threshold", "edgeitems", "linewidth")
        PRINT_OPTIONS.update(zip(keys, _PROFILES[profile]))
    for name, value in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                        ("linewidth", linewidth)):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or value < 0:
                raise TypeError(f"set_printoptions(): {name} must be a non-negative number, got {value!r}")
            PRINT_OPTIONS[name] = value
    PRINT_OPTIONS["sci_mode"] = sci_mode


class _ElementFormat:
    """The one format every shown element of a tensor is written in (see the module docstring)."""

    def __init__(self, values, floating, precision, sci_mode):
        self.floating, self.precision = floating, precision
        self.int_mode, self.sci_mode, self.width = True, False, 1
        if values.size == 0:
            return
        if not floating:
            extremes = [values.min(), values.max()]
            self.width = max(len(str(v)) for v in np.asarray(extremes).tolist())
            return
        finite = values[np.isfinite(values) & (values != 0)]
        if finite.size == 0:
            return
        magnitude = np.abs(finite)
        smallest, largest = float(magnitude.min()), float(magnitude.max())
        self.int_mode = bool(np.all(finite == np.ceil(finite)))
        self.sci_mode = (largest / smallest > 1000.0 or largest > 1.0e8 or smallest < 1.0e-4
                         if sci_mode is None else bool(sci_mode))
        # a format's length grows with the magnitude (the exponent's digits aside, which the
        # smallest magnitude covers), one more with a sign: the extremes of each sign decide it
        candidates = []
        for part in (finite[finite > 0], finite[finite < 0]):
            if part.size:
                candidates += [float(part.min()), float(part.max())]
        if self.sci_mode:
            self.width = max(len(f"{v:.{precision}e}") for v in candidates)
        elif self.int_mode:
            self.width = max(len(f"{v:.0f}") + 1 for v in candidates)
        else:
            self.width = max(len(f"{v:.{precision}f}") for v in candidates)

    def __call__(self, value):
        if not self.floating:
            text = str(value)
        elif self.sci_mode:
            text = f"{value:{self.width}.{self.precision}e}"
        elif self.int_mode:
            text = f"{value:.0f}" + ("" if math.isinf(value) or math.isnan(value) else ".")
        else:
            text = f"{value:.{self.precision}f}"
        return text.rjust(self.width)


def _shown(values, edgeitems):
    """The elements a summarised tensor shows: the first and last ``edgeitems`` of every dim
    longer than twice that."""
    for d, n in enumerate(values.shape):
        if n > 2 * edgeitems:
            keep = np.r_[0:edgeitems, n - edgeitems:n]
            values = np.take(values, keep, axis=d)
    return values


def _layout(texts, width, cut, edgeitems, linewidth, indent):
    """The nested-bracket text of ``texts`` (an object array of elements formatted to ``width``,
    which a nan may pass); ``cut[d]`` says whether dim d was summarised (its ``...`` goes after
    the first ``edgeitems``)."""
    if texts.ndim == 1:
        items = texts.tolist()
        if cut[0]:
            items = items[:edgeitems] + [" ..."] + items[edgeitems:]
        per_line = max(1, math.floor((linewidth - indent) / (width + 2)))
        lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
    parts = [_layout(sub, width, cut[1:], edgeitems, linewidth, indent + 1) for sub in texts]
    if cut[0]:
        parts = parts[:edgeitems] + ["..."] + parts[edgeitems:]
    return "[" + ("," + "\n" * (texts.ndim - 1) + " " * (indent + 1)).join(parts) + "]"


def _as_float64(values):
    """Floating values as float64, exactly their stored values (bfloat16 goes through float32)."""
    if values.dtype.kind != "f":
        values = values.astype(np.float32)
    return values.astype(np.float64)


def format_body(t, indent=len(_PREFIX)):
    """The values' part of the text: ``[...]`` brackets, or one element for a 0-d tensor."""
    opts = PRINT_OPTIONS
    precision, edgeitems = int(opts["precision"]), int(opts["edgeitems"])
    values = np.asarray(t.numpy(force=True))           # a host copy off the CPU
    if values.size == 0:
        return "[]"
    summarize = values.size > opts["threshold"]
    if summarize and values.ndim and not edgeitems:
        return "[...]"
    shown = _shown(values, edgeitems) if summarize else values
    floating = t.dtype.is_floating_point
    if floating:
        shown = _as_float64(shown)
    element = _ElementFormat(shown, floating, precision, opts["sci_mode"])
    texts = np.empty(shown.size, dtype=object)
    texts[:] = [element(v) for v in shown.ravel().tolist()]
    if values.ndim == 0:
        return texts[0]
    cut = [summarize and n > 2 * edgeitems for n in values.shape]
    return _layout(texts.reshape(shown.shape), element.width, cut, edgeitems, opts["linewidth"], indent)


def _with_suffixes(text, suffixes, indent):
    """``text`` + each suffix after ", ", or on a new line when the last line would pass the
    line width (whose length is counted two more than it is, as PyTorch counts it)."""
    linewidth = PRINT_OPTIONS["linewidth"]
    last_line = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if last_line + len(suffix) + 2 > linewidth:
            text += ",\n" + " " * indent + suffix
            last_line = indent + len(suffix)
        else:
            text += ", " + suffix
            last_line += len(suffix) + 2
    return text + ")"


def tensor_repr(t):
    """``tensor([...], <suffixes>)`` for a Tensor ``t``, as PyTorch writes it."""
    suffixes = []
    if t.device.type != "cpu":
        suffixes.append(f"device='{t.device}'")
    shape = tuple(int(n) for n in t.shape)
    default_float = dtypes.wrap(dtypes.DEFAULT_FLOAT)
    if t.numel() == 0:
        if len(shape) != 1:
            suffixes.append(f"size={shape}")
        if t.dtype != default_float:
            suffixes.append(f"dtype={t.dtype}")
    else:
        if not int(PRINT_OPTIONS["edgeitems"]):
            suffixes.append(f"size={shape}")
        if t.dtype not in (default_float, dtypes.int64, dtypes.bool_):
            suffixes.append(f"dtype={t.dtype}")
    grad_fn = t.grad_fn
    if grad_fn is not None:
        suffixes.append(f"grad_fn=<{grad_fn.name()}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return _with_suffixes(_PREFIX + format_body(t), suffixes, len(_PREFIX))
