"""The special functions NumPy lacks, on float64 arrays, without SciPy: erfc, lgamma, digamma
and trigamma (lgamma's first and second derivatives), erfinv, and the modified Bessel function
I1 (the derivative of I0). Python's math module gives erf, erfc and lgamma per element (exact,
not fast); the rest are series written out here.

digamma, psi(x) = d/dx ln Gamma(x), by the recurrence, the reflection and the asymptotic series:

- recurrence: Gamma(x + 1) = x Gamma(x), so psi(x) = psi(x + 1) - 1/x; applied until x >= 10;
- asymptotic (Stirling's series differentiated), for large x:
      psi(x) ~ ln x - 1/(2x) - sum_k B_2k / (2k x**2k)
             = ln x - 1/(2x) - 1/(12x**2) + 1/(120x**4) - 1/(252x**6) + 1/(240x**8) - 1/(132x**10)
               + 691/(32760x**12) - 1/(12x**14)
  (B_2k the Bernoulli numbers); at x >= 10 the first term left out is below 1e-17 relative;
- reflection, Gamma(x) Gamma(1 - x) = pi / sin(pi x), differentiated in log form:
      psi(1 - x) - psi(x) = pi cot(pi x),  so  psi(x) = psi(1 - x) - pi / tan(pi r)
  for x < 0, with r the fractional part of x (tan(pi r) = tan(pi x), and more accurate);
- psi(+-0) = -+inf, NaN at the negative integers and -inf (the poles), as PyTorch.

trigamma, psi'(x), the same three steps differentiated once more:
      psi'(x) = psi'(x + 1) + 1/x**2,
      psi'(x) ~ 1/x + 1/(2x**2) + sum_k B_2k / x**(2k+1)
              = 1/x + 1/(2x**2) + 1/(6x**3) - 1/(30x**5) + 1/(42x**7) - 1/(30x**9) + 5/(66x**11)
                - 691/(2730x**13) + 7/(6x**15),
      psi'(x) = pi**2 / sin(pi x)**2 - psi'(1 - x)   (for x < 1/2, as PyTorch reflects).

erfinv: Giles' approximation ("Approximating the erfinv function", GPU Computing Gems, 2011),
good to about 1e-7 where 1 - |y| > 1e-7 (and e**-x**2 / (x sqrt(pi)) = 1 - |y| solved for x
beyond), then Newton steps on erf(x) = |y| for |y| <= 1/2, or on ln erfc(x) = ln(1 - |y|) in the
tails, where 1 - |y| is exact, erf(x) - y would cancel, and the log makes the equation nearly
quadratic in x; each step squares the error. erfinv(+-1) = +-inf, NaN outside [-1, 1].

I1 (I0' = I1): the power series I1(x) = sum_k (x/2)**(2k+1) / (k! (k+1)!) for |x| < 30 (positive
terms, no cancellation) and the asymptotic series e**x / sqrt(2 pi x) (1 - 3/(8x) - 15/(128x**2)
- ...) beyond, a_k = prod_{j<=k} (4 - (2j-1)**2) / (k! 8**k) the coefficient of (-1/x)**k.
"""
import math

import numpy as np

_erf = np.vectorize(math.erf, otypes=[np.float64])     # NumPy has no erf: math.erf per element
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def erf(x):
    return _erf(np.asarray(x, np.float64))


def erfc(x):
    return _erfc(np.asarray(x, np.float64))


def _lgamma_scalar(v):
    try:
        return math.lgamma(v)
    except ValueError:   # the poles 0, -1, -2, ...: PyTorch's +inf
        return math.inf


_lgamma = np.vectorize(_lgamma_scalar, otypes=[np.float64])


def lgamma(x):
    return _lgamma(np.asarray(x, np.float64))


def _shift_up(x, step):
    """x moved to >= 10 by the recurrence: (the shifted x, the sum of step(x) over the steps)."""
    acc = np.zeros_like(x)
    small = x < 10
    while small.any():
        acc += np.where(small, step(x), 0.0)
        x = np.where(small, x + 1, x)
        small = x < 10
    return x, acc


def digamma(x):
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        pole = (x < 0) & (x == np.floor(x))            # -1, -2, ..., -inf
        reflect = (x < 0) & ~pole
        z = np.where(pole | (x == 0), 1.0, np.where(reflect, 1 - x, x))
        z, acc = _shift_up(z, lambda v: -1 / v)
        w = 1 / (z * z)
        series = w * (1 / 12 - w * (1 / 120 - w * (1 / 252 - w * (1 / 240 - w * (1 / 132 - w * (691 / 32760
                                                                                            - w / 12))))))
        out = acc + np.log(z) - 0.5 / z - series
        out = np.where(reflect, out - np.pi / np.tan(np.pi * np.modf(x)[0]), out)
        out = np.where(x == 0, np.copysign(np.inf, -x), out)
        return np.where(pole, np.nan, out)


def trigamma(x):
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        reflect = x < 0.5
        z, acc = _shift_up(np.where(reflect, 1 - x, x), lambda v: 1 / (v * v))
        w = 1 / (z * z)
        series = w / z * (1 / 6 - w * (1 / 30 - w * (1 / 42 - w * (1 / 30 - w * (5 / 66 - w * (691 / 2730
                                                                                          - w * 7 / 6))))))
        out = acc + 1 / z + 0.5 * w + series
        return np.where(reflect, np.pi ** 2 / np.sin(np.pi * x) ** 2 - out, out)


def _giles(u):
    """Giles' single-precision erfinv, for 0 <= u < 1."""
    w = -np.log((1 - u) * (1 + u))
    c = w - 2.5
    central = 2.81022636e-08
    for k in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503, -0.00417768164,
              0.246640727, 1.50140941):
        central = k + central * c
    t = np.sqrt(w) - 3
    tail = -0.000200214257
    for k in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047,
              1.00167406, 2.83297682):
        tail = k + tail * t
    return np.where(w < 5, central, tail) * u


def erfinv(y):
    y = np.asarray(y, np.float64)
    u = np.abs(y)
    inside = u < 1
    u = np.where(inside, u, 0.0)
    v = np.empty_like(u)
    central = u <= 0.5
    with np.errstate(all="ignore"):
        c = u[central]
        vc = _giles(c)
        for _ in range(2):   # Newton on erf(v) = u
            vc = vc - (_erf(vc) - c) / (2 / math.sqrt(math.pi) * np.exp(-vc * vc))
        v[central] = vc
        q = 1 - u[~central]    # exact for u >= 1/2
        t = -np.log(q)
        # beyond Giles' range (1 - u < 1e-7): erfc(v) ~ e**-v**2 / (v sqrt(pi)), so v**2 ~ t - ln(pi t) / 2
        vt = np.where(t < 16, _giles(u[~central]), np.sqrt(t - 0.5 * np.log(np.pi * t)))
        for _ in range(3):   # Newton on ln erfc(v) = ln q, nearly quadratic in v
            e = _erfc(vt)
            vt = vt + (np.log(e) + t) * e / (2 / math.sqrt(math.pi) * np.exp(-vt * vt))
        v[~central] = vt
        out = np.where(inside, v, np.where(np.abs(y) == 1, np.inf, np.nan))
    return np.copysign(out, y)


def i1(x):
    x = np.asarray(x, np.float64)
    a = np.abs(x)
    small = a < 30
    out = np.empty_like(a)
    s = a[small] / 2
    term = s.copy()
    total = term.copy()
    for k in range(1, 80):
        term = term * s * s / (k * (k + 1))
        total += term
    out[small] = total
    b = a[~small]
    with np.errstate(all="ignore"):
        coef, tail, power = 1.0, np.ones_like(b), np.ones_like(b)
        for k in range(1, 12):
            coef *= (4 - (2 * k - 1) ** 2) / (k * 8)
            power = power * (-1 / b)
            tail += coef * power
        out[~small] = np.exp(b) / np.sqrt(2 * np.pi * b) * tail
    return np.copysign(out, x)
