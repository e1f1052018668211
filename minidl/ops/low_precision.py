"""float16 and bfloat16 ops computed in float32 and rounded once, as a GPU computes them.

A GPU multiplies low-precision matrices on tensor cores: the float16/bfloat16 inputs are
multiplied exactly, the products summed in float32, and the result rounded to the low dtype
once; its softmax, GELU and loss kernels likewise load 2-byte values and compute in float32.
The ops decorated with ``float32_compute`` (linear, matmul, addmm, einsum, conv,
conv_transpose, attention, bilinear, adaptive average pooling, softmax, log_softmax, GELU,
cross-entropy) do the same on every device: when an input array is
float16 or bfloat16, forward runs on float32 copies of the inputs (exact: every low-precision
value is a float32 value) and rounds its floating outputs to the low dtype; backward likewise
runs in float32 on float32 copies of what forward saved and rounds each input's gradient to that
input's dtype. On the CPU the float32 work is BLAS (and the float32 Numba kernels), so a
float16 GEMM is as fast as a float32 one instead of going through NumPy's slow non-BLAS float16
loops (and bfloat16, which NumPy's matmul returns as float32, keeps its dtype), and a softmax's
sum or a GELU is not rounded after every NumPy step. Every product of two float16 (11-bit) or
bfloat16 (8-bit) significands is exact in float32's 24 bits, so the result equals
"float32-accumulated products of the low-precision inputs" up to the order of summation.

What forward saves for backward (in ``save_for_backward`` or as ``ctx`` attributes) is kept as a
GPU framework keeps it, 2 bytes an element where that is what the GPU keeps:

- an input's float32 copy is swapped back for the input it was made from, and a view of the
  copy (a reshape, a slice) for the same view of the input: exact, no extra memory, and an
  in-place write to the input is still detected;
- the op's own output (softmax and log_softmax save it) is swapped for the rounded output the op
  returns: what the GPU's kernel saves, and the output's in-place writes are detected too;
- an array forward derives is rounded to the low dtype when the op declares it with
  ``keep_low(ctx, *arrays)``: one that is exact there (conv's unfolded columns are copies of the
  rounded input) or one the GPU keeps rounded (attention's probabilities: PyTorch's math attention
  under autocast computes softmax and dropout in the low dtype; LinearGelu's GEMM result, which
  the unfused Linear would return rounded);
- everything else stays float32: statistics (attention's row log-sum-exp), dropout multipliers
  (1/(1-p) is not exact in a low dtype), sums that are not exact (conv's Winograd transform V,
  which conv rebuilds in backward instead: ``narrows_saves``).

Backward widens the low arrays to float32 copies for the op's float32 code and puts the low ones
back when it is done, so a graph kept with ``retain_graph`` stays 2-byte. A rounded saved array
costs backward one rounding of relative size 2**-11 (float16) or 2**-8 (bfloat16) per element:
the gradients move by a few low-precision ulps of their scale, the same order as the rounding of
the gradient itself (tests/test_low_precision_saves.py holds them to that). ``NARROW_SAVES = False``
keeps the derived arrays and outputs in float32 (the inputs are swapped back either way).
Each call converts its inputs once in forward and once more in backward.

GEMM operands on cuda. The cuda matmul kernel reads float16 and bfloat16 operands as they are
and sums their exact products in float32 (minidl/kernels/cuda/matmul.py), as a tensor core does,
so a float32 copy of a GEMM operand is pure cost there. An op opts in by naming, in the class
attribute ``cuda_low_operands``, the forward arguments that forward and backward use only as
matmul operands (directly, or through views: reshape, transpose, swapaxes) and save as they
are; the name ``"grad_output"`` adds backward's incoming gradients, when backward uses them only
as matmul operands and in sums (a cuda sum of low-precision values accumulates in float32 and
rounds once, as the sum of their float32 copies rounded). On cuda those arguments (and their
saved arrays) stay 2-byte, and forward and backward run inside the cuda backend's
``float32_sums()``, where a matmul of low operands returns its float32 sums unrounded: the op's
code sees the very float32 values the copies would have given it, and the results are
unchanged bit for bit. On the CPU nothing changes: every input is widened for float32 BLAS.
"""
import functools
import inspect

import numpy as np

_FLOAT32 = np.dtype(np.float32)
_ndarray = np.ndarray
NARROW_SAVES = True   # round saved outputs and keep_low arrays to the low dtype (see the module docstring)
_MARKS = "_keep_low"  # the ctx attribute that holds the arrays keep_low declared, during forward only


def _low(a):
    """True for a float16 or bfloat16 array (NumPy files bfloat16 under kind "V")."""
    dt = getattr(a, "dtype", None)
    return dt is not None and dt.itemsize == 2 and dt.kind in "fV" and hasattr(a, "astype")


def _widen(a):
    return cast_array(a, _FLOAT32) if _low(a) else a


def keep_low(ctx, *arrays):
    """Declare float32 arrays that forward saves as fit to keep in the low dtype of a
    float16/bfloat16 call (see the module docstring): the decorator rounds them after forward
    and widens them again for backward. Outside such a call (float32 and float64 inputs) it does
    nothing. ``None`` entries are skipped."""
    marks = ctx.__dict__.get(_MARKS)
    if marks is not None:
        for a in arrays:
            if a is not None:
                marks[id(a)] = a    # held, so the id stays this array's until forward returns


def narrows_saves(ctx):
    """True inside the forward of a float16/bfloat16 call whose saves are kept low: an op may
    then choose not to keep an array that is not exact in the low dtype and rebuild it in
    backward from the (low) inputs instead of keeping it in float32."""
    return _MARKS in ctx.__dict__


def _gemm_operands(cls, forward):
    """The positions (in forward's arguments after ctx) that ``cls.cuda_low_operands`` names, and
    whether it names ``"grad_output"``."""
    names = tuple(getattr(cls, "cuda_low_operands", ()))
    params = list(inspect.signature(forward).parameters)[1:]
    unknown = [n for n in names if n != "grad_output" and n not in params]
    if unknown:
        raise TypeError(f"{cls.__name__}.cuda_low_operands names {unknown}, which are not arguments of forward "
                        f"(expected names from {params} or 'grad_output')")
    return frozenset(params.index(n) for n in names if n != "grad_output"), "grad_output" in names


def _on_cuda(a):
    return type(a) is not _ndarray and getattr(a, "device", None) == "cuda"


def _float32_sums():
    """The cuda backend's float32_sums() (loaded by the time a cuda array exists)."""
    from ..backends.cuda.reduction import float32_sums
    return float32_sums()


def float32_compute(cls):
    """Make the Function ``cls`` compute float16/bfloat16 inputs in float32 (see the module
    docstring); float32 and float64 inputs run exactly as before."""
    forward, backward = cls.forward, cls.backward
    gemm_args, gemm_grads = _gemm_operands(cls, forward)

    @functools.wraps(forward)
    def low_precision_forward(ctx, *args):
        low = next((a.dtype for a in args if _low(a)), None)
        if low is None:
            return forward(ctx, *args)
        passed = [a for i, a in enumerate(args) if i in gemm_args and _low(a) and _on_cuda(a)]
        wide = tuple(a if any(a is p for p in passed) else _widen(a) for a in args)
        narrow = NARROW_SAVES
        if narrow:
            ctx.__dict__[_MARKS] = {}
        if passed:
            with _float32_sums():
                out = forward(ctx, *wide)
        else:
            out = forward(ctx, *wide)
        marks = ctx.__dict__.pop(_MARKS, None)
        swap = _Swap(low, marks)
        for w, a in zip(wide, args):
            if w is not a:
                swap.add(w, a)
        if isinstance(out, tuple):
            out = tuple(_narrow_output(o, low, swap, narrow) for o in out)
        else:
            out = _narrow_output(out, low, swap, narrow)
        # the arrays passed low are alive until backward wherever they are saved, so their ids
        # cannot name another saved array
        ctx.low_precision = (low, tuple(getattr(a, "dtype", None) for a in args), swap.apply(ctx),
                             frozenset(id(p) for p in passed))
        return out

    @functools.wraps(backward)
    def low_precision_backward(ctx, *grads):
        meta = ctx.__dict__.get("low_precision")
        if meta is None:
            return backward(ctx, *grads)
        _, arg_dtypes, names, passed = meta
        d = ctx.__dict__
        kept = {k: d[k] for k in names if k in d}
        # an array saved twice (attention's P and P*D without dropout) is widened once; the
        # arrays forward took low stay low
        memo = {}
        widened = {k: _widened(v, memo, passed) for k, v in kept.items()}
        d.update(widened)
        try:
            if passed:
                gs = grads if gemm_grads else tuple(_widen(g) for g in grads)
                with _float32_sums():
                    result = backward(ctx, *gs)
            else:
                result = backward(ctx, *(_widen(g) for g in grads))
        finally:
            for k, v in widened.items():   # the low arrays back, unless backward replaced them itself
                if d.get(k) is v:
                    d[k] = kept[k]
        if not isinstance(result, tuple):
            return _narrow(result, arg_dtypes[0])
        return tuple(_narrow(g, dt) for g, dt in zip(result, arg_dtypes))

    cls.forward = staticmethod(low_precision_forward)
    cls.backward = staticmethod(low_precision_backward)
    return cls


class _Swap:
    """The replacements of one call's saved arrays: float32 arrays that stand for a low array
    (an input's copy, the unrounded output) by identity or as a view of their memory, and the
    arrays keep_low declared, rounded once each."""

    def __init__(self, low, marks):
        self.low, self.marks = low, marks or {}
        self.same = {}      # id(float32 array) -> the low array it stands for
        self.roots = {}     # id(float32 array that owns its memory) -> (it, the low array laid out alike)
        self.rounded = {}   # id(declared array) -> its rounding

    def add(self, wide, low):
        self.same[id(wide)] = low
        if _aligned(wide, low):
            self.roots[id(wide)] = (wide, low)

    def get(self, a):
        """The low-precision stand-in for the saved array ``a``, or ``a`` itself."""
        hit = self.same.get(id(a))
        if hit is not None:
            return hit
        if type(a) is _ndarray and a.base is not None and a.dtype == _FLOAT32:
            root = self.roots.get(id(a.base))
            if root is not None:
                view = _view_on(a, *root)
                if view is not None:
                    return view
        if id(a) in self.marks and getattr(a, "dtype", None) == _FLOAT32:
            r = self.rounded.get(id(a))
            if r is None:
                r = self.rounded[id(a)] = cast_array(a, self.low)
            return r
        return a

    def apply(self, ctx):
        """Swap every saved array on ``ctx`` (in saved_tensors and in attributes, tuples and lists
        looked into); return the names of the attributes that now hold low arrays."""
        names = []
        d = ctx.__dict__
        for k, v in d.items():
            if k in ("needs_input_grad", "low_precision"):
                continue
            if type(v) is tuple or type(v) is list:
                new = type(v)(self.get(a) if _is_array(a) else a for a in v)
                changed = any(n is not a for n, a in zip(new, v))
                low = any(_low(n) for n in new)
            elif _is_array(v):
                new = self.get(v)
                changed, low = new is not v, _low(new)
            else:
                continue
            if changed:
                d[k] = new
            if low:
                names.append(k)
        return tuple(names)


def _is_array(a):
    return hasattr(a, "shape") and hasattr(a, "dtype") and hasattr(a, "astype") and not isinstance(a, np.generic)


def _widened(v, memo, passed=frozenset()):
    if type(v) is tuple or type(v) is list:
        return type(v)(_widened(a, memo, passed) for a in v)
    if not _low(v) or id(v) in passed:
        return v
    w = memo.get(id(v))
    if w is None:
        w = memo[id(v)] = cast_array(v, _FLOAT32)
    return w


def _aligned(wide, low):
    """True when ``low`` holds ``wide``'s elements at the same positions (NumPy arrays of one shape,
    both C-ordered) and ``wide`` is the array its views name as their ``base``."""
    return (type(wide) is _ndarray and type(low) is _ndarray and _owner(wide) and wide.shape == low.shape
            and wide.flags.c_contiguous and low.flags.c_contiguous)


def _owner(a):
    """True for an ndarray that views no other ndarray: it owns its memory, or its base is
    another kind of object (Numba's allocation of an array a kernel returned)."""
    return a.base is None or type(a.base) is not _ndarray


def _view_on(a, wide, low):
    """The view of ``low`` that ``a`` is of ``wide`` (float32, C-ordered, owning its memory), or
    None where a's strides do not step whole elements."""
    offset = a.__array_interface__["data"][0] - wide.__array_interface__["data"][0]
    if offset % 4 or any(s % 4 for s in a.strides):
        return None
    return np.ndarray(a.shape, low.dtype, buffer=low.reshape(-1), offset=offset // 2,
                      strides=tuple(s // 2 for s in a.strides))


def _narrow_output(out, low, swap, narrow):
    """A float32 output rounded to the low dtype; with ``narrow``, registered so that a saved
    array that is the output (or views its memory) is swapped for the rounded one."""
    r = _narrow(out, low)
    if r is out or not narrow:
        return r
    swap.same[id(out)] = r
    if type(out) is _ndarray and out.base is not None and type(out.base) is _ndarray:
        root = out.base   # out views a buffer (a reshape of a kernel's result): round the buffer
        if _owner(root) and root.size == out.size and root.flags.c_contiguous:
            rr = cast_array(root, low)
            view = _view_on(out, root, rr)
            if view is not None:
                swap.same[id(out)], swap.same[id(root)] = view, rr
                swap.roots[id(root)] = (root, rr)
                return view
    elif _aligned(out, r):
        swap.roots[id(out)] = (out, r)
    return r


def cast_array(a, dtype):
    """``a.astype(dtype)``, where a value past a narrower float's range becomes inf as in a GPU's
    conversion (and PyTorch's), without NumPy's overflow warning: in float16 training an
    overflow is expected, and GradScaler is what answers it. CPU casts between float32 and the
    2-byte floats run as one parallel Numba pass (``minidl.kernels.cpu.half_cast``: NumPy's own
    float16 conversion is several times slower), with the same results."""
    if type(a) is _ndarray:
        from ..kernels.cpu.half_cast import astype
        return astype(a, dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        return a.astype(dtype)


def _narrow(a, dtype):
    """A float32 result rounded to ``dtype`` (left alone when it is not float32 or dtype is None)."""
    if dtype is None or getattr(a, "dtype", None) != _FLOAT32 or dtype == _FLOAT32:
        return a
    return cast_array(a, dtype)
