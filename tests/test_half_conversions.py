"""The float16/bfloat16 <-> float32 conversions the CPU kernels inline (minidl/kernels/cpu/_half.py)
are bit-exact against NumPy (float16) and ml_dtypes (bfloat16): every 2-byte pattern decoded,
float32 patterns encoded at every rounding boundary of every binade (ties, one ulp either side),
at the overflow and subnormal boundaries, inf, NaN (payloads included) and -0.0; compiled both
plainly and under the kernels' fastmath flags, and run as Python under NUMBA_DISABLE_JIT=1.
What the kernels call for float16 (widen/narrow, by F16C) quiets a signalling NaN and is
otherwise exact: checked as NumPy's conversion of the quieted input."""
import os
import platform
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest
from numba import njit

from minidl.kernels.cpu import _half
from minidl.kernels.cpu._half import (compute_type, compute_zero, compute_zeros, is_half, narrow,
                                      soft_bfloat_to_float, soft_float_to_bfloat, soft_float_to_half,
                                      soft_half_to_float, storage, widen)
from minidl.kernels.cpu._numerics import REASSOC_CONTRACT

BF16 = np.dtype(ml_dtypes.bfloat16)
FORMATS = {"float16": (np.dtype(np.float16), np.uint16), "bfloat16": (BF16, np.int16)}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _decode(h, out):
    for i in range(h.shape[0]):
        out[i] = widen(h[i])


def _encode(v, out):
    for i in range(v.shape[0]):
        out[i] = narrow(v[i], out)


def _soft(decode, encode):
    def dec(h, out):
        for i in range(h.shape[0]):
            out[i] = decode(h[i])

    def enc(v, out):
        for i in range(v.shape[0]):
            out[i] = encode(v[i])
    return njit(fastmath=REASSOC_CONTRACT)(dec), njit(fastmath=REASSOC_CONTRACT)(enc)


# what the kernels call (widen/narrow: LLVM IR, float16 by F16C where the CPU has it), under no
# flags and under the kernels' fastmath flags (inlined helpers take their caller's); the exact
# conversions; and the integer ones that serve CPUs without F16C and NUMBA_DISABLE_JIT=1
_PLAIN = (njit(_decode), njit(_encode))
_FAST = (njit(fastmath=REASSOC_CONTRACT)(_decode), njit(fastmath=REASSOC_CONTRACT)(_encode))
KERNELS = {"plain": {"float16": _PLAIN, "bfloat16": _PLAIN}, "fastmath": {"float16": _FAST, "bfloat16": _FAST},
           "exact": {"float16": _soft(_half.half_to_float, _half.float_to_half),
                     "bfloat16": _soft(_half.bfloat_to_float, _half.float_to_bfloat)},
           "integer": {"float16": _soft(soft_half_to_float, soft_float_to_half),
                       "bfloat16": _soft(soft_bfloat_to_float, soft_float_to_bfloat)}}


def _quiets(fmt, compiled):
    """Does this conversion quiet a signalling NaN (widen/narrow on float16 by F16C)?"""
    return fmt == "float16" and compiled in ("plain", "fastmath") and _half.HARDWARE_HALF


def _quieted16(h):
    """float16 patterns with every signalling NaN made quiet (bit 9 set)."""
    h = h.view(np.uint16)
    snan = ((h & 0x7c00) == 0x7c00) & ((h & 0x3ff) != 0) & ((h & 0x200) == 0)
    return np.where(snan, h | np.uint16(0x200), h)


def _quieted32(v):
    """float32 values with every signalling NaN made quiet (bit 22 set)."""
    b = v.view(np.uint32)
    snan = ((b & 0x7f800000) == 0x7f800000) & ((b & 0x7fffff) != 0) & ((b & 0x400000) == 0)
    return np.where(snan, b | np.uint32(0x400000), b).view(np.float32)


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint32)


def _f32(bits):
    return np.asarray(bits, np.uint32).view(np.float32)


def encode_patterns(fmt):
    """float32 bit patterns where an encoder can go wrong: for every value of the bits kept
    (float16: the top 18 below the sign, bfloat16: the top 15), the dropped bits at 0, 1, just
    under, at and just over the halfway point and all ones, with either sign; and the
    neighbourhoods of the overflow threshold, of the smallest normal and subnormal, inf and
    NaN with assorted payloads (signalling and quiet), and random patterns."""
    drop = 13 if fmt == "float16" else 16
    half = 1 << (drop - 1)
    high = np.arange(1 << (31 - drop), dtype=np.uint32) << np.uint32(drop)
    low = np.array([0, 1, half - 1, half, half + 1, (1 << drop) - 1], np.uint32)
    grid = (high[:, None] | low[None, :]).ravel()
    specials = [np.float32(v) for v in (65504.0, 65519.0, 65520.0, 65536.0, 2.0 ** -14, 2.0 ** -24, 2.0 ** -25,
                                        3 * 2.0 ** -26, 1.1754944e-38, 3.4028235e38, 1.0, 0.0)]
    around = [np.arange(-(1 << 14), 1 << 14, dtype=np.int64) + int(_bits(np.array([v]))[0]) for v in specials]
    nans = np.array([0x7f800000, 0x7f800001, 0x7f801000, 0x7f802000, 0x7fc00000, 0x7fffffff, 0x7fa00000,
                     0x7f800fff, 0x7fbfffff, 0x7fc00001, 0x00000001, 0x007fffff, 0x00800000], np.uint32)
    rng = np.random.default_rng(0)
    random = rng.integers(0, 1 << 31, 1 << 20, dtype=np.uint32)
    mags = np.concatenate([grid, np.concatenate(around).clip(0, 0x7fffffff).astype(np.uint32), nans, random])
    return np.concatenate([mags, mags | np.uint32(0x80000000)])


@pytest.mark.parametrize("compiled", KERNELS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_2_byte_pattern_decodes_as_numpy(fmt, compiled):
    dtype, view = FORMATS[fmt]
    h = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(view)
    out = np.empty(h.shape[0], np.float32)
    KERNELS[compiled][fmt][0](h, out)
    want = (_quieted16(h) if _quiets(fmt, compiled) else h).view(dtype).astype(np.float32)
    np.testing.assert_array_equal(_bits(out), _bits(want))     # bits: NaN payloads and -0.0 included


@pytest.mark.parametrize("compiled", KERNELS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_float32_patterns_encode_as_numpy(fmt, compiled):
    dtype, view = FORMATS[fmt]
    v = _f32(encode_patterns(fmt))
    out = np.empty(v.shape[0], view)
    with np.errstate(over="ignore", invalid="ignore"):
        want = (_quieted32(v) if _quiets(fmt, compiled) else v).astype(dtype).view(view)
    KERNELS[compiled][fmt][1](v, out)
    bad = np.flatnonzero(out != want)
    assert bad.size == 0, (f"{bad.size} of {v.size} differ, e.g. float32 bits {_bits(v[bad[:4]])} -> "
                           f"{out[bad[:4]].view(np.uint16)}, expected {want[bad[:4]].view(np.uint16)}")


def test_the_boundaries_round_as_ieee():
    """Spelled-out cases, so a failure above reads as a known fact: 65519.996 rounds down to
    65504, 65520 (the halfway point) to inf; 2^-25 (half the smallest subnormal) ties to 0,
    just above it to the smallest subnormal; bfloat16 rounds 1 + 2^-8 (a tie) to even, 1."""
    f16 = np.empty(6, np.uint16)
    KERNELS["plain"]["float16"][1](np.array([65519.996, 65520.0, 2.0 ** -25, 2.0 ** -25 * 1.0000001, -0.0, np.inf],
                                 np.float32), f16)
    assert list(f16) == [0x7bff, 0x7c00, 0x0000, 0x0001, 0x8000, 0x7c00]
    bf = np.empty(3, np.int16)
    KERNELS["plain"]["bfloat16"][1](np.array([1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, -np.nan], np.float32), bf)
    assert list(bf.view(np.uint16)) == [0x3f80, 0x3f82, 0xffc0]


def test_hardware_float16_is_used_where_numba_targets_it():
    import llvmlite.binding as llvm
    import numba
    if numba.config.DISABLE_JIT:
        assert not _half.HARDWARE_HALF and _half.bfloat_to_float is _half.soft_bfloat_to_float
    else:
        if numba.config.CPU_NAME is None and platform.machine().lower() in ("x86_64", "amd64"):
            assert _half.HARDWARE_HALF == bool(llvm.get_host_cpu_features().get("f16c"))
        assert _half.bfloat_to_float is not _half.soft_bfloat_to_float      # IR under the JIT
    assert (_half.half_to_float is _half.soft_half_to_float) == (not _half.HARDWARE_HALF)


@njit
def _helpers(a):
    z = compute_zero(a)
    t = compute_type(a, 1.0 / 3.0)
    zs = compute_zeros(a, 3)
    return z, t, zs


@pytest.mark.parametrize("dtype, compute", [(np.float16, np.float32), (BF16, np.float32), (np.float32, np.float32),
                                            (np.float64, np.float64)])
def test_storage_views_and_compute_types(dtype, compute):
    x = np.arange(6, dtype=np.float32).astype(dtype).reshape(2, 3)
    s = storage(x)
    assert np.shares_memory(s, x) and s.shape == x.shape and s.dtype.itemsize == x.dtype.itemsize
    assert is_half(dtype) == (np.dtype(dtype).itemsize == 2)
    assert np.array_equal(s.view(dtype), x)
    z, t, zs = _helpers(s)      # (Numba returns scalars as Python floats: the rounding tells the type)
    assert z == 0 and t == compute(1.0 / 3.0) and (compute is np.float64) == (t == np.float64(1.0 / 3.0))
    assert zs.dtype == compute and zs.shape == (3,) and not zs.any()


def test_python_mode_under_disable_jit():
    """With NUMBA_DISABLE_JIT=1 the helpers run as Python on NumPy scalars, with the same bits."""
    script = textwrap.dedent("""
        import ml_dtypes, numpy as np
        from minidl.kernels.cpu._half import compute_type, compute_zeros, narrow, widen
        h = np.array([0, 1, 0x3ff, 0x400, 0x3c00, 0x7bff, 0x7c00, 0x7c01, 0x7e00, 0x8000, 0x8001, 0xfc00, 0xfe13],
                     np.uint16)
        v = np.array([0.0, -0.0, 1.0, 65504.0, 65519.996, 65520.0, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26, 1e-8,
                      np.inf, -np.inf, np.nan, 1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, -3.14159, 1e30], np.float32)
        v = np.concatenate([v, np.array([0x7f800001, 0x7fa00000, 0xffc00001], np.uint32).view(np.float32)])
        for dtype, view in ((np.dtype(np.float16), np.uint16), (np.dtype(ml_dtypes.bfloat16), np.int16)):
            hs = h.view(view)
            got = np.array([widen(hs[i]) for i in range(h.size)], np.float32)
            assert np.array_equal(got.view(np.uint32), hs.view(dtype).astype(np.float32).view(np.uint32)), dtype
            out = np.empty(v.size, view)
            for i in range(v.size):
                out[i] = narrow(v[i], out)
            with np.errstate(over="ignore", invalid="ignore"):
                assert np.array_equal(out, v.astype(dtype).view(view)), dtype
            assert type(compute_type(out, 0.5)) is np.float32 and compute_zeros(out, 2).dtype == np.float32
        print("ok")
    """)
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-2000:]
