"""nbgrader metadata comes from the gradebook, never from the submission: an edit costs the edit, not the grade.

Plain nbgrader raises ``KeyError`` (or a "metadata corrupted" ``ValidationError``)
when a student renames a test cell's ``grade_id``, removes its ``points``,
turns it into an ungraded cell, adds a cell with made-up nbgrader metadata
or pastes a copy of an answer cell, and the whole submission is then "not
graded" — a student with a low score could trade it for that.
:class:`RestoreFromGradebook` runs first in ``Autograde.sanitize_preprocessors``
and, from the gradebook's record of the assignment (nbgrader's public
``Gradebook`` API):

* gives every known cell (matched by ``grade_id``) the metadata and cell type
  the gradebook holds; ``OverwriteCells`` then restores read-only and test
  cells' sources as usual;
* keeps the **first** cell with a known ``grade_id``; later copies (what
  JupyterLab's "duplicate cell" makes) lose their nbgrader metadata and run
  as the plain cells they are;
* drops nbgrader metadata that names no known cell (a renamed or invented
  cell), keeping the cell and its code;
* puts back every known cell the submission lacks, after the nearest earlier
  cell it still has: read-only and test cells as the gradebook holds them, an
  answer cell empty (never with the solution);
* ignores what the submission claims in ``metadata.attention_lab`` (the
  grader's own notes) and records what it changed in
  ``nb.metadata["attention_lab"]["metadata_edits"]`` (one line each, for the table).
"""

from __future__ import annotations

import copy

import nbformat
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.nbgrader.sanitize import inert_text

DELETED_ANSWER = "# (this answer cell was deleted)"
#: The keys of nbgrader metadata that decide how a cell is graded.
GRADING_KEYS = ("grade", "solution", "locked", "task", "points")


def known_cells(gradebook: Gradebook, notebook: str, assignment: str) -> list[dict]:
    """The nbgrader cells of one notebook as the gradebook holds them, in notebook order.

    Parameters
    ----------
    gradebook : nbgrader.api.Gradebook
        An open gradebook.
    notebook, assignment : str
        The notebook's name (without ``.ipynb``) and its assignment.

    Returns
    -------
    list of dict
        ``{"grade_id", "cell_type", "source", "metadata"}`` per cell, where
        ``metadata`` is the cell's whole ``metadata`` dict (``nbgrader`` and
        the ``deletable``/``editable`` flags nbgrader sets).

    Raises
    ------
    nbgrader.api.MissingEntry
        If the gradebook does not know the notebook.
    """
    record = gradebook.find_notebook(notebook, assignment)
    points = {cell.name: cell.max_score for cell in record.grade_cells}
    solutions = {cell.name for cell in record.solution_cells}
    tasks = {cell.name: cell.max_score for cell in record.task_cells}
    cells = []
    for source in record.source_cells:  # nbgrader's own add_missing_cells relies on this order too
        meta = {"grade": source.name in points, "grade_id": source.name, "locked": bool(source.locked),
                "schema_version": 3, "solution": source.name in solutions, "cell_type": source.cell_type,
                "checksum": source.checksum}
        if source.name in points:
            meta["points"] = points[source.name]
        if source.name in tasks:
            meta.update(task=True, points=tasks[source.name])
        flags = {"deletable": False} | ({"editable": False} if source.locked else {})
        cells.append({"grade_id": source.name, "cell_type": source.cell_type, "source": source.source,
                      "metadata": {**flags, "nbgrader": meta}})
    return cells


def _grade_id(cell) -> str | None:
    meta = cell.get("metadata", {}).get("nbgrader")
    grade_id = meta.get("grade_id") if isinstance(meta, dict) else None
    return grade_id if isinstance(grade_id, str) else None


def _same(a, b) -> bool:
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return bool(a) == bool(b) if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None else a == b


def _set_type(cell, cell_type: str) -> None:
    cell["cell_type"] = cell_type
    if cell_type == "code":
        cell.setdefault("outputs", [])
        cell.setdefault("execution_count", None)
    else:
        cell.pop("outputs", None)
        cell.pop("execution_count", None)


def restore_metadata(nb, known: list[dict]) -> list[str]:
    """Give ``nb``'s cells the gradebook's nbgrader metadata, in place (see the module docstring).

    Returns
    -------
    list of str
        One line per change, e.g. ``"test_softmax: points, grade restored"``.
    """
    by_id = {cell["grade_id"]: cell for cell in known}
    seen: set[str] = set()
    notes = []
    for cell in nb.cells:
        metadata = cell.setdefault("metadata", {})
        if "nbgrader" not in metadata:
            continue
        grade_id = _grade_id(cell)
        if grade_id in by_id and grade_id not in seen:
            seen.add(grade_id)
            expected = by_id[grade_id]
            claimed = metadata["nbgrader"] if isinstance(metadata["nbgrader"], dict) else {}
            changed = [key for key in GRADING_KEYS
                       if not _same(claimed.get(key), expected["metadata"]["nbgrader"].get(key))]
            if cell.get("cell_type") != expected["cell_type"]:
                changed.append(f"cell type {inert_text(str(cell.get('cell_type')), 20)}")
                _set_type(cell, expected["cell_type"])
            metadata.update(copy.deepcopy(expected["metadata"]))
            if changed:
                notes.append(f"{grade_id}: {', '.join(changed)} restored")
        elif grade_id in by_id:
            del metadata["nbgrader"]
            metadata.pop("deletable", None)
            metadata.pop("editable", None)
            notes.append(f"copied cell {grade_id}: the copy ran as a plain cell")
        else:
            del metadata["nbgrader"]
            what = f"unknown cell {inert_text(grade_id, 40)}" if grade_id else "nbgrader metadata without a grade_id"
            notes.append(f"{what} graded as a plain {cell.get('cell_type', 'code')} cell")
    return notes


def restore_deleted_cells(nb, known: list[dict]) -> list[str]:
    """Put back, in place, every known cell ``nb`` lacks, after the nearest earlier known cell it has.

    nbgrader 0.9's ``OverwriteCells.add_missing_cells`` raises ``KeyError``
    when the cell before a deleted one is a read-only cell (it looks the
    neighbour up among grade cells only), which drops the whole submission.

    Returns
    -------
    list of str
        One line per restored cell.
    """
    notes = []
    for position, cell in enumerate(known):
        present = [_grade_id(c) for c in nb.cells]
        if cell["grade_id"] in present:
            continue
        solution = cell["metadata"]["nbgrader"]["solution"]
        source = DELETED_ANSWER if solution else cell["source"]
        if cell["cell_type"] == "code":
            restored = nbformat.v4.new_code_cell(source)
        elif cell["cell_type"] == "raw":
            restored = nbformat.v4.new_raw_cell(source)
        else:
            restored = nbformat.v4.new_markdown_cell("(this answer cell was deleted)" if solution else source)
        restored.metadata.update(copy.deepcopy(cell["metadata"]))
        earlier = [c["grade_id"] for c in known[:position]]
        anchor = next((present.index(g) for g in reversed(earlier) if g in present), -1)
        nb.cells.insert(anchor + 1, restored)
        notes.append(f"{cell['grade_id']}: deleted, restored")
    return notes


class RestoreFromGradebook(NbGraderPreprocessor):
    """First in ``Autograde.sanitize_preprocessors``: nbgrader metadata and deleted cells from the gradebook."""

    def preprocess(self, nb, resources):
        info = resources.get("nbgrader") or {}
        nb.metadata.pop("attention_lab", None)  # only the grader writes its notes
        try:
            with Gradebook(info["db_url"]) as gradebook:
                known = known_cells(gradebook, info["notebook"], info["assignment"])
        except (KeyError, MissingEntry):
            self.log.warning("RestoreFromGradebook: the gradebook does not know %s; left as it is", info.get("notebook"))
            return nb, resources
        edits = restore_metadata(nb, known)
        restored = restore_deleted_cells(nb, known)
        for line in edits + restored:
            self.log.warning("nbgrader metadata: %s", line)
        if edits or restored:
            nb.metadata["attention_lab"] = {"metadata_edits": edits, "restored_cells": restored}
        return nb, resources
