"""The README's quick start is what CI runs: keep the two in step."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _bash_blocks(text):
    return re.findall(r"```bash\n(.*?)```", text, flags=re.S)


def test_ci_runs_the_readme_test_command_verbatim():
    readme = (ROOT / "README.md").read_text()
    commands = [line for block in _bash_blocks(readme) for line in block.splitlines() if "pytest" in line]
    assert commands, "the README's quick start has no test command"
    assert commands[0] in (ROOT / ".ci" / "run").read_text()


def test_quick_start_demo_script_exists():
    readme = (ROOT / "README.md").read_text()
    first = _bash_blocks(readme)[0]
    script = re.search(r"python (examples/\S+\.py)", first).group(1)
    assert (ROOT / script).is_file()
