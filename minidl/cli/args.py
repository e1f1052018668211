"""What the command line and the example scripts accept, said once.

- ``type=`` validators (``positive_int``, ``nonnegative_float``, ...): argparse turns a refusal
  into ``error: argument --flag: expected ..., got '...'`` with exit status 2, so every flag of
  every command reports a bad value the same way, before anything runs.
- ``UsageError``: a combination only the command can judge (a norm a model lacks, ``--n-head``
  not dividing ``--d-model``); ``minidl.cli.main`` reports it as an argparse error too.
- Resuming: a run's hyper-parameters are stored with its checkpoint. A flag given again at
  resume must agree with the stored value (``check_resumed``), or the resumed run would quietly
  differ from the one it continues; ``given_options`` tells which flags a command line set.
"""
import argparse
import math
import os


class UsageError(ValueError):
    """A bad argument or combination of arguments (reported as an argparse error, exit status 2)."""


def _refuse(expected, text):
    return argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")


def int_at_least(low, expected):
    def check(text):
        try:
            value = int(text)
        except (TypeError, ValueError):
            raise _refuse(expected, text) from None
        if value < low:
            raise _refuse(expected, text)
        return value
    check.__name__ = expected
    return check


def float_in(expected, low=-math.inf, high=math.inf, low_open=False, high_open=False):
    """A finite float in [low, high] (an open end excludes its bound); NaN and inf never pass."""
    def check(text):
        try:
            value = float(text)
        except (TypeError, ValueError):
            raise _refuse(expected, text) from None
        if (not math.isfinite(value) or value < low or value > high or (low_open and value == low)
                or (high_open and value == high)):
            raise _refuse(expected, text)
        return value
    check.__name__ = expected
    return check


positive_int = int_at_least(1, "a positive integer")
nonnegative_int = int_at_least(0, "an integer >= 0")
seed = int_at_least(0, "a seed (an integer >= 0)")
positive_float = float_in("a positive finite number", low=0.0, low_open=True)
nonnegative_float = float_in("a finite number >= 0", low=0.0)
fraction = float_in("a number in [0, 1)", low=0.0, high=1.0, high_open=True)
open_fraction = float_in("a number in (0, 1)", low=0.0, high=1.0, low_open=True, high_open=True)
unit_interval = float_in("a number in [0, 1]", low=0.0, high=1.0)


def check_heads(d_model, n_head, head_dim_even=False):
    """The attention split of a Transformer: n_head must divide d_model (rotary: into even halves)."""
    if d_model % n_head:
        raise UsageError(f"--n-head {n_head} must divide --d-model {d_model} (each head gets d_model / n_head "
                         "features)")
    if head_dim_even and (d_model // n_head) % 2:
        raise UsageError(f"--d-model {d_model} / --n-head {n_head} = {d_model // n_head}: rotary positions "
                         "need an even number of features per head")


def same_data(a, b):
    """Two --data values name the same data (paths compared as absolute paths)."""
    if a == b:
        return True
    return isinstance(a, str) and isinstance(b, str) and os.path.abspath(a) == os.path.abspath(b)


# resuming ----------------------------------------------------------------------------------
_UNSET = object()


def given_options(parser, argv):
    """(args, the dests of the options ``argv`` sets explicitly), for scripts whose flags have
    ordinary defaults: parsing into a namespace pre-filled with a marker leaves the marker
    wherever argparse would have filled in a default."""
    marked = argparse.Namespace(**{a.dest: _UNSET for a in parser._actions if a.dest != argparse.SUPPRESS})
    given = {k for k, v in vars(parser.parse_args(argv, marked)).items() if v is not _UNSET}
    return parser.parse_args(argv), given


def _show(value):
    return repr(value) if isinstance(value, str) else str(value)


def check_resumed(where, stored, given, same=None):
    """Raise UsageError for the first flag given at resume that disagrees with the stored run.

    ``stored`` and ``given``: {flag ("--lr"): value}; ``given`` holds only the flags the command
    line set. ``same``: {flag: equality} for values that compare specially (paths)."""
    same = same or {}
    for flag, value in given.items():
        if flag in stored and not same.get(flag, lambda a, b: a == b)(stored[flag], value):
            raise UsageError(f"{flag} {_show(value)} conflicts with the run being resumed from {where}, which has "
                             f"{flag} {_show(stored[flag])}; drop the flag to continue that run, or start a new "
                             "run elsewhere")


def check_run_length(where, done, target, asked, unit="steps"):
    """The run length ``target`` (asked for as ``asked``, e.g. "--steps 4", or None for the
    stored length) against the ``done`` already trained: False when nothing is left to train,
    UsageError when it is fewer (a run cannot be shortened below what it has done)."""
    if target < done:
        raise UsageError(f"{asked or target} is fewer than the {done} {unit} the checkpoint in {where} has "
                         f"already trained; ask for more than {done} to train longer")
    return target > done
