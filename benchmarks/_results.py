"""The generated blocks of docs/results.md.

A benchmark run with ``--write-results`` owns one block of docs/results.md, between the markers
``markers(script)`` names, and replaces only that block: the prose around it (earlier runs,
what the figures mean) stays as written. The file is rewritten through a temporary file in the
same folder and renamed over the old one, so an interrupted write leaves the old file whole.
"""
import os
import statistics
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "..", "docs", "results.md")


def markers(script):
    """The (begin, end) comment lines around ``script``'s block (script: e.g. "bench_cnn")."""
    return (f"<!-- {script}: begin (written by benchmarks/{script}.py --write-results) -->",
            f"<!-- {script}: end -->")


def commit():
    """The short hash of the checkout's HEAD, or "?" outside a git checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE)
    except OSError:
        return "?"
    return out.stdout.strip() or "?"


def run_header(script, args, version):
    """The block's first line: the command that wrote it (with the flags its figures depend on),
    the commit, the peer's version, the clock and the BLAS the kernels call
    (``minidl.kernels.cpu._cblas``)."""
    flags = f"--threads {args.threads} --rounds {args.rounds} --steps {args.steps}" + \
        (" --cpu-time" if args.cpu_time else "")
    from minidl.kernels.cpu import _cblas
    return (f"`python benchmarks/{script}.py {flags} --write-results` (working tree on {commit()}; "
            f"PyTorch {version or 'not run'}, own process; {'CPU time' if args.cpu_time else 'wall-clock'}, "
            f"medians of {args.steps} steps per round; the kernels' GEMMs: {_cblas.PROVIDER or 'none'}):")


def ratio_cell(ratios):
    """A table cell of the rounds' ratios: the median in bold, the range, the count."""
    return f"**{statistics.median(ratios):.2f}** ({min(ratios):.2f}-{max(ratios):.2f}), {len(ratios)}"


def write_block(script, text, path=RESULTS):
    """Put ``text`` between ``script``'s markers in ``path``; False (and the file untouched)
    when the file lacks them."""
    begin, end = markers(script)
    with open(path, encoding="utf-8") as f:
        doc = f.read()
    if begin not in doc or end not in doc.split(begin, 1)[1]:
        print(f"{path} has no {begin!r} ... {end!r} section; not written")
        return False
    head, rest = doc.split(begin, 1)
    tail = rest.split(end, 1)[1]
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(head + begin + "\n" + text + "\n" + end + tail)
    os.replace(tmp, path)
    print(f"written into {os.path.relpath(path)}")
    return True
