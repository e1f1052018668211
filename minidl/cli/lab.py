"""``minidl lab EXPERIMENT``: run one experiment of the normalization lab (or ``all``).
In full mode each training loop shows a progress bar (``--no-progress``: none)."""
import os

from ..lab import EXPERIMENTS
from .args import UsageError, seed


def add_arguments(p):
    p.add_argument("experiment", choices=list(EXPERIMENTS) + ["all"], metavar="EXPERIMENT",
                   help="; ".join(f"{k}: {v[1]}" for k, v in EXPERIMENTS.items()) + "; all: every one")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", dest="quick", action="store_true", default=True,
                      help="small models and few steps, under a minute on 2 cores (default)")
    mode.add_argument("--full", dest="quick", action="store_false", help="the larger version")
    p.add_argument("--out", default=None, help="output directory (default runs/lab/EXPERIMENT)")
    p.add_argument("--seed", type=seed, default=0)
    p.add_argument("--no-progress", action="store_true", help="no progress bars in full mode")
    p.add_argument("--dataset", choices=("digits", "shapes"), default=None,
                   help="batch-size only: the 8x8 digits (default) or the harder 32x32 colour shapes")
    return p


def run(args):
    from .. import lab
    names = list(EXPERIMENTS) if args.experiment == "all" else [args.experiment]
    if args.dataset and args.experiment not in ("batch-size", "all"):
        raise UsageError(f"--dataset applies to batch-size, not {args.experiment}")
    results = []
    for name in names:
        out = args.out if len(names) == 1 else os.path.join(args.out or os.path.join("runs", "lab"), name)
        options = {"dataset": args.dataset} if args.dataset and name == "batch-size" else {}
        result = lab.run(name, quick=args.quick, out=out, seed=args.seed, progress=False if args.no_progress else None,
                         **options)
        print(result.format(), flush=True)
        print()
        results.append(result)
    return results
