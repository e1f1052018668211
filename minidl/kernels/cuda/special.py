"""The special functions as cuda device functions for the generic map / zip kernels: lgamma, erfc,
digamma, trigamma, erfinv, i0, i1, the Hurwitz zeta function (and polygamma from it) and nextafter.

Each computes in float64 whatever the stored dtype (``float(x)`` first) and the kernel rounds once
on the store, as the CPU ops do (float64 on the host, one rounding). The methods are those of the
CPU's NumPy versions (minidl/ops/_special_math.py and special_functions_math.py), written per
element, so the two devices agree to the last bits or close to them:

- lgamma, erfc: the C library's (CUDA's libdevice on a GPU, Python's math in the simulator);
  lgamma is +inf at the poles 0, -1, -2, ... and at -inf, as PyTorch.
- digamma psi(x): the recurrence psi(x) = psi(x + 1) - 1/x up to x >= 10, then the asymptotic
  (differentiated Stirling) series psi(x) ~ ln x - 1/(2x) - sum_k B_2k / (2k x**2k); for x < 0 the
  reflection psi(x) = psi(1 - x) - pi / tan(pi r), r the fractional part of x; psi(+-0) = -+inf,
  NaN at the negative integers and -inf.
- trigamma psi'(x): psi'(x) = psi'(x + 1) + 1/x**2, psi'(x) ~ 1/x + 1/(2x**2) + sum_k B_2k / x**(2k+1),
  and for x < 1/2 the reflection psi'(x) = pi**2 / sin(pi x)**2 - psi'(1 - x).
- erfinv: Giles' single-precision approximation ("Approximating the erfinv function", GPU
  Computing Gems, 2011), then Newton on erf(v) = |y| for |y| <= 1/2 (two steps) or on
  ln erfc(v) = ln(1 - |y|) in the tails (three steps; e**-v**2 / (v sqrt(pi)) = 1 - |y| solved for v
  as the start where 1 - |y| < 1e-7); +-inf at +-1, NaN beyond.
- i0, i1: the power series I_n(x) = sum_k (x/2)**(2k+n) / (k! (k+n)!) for |x| < 30 (positive terms,
  no cancellation) and the asymptotic series e**x / sqrt(2 pi x) sum_k (-1)**k a_k / x**k,
  a_k = prod_{j<=k} (4 n**2 - (2j-1)**2) / (k! 8**k) (Abramowitz and Stegun 9.7.1) beyond; +inf once
  e**x overflows (x > 709.78), NaN at +-inf (inf / inf, as PyTorch). I1 is odd, I0 even.
- zeta(x, q) = sum_k (q + k)**-x (Cephes zeta.c): the direct sum until q + k > 9 (at least nine
  terms), then Euler-Maclaurin, sum_{k>=N} f(q+k) = int_w^inf f + f(w)/2 - sum_j B_2j/(2j)! f^(2j-1)(w)
  with f(t) = t**-x, w = q + N. polygamma(n, x) = (-1)**(n+1) n! zeta(n + 1, x) for n >= 2.
- nextafter(a, b): the neighbour of a towards b found from a's exponent (frexp): a +- 2**(e - p)
  with p the precision (24 or 53 bits), halved when stepping towards zero from a power of two,
  never below the smallest subnormal; one function per dtype since the step depends on it.

Python's math raises where the GPU (and NumPy) give inf or NaN (pow and exp overflow, log(0),
lgamma at a pole, floor of inf); the guards return NumPy's value first so the simulator agrees.
"""
import math

from numba import cuda

_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)
_MACHEP = 1.11022302462515654042e-16
# (2j)! / B_2j, j = 1..12 (Cephes zeta.c)
_ZETA_A = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
           -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15, 1.8152105401943546773e17,
           -7.1661652561756670113e18)
_GILES_CENTRAL = (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503, -0.00417768164,
                  0.246640727, 1.50140941)
_GILES_TAIL = (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047,
               1.00167406, 2.83297682)


def _d(fn):
    return cuda.jit(device=True)(fn)


@_d
def _is_integer(v):
    """v is a whole number (the infinities count, as NumPy's v == floor(v))."""
    if math.isinf(v):
        return True
    return v == math.floor(v)


@_d
def _pow(b, e):
    """b**e, +-inf where it overflows (Python's pow raises there)."""
    if b != 0 and e * math.log(abs(b)) > 709.78:
        if b < 0 and _is_integer(e) and math.fmod(e, 2.0) != 0:
            return -math.inf
        return math.inf
    return b ** e


@_d
def lgamma(x, c):
    x = float(x)
    if x != x:
        return x
    if math.isinf(x) or (x <= 0 and x == math.floor(x)):
        return math.inf
    return math.lgamma(x)


@_d
def erfc(x, c):
    return math.erfc(float(x))


@_d
def digamma(x, c):
    x = float(x)
    if x != x:
        return x
    if math.isinf(x):
        return x if x > 0 else math.nan
    if x == 0:
        return -math.copysign(math.inf, x)
    reflect = 0.0
    if x < 0:
        if x == math.floor(x):
            return math.nan
        reflect = math.pi / math.tan(math.pi * (x - math.ceil(x)))
        x = 1.0 - x
    acc = 0.0
    while x < 10.0:
        acc = acc + -1.0 / x
        x += 1.0
    w = 1.0 / (x * x)
    series = w * (1 / 12 - w * (1 / 120 - w * (1 / 252 - w * (1 / 240 - w * (1 / 132 - w * (691 / 32760
                                                                                          - w / 12))))))
    return acc + math.log(x) - 0.5 / x - series - reflect


@_d
def trigamma(x, c):
    x = float(x)
    if math.isinf(x) and x < 0:
        return math.nan
    reflect = x < 0.5
    z = 1.0 - x if reflect else x
    acc = 0.0
    while z < 10.0:
        acc = acc + 1.0 / (z * z)
        z += 1.0
    w = 1.0 / (z * z)
    series = w / z * (1 / 6 - w * (1 / 30 - w * (1 / 42 - w * (1 / 30 - w * (5 / 66 - w * (691 / 2730
                                                                                       - w * 7 / 6))))))
    out = acc + 1.0 / z + 0.5 * w + series
    if reflect:
        s2 = math.sin(math.pi * x) ** 2
        if s2 == 0:   # x = 0, or so near it that sin(pi x)**2 underflows
            return math.inf
        return math.pi ** 2 / s2 - out
    return out


@_d
def _giles(u):
    w = -math.log((1.0 - u) * (1.0 + u))
    if w < 5:
        c = w - 2.5
        p = 2.81022636e-08
        for k in _GILES_CENTRAL:
            p = k + p * c
    else:
        c = math.sqrt(w) - 3
        p = -0.000200214257
        for k in _GILES_TAIL:
            p = k + p * c
    return p * u


@_d
def erfinv(y, c):
    y = float(y)
    u = abs(y)
    if not u < 1:
        if u == 1:
            return math.copysign(math.inf, y)
        return math.nan
    if u <= 0.5:
        v = _giles(u)
        for _ in range(2):   # Newton on erf(v) = u
            v = v - (math.erf(v) - u) / (_TWO_OVER_SQRT_PI * math.exp(-v * v))
    else:
        t = -math.log(1.0 - u)   # 1 - u is exact for u >= 1/2
        if t < 16:
            v = _giles(u)
        else:
            v = math.sqrt(t - 0.5 * math.log(math.pi * t))
        for _ in range(3):   # Newton on ln erfc(v) = ln(1 - u)
            e = math.erfc(v)
            v = v + (math.log(e) + t) * e / (_TWO_OVER_SQRT_PI * math.exp(-v * v))
    return math.copysign(v, y)


@_d
def _bessel_i(x, n):
    """I_n(|x|) for n = 0 or 1 (the module docstring's two series)."""
    a = abs(x)
    if a != a:
        return a
    if a < 30:
        s = a / 2
        term = s if n == 1 else 1.0
        total = term
        for k in range(1, 80):
            term = term * s * s / (k * (k + n))
            total += term
        return total
    if math.isinf(a):   # e**a / sqrt(2 pi a) is inf / inf there: NaN, as PyTorch and NumPy
        return math.nan
    if a > 709.78:   # e**a overflows (as on the CPU, where it is computed the same way)
        return math.inf
    mu = 4.0 * n * n
    coef, tail, power = 1.0, 1.0, 1.0
    for k in range(1, 12):
        coef *= (mu - (2 * k - 1) ** 2) / (k * 8)
        power = power * (-1 / a)
        tail += coef * power
    return math.exp(a) / math.sqrt(2 * math.pi * a) * tail


@_d
def i0(x, c):
    return _bessel_i(float(x), 0)


@_d
def i1(x, c):
    x = float(x)
    return math.copysign(_bessel_i(x, 1), x)


@_d
def zeta(x, q):
    x, q = float(x), float(q)
    if x != x or q != q or x < 1:
        return math.nan
    if x == 1:
        return math.inf
    if math.isinf(q):
        return math.nan if q > 0 else math.inf
    if q <= 0:
        if q == math.floor(q):
            return math.inf
        if not _is_integer(x):
            return math.nan
    s = _pow(q, -x)
    a = q
    b = 0.0
    i = 0
    while True:   # the direct sum
        i += 1
        a += 1.0
        b = _pow(a, -x)
        s += b
        if abs(b) < _MACHEP * abs(s):
            return s
        if not (i < 9 or a <= 9):
            break
    w = a   # Euler-Maclaurin from w on
    s = s + b * w / (x - 1) - 0.5 * b
    fac = 1.0
    k = 0.0
    for coef in _ZETA_A:
        fac = fac * (x + k)
        b = b / w
        t = fac * b / coef
        s = s + t
        if abs(t / s) < _MACHEP:
            return s
        k += 1
        fac = fac * (x + k)
        b = b / w
        k += 1
    return s


@_d
def polygamma(x, n):
    """psi^(n)(x); ``n`` comes as the map kernel's scalar."""
    if n == 0:
        return digamma(x, 0)
    if n == 1:
        return trigamma(x, 0)
    factorial = 1.0
    for k in range(2, int(n) + 1):
        factorial *= k
    sign = 1.0 if math.fmod(n, 2.0) != 0 else -1.0
    return sign * factorial * zeta(float(n) + 1.0, x)


@_d
def _nextafter(a, b, precision, min_exponent, max_finite):
    a, b = float(a), float(b)
    if a != a or b != b:
        return a + b
    if a == b:
        return b
    if a == 0:
        return math.copysign(math.ldexp(1.0, min_exponent), b)
    if math.isinf(a):
        return math.copysign(max_finite, a)
    m, e = math.frexp(a)   # a = m 2**e, 1/2 <= |m| < 1
    step = math.ldexp(1.0, max(e - precision, min_exponent))
    if (b > a) != (a > 0) and abs(m) == 0.5 and e - precision - 1 >= min_exponent:
        step = step / 2   # towards zero from a power of two: the spacing below is half
    return a + math.copysign(step, b - a)


@_d
def nextafter_f32(a, b):
    return _nextafter(a, b, 24, -149, 3.4028234663852886e38)


@_d
def nextafter_f64(a, b):
    return _nextafter(a, b, 53, -1074, 1.7976931348623157e308)


UNARY = dict(lgamma=lgamma, erfc=erfc, digamma=digamma, trigamma=trigamma, erfinv=erfinv, i0=i0, i1=i1,
             polygamma=polygamma)
BINARY = dict(zeta=zeta, nextafter_f32=nextafter_f32, nextafter_f64=nextafter_f64)
