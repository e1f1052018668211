"""Lab experiment ``batch-size`` (see docs/lab.md): prints a table and saves a figure.

    python examples/lab_batch_size.py            # quick mode (under 2 minutes on 2 cores)
    python examples/lab_batch_size.py --full     # the larger version
    python examples/lab_batch_size.py --out DIR  # where the figure goes (default runs/lab/batch-size)

The same as ``python -m minidl lab batch-size``.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from minidl.cli import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main(["lab", "batch-size", *sys.argv[1:]]))
