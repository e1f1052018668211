"""What a measurement is: ``TaskSpec`` (what was timed) and ``Measurement`` (the times), with
PyTorch's fields, statistics and printed form, plus the formatting helpers ``Compare`` uses.

A Measurement holds ``raw_times``, the seconds each block of ``number_per_run`` runs took;
``times`` are per run (``raw / number_per_run``). ``median``, ``mean`` and the quartiles are
over those per-run times, the quartiles (and median) by linear interpolation between order
statistics (numpy.quantile's default, which is torch.quantile's), and ``iqr = p75 - p25``.
"""
import collections
import contextlib
import dataclasses
import math
import textwrap

import numpy as np

__all__ = ["TaskSpec", "Measurement", "select_unit", "unit_to_english", "trim_sigfig", "ordered_unique",
           "set_torch_threads"]

_MAX_SIGNIFICANT_FIGURES = 4
_MIN_CONFIDENCE_INTERVAL = 25e-9   # 25 ns: below this the clock itself is the noise

_IQR_WARN_THRESHOLD = 0.1
_IQR_GROSS_WARN_THRESHOLD = 0.25


@dataclasses.dataclass(init=True, repr=False, eq=True, frozen=True)
class TaskSpec:
    """What a Timer measures (all but its globals); hashable, so Measurements of the same task
    can be merged."""
    stmt: str
    setup: str
    global_setup: str = ""
    label: str = None
    sub_label: str = None
    description: str = None
    env: str = None
    num_threads: int = 1

    @property
    def title(self):
        """The label (else the one-line stmt), with the sub_label."""
        if self.label is not None:
            return self.label + (f": {self.sub_label}" if self.sub_label else "")
        if "\n" not in self.stmt:
            return self.stmt + (f": {self.sub_label}" if self.sub_label else "")
        return f"stmt:{f' ({self.sub_label})' if self.sub_label else ''}\n{textwrap.indent(self.stmt, '  ')}"

    def setup_str(self):
        if self.setup == "pass" or not self.setup:
            return ""
        if "\n" in self.setup:
            return f"setup:\n{textwrap.indent(self.setup, '  ')}"
        return f"setup: {self.setup}"

    def summarize(self):
        """The task's part of a Measurement's repr: title, description, setup."""
        sections = [self.title, self.description or "", self.setup_str()]
        return "\n".join([f"{s}\n" if "\n" in s else s for s in sections if s])


_TASKSPEC_FIELDS = tuple(f.name for f in dataclasses.fields(TaskSpec))


@dataclasses.dataclass(init=True, repr=False)
class Measurement:
    """The result of a Timer: ``raw_times`` of blocks of ``number_per_run`` runs of
    ``task_spec``'s statement. The task's fields (``stmt``, ``label``, ``num_threads``...) read
    through as attributes. ``metadata`` is the user's."""
    number_per_run: int
    raw_times: list
    task_spec: TaskSpec
    metadata: dict = None

    def __post_init__(self):
        self._sorted_times = ()
        self._warnings = ()
        self._median = -1.0
        self._mean = -1.0
        self._p25 = -1.0
        self._p75 = -1.0

    def __getattr__(self, name):
        if name in _TASKSPEC_FIELDS:
            return getattr(self.task_spec, name)
        return super().__getattribute__(name)

    @property
    def times(self):
        """Seconds per run, one entry per block."""
        return [t / self.number_per_run for t in self.raw_times]

    @property
    def median(self):
        self._lazy_init()
        return self._median

    @property
    def mean(self):
        self._lazy_init()
        return self._mean

    @property
    def iqr(self):
        """The interquartile range of the per-run times, p75 - p25."""
        self._lazy_init()
        return self._p75 - self._p25

    @property
    def significant_figures(self):
        """How many digits of the median are trustworthy: log10(median / ci), with ci the 90%
        confidence half-width 1.645 * std / sqrt(n) of the times inside the interquartile
        region (at least 25 ns), clamped to [1, 4]. ``Compare`` trims to it on request."""
        self._lazy_init()
        n_total = len(self._sorted_times)
        interquartile = self._sorted_times[n_total // 4:math.ceil(3 * n_total / 4)]
        std = float(np.std(interquartile)) if interquartile else math.nan
        sqrt_n = math.sqrt(len(interquartile))
        confidence_interval = max(1.645 * std / sqrt_n, _MIN_CONFIDENCE_INTERVAL) if sqrt_n else math.nan
        relative_ci = math.log10(self._median / confidence_interval) if sqrt_n else math.nan
        figures = math.floor(relative_ci) if math.isfinite(relative_ci) else 1
        return min(max(figures, 1), _MAX_SIGNIFICANT_FIGURES)

    @property
    def has_warnings(self):
        """Whether the spread is large: IQR over 10% of the median."""
        self._lazy_init()
        return bool(self._warnings)

    def _lazy_init(self):
        if self.raw_times and not self._sorted_times:
            self._sorted_times = tuple(sorted(self.times))
            s = np.asarray(self._sorted_times, dtype=np.float64)
            self._median = float(np.quantile(s, 0.5))
            self._mean = float(s.mean())
            self._p25 = float(np.quantile(s, 0.25))
            self._p75 = float(np.quantile(s, 0.75))

            def add_warning(msg):
                rel_iqr = self.iqr / self.median * 100
                self._warnings += (f"  WARNING: Interquartile range is {rel_iqr:.1f}% "
                                   f"of the median measurement.\n           {msg}",)

            if not self.meets_confidence(_IQR_GROSS_WARN_THRESHOLD):
                add_warning("This suggests significant environmental influence.")
            elif not self.meets_confidence(_IQR_WARN_THRESHOLD):
                add_warning("This could indicate system fluctuation.")

    def meets_confidence(self, threshold=_IQR_WARN_THRESHOLD):
        """Whether iqr / median < threshold."""
        return self.iqr / self.median < threshold

    @property
    def title(self):
        return self.task_spec.title

    @property
    def env(self):
        return "Unspecified env" if self.task_spec.env is None else self.task_spec.env

    @property
    def as_row_name(self):
        return self.sub_label or self.stmt or "[Unknown]"

    def __repr__(self):
        """PyTorch's form, e.g.::

            <minidl.utils.benchmark.common.Measurement object at 0x7f395b6ac110>
            x + 1
              Median: 5.73 us
              IQR:    2.25 us (4.01 to 6.26)
              372 measurements, 100 runs per measurement, 1 thread
        """
        self._lazy_init()
        skip_line, newline = "MEASUREMENT_REPR_SKIP_LINE", "\n"
        n = len(self._sorted_times)
        time_unit, time_scale = select_unit(self._median)
        iqr_filter = "" if n >= 4 else skip_line
        threads = f"{self.num_threads} thread{'s' if self.num_threads > 1 else ''}"
        repr_str = f"""
{object.__repr__(self)}
{self.task_spec.summarize()}
  {'Median: ' if n > 1 else ''}{self._median / time_scale:.2f} {time_unit}
  {iqr_filter}IQR:    {self.iqr / time_scale:.2f} {time_unit} ({self._p25 / time_scale:.2f} to \
{self._p75 / time_scale:.2f})
  {n} measurement{'s' if n > 1 else ''}, {self.number_per_run} runs {'per measurement,' if n > 1 else ','} {threads}
{newline.join(self._warnings)}""".strip()
        return "\n".join(line for line in repr_str.splitlines() if skip_line not in line)

    @staticmethod
    def merge(measurements):
        """Pool the replicates of each task into one Measurement of per-run times
        (``number_per_run=1``, no metadata), in order of first appearance."""
        grouped = collections.defaultdict(list)
        for m in measurements:
            grouped[m.task_spec].append(m)
        return [Measurement(number_per_run=1, raw_times=[t for m in group for t in m.times], task_spec=spec,
                            metadata=None) for spec, group in grouped.items()]


def select_unit(t):
    """The unit (ns, us, ms, s) that puts ``t`` seconds in [1, 1000), and its scale."""
    exponent = math.floor(math.log10(t) // 3) if t > 0 and math.isfinite(t) else None
    time_unit = {-3: "ns", -2: "us", -1: "ms"}.get(exponent, "s")
    return time_unit, {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1}[time_unit]


def unit_to_english(u):
    return {"ns": "nanosecond", "us": "microsecond", "ms": "millisecond", "s": "second"}[u]


def trim_sigfig(x, n):
    """``x`` rounded to ``n`` significant figures (3.14159, 2 -> 3.1)."""
    if n != int(n):
        raise AssertionError("Number of significant figures must be an integer")
    magnitude = math.ceil(math.log10(abs(x)))
    scale = 10 ** (magnitude - n)
    return float(np.round(x / scale) * scale)


def ordered_unique(elements):
    return list(dict.fromkeys(elements))


@contextlib.contextmanager
def set_torch_threads(n):
    """Run the block with ``minidl.set_num_threads(n)``, restoring the previous count after
    (PyTorch's name, kept for scripts that import it)."""
    from ...threads import get_num_threads, set_num_threads
    prior = get_num_threads()
    try:
        set_num_threads(n)
        yield
    finally:
        set_num_threads(prior)
