"""nbgrader preprocessors that extend Attention Lab's grading pipeline.

Each is one small configurable class, composed in ``nbgrader_config.py``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import nbformat
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor

from attention_lab import wire
from autograder import assignments
from autograder.in_process import grader_for
from autograder.notebook_cells import nbgrader_meta
from autograder.probe_output import screen, why_missing


class ClearWidgetState(NbGraderPreprocessor):
    """Drop saved ipywidgets state from a notebook's metadata.

    ``ClearOutput`` clears cell outputs but not ``metadata.widgets``, which
    JupyterLab saves when a notebook with live widgets is stored; that state
    can hold a rendered answer (a printed reference result in an Output
    widget), so it must not reach ``release/``. (Subclassing nbgrader's base
    class makes it enabled by default, like nbgrader's own preprocessors.)
    """

    def preprocess(self, nb, resources):
        nb.metadata.pop("widgets", None)
        for cell in nb.cells:
            cell.metadata.pop("widgets", None)
        return nb, resources


# ---- grading outside the learner's kernel -------------------------------------------------------

_HIDDEN_REGION = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS.*?^[ \t]*### END HIDDEN TESTS[ \t]*\n?",
                            re.MULTILINE | re.DOTALL)
GRADED_OUTSIDE = "# (Hidden tests: graded by the course's grader outside this notebook; results below.)"


def _course_grader(config, resources):
    """The assignment's :class:`~autograder.comparison.Grader` for this run, or None if the notebook isn't ours."""
    name = (resources.get("nbgrader") or {}).get("assignment")
    try:
        assignment = assignments.get(name)
    except KeyError:
        return None
    root = CourseDirectory(config=config).root or os.getcwd()
    return grader_for(assignment, Path(root))


def _autograder_cells(nb, grader):
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        if (cell.cell_type == "code" and meta.get("grade") and not meta.get("solution")
                and meta.get("grade_id") in grader.cases):
            yield meta["grade_id"], cell


class InsertProbes(NbGraderPreprocessor):
    """Before execution: replace each autograder cell's hidden tests with a probe carrying its hidden inputs.

    The probe (:func:`attention_lab.probe.run`) runs first in the cell, so a
    failing visible check after it cannot stop it; it only calls the
    learner's functions and publishes the raw results. No reference code and
    no expected value enters the kernel.
    """

    def preprocess(self, nb, resources):
        grader = _course_grader(self.config, resources)
        if grader is None:
            self.log.warning("InsertProbes: %s is not an Attention Lab assignment; left as it is",
                             (resources.get("nbgrader") or {}).get("assignment"))
            return nb, resources
        for grade_id, cell in _autograder_cells(nb, grader):
            visible = _HIDDEN_REGION.sub("", cell.source).rstrip()
            packed = wire.pack(grader.request(grade_id))
            cell.source = (f'import attention_lab.probe as _attention_lab_probe; '
                           f'_attention_lab_probe.run(globals(), "{packed}")\n{visible}')
        return nb, resources


class GradeOutsideKernel(NbGraderPreprocessor):
    """After execution: grade each step from its probe's results, in this process.

    Each autograder cell's outputs become the grader's feedback (stdout) and
    its score (the cell's value, which nbgrader reads as partial credit);
    anything the cell printed or raised in the kernel is dropped, so the
    learner's code cannot change a score by what it prints. The cell's
    source becomes its visible part again, so feedback shows no hidden
    inputs. A summary goes to ``nb.metadata["attention_lab"]["grading"]``.
    """

    def preprocess(self, nb, resources):
        grader = _course_grader(self.config, resources)
        if grader is None:
            return nb, resources
        cells = dict(_autograder_cells(nb, grader))
        screened = {grade_id: screen(grader.request(grade_id), cell.outputs) for grade_id, cell in cells.items()}
        results = {grade_id: found for grade_id, (found, _) in screened.items()}
        points = {grade_id: float(nbgrader_meta(cell)["points"]) for grade_id, cell in cells.items()}
        notes = nb.metadata.setdefault("attention_lab", {})
        execution = notes.get("execution") or {}
        stopped = execution.get("reason") if execution.get("status") not in (None, "ok") else None
        verdicts = grader.grade(results, points, missing_reason=stopped)
        for grade_id, cell in cells.items():
            verdict = verdicts[grade_id]
            if results[grade_id] is None:  # say why, in the cell's own terms (forged output, a replaced probe, ...)
                why = screened[grade_id][1] or why_missing(cell, stopped)
                verdict.lines = [f"  ✗ no result reached the grader ({why})"]
            visible = "\n".join(line for line in cell.source.splitlines()
                                if not line.startswith("import attention_lab.probe as _attention_lab_probe;"))
            cell.source = f"{visible.rstrip()}\n{GRADED_OUTSIDE}".lstrip("\n")
            cell.outputs = [
                nbformat.v4.new_output("stream", name="stdout", text=verdict.text() + "\n"),
                nbformat.v4.new_output("execute_result", data={"text/plain": repr(float(verdict.score))},
                                       execution_count=cell.get("execution_count")),
            ]
        notes["grading"] = {grade_id: {"score": v.score, "points": v.points, "named": v.named}
                            for grade_id, v in verdicts.items()}
        return nb, resources
