"""float16 and bfloat16 inside the CPU kernels: 2-byte storage, float32 arithmetic.

Numba cannot type NumPy's float16 arrays, nor ml_dtypes' bfloat16. The kernels therefore see
a 2-byte activation through an integer view of the same memory (``storage``): float16 as
uint16, bfloat16 as int16. The view's integer type tells Numba the format, so one kernel
source compiles to a float16, a bfloat16, a float32 and a float64 version, each with the
conversion inlined into its loops; no float32 copy of the activation is made.

Inside a kernel, these helpers do the rest (all inlined, so the loops still vectorise):

    widen(a[i, j])         the element as the compute type: float32 for 2-byte storage,
                           the value itself for float32/float64
    narrow(v, a)           v rounded to a's storage format, ready for a[i, j] = ...
    compute_zero(a)        0 in a's compute type (for accumulators: ``s = compute_zero(x)``)
    compute_type(a, v)     v cast to a's compute type (per-row constants: ``rc = compute_type(x, r)``)
    compute_zeros(a, n)    an (n,) array of zeros in a's compute type (per-chunk accumulators)

The conversions, exact and round-to-nearest-even as IEEE 754 and NumPy / ml_dtypes (every bit
pattern, NaN payloads included):

    float16 -> float32     LLVM's ``fpext half`` where the CPU converts in hardware
                           (``HARDWARE_HALF``: x86 with F16C, vcvtph2ps; aarch64); otherwise
                           in integers: sign | (exponent + 112) << 23 | mantissa << 13 for
                           normal values; subnormals (exponent 0) are m * 2^-24, exact in
                           float32; exponent 31 is inf or NaN (payload kept).
    float32 -> float16     ``fptrunc`` (vcvtps2ph) in hardware; otherwise in integers: a normal
                           result drops 13 mantissa bits, rounding to nearest even by adding 0xfff
                           plus the lowest kept bit before the shift (a carry into the exponent is
                           the correct next binade, and from 65520 up it reaches the inf pattern
                           0x7c00); below 2^-14 the result is the integer nearest |v| * 2^24 (ties
                           to even), a subnormal half (1024 is the smallest normal, also right);
                           NaN keeps its top payload bits and stays NaN, as NumPy's conversion.
    bfloat16 <-> float32   bfloat16 is float32's top 16 bits: widening shifts left by 16;
                           narrowing rounds the low 16 bits away to nearest even (add 0x7fff
                           plus the lowest kept bit); NaN becomes the quiet NaN of its sign, as
                           ml_dtypes.

Under the JIT, the conversions the kernels use are written as LLVM IR (``ir_*``): Numba widens
integer arithmetic on uint32 to 64 bits, and vectorised loops of such code run in 8 lanes with
packing in between instead of 16 (measured: the integer bfloat16 conversions made a scale-and-
store loop slower than its float32 version; in IR it is faster). The hardware conversions quiet a
signalling NaN, which NumPy's conversion keeps; the IR undoes that with one select, so the
results are NumPy's bit for bit (``half_to_float``, ``float_to_half``).

What the kernels call (``widen``, ``narrow``) skips that select for float16: it doubled the time
of a float16 norm, and it cannot change a kernel's result. Every value a kernel widens goes into
arithmetic, which quiets a signalling NaN anyway (keeping its payload, the bits the select would
have cleared then set again), and every value it narrows is the result of arithmetic, never a
signalling NaN, for which the instructions and NumPy agree. So ``widen``/``narrow`` on float16
equal NumPy's conversions on every pattern but the signalling NaNs, where they give NumPy's
conversion of the quieted NaN (in hardware; without it they are the exact integer versions).

The integer versions (``soft_*``, every branch a select: ``select``, ``min``, ``max``, so that
they hold no control flow) serve CPUs without hardware float16 and ``NUMBA_DISABLE_JIT=1``, where
they run as Python on NumPy scalars (slow, but steppable).
"""
import platform

import ml_dtypes
import numba
import numpy as np
from numba import njit
from numba.core import types
from numba.extending import intrinsic, overload

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
FLOAT16 = np.dtype(np.float16)
_VIEW = {FLOAT16: np.dtype(np.uint16), BFLOAT16: np.dtype(np.int16)}


def is_half(dtype):
    """Is ``dtype`` a 2-byte float the kernels see through an integer view?"""
    return np.dtype(dtype) in _VIEW


def storage(a):
    """The array a kernel takes for ``a``: float16 as a uint16 view, bfloat16 as an int16 view
    of the same memory (no copy), anything else as it is."""
    view = _VIEW.get(a.dtype)
    return a if view is None else a.view(view)


# -- bit casts between float32 and uint32 ---------------------------------------------------------
if numba.config.DISABLE_JIT:
    def f32_bits(v):
        return np.float32(v).view(np.uint32)

    def bits_f32(b):
        return np.uint32(b).view(np.float32)
else:
    @intrinsic
    def _f32_bits(typingctx, v):
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], context.get_value_type(types.uint32))
        return types.uint32(types.float32), codegen

    @intrinsic
    def _bits_f32(typingctx, b):
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], context.get_value_type(types.float32))
        return types.float32(types.uint32), codegen

    @njit(cache=True, inline="always")
    def f32_bits(v):
        """The bits of float32 ``v`` as a uint32."""
        return _f32_bits(np.float32(v))

    @njit(cache=True, inline="always")
    def bits_f32(b):
        """The float32 whose bits are the uint32 ``b``."""
        return _bits_f32(np.uint32(b))


# -- the four conversions -------------------------------------------------------------------------
_TWO_M24 = np.float32(2.0 ** -24)
_TWO_24 = np.float32(2.0 ** 24)


_U = np.uint32


@njit(cache=True, inline="always")
def select(c, a, b):
    """``a if c else b`` for uint32 a and b, as a mask rather than a branch: Numba inlines these
    functions into the kernels' loops at the level of its own IR, where every conditional
    expression would become a branch (and, repeated in one kernel, trips Numba's SSA checks);
    LLVM turns the mask back into one select instruction (a blend, once vectorised)."""
    m = _U(c) * _U(0xffffffff)
    return (_U(a) & m) | (_U(b) & ~m)


@njit(cache=True, inline="always")
def soft_half_to_float(h):
    """float16 bits (uint16) -> float32, exact, in integer arithmetic."""
    h = _U(h)
    sign = (h & _U(0x8000)) << _U(16)
    em = h & _U(0x7fff)
    normal = (em << _U(13)) + _U(0x38000000)
    special = _U(0x7f800000) | ((em & _U(0x3ff)) << _U(13))
    sub = f32_bits(np.float32(em) * _TWO_M24)           # em < 0x400: m * 2^-24, exact
    return bits_f32(sign | select(em >= _U(0x7c00), special, select(em >= _U(0x400), normal, sub)))


@njit(cache=True, inline="always")
def soft_float_to_half(v):
    """float32 -> float16 bits (uint16), rounded to nearest even, in integer arithmetic."""
    b = f32_bits(v)
    sign = (b >> _U(16)) & _U(0x8000)
    a = b & _U(0x7fffffff)
    an = max(a, _U(0x38800000))                         # the normal formula's domain
    normal = ((an + _U(0xfff) + ((an >> _U(13)) & _U(1))) >> _U(13)) - _U(0x1c000)
    asub = min(a, _U(0x38800000))                       # the subnormal formula's domain
    sub = _U(np.rint(bits_f32(asub) * _TWO_24))
    nan = _U(0x7c00) + ((a & _U(0x7fffff)) >> _U(13))
    nan = nan + _U(nan == _U(0x7c00))                   # a payload that shifted out to 0 stays NaN
    big = select(a > _U(0x7f800000), nan, _U(0x7c00))
    r = select(a < _U(0x38800000), sub, select(a < _U(0x477ff000), normal, big))
    return np.uint16(sign | r)


@njit(cache=True, inline="always")
def soft_bfloat_to_float(h):
    """bfloat16 bits (int16) -> float32, exact, in integer arithmetic."""
    return bits_f32(_U(np.uint16(h)) << _U(16))


@njit(cache=True, inline="always")
def soft_float_to_bfloat(v):
    """float32 -> bfloat16 bits (int16), rounded to nearest even; NaN -> the quiet NaN of its
    sign; in integer arithmetic."""
    b = f32_bits(v)
    sign = (b >> _U(16)) & _U(0x8000)
    a = b & _U(0x7fffffff)
    r = (a + _U(0x7fff) + ((a >> _U(16)) & _U(1))) >> _U(16)
    return np.int16(np.uint16(sign | select(a > _U(0x7f800000), _U(0x7fc0), r)))


# -- the conversions as LLVM IR ---------------------------------------------------------------------
def _hardware_half():
    """Does Numba compile for a CPU that converts float16 in one instruction: x86 with F16C
    (vcvtph2ps / vcvtps2ph), which Numba targets on the host unless NUMBA_CPU_NAME names another
    CPU (with NUMBA_CPU_FEATURES as its features), or aarch64 (fcvt, in every ARMv8 CPU)?"""
    if numba.config.DISABLE_JIT:
        return False
    machine = platform.machine().lower()
    if machine in ("aarch64", "arm64"):
        return True
    if machine not in ("x86_64", "amd64"):
        return False
    if numba.config.CPU_NAME is not None:
        return "+f16c" in (numba.config.CPU_FEATURES or "").split(",")
    import llvmlite.binding as llvm
    try:
        return bool(llvm.get_host_cpu_features().get("f16c"))
    except RuntimeError:           # features unknown on this host
        return False


HARDWARE_HALF = _hardware_half()

if not numba.config.DISABLE_JIT:
    from llvmlite import ir

    _I16, _I32, _F32 = ir.IntType(16), ir.IntType(32), ir.FloatType()

    def _k(v):
        return ir.Constant(_I32, v)

    def _is_nan_bits(builder, b):
        """i1: the float32 bits ``b`` are a NaN."""
        return builder.icmp_unsigned(">", builder.and_(b, _k(0x7fffffff)), _k(0x7f800000))

    @intrinsic
    def ir_bfloat_to_float(typingctx, h):
        """bfloat16 bits (int16) -> float32: the bits shifted up by 16."""
        def codegen(context, builder, signature, args):
            return builder.bitcast(builder.shl(builder.zext(args[0], _I32), _k(16)), _F32)
        return types.float32(types.int16), codegen

    @intrinsic
    def ir_float_to_bfloat(typingctx, v):
        """float32 -> bfloat16 bits (int16): (b + 0x7fff + bit 16 of b) >> 16 rounds to nearest
        even (the sign bit rides along: below the NaNs the carry never reaches it); a NaN
        becomes the quiet NaN of its sign."""
        def codegen(context, builder, signature, args):
            b = builder.bitcast(args[0], _I32)
            odd = builder.and_(builder.lshr(b, _k(16)), _k(1))
            r = builder.lshr(builder.add(builder.add(b, _k(0x7fff)), odd), _k(16))
            nan = builder.or_(builder.and_(builder.lshr(b, _k(16)), _k(0x8000)), _k(0x7fc0))
            return builder.trunc(builder.select(_is_nan_bits(builder, b), nan, r), _I16)
        return types.int16(types.float32), codegen

    @intrinsic
    def ir_half_to_float(typingctx, h):
        """float16 bits (uint16) -> float32 by LLVM's fpext (vcvtph2ps with F16C), exact. The
        instruction quiets a signalling NaN (sets mantissa bit 22); that bit is cleared again so
        that every pattern widens as NumPy's conversion, which keeps it."""
        def codegen(context, builder, signature, args):
            fb = builder.bitcast(builder.fpext(builder.bitcast(args[0], ir.HalfType()), _F32), _I32)
            h = builder.zext(args[0], _I32)
            nan = builder.icmp_unsigned(">", builder.and_(h, _k(0x7fff)), _k(0x7c00))
            signalling = builder.icmp_unsigned("==", builder.and_(h, _k(0x200)), _k(0))
            fixed = builder.select(builder.and_(nan, signalling), builder.xor(fb, _k(0x400000)), fb)
            return builder.bitcast(fixed, _F32)
        return types.float32(types.uint16), codegen

    @intrinsic
    def ir_float_to_half(typingctx, v):
        """float32 -> float16 bits (uint16) by LLVM's fptrunc (vcvtps2ph with F16C, rounding to
        nearest even), exact. For a signalling NaN the instruction sets the quiet bit (9);
        NumPy's conversion keeps the top payload bits as they are, and a payload that shifts
        out to nothing becomes 1 (to stay NaN): both restored here."""
        def codegen(context, builder, signature, args):
            b = builder.bitcast(args[0], _I32)
            h = builder.zext(builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), _I16), _I32)
            signalling = builder.icmp_unsigned("==", builder.and_(b, _k(0x400000)), _k(0))
            empty = builder.icmp_unsigned("==", builder.and_(b, _k(0x1ff << 13)), _k(0))
            numpy_nan = builder.or_(builder.and_(h, _k(0xfdff)), builder.zext(empty, _I32))
            sig_nan = builder.and_(_is_nan_bits(builder, b), signalling)
            return builder.trunc(builder.select(sig_nan, numpy_nan, h), _I16)
        return types.uint16(types.float32), codegen

    @intrinsic
    def ir_quiet_half_to_float(typingctx, h):
        """float16 bits (uint16) -> float32 by fpext alone: exact, but a signalling NaN comes out
        quiet (mantissa bit 22 set, the payload kept)."""
        def codegen(context, builder, signature, args):
            return builder.fpext(builder.bitcast(args[0], ir.HalfType()), _F32)
        return types.float32(types.uint16), codegen

    @intrinsic
    def ir_quiet_float_to_half(typingctx, v):
        """float32 -> float16 bits (uint16) by fptrunc alone: exact, but a signalling NaN comes out
        quiet (bit 9 set, the top payload bits kept)."""
        def codegen(context, builder, signature, args):
            return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), _I16)
        return types.uint16(types.float32), codegen

    @njit(cache=True, inline="always")
    def bfloat_to_float(h):
        """bfloat16 bits (int16) -> float32, exact."""
        return ir_bfloat_to_float(np.int16(h))

    @njit(cache=True, inline="always")
    def float_to_bfloat(v):
        """float32 -> bfloat16 bits (int16), rounded to nearest even; NaN -> the quiet NaN of its sign."""
        return ir_float_to_bfloat(np.float32(v))
else:
    bfloat_to_float, float_to_bfloat = soft_bfloat_to_float, soft_float_to_bfloat

if HARDWARE_HALF:
    @njit(cache=True, inline="always")
    def half_to_float(h):
        """float16 bits (uint16) -> float32, exact (NumPy's bits for every pattern)."""
        return ir_half_to_float(np.uint16(h))

    @njit(cache=True, inline="always")
    def float_to_half(v):
        """float32 -> float16 bits (uint16), rounded to nearest even (NumPy's bits for every pattern)."""
        return ir_float_to_half(np.float32(v))

    @njit(cache=True, inline="always")
    def quiet_half_to_float(h):
        """float16 bits (uint16) -> float32, exact but for quieting a signalling NaN (what widen uses)."""
        return ir_quiet_half_to_float(np.uint16(h))

    @njit(cache=True, inline="always")
    def quiet_float_to_half(v):
        """float32 -> float16 bits (uint16), exact but for quieting a signalling NaN (what narrow uses)."""
        return ir_quiet_float_to_half(np.float32(v))
else:
    half_to_float, float_to_half = soft_half_to_float, soft_float_to_half
    quiet_half_to_float, quiet_float_to_half = soft_half_to_float, soft_float_to_half


# -- what the kernels call ------------------------------------------------------------------------
def widen(v):
    """An element read from a kernel array, as its compute type (see the module docstring)."""
    if isinstance(v, np.uint16):
        return half_to_float(v)
    if isinstance(v, np.int16):
        return bfloat_to_float(v)
    return v


def narrow(v, a):
    """``v`` in the storage format of array ``a`` (see the module docstring)."""
    if a.dtype == np.uint16:
        return float_to_half(v)
    if a.dtype == np.int16:
        return float_to_bfloat(v)
    return a.dtype.type(v)


def compute_zero(a):
    """Zero in the compute type of array ``a``: float32 for 2-byte storage, else a's dtype."""
    return np.float32(0.0) if a.dtype in (np.uint16, np.int16) else a.dtype.type(0.0)


def compute_type(a, v):
    """``v`` cast to the compute type of array ``a``."""
    return np.float32(v) if a.dtype in (np.uint16, np.int16) else a.dtype.type(v)


def compute_zeros(a, n):
    """An array of zeros of shape ``n`` (a length or a tuple) in the compute type of array ``a``."""
    return np.zeros(n, np.float32 if a.dtype in (np.uint16, np.int16) else a.dtype)


@overload(widen, inline="always")
def _widen(v):
    if v == types.uint16:
        return lambda v: quiet_half_to_float(v)
    if v == types.int16:
        return lambda v: bfloat_to_float(v)
    return lambda v: v


@overload(narrow, inline="always")
def _narrow(v, a):
    if a.dtype == types.uint16:
        return lambda v, a: quiet_float_to_half(v)
    if a.dtype == types.int16:
        return lambda v, a: float_to_bfloat(v)
    return lambda v, a: a.dtype.type(v)


@overload(compute_zero, inline="always")
def _compute_zero(a):
    if a.dtype in (types.uint16, types.int16):
        return lambda a: np.float32(0.0)
    return lambda a: a.dtype.type(0.0)


@overload(compute_type, inline="always")
def _compute_type(a, v):
    if a.dtype in (types.uint16, types.int16):
        return lambda a, v: np.float32(v)
    return lambda a, v: a.dtype.type(v)


@overload(compute_zeros, inline="always")
def _compute_zeros(a, n):
    if a.dtype in (types.uint16, types.int16):
        return lambda a, n: np.zeros(n, np.float32)
    return lambda a, n: np.zeros(n, a.dtype)
