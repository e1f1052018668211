"""The ``minidl`` command line (``python -m minidl ...``): train, sample, gradcheck, bench, lab.

The subcommands are imported when the command line is used, not with this package: the
trainer (minidl.train) uses ``minidl.cli.args`` and is itself used by ``minidl train``."""


def build_parser():
    from .main import build_parser as build
    return build()


def main(argv=None):
    from .main import main as run
    return run(argv)


__all__ = ["build_parser", "main"]
