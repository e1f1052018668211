"""A training run's directory, the flags every training program shares, and the rule for resuming.

Every program that trains (``minidl train``, examples/train_cnn.py, examples/train_gpt.py)
writes into ``--out``: ``checkpoint.npz``, ``metrics.csv``, ``metrics.json`` and ``loss.png``.
``--resume`` continues the run whose checkpoint is in ``--out``, by one rule:

- the checkpoint must have been written by the same program;
- the hyper-parameters it stores are the run's: a flag given again must agree with the stored
  value (``Run.adopt``), or the resumed run would quietly differ from the one it continues;
- ``--steps`` / ``--epochs`` set a new run length (the learning-rate schedule is recomputed
  for it from the current step on); without them the stored length holds; fewer steps than
  are done is an error, and a complete run trains nothing and rewrites nothing;
- ``--eval-every``, ``--device`` and ``--no-progress`` may change, unless the program stores
  them (the GPT example stores ``--eval-every``: its evaluation batches come from the random
  stream that the training batches come from).
"""
import argparse
import os
import shlex

from ..cli.args import UsageError, positive_float, positive_int, seed
from ..io import CheckpointError, load

CHECKPOINT = "checkpoint.npz"
FORMAT = "minidl-train"


def add_arguments(p, out, seed_default=0, length="one epoch", eval_every="one epoch"):
    """The flags of every training program: how long, where, resume, seed, device, progress.

    ``--epochs``, ``--steps`` and ``--eval-every`` default to None: the program's own choice
    (described by ``length`` and ``eval_every``) applies unless one is given (see ``Run.length``)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--epochs", type=positive_float, default=None,
                   help=f"the run's length in epochs (default: {length}); with --resume: a new length")
    g.add_argument("--steps", type=positive_int, default=None,
                   help=f"the run's length in optimizer steps (default: {length}); with --resume: a new length")
    p.add_argument("--eval-every", type=positive_int, default=None,
                   help=f"steps between evaluations (default: {eval_every})")
    # seed_default None: the program tells a given --seed from none and fills in 0 itself
    p.add_argument("--seed", type=seed, default=seed_default, help=f"default {seed_default or 0}")
    p.add_argument("--out", default=out, help=f"output directory (default {out or 'runs/train/MODEL'}): "
                   f"{CHECKPOINT}, metrics.csv, metrics.json, loss.png")
    p.add_argument("--resume", action="store_true", help=f"continue the run whose {CHECKPOINT} is in --out")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def flag(dest):
    return "--" + dest.replace("_", "-")


_UNSET = object()


def given_options(parser, argv):
    """(args, the dests of the options ``argv`` sets explicitly), for programs whose flags have
    ordinary defaults: parsing into a namespace pre-filled with a marker leaves the marker
    wherever argparse would have filled in a default."""
    marked = argparse.Namespace(**{a.dest: _UNSET for a in parser._actions if a.dest != argparse.SUPPRESS})
    given = {k for k, v in vars(parser.parse_args(argv, marked)).items() if v is not _UNSET}
    return parser.parse_args(argv), given


def same_data(a, b):
    """Two --data values name the same data (paths compared as absolute paths)."""
    if a == b:
        return True
    return isinstance(a, str) and isinstance(b, str) and os.path.abspath(a) == os.path.abspath(b)


def _show(value):
    return repr(value) if isinstance(value, str) else str(value)


def check_resumed(where, stored, given, same=None):
    """Raise UsageError for the first flag given at resume that disagrees with the stored run.

    ``stored`` and ``given``: {flag ("--lr"): value}; ``given`` holds only the flags the command
    line set. ``same``: {flag: equality} for values that compare specially (paths)."""
    same = same or {}
    for name, value in given.items():
        if name in stored and not same.get(name, lambda a, b: a == b)(stored[name], value):
            raise UsageError(f"{name} {_show(value)} conflicts with the run being resumed from {where}, which has "
                             f"{name} {_show(stored[name])}; drop the flag to continue that run, or start a new "
                             "run elsewhere")


class Run:
    """The output directory of one training run and, with ``resume``, the checkpoint it continues.

    ``program`` names the program in the checkpoint ("examples/train_cnn.py", "minidl train"):
    a run resumes only with the program that wrote it. ``command`` starts the program (default
    ``python PROGRAM``); the line printed on a stop request resumes with it."""

    def __init__(self, out, program, resume=False, command=None, device="cpu"):
        if os.path.exists(out) and not os.path.isdir(out):
            raise UsageError(f"--out {out!r} is a file; expected a directory")
        self.out, self.program = out, program
        self.path = os.path.join(out, CHECKPOINT)
        self.command = command or f"python {program}"
        self.device = device
        self.checkpoint = self._read() if resume else None
        self.asked = None   # how the run length was asked for ("--steps 6"), for messages

    def _read(self):
        if not os.path.exists(self.path):
            raise UsageError(f"--resume: no checkpoint at {self.path}")
        try:
            ckpt = load(self.path)
        except CheckpointError as exc:
            raise UsageError(f"--resume: {exc}") from None
        if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
            raise UsageError(f"--resume: {self.path} was not written by a minidl training program")
        written_by = ckpt.get("program", "minidl train")   # minidl train's earlier checkpoints do not say
        if written_by != self.program:
            raise UsageError(f"--resume: {self.path} was written by {written_by}, not by {self.program}")
        return ckpt

    @property
    def step(self):
        """The optimizer steps already done (0 for a new run)."""
        return int(self.checkpoint["step"]) if self.checkpoint else 0

    @property
    def resume_command(self):
        cmd = f"{self.command} --out {shlex.quote(self.out)} --resume"
        return cmd + (f" --device {self.device}" if self.device != "cpu" else "")

    def adopt(self, args, keys, given, stored=None, same=None):
        """Resuming: set ``args``'s ``keys`` to the stored run's values (``stored``: {dest: value},
        default the checkpoint's ``args``), after checking that each of them the command line
        gave (``given``: a set of dests) agrees. A new run keeps ``args`` as they are."""
        if self.checkpoint is None:
            return args
        stored = {k: v for k, v in (self.checkpoint["args"] if stored is None else stored).items() if k in keys}
        check_resumed(self.path, {flag(k): v for k, v in stored.items()},
                      {flag(k): getattr(args, k) for k in keys if k in given},
                      same={flag(k): f for k, f in (same or {}).items()})
        for k, v in stored.items():
            setattr(args, k, v)
        return args

    def length(self, steps, epochs, steps_per_epoch, default_steps=None, default_epochs=None):
        """The run's length in optimizer steps: ``steps``, or ``epochs`` of ``steps_per_epoch``,
        when given; else a resumed run's stored length; else the program's default. Fewer steps
        than the checkpoint has done is a UsageError (a run cannot be shortened)."""
        if steps is not None:
            total, self.asked = steps, f"--steps {steps}"
        elif epochs is not None:
            total = max(1, int(round(epochs * steps_per_epoch)))
            self.asked = f"--epochs {epochs:g} ({total} steps)"
        elif self.checkpoint is not None:
            if "total_steps" not in self.checkpoint:
                raise UsageError("--resume: the checkpoint does not record the run's length; give --steps")
            total = int(self.checkpoint["total_steps"])
        elif default_steps is not None:
            total = default_steps
        else:
            total = max(1, int(round((default_epochs or 1) * steps_per_epoch)))
        if total < self.step:
            raise UsageError(f"{self.asked or total} is fewer than the {self.step} steps the checkpoint in {self.out} "
                             f"has already trained; ask for more than {self.step} to train longer")
        return total
