"""``minidl`` / ``python -m minidl``: argparse subcommands.

    minidl train MODEL [--steps N | --epochs E] [--norm ...] [--out DIR] [--resume]
    minidl sample CHECKPOINT [--prompt TEXT] [--length N]
    minidl gradcheck [-k GLOB]
    minidl bench [NAME ...]
    minidl lab EXPERIMENT [--quick | --full] [--out DIR]

Unknown subcommands, models, norms or experiments get argparse's error, which lists the
valid choices; a bad value (``--batch-size 0``, ``--lr nan``) is refused by the flag's type
(minidl.cli.args); argument combinations that only the subcommand can judge (e.g. a norm a
model does not support) are reported the same way (usage line, message, exit status 2).
A Ctrl-C outside a training loop ends the command with exit status 130 and no traceback.
"""
import argparse
import sys

from . import bench, gradcheck, lab, sample, train
from .args import UsageError


def build_parser():
    p = argparse.ArgumentParser(prog="minidl", description="minidl: train zoo models, sample text, check gradients, "
                                "run benchmarks and the normalization lab.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    sub.required = True
    commands = {
        "train": (train, "train a zoo model (metrics, loss plot, checkpoints into --out)"),
        "sample": (sample, "generate text from a GPT or LSTM checkpoint"),
        "gradcheck": (gradcheck, "finite-difference gradcheck of every op and layer"),
        "bench": (bench, "run the benchmarks in benchmarks/"),
        "lab": (lab, "run a normalization-lab experiment"),
    }
    for name, (module, help_) in commands.items():
        sp = sub.add_parser(name, help=help_, description=(module.__doc__ or help_).strip().split("\n\n")[0])
        module.add_arguments(sp)
    p._subparsers_by_name = sub.choices
    return p


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    sp = parser._subparsers_by_name[args.command]
    try:
        if args.command == "train":
            return train.run(args)
        if args.command == "sample":
            sample.run(args)
            return 0
        if args.command == "gradcheck":
            return gradcheck.run(args)
        if args.command == "bench":
            bad = bench.check(args)
            if bad:
                sp.error(f"argument NAME: invalid choice: {bad[0]!r} (choose from "
                         f"{', '.join(repr(n) for n in sorted(bench.available()))})")
            return bench.run(args)
        lab.run(args)
        return 0
    except UsageError as exc:
        sp.error(str(exc))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
