"""``minidl gradcheck``: finite-difference checks of every op and layer, as a table.

Each case of ``minidl.cli.specs`` is checked by ``minidl.autograd.gradcheck`` (float64,
central differences, random cotangents): that is the verdict. The table also shows the
worst absolute error |analytic - numerical| over all checked inputs, measured with the same
cotangent, so a pass with little margin is visible. Exit status 1 when any case fails.
"""
import fnmatch
import time

import numpy as np

from ..autograd import engine, grad_mode
from ..autograd.gradcheck import GradcheckError, gradcheck
from .args import UsageError, nonnegative_float, positive_float


def add_arguments(p):
    p.add_argument("-k", "--filter", default=None, help="only cases whose name matches this glob (e.g. '*norm*')")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    p.add_argument("--eps", type=positive_float, default=1e-6, help="finite-difference step")
    p.add_argument("--atol", type=nonnegative_float, default=1e-5)
    p.add_argument("--rtol", type=nonnegative_float, default=1e-3)
    return p


def worst_error(func, tensors, eps, seed=0):
    """max |analytic - numerical| of <v, func(x)> over every input with requires_grad."""
    leaves = [(t.detach().requires_grad_(True) if getattr(t, "requires_grad", False) else t) for t in tensors]
    outs = func(*leaves)
    outs = [o for o in (outs if isinstance(outs, (tuple, list)) else (outs,)) if o.dtype.kind == "f"]
    rng = np.random.default_rng(seed)
    vs = [rng.standard_normal(o.shape) for o in outs]
    engine.backward([o for o in outs if o.requires_grad], [v for o, v in zip(outs, vs) if o.requires_grad])

    def objective():
        with grad_mode.no_grad():
            ys = func(*leaves)
        ys = [o for o in (ys if isinstance(ys, (tuple, list)) else (ys,)) if o.dtype.kind == "f"]
        return sum(float(np.sum(y.numpy(force=True) * v)) for y, v in zip(ys, vs))
    worst = 0.0
    for i, t in enumerate(leaves):
        if not getattr(t, "requires_grad", False):
            continue
        if t.grad is None:  # a check against zeros on both sides would pass without testing anything
            raise GradcheckError(f"input {i} received no gradient: it does not reach the output")
        analytic = t.grad.numpy(force=True)
        data = t._data
        for j in np.ndindex(*t.shape):
            orig = data[j]
            data[j] = orig + eps
            plus = objective()
            data[j] = orig - eps
            minus = objective()
            data[j] = orig
            worst = max(worst, abs(analytic[j] - (plus - minus) / (2 * eps)))
    return worst


def run(args):
    from . import specs
    from ..testing.op_spec import _is_float_array, _to_tensors
    cases = specs.registry()
    if args.filter:
        cases = [c for c in cases if fnmatch.fnmatch(c.name.lower(), args.filter.lower())]
        if not cases:
            raise UsageError(f"-k {args.filter!r}: no gradcheck case matches (--list shows them)")
    if args.list:
        for c in cases:
            print(f"{c.group:10s} {c.name}")
        return 0
    rows, failed = [], 0
    width = max(len(c.name) for c in cases)
    print(f"{'group':10s} {'case':{width}s}  result  worst |err|  ms")
    print("-" * (width + 36))
    for c in cases:
        arrays = c.make_inputs()
        idx = c.grad_inputs if c.grad_inputs is not None else [i for i, a in enumerate(arrays) if _is_float_array(a)]
        t0 = time.perf_counter()
        detail = ""
        try:
            ok = gradcheck(c.op, _to_tensors(arrays, np.float64, "cpu", set(idx)), eps=args.eps, atol=args.atol,
                           rtol=args.rtol)
            err = worst_error(c.op, _to_tensors(arrays, np.float64, "cpu", set(idx)), args.eps)
        except GradcheckError as exc:
            ok, err, detail = False, float("nan"), str(exc)
        except Exception as exc:  # an op that raises is a failure of that case, not of the tool
            ok, err, detail = False, float("nan"), f"{type(exc).__name__}: {exc}"
        ms = 1e3 * (time.perf_counter() - t0)
        failed += not ok
        rows.append((c, ok, err, ms, detail))
        print(f"{c.group:10s} {c.name:{width}s}  {'pass' if ok else 'FAIL':6s}  {err:10.2e}  {ms:5.0f}", flush=True)
        if detail:
            print(f"{'':10s}   {detail}")
    print("-" * (width + 36))
    worst = max((r for r in rows if r[1]), key=lambda r: r[2], default=None)
    print(f"{len(rows) - failed} passed, {failed} failed" +
          (f"; largest error among passes {worst[2]:.2e} ({worst[0].name})" if worst else ""))
    return 1 if failed else 0
