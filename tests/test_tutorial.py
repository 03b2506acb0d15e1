"""docs/tutorial.md runs as written, and its test passes on every backend."""
import linecache
import re
from pathlib import Path

TUTORIAL = Path(__file__).resolve().parent.parent / "docs" / "tutorial.md"


def _namespace():
    text = TUTORIAL.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    # keep each block at its line in the markdown, so errors point into tutorial.md
    lines = [""] * text.count("\n")
    for m in re.finditer(r"```python\n(.*?)```", text, re.S):
        start = text[:m.start(1)].count("\n")
        for i, line in enumerate(m.group(1).splitlines()):
            lines[start + i] = line
    source = "\n".join(lines) + "\n"
    linecache.cache[str(TUTORIAL)] = (len(source), None, source.splitlines(True), str(TUTORIAL))
    ns = {"__name__": "tutorial"}
    exec(compile(source, str(TUTORIAL), "exec"), ns)
    assert len(blocks) >= 5
    return ns


def test_tutorial_runs_and_its_error_points_into_it(capsys):
    _namespace()
    out = capsys.readouterr().out
    assert "kernel softmax(" in out
    assert re.search(r"tutorial.md:\d+: tl.row_max\(v, x\)", out)
    assert "row_max: destination length: expected 32, got 64" in out


def test_tutorial_test_on_every_backend(backend):
    _namespace()["test_softmax"](backend=backend)


def test_tutorial_sum_over_blocks_on_every_backend(backend):
    _namespace()["test_col_sum"](backend=backend)
