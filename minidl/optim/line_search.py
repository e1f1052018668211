"""The strong-Wolfe line search of LBFGS (``line_search_fn="strong_wolfe"``), as PyTorch's.

Along a descent direction d from x, find a step t with sufficient decrease
f(x + t d) <= f(x) + c1 t g.d and small curvature |g(x + t d).d| <= c2 |g.d|: first widen t
until a bracket holding such a step is found (or one already fits), then shrink the bracket
by safeguarded cubic interpolation ("zoom", Nocedal & Wright, Algorithms 3.5 and 3.6).

The scalars follow PyTorch's types: the losses f are Python floats, the directional derivatives
g.d and max|d| are 0-d values of the parameters' dtype (``tensor_scalar``), and a step t is whatever
the arithmetic made it (the caller's lr, a Python number, or a 0-d value where it was computed from
one). So a float32 search compares and interpolates in float32 where PyTorch's does.
"""
import math

import numpy as np


def tensor_scalar(value, dtype):
    """A 0-d result that PyTorch keeps as a 0-d tensor of ``dtype`` (a dot product, a max, a sum),
    as a NumPy scalar of that dtype on the host. NumPy treats Python numbers in arithmetic with it
    as weak, as PyTorch treats them with a 0-d tensor, so ``1.0 / ys`` or ``f + c1 * t * gtd`` stays
    in float32 for float32 parameters and is rounded where PyTorch's is."""
    return np.dtype(dtype).type(float(value))


def tensor_dot(a, b):
    """The dot product of two flat vectors as ``tensor_scalar`` of their dtype (NumPy's ``dot`` on
    the host, whose float32 sums are BLAS's as PyTorch's are; ``@`` on a device)."""
    return tensor_scalar(a.dot(b) if isinstance(a, np.ndarray) else a @ b, a.dtype)


def cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser, clamped to ``bounds`` (default [x1, x2]), of the cubic through
    (x1, f1) and (x2, f2) with slopes g1 and g2; the bounds' midpoint if it has none."""
    lo, hi = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square < 0:
        return (lo + hi) / 2.0
    d2 = math.sqrt(d2_square) if type(d2_square) in (int, float) else np.sqrt(d2_square)
    if x1 <= x2:
        min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(min_pos, lo), hi)


def strong_wolfe(obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """(loss, flat gradient, step t, evaluations) at the step found. ``obj_func(x, t, d)``
    gives the loss and flat gradient at x + t d; f, g, gtd are the loss, gradient and
    directional derivative at t = 0."""
    d_norm = tensor_scalar(abs(d).max(), d.dtype)
    g = g.copy()
    f_new, g_new = obj_func(x, t, d)
    evals = 1
    gtd_new = tensor_dot(g_new, d)
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done, ls_iter = False, 0
    while ls_iter < max_ls:    # widen until a bracket [t_prev, t] holds an acceptable step
        too_far = f_new > f + c1 * t * gtd or (ls_iter > 1 and f_new >= f_prev)
        if not too_far and abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if too_far or gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        min_step, max_step = t + 0.01 * (t - t_prev), t * 10
        t_prev, t = t, cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(min_step, max_step))
        f_prev, g_prev, gtd_prev = f_new, g_new.copy(), gtd_new
        f_new, g_new = obj_func(x, t, d)
        evals += 1
        gtd_new = tensor_dot(g_new, d)
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]

    insufficient_progress = False
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:    # zoom: shrink the bracket
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1])
        # keep t away from the bracket's ends, unless the last step already made progress there
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insufficient_progress or t >= max(bracket) or t <= min(bracket):
                t = max(bracket) - eps if abs(t - max(bracket)) < abs(t - min(bracket)) else min(bracket) + eps
                insufficient_progress = False
            else:
                insufficient_progress = True
        else:
            insufficient_progress = False
        f_new, g_new = obj_func(x, t, d)
        evals += 1
        gtd_new = tensor_dot(g_new, d)
        ls_iter += 1
        if f_new > f + c1 * t * gtd or f_new >= bracket_f[low]:
            bracket[high], bracket_f[high], bracket_g[high], bracket_gtd[high] = t, f_new, g_new.copy(), gtd_new
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
                bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
            bracket[low], bracket_f[low], bracket_g[low], bracket_gtd[low] = t, f_new, g_new.copy(), gtd_new
    return bracket_f[low], bracket_g[low], bracket[low], evals
