"""The notebooks' exercises keep their shape: in each notebook an exercise cell with ``...``
placeholders, then a check cell whose committed output says "Not answered yet"; in its
solutions notebook the same check, after an answer cell without placeholders, whose committed
output is the check passing.  Every check asserts something, so a wrong answer fails it.  (nbval,
through tests/test_notebooks.py, re-runs both and compares the outputs.)
"""

import json
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
UNANSWERED = "Not answered yet"


def _code_cells(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [c for c in cells if c["cell_type"] == "code"]


def _source(cell):
    return "".join(cell["source"])


def _text(cell):
    return "".join("".join(o.get("text", "")) for o in cell["outputs"])


def _with_exercises():
    found = []
    for path in sorted(NOTEBOOKS.glob("[0-9]*.ipynb")):
        if any(UNANSWERED in _source(c) for c in _code_cells(path)):
            found.append(path)
    return found


def _solutions_of(path):
    return NOTEBOOKS / "solutions" / ("%s_solutions.ipynb" % path.name.split("_")[0])


def test_the_later_notebooks_have_exercises():
    names = {p.name[:2] for p in _with_exercises()}
    assert {"06", "07", "08", "09", "10", "11", "12", "13", "14"} <= names


@pytest.mark.parametrize("path", _with_exercises(), ids=lambda p: p.name)
def test_each_check_is_unanswered_in_the_notebook_and_passes_in_the_solutions(path):
    cells = _code_cells(path)
    solution_cells = _code_cells(_solutions_of(path))
    solution_sources = [_source(c) for c in solution_cells]
    checks = [i for i, c in enumerate(cells) if UNANSWERED in _source(c)]
    assert len(checks) >= 2, "%s: fewer than 2 exercises" % path.name
    for i in checks:
        check = _source(cells[i])
        assert "assert " in check, "%s: a check that cannot fail:\n%s" % (path.name, check)
        assert "..." in _source(cells[i - 1]), "%s: no placeholder before a check" % path.name
        assert UNANSWERED in _text(cells[i]), "%s: a saved check output is answered" % path.name
        assert check in solution_sources, "%s: a check differs in the solutions" % path.name
        j = solution_sources.index(check)
        assert "..." not in solution_sources[j - 1], "%s: an unanswered solution" % path.name
        out = _text(solution_cells[j])
        assert out and UNANSWERED not in out, "%s: a solution's check did not pass" % path.name
