"""What every lab experiment shares: a result object with tables, a figure and a conclusion.

An experiment is a module with ``run(quick=True, out=None, seed=0) -> LabResult``. It computes
its numbers, fills one or more ``Table``s, draws one figure into ``out`` and states a
conclusion *computed from those numbers* (so a run where the expected effect does not show
says so instead of repeating the literature). Its training loops run over ``progress(range(...), desc)``,
which shows a progress bar while ``progress_bars(True)`` is in effect (``lab.run`` turns it on
for full mode).
"""
import contextlib
import json
import os
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Table:
    title: str
    columns: list
    rows: list = field(default_factory=list)   # each a dict column -> value

    def add(self, **row):
        missing = [c for c in self.columns if c not in row]
        if missing:
            raise KeyError(f"Table {self.title!r}: row lacks columns {missing}")
        self.rows.append(row)

    def column(self, name):
        return [r[name] for r in self.rows]

    def format(self):
        cells = [[_fmt(r[c]) for c in self.columns] for r in self.rows]
        widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(self.columns)]
        line = "  ".join(c.ljust(w) for c, w in zip(self.columns, widths))
        out = [self.title, line, "-" * len(line)]
        out += ["  ".join(v.rjust(w) if _numeric(v) else v.ljust(w) for v, w in zip(row, widths)) for row in cells]
        return "\n".join(out)


@dataclass
class LabResult:
    name: str
    tables: list
    figure: str                 # path of the saved PNG
    conclusion: str
    quick: bool = True
    data: dict = field(default_factory=dict)   # raw numbers (curves) for tests and plots

    def table(self, title_prefix=""):
        for t in self.tables:
            if t.title.startswith(title_prefix):
                return t
        raise KeyError(f"{self.name}: no table titled {title_prefix!r}...")

    def format(self):
        mode = "quick" if self.quick else "full"
        parts = [f"== lab {self.name} ({mode} mode) =="] + [t.format() + "\n" for t in self.tables]
        parts += [f"figure: {self.figure}", f"conclusion: {self.conclusion}"]
        return "\n".join(parts)

    def save_json(self, path):
        blob = {"name": self.name, "quick": self.quick, "figure": self.figure, "conclusion": self.conclusion,
                "tables": [{"title": t.title, "columns": t.columns, "rows": t.rows} for t in self.tables]}
        with open(path, "w") as f:
            json.dump(blob, f, indent=2, default=_jsonable)


def _jsonable(v):
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    return str(v)


def _numeric(s):
    try:
        float(s.replace("%", "").replace("x", ""))
        return True
    except ValueError:
        return False


def _fmt(v):
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        v = float(v)
        if v != v:
            return "nan"
        if v == 0:
            return "0"
        if abs(v) >= 1e4 or abs(v) < 1e-3:
            return f"{v:.2e}"
        return f"{v:.4g}"
    return str(v)


_PROGRESS = [False]


@contextlib.contextmanager
def progress_bars(enabled):
    """Within the block, ``progress`` shows a tqdm bar per training loop (when tqdm is installed)."""
    before, _PROGRESS[0] = _PROGRESS[0], bool(enabled)
    try:
        yield
    finally:
        _PROGRESS[0] = before


def progress(steps, desc):
    """``steps`` (a range of training steps), with a progress bar named ``desc`` inside
    ``progress_bars(True)``."""
    if _PROGRESS[0]:
        try:
            from tqdm import tqdm
        except ImportError:
            return steps
        return tqdm(steps, desc=desc, unit="step", leave=False, dynamic_ncols=True)
    return steps


def out_dir(name, out):
    path = out or os.path.join("runs", "lab", name)
    os.makedirs(path, exist_ok=True)
    return path


def pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save_figure(fig, out, name):
    path = os.path.join(out, f"{name}.png")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    pyplot().close(fig)
    return path


def smooth(values, k=5):
    """Trailing moving average (the first k-1 points average what exists so far)."""
    v = np.asarray(values, dtype=np.float64)
    if len(v) == 0:
        return v
    c = np.cumsum(np.insert(v, 0, 0.0))
    idx = np.arange(1, len(v) + 1)
    lo = np.maximum(idx - k, 0)
    return (c[idx] - c[lo]) / (idx - lo)


def classifier_step(model, opt, sched, x, y):
    """One training step of cross-entropy on the arrays (x, y): backward, the optimizer's step and
    the schedule's; returns the loss as a float."""
    from ..nn import functional as F
    from ..tensor.factories import tensor
    loss = F.cross_entropy(model(tensor(x)), tensor(y))
    opt.zero_grad()
    loss.backward()
    opt.step()
    if sched is not None:
        sched.step()
    return float(loss.item())


def eval_accuracy(model, x, y, chunk=500, nan_if_diverged=False):
    """Accuracy of ``model`` in eval mode over the arrays (x, y), ``chunk`` images at a time;
    with ``nan_if_diverged``, NaN when a logit is not finite (a diverged run has no accuracy).
    Leaves the model in train mode."""
    from ..autograd import grad_mode
    from ..tensor.factories import tensor
    model.eval()
    with grad_mode.no_grad():
        logits = np.concatenate([model(tensor(x[i:i + chunk])).numpy() for i in range(0, len(x), chunk)])
    model.train()
    if nan_if_diverged and not np.isfinite(logits).all():
        return float("nan")
    return float((logits.argmax(1) == y).mean())
