"""L-BFGS: a quasi-Newton method that approximates the inverse Hessian from the last
``history_size`` pairs (s, y) of steps and gradient changes. PyTorch's algorithm:

``step(closure)`` (the closure clears the gradients, computes the loss, calls backward and
returns the loss) runs up to ``max_iter`` iterations, on all parameters as one flat vector x
with flat gradient g:

    first iteration:  d = -g,  t = min(1, 1 / sum|g|) * lr
    afterwards:       y = g - g_prev,  s = t_prev * d_prev;  if y.s > 1e-10 keep (s, y),
                      rho = 1 / y.s,  H = y.s / y.y   (dropping the oldest past history_size)
                      d = -(H^-1 approx) g by the two-loop recursion:
                          q = -g;  for i newest..oldest: a_i = rho_i s_i.q;  q -= a_i y_i
                          r = H q; for i oldest..newest: b = rho_i y_i.r;   r += (a_i - b) s_i
                      t = lr
    x <- x + t d      (t from the strong-Wolfe line search with line_search_fn="strong_wolfe")

It stops early when max|g| <= tolerance_grad, g.d > -tolerance_change, max|t d| or the change
of the loss fall below tolerance_change, or ``max_eval`` closure calls are spent. The state
(the history, d, t, ...) is kept under the first parameter, as in PyTorch, so state_dict and
load_state_dict carry it; its vectors (d, prev_flat_grad, old_dirs, old_stps) are Tensors, as
PyTorch's.

The scalars have PyTorch's types, so that a float32 run rounds where PyTorch's does (over a long
nonconvex run float64 scalars drift away from PyTorch's path): what PyTorch computes as a 0-d
tensor (the dot products ys, y.y, s.q, y.r; ro = 1/ys, H_diag, al, g.d, and a t computed from
them) is a NumPy scalar of the parameters' dtype during the step (``tensor_scalar``) and a 0-d
Tensor beside the parameter in the state; what PyTorch keeps as a Python number (the losses,
prev_loss, t = lr, the first H_diag = 1, the counts) stays one. The updates ``x += alpha v`` of the
recursion and of the step are rounded once, as PyTorch's ``add_(v, alpha=)`` (``_add_scaled``).
"""
import numbers

import numpy as np

from .. import backends
from ..autograd import grad_mode
from ..tensor.tensor import Tensor
from . import hyper, state_checks
from .line_search import strong_wolfe, tensor_dot, tensor_scalar
from .optimizer import Optimizer, _beside, held

_FLAT = ("d", "prev_flat_grad")
_FLAT_LISTS = ("old_dirs", "old_stps")
_SCALARS = ("t", "H_diag")
_SCALAR_LISTS = ("ro", "al")


class LBFGS(Optimizer):
    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None):
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                        tolerance_change=tolerance_change, history_size=history_size, line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    @staticmethod
    def _check_group(group):
        hyper.check_lr(group["lr"])
        for name in ("max_iter", "max_eval", "history_size"):
            value = group[name]
            if not state_checks.is_index(value) or value < 1:
                raise ValueError(f"LBFGS {name} must be a positive integer, got {value!r}")
        hyper.check_nonnegative("tolerance_grad", group["tolerance_grad"])
        hyper.check_nonnegative("tolerance_change", group["tolerance_change"])
        if group["line_search_fn"] not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS line_search_fn must be None or 'strong_wolfe', got {group['line_search_fn']!r}")

    def _state_spec(self, group):
        return {"func_evals": ("count", True), "n_iter": ("count", True), "prev_loss": ("real", False)}

    def _checked_param_state(self, index, p, group, entries):
        """Also the flat vectors: each as long as all parameters together; and the scalars, each a
        number (kept as it is) or a 0-d array (kept as a 0-d Tensor of the parameter's dtype, as
        PyTorch casts it), the lists ro and al of such (al also of None)."""
        scalars = {}
        for name in _SCALARS + _SCALAR_LISTS:
            if entries.get(name) is not None:
                where = f"loaded optimizer state for parameter {index}, {name!r}"
                scalars[name] = _loaded_scalars(where, entries[name], p, name == "al") if name in _SCALAR_LISTS \
                    else _loaded_scalar(where, entries[name], p)
        state = super()._checked_param_state(index, p, group, entries)
        state.update(scalars)
        n = self._numel()
        for name in _FLAT + _FLAT_LISTS:
            if state.get(name) is None:
                continue
            vectors = state[name] if name in _FLAT_LISTS else [state[name]]
            if not isinstance(vectors, list) or any(getattr(v, "shape", None) != (n,) for v in vectors):
                raise ValueError(f"loaded optimizer state for parameter {index}, {name!r}: expected "
                                 f"{'a list of vectors' if name in _FLAT_LISTS else 'a vector'} of length {n} "
                                 "(all parameters flattened)")
        return state

    # flat views of all parameters ------------------------------------------------------
    def _numel(self):
        return sum(p.numel() for p in self._params)

    def _xp(self):
        return backends.namespace_of(self._params[0]._data)

    def _gather_flat_grad(self):
        xp = self._xp()
        return xp.concatenate([xp.zeros(p.numel(), dtype=p._data.dtype) if p.grad is None
                               else p.grad._data.reshape(-1) for p in self._params])

    def _add_grad(self, step, update):
        offset = 0
        for p in self._params:
            n = p.numel()
            _add_scaled(p._data, update[offset:offset + n].reshape(p._data.shape), step)
            offset += n

    def _directional_evaluate(self, closure, x, t, d):
        self._add_grad(t, d)
        loss = _loss_value(closure())
        flat_grad = self._gather_flat_grad()
        for p, saved in zip(self._params, x):
            p._data[...] = saved
        return loss, flat_grad

    def step(self, closure):
        """Up to ``max_iter`` iterations; returns the loss of the first closure call. The scalar
        arithmetic gives inf or nan silently (a zero curvature, a degenerate interpolation), as
        PyTorch's 0-d tensors do."""
        if closure is None or not callable(closure):
            raise TypeError("LBFGS.step requires a closure that reevaluates the model and returns the loss")
        with grad_mode.no_grad(), np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            return self._run(closure)

    def _run(self, closure):
        group = self.param_groups[0]
        lr, max_iter, max_eval = _lr_value(group["lr"]), group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        history_size = group["history_size"]
        xp = self._xp()
        errors = np.geterr()

        def evaluate():    # the closure's own NumPy runs with the caller's error settings
            with grad_mode.enable_grad(), np.errstate(**errors):
                return closure()

        state = self.state.setdefault(self._params[0], {})
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        orig_loss = evaluate()
        loss = _loss_value(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        dtype = flat_grad.dtype

        def scalar(value):
            return tensor_scalar(value, dtype)
        if flat_grad.size == 0 or scalar(abs(flat_grad).max()) <= tolerance_grad:
            return orig_loss

        d, t = _array(state.get("d")), _scalar(state.get("t"))
        old_dirs, old_stps = _arrays(state.get("old_dirs")), _arrays(state.get("old_stps"))
        ro, H_diag, al = _scalars(state.get("ro")), _scalar(state.get("H_diag")), _scalars(state.get("al"))
        prev_flat_grad, prev_loss = _array(state.get("prev_flat_grad")), state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro, H_diag = [], [], [], 1
            else:
                y = flat_grad - prev_flat_grad
                s = d * float(t)
                ys = tensor_dot(y, s)
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / tensor_dot(y, y)
                if al is None:    # kept across steps, as PyTorch's, whose entries are overwritten before use
                    al = [None] * history_size
                al += [None] * (len(old_dirs) - len(al))
                q = -flat_grad
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = tensor_dot(old_stps[i], q) * ro[i]
                    _add_scaled(q, old_dirs[i], -al[i])
                d = r = q * float(H_diag)
                for i in range(len(old_dirs)):
                    be_i = tensor_dot(old_dirs[i], r) * ro[i]
                    _add_scaled(r, old_stps[i], al[i] - be_i)
            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.copy()
            else:    # in place, as PyTorch: the state's Tensor follows
                prev_flat_grad[...] = flat_grad
            prev_loss = loss
            t = min(1.0, 1.0 / scalar(abs(flat_grad).sum())) * lr if state["n_iter"] == 1 else lr
            gtd = tensor_dot(flat_grad, d)
            if gtd > -tolerance_change:    # not a descent direction
                break

            evals = 0
            if group["line_search_fn"] is not None:
                x_init = [xp.array(p._data, copy=True) for p in self._params]
                loss, flat_grad, t, evals = strong_wolfe(
                    lambda x, t, d: self._directional_evaluate(evaluate, x, t, d), x_init, t, d, loss, flat_grad,
                    gtd, max_ls=max_eval - current_evals)
                self._add_grad(t, d)
                opt_cond = scalar(abs(flat_grad).max()) <= tolerance_grad
            else:
                self._add_grad(t, d)
                opt_cond = False
                if n_iter != max_iter:    # the next iteration needs the gradient here
                    loss = _loss_value(evaluate())
                    flat_grad = self._gather_flat_grad()
                    opt_cond = scalar(abs(flat_grad).max()) <= tolerance_grad
                    evals = 1
            current_evals += evals
            state["func_evals"] += evals
            if (n_iter == max_iter or current_evals >= max_eval or opt_cond
                    or scalar(abs(d * float(t)).max()) <= tolerance_change or abs(loss - prev_loss) < tolerance_change):
                break

        p0 = self._params[0]
        state.update(d=held(d), t=_held_scalar(t, p0), old_dirs=[held(v) for v in old_dirs],
                     old_stps=[held(v) for v in old_stps], ro=[_held_scalar(v, p0) for v in ro],
                     H_diag=_held_scalar(H_diag, p0), prev_flat_grad=held(prev_flat_grad), prev_loss=prev_loss)
        if al is not None:
            state["al"] = [_held_scalar(v, p0) for v in al]
        return orig_loss


def _add_scaled(x, v, alpha):
    """x += alpha * v in place, rounded once as PyTorch's ``x.add_(v, alpha=alpha)`` is (its kernel
    is a fused multiply-add): below float64 the product and sum are formed in float64, where the
    product of two float32 numbers is exact, and rounded to x's dtype once. alpha is first rounded
    to x's dtype, as the kernel takes it."""
    if x.dtype.itemsize < 8 and x.dtype.kind == "f":
        alpha = float(np.dtype(x.dtype).type(alpha))
        x[...] = (x.astype(np.float64) + v.astype(np.float64) * alpha).astype(x.dtype)
    else:
        x += v * float(alpha)


def _loss_value(loss):
    if isinstance(loss, Tensor):
        if loss.numel() != 1:
            raise ValueError(f"LBFGS closure must return a scalar loss, got a tensor of shape {tuple(loss.shape)}")
        return float(loss.item())
    return float(loss)


def _lr_value(lr):
    """The step's lr: a number as it is; a Tensor lr as a 0-d value of its dtype (PyTorch's t is
    then a 0-d tensor, not a Python number)."""
    return tensor_scalar(lr.item(), lr._data.dtype) if isinstance(lr, Tensor) else lr


def _array(value):
    """A state vector's array (the state holds Tensors; None stays None)."""
    return value._data if isinstance(value, Tensor) else value


def _arrays(values):
    return None if values is None else [_array(v) for v in values]


def _scalar(value):
    """A state scalar for the step: a 0-d Tensor as a NumPy scalar of its dtype, a number (or None) as it is."""
    if isinstance(value, Tensor):
        return tensor_scalar(value.item(), value._data.dtype)
    return value


def _scalars(values):
    return None if values is None else [_scalar(v) for v in values]


def _held_scalar(value, p):
    """A step scalar for the state: a NumPy scalar (PyTorch's 0-d tensor) as a 0-d Tensor beside ``p``."""
    return held(_beside(p, np.array(value))) if isinstance(value, np.generic) else value


def _loaded_scalar(where, value, p):
    """A loaded t or H_diag: a number kept as it is, a 0-d array or Tensor as a 0-d Tensor of the
    parameter's dtype (PyTorch casts a floating-point state tensor to the parameter's)."""
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_, np.generic)):
        return state_checks.real(where, value) if isinstance(value, float) else value
    if getattr(value, "ndim", None) != 0 and not isinstance(value, np.generic):
        raise ValueError(f"{where}: expected a number or a 0-d tensor, got {state_checks._show(value)}")
    state_checks.real(where, value)
    host = np.asarray(state_checks.host(value))
    return held(_beside(p, host.astype(p._data.dtype if host.dtype.kind == "f" else host.dtype)))


def _loaded_scalars(where, values, p, none_allowed):
    if not isinstance(values, (list, tuple)):
        raise ValueError(f"{where}: expected a list of scalars, got {state_checks._show(values)}")
    return [None if v is None and none_allowed else _loaded_scalar(f"{where}[{i}]", v, p)
            for i, v in enumerate(values)]
