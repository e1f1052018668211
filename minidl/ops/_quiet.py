"""IEEE special values without NumPy's RuntimeWarnings, as PyTorch computes them.

PyTorch returns sqrt(-1) = nan, log(0) = -inf and 0 / 0 = nan silently; NumPy computes the same
values but also warns ("invalid value encountered in sqrt"), which a port would see as a new
warning (and as an exception under ``-W error``). ``quiet()`` is NumPy's ``errstate(all="ignore")``
for the ops whose ordinary inputs reach those values. ``np.errstate`` builds its error-state object
on every entry, which costs more than a small op; the same state, built once, is set into NumPy's
context variable here (the variable ``np.errstate`` itself sets), falling back to ``np.errstate``
where that NumPy internal is missing.
"""
import numpy as np

try:
    from numpy._core._ufunc_config import _extobj_contextvar as _STATE
    from numpy._core.umath import _make_extobj
    _IGNORE = _make_extobj(all="ignore")
except (ImportError, AttributeError, TypeError):   # another NumPy layout: the public, slower way
    _STATE = None


class _Quiet:
    __slots__ = ("_token",)

    def __enter__(self):
        self._token = _STATE.set(_IGNORE)
        return self

    def __exit__(self, *exc):
        _STATE.reset(self._token)
        return False


def quiet():
    """A context manager under which NumPy's floating-point errors pass without a warning."""
    return _Quiet() if _STATE is not None else np.errstate(all="ignore")
