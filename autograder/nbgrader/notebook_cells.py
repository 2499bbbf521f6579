"""Reading and filling nbgrader notebooks: solution cells, test cells, submissions.

Shared by the example class builder, the grading commands and the tests, so
that "what is the solution of cell X" and "make a submission from the
release" are decided in one place.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

_SOLUTION_BLOCK = re.compile(r"^[ \t]*### BEGIN SOLUTION[ \t]*\n(.*?)^[ \t]*### END SOLUTION[ \t]*\n?",
                             re.MULTILINE | re.DOTALL)
_HIDDEN_MARKERS = re.compile(r"^[ \t]*### (BEGIN|END) HIDDEN TESTS[ \t]*\n?", re.MULTILINE)


def read(path: str | Path):
    """Read a notebook (nbformat 4) as an ``nbformat.NotebookNode``."""
    import nbformat  # imported when needed: nbformat's schema validation takes seconds to import

    return nbformat.read(str(path), as_version=4)


def read_json(path: str | Path) -> dict:
    """A notebook's raw JSON, without nbformat (fast to import, for the instructor's in-notebook grading)."""
    with open(path, encoding="utf-8") as handle:
        nb = json.load(handle)
    for cell in nb.get("cells", []):
        if isinstance(cell.get("source"), list):
            cell["source"] = "".join(cell["source"])
    return nb


def nbgrader_meta(cell) -> dict:
    """The cell's ``metadata.nbgrader`` dict, or ``{}``."""
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def solution_cells(nb) -> dict[str, str]:
    """``grade_id`` → source of each code solution cell, with the solution delimiters removed.

    A markdown solution cell (a written answer, graded by hand) is text, not code: it is not listed.
    """
    return {
        nbgrader_meta(cell)["grade_id"]: _SOLUTION_BLOCK.sub(r"\1", cell["source"])
        for cell in nb["cells"]
        if nbgrader_meta(cell).get("solution") and cell["cell_type"] == "code"
    }


def test_cells(nb) -> dict[str, tuple[str, float]]:
    """``grade_id`` → (source with hidden-test markers removed, points) of each autograded code cell."""
    return {
        nbgrader_meta(cell)["grade_id"]: (_HIDDEN_MARKERS.sub("", cell["source"]), float(nbgrader_meta(cell)["points"]))
        for cell in nb["cells"]
        if cell["cell_type"] == "code" and nbgrader_meta(cell).get("grade") and not nbgrader_meta(cell).get("solution")
    }


def fill_release(release_nb, answers: dict[str, str]):
    """A copy of a release notebook with solution cells replaced, as a student would submit it.

    Parameters
    ----------
    release_nb : NotebookNode
        The notebook students receive.
    answers : dict of str to str
        ``grade_id`` → new source for that solution cell; other cells are untouched.

    Raises
    ------
    KeyError
        If ``answers`` names a cell that is not a solution cell of the notebook.
    """
    import nbformat

    nb = nbformat.from_dict(release_nb)
    found = set()
    for cell in nb.cells:
        grade_id = nbgrader_meta(cell).get("grade_id")
        if nbgrader_meta(cell).get("solution") and grade_id in answers:
            cell.source = answers[grade_id].strip("\n")
            found.add(grade_id)
    missing = set(answers) - found
    if missing:
        raise KeyError(f"no solution cell with grade_id {sorted(missing)} in the notebook")
    return nb
