"""PyTorch's ``torch.utils.benchmark``: ``Timer`` measures a statement, returning a
``Measurement`` (per-run times with median, mean, IQR and PyTorch's printed form); ``Compare``
lays many Measurements out as tables. Built on the standard library's ``timeit``; the fuzzers
and Callgrind instruction counts of PyTorch's module are not provided."""
from .common import Measurement, TaskSpec, select_unit, set_torch_threads, trim_sigfig  # noqa: F401
from .common import ordered_unique, unit_to_english  # noqa: F401
from .compare import Colorize, Compare  # noqa: F401
from .timer import Language, Timer, timer  # noqa: F401

__all__ = ["Timer", "timer", "Language", "Measurement", "TaskSpec", "Compare", "Colorize", "select_unit",
           "unit_to_english", "trim_sigfig", "ordered_unique", "set_torch_threads"]
