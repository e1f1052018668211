"""The README's lab gallery: every registered experiment once, in docs/lab.md's order, each with
its own committed figure, its claim and its measured verdict."""
import pathlib
import re

from minidl import lab

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _gallery():
    text = (ROOT / "README.md").read_text()
    found = re.search(r"^## Lab gallery\n(.*?)(?=^## )", text, flags=re.S | re.M)
    assert found, "README.md has no '## Lab gallery' section"
    return found.group(1)


def test_gallery_lists_every_experiment_in_the_lab_docs_order():
    gallery = _gallery()
    named = re.findall(r"\*\*`([\w-]+)`\*\*", gallery)
    documented = re.findall(r"^## \d+\. `([\w-]+)`", (ROOT / "docs" / "lab.md").read_text(), flags=re.M)
    assert named == documented == list(lab.EXPERIMENTS)
    for entry in re.findall(r"\*\*`[\w-]+`\*\*: ([^|]*)", gallery):
        claim, _, measured = entry.partition("*Measured:*")
        assert claim.strip() and measured.strip(), entry


def test_every_gallery_image_is_the_experiments_figure_and_exists():
    gallery = _gallery()
    images = re.findall(r'<img src="([^"]+)"', gallery) + re.findall(r"!\[[^\]]*\]\(([^)]+)\)", gallery)
    assert [pathlib.PurePosixPath(p).name for p in images] == [f"lab_{name}.png" for name in lab.EXPERIMENTS]
    for path in images + re.findall(r"\]\((docs/figures/[^)]+)\)", gallery):
        f = ROOT / path
        assert f.is_file() and f.stat().st_size > 10_000, path
        assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path
