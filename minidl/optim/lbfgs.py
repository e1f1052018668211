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
PyTorch's. The scalars of the recursion (ro, H_diag, al) are Python floats, computed in
float64 where PyTorch keeps 0-d tensors of the parameters' dtype.
"""
from .. import backends
from ..autograd import grad_mode
from ..tensor.tensor import Tensor
from . import hyper, state_checks
from .line_search import strong_wolfe
from .optimizer import Optimizer, held

_FLAT = ("d", "prev_flat_grad")
_FLAT_LISTS = ("old_dirs", "old_stps")


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
        return {"func_evals": ("count", True), "n_iter": ("count", True), "t": ("real", False),
                "H_diag": ("real", False), "prev_loss": ("real", False)}

    def _checked_param_state(self, index, p, group, entries):
        """Also the flat vectors: each as long as all parameters together."""
        state = super()._checked_param_state(index, p, group, entries)
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
            p._data += step * update[offset:offset + n].reshape(p._data.shape)
            offset += n

    def _directional_evaluate(self, closure, x, t, d):
        self._add_grad(t, d)
        loss = _loss_value(closure())
        flat_grad = self._gather_flat_grad()
        for p, saved in zip(self._params, x):
            p._data[...] = saved
        return loss, flat_grad

    def step(self, closure):
        """Up to ``max_iter`` iterations; returns the loss of the first closure call."""
        if closure is None or not callable(closure):
            raise TypeError("LBFGS.step requires a closure that reevaluates the model and returns the loss")
        with grad_mode.no_grad():
            return self._run(closure)

    def _run(self, closure):
        group = self.param_groups[0]
        lr, max_iter, max_eval = hyper.scalar(group["lr"]), group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        history_size = group["history_size"]
        xp = self._xp()

        def evaluate():
            with grad_mode.enable_grad():
                return closure()

        state = self.state.setdefault(self._params[0], {})
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        orig_loss = evaluate()
        loss = _loss_value(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        if float(abs(flat_grad).max(initial=0.0)) <= tolerance_grad:
            return orig_loss

        d, t = _array(state.get("d")), _number(state.get("t"))
        old_dirs, old_stps = _arrays(state.get("old_dirs")), _arrays(state.get("old_stps"))
        ro, H_diag = _numbers(state.get("ro")), _number(state.get("H_diag"))
        prev_flat_grad, prev_loss = _array(state.get("prev_flat_grad")), _number(state.get("prev_loss"))
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro, H_diag = [], [], [], 1.0
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = float(y.dot(s))
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / float(y.dot(y))
                al = [0.0] * len(old_dirs)
                q = -flat_grad
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = float(old_stps[i].dot(q)) * ro[i]
                    q -= al[i] * old_dirs[i]
                d = r = q * H_diag
                for i in range(len(old_dirs)):
                    be_i = float(old_dirs[i].dot(r)) * ro[i]
                    r += (al[i] - be_i) * old_stps[i]
                state["al"] = al
            prev_flat_grad = flat_grad.copy()
            prev_loss = loss
            t = min(1.0, 1.0 / float(abs(flat_grad).sum())) * lr if state["n_iter"] == 1 else lr
            gtd = float(flat_grad.dot(d))
            if gtd > -tolerance_change:    # not a descent direction
                break

            evals = 0
            if group["line_search_fn"] is not None:
                x_init = [xp.array(p._data, copy=True) for p in self._params]
                loss, flat_grad, t, evals = strong_wolfe(
                    lambda x, t, d: self._directional_evaluate(evaluate, x, t, d), x_init, t, d, loss, flat_grad,
                    gtd, max_ls=max_eval - current_evals)
                self._add_grad(t, d)
                opt_cond = float(abs(flat_grad).max()) <= tolerance_grad
            else:
                self._add_grad(t, d)
                opt_cond = False
                if n_iter != max_iter:    # the next iteration needs the gradient here
                    loss = _loss_value(evaluate())
                    flat_grad = self._gather_flat_grad()
                    opt_cond = float(abs(flat_grad).max()) <= tolerance_grad
                    evals = 1
            current_evals += evals
            state["func_evals"] += evals
            if (n_iter == max_iter or current_evals >= max_eval or opt_cond
                    or float(abs(d * t).max()) <= tolerance_change or abs(loss - prev_loss) < tolerance_change):
                break

        state.update(d=held(d), t=t, old_dirs=[held(v) for v in old_dirs], old_stps=[held(v) for v in old_stps],
                     ro=ro, H_diag=H_diag, prev_flat_grad=held(prev_flat_grad), prev_loss=prev_loss)
        return orig_loss


def _loss_value(loss):
    if isinstance(loss, Tensor):
        if loss.numel() != 1:
            raise ValueError(f"LBFGS closure must return a scalar loss, got a tensor of shape {tuple(loss.shape)}")
        return float(loss.item())
    return float(loss)


def _array(value):
    """A state vector's array (the state holds Tensors; None stays None)."""
    return value._data if isinstance(value, Tensor) else value


def _arrays(values):
    return None if values is None else [_array(v) for v in values]


def _number(value):
    """A state scalar as a Python number (a 0-d Tensor, as PyTorch saves H_diag, included)."""
    return value.item() if isinstance(value, Tensor) else value


def _numbers(values):
    return None if values is None else [_number(v) for v in values]
