"""``python -m minidl``: the command line (see minidl.cli)."""
from .cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
