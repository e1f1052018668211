"""The ``minidl`` command line (``python -m minidl ...``): train, sample, gradcheck, bench, lab."""
from .main import build_parser, main

__all__ = ["build_parser", "main"]
