"""What the command line and the example scripts accept, said once.

- ``type=`` validators (``positive_int``, ``nonnegative_float``, ...): argparse turns a refusal
  into ``error: argument --flag: expected ..., got '...'`` with exit status 2, so every flag of
  every command reports a bad value the same way, before anything runs.
- ``UsageError``: a combination only the command can judge (a norm a model lacks, ``--n-head``
  not dividing ``--d-model``); ``minidl.cli.main`` reports it as an argparse error too.
- The flags every training program shares, and the rule for resuming a run, are in
  minidl.train.run.
"""
import argparse
import math


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
