"""Run a source notebook's self-check cells on an answer, in this process (a fast model of Run All).

An assignment's self-check cells are its read-only code cells named ``check_*``
(one or more after each answer) and ``fact_*`` (the facts after the last step).
The self-checks of a step are the ``check_*`` cells between the previous
autograder-test cell and the step's own. A cell runs in a namespace made like
the kernel's: the setup cell (without its ``%`` magics), then the source
solution with some cells replaced.
"""

from __future__ import annotations

import contextlib
import functools
import io
import re
from dataclasses import dataclass

import matplotlib

from attention_lab.core.worked import SelfCheckFailed
from autograder.grader import answers
from autograder.nbgrader.notebook_cells import nbgrader_meta, read_json
from autograder.grader.spec import Assignment

matplotlib.use("Agg")  # no window in tests, should a cell import pyplot (the course draws outside it)

SELF_CHECK_PREFIXES = ("check_", "fact_")


@dataclass(frozen=True)
class Cells:
    """The parts of a source notebook the self-checks need."""

    setup: str
    self_checks: dict[str, str]  # grade_id → source, in notebook order
    of_step: dict[str, tuple[str, ...]]  # autograder-test grade_id → its step's check_* grade_ids


def is_self_check(cell) -> bool:
    """A read-only, ungraded code cell named ``check_*`` or ``fact_*``."""
    meta = nbgrader_meta(cell)
    return (cell["cell_type"] == "code" and meta.get("locked") and not meta.get("grade")
            and not meta.get("solution") and meta.get("grade_id", "").startswith(SELF_CHECK_PREFIXES))


def cells_of(assignment: Assignment) -> Cells:
    return _cells(assignment.name, assignment.notebook)


@functools.lru_cache(maxsize=None)
def _cells(name: str, notebook: str) -> Cells:
    nb = read_json(answers.REPO / "source" / name / notebook)
    setup, self_checks, of_step, pending = "", {}, {}, []
    for cell in nb["cells"]:
        meta = nbgrader_meta(cell)
        grade_id = meta.get("grade_id", "")
        if grade_id == "setup":
            setup = "\n".join(line for line in cell["source"].splitlines() if not line.lstrip().startswith("%"))
        elif is_self_check(cell):
            self_checks[grade_id] = cell["source"]
            if grade_id.startswith("check_"):
                pending.append(grade_id)
        elif cell["cell_type"] == "code" and meta.get("grade") and not meta.get("solution"):
            of_step[grade_id], pending = tuple(pending), []
    return Cells(setup, self_checks, of_step)


def namespace_for(assignment: Assignment, cells: dict[str, str]) -> dict:
    """The kernel's namespace after the setup cell and the solution with ``cells`` (grade_id → source) replaced."""
    namespace = answers.answer_namespace(assignment.name, assignment.notebook, cells)
    exec(cells_of(assignment).setup, namespace)
    return namespace


def verdict(namespace: dict, source: str) -> str | None:
    """None when the self-check cell passes; its message when it fails with :class:`SelfCheckFailed`.

    Any other exception propagates: a self-check must fail in plain words, never with a raw error.
    """
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            answers.run_cell(source, namespace)
    except SelfCheckFailed as failure:
        return str(failure)
    return None


def release_with(assignment: Assignment, cells: dict[str, str]):
    """The release notebook answered with the source solution, ``cells`` (grade_id → source) replacing some answers."""
    from autograder.nbgrader.notebook_cells import fill_release, read, solution_cells

    source = answers.REPO / "source" / assignment.name / assignment.notebook
    release = answers.REPO / "release" / assignment.name / assignment.notebook
    return fill_release(read(release), {**solution_cells(read(source)), **cells})


def first_mistake(assignment: Assignment) -> str:
    """The bank mistake the notebook-wide tests fill a release with (the bank's first: a fixed choice)."""
    return next(iter(assignment.mistakes))


PLAIN = re.compile(r"\x1b\[[0-9;]*m")


def error_lines(output) -> list[str]:
    """The lines a notebook shows for an error output (its traceback, without colours)."""
    return [PLAIN.sub("", line) for chunk in output.get("traceback", []) for line in chunk.splitlines()]


def our_frames(lines: list[str]) -> list[str]:
    """Lines of a traceback that show a frame of this course's own package (or where it is installed)."""
    return [line for line in lines if "attention_lab/" in line or str(answers.REPO) in line
            or "site-packages" in line]


def _text(output) -> str:
    text = output.get("text", "")
    return "".join(text) if isinstance(text, list) else text  # nbformat's multiline strings may be lists


def assert_ran_to_the_end_with_every_verdict_and_the_visual(nb) -> None:
    """What Run All on a release with a known mistake must give, asserted on the notebook it leaves (from nbclient,
    or JupyterLab's model after Run All): no error shows a frame of ours, every self-check shows its verdict (a ✓
    printed, or a :class:`SelfCheckFailed` whose first line is its plain ``✗`` message), at least one fails, and
    the explorer (the cell named ``explorer`` or ``explore``) is drawn at the end."""
    failed = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        errors = [o for o in cell.outputs if o.output_type == "error"]
        for error in errors:
            assert not our_frames(error_lines(error)), "\n".join(error_lines(error))
        if is_self_check(cell):
            printed = "".join(_text(o) for o in cell.outputs if o.output_type == "stream")
            assert errors or "✓" in printed, f"{nbgrader_meta(cell)['grade_id']} shows no verdict"
            for error in errors:
                assert error.ename == "SelfCheckFailed" and error_lines(error)[0].startswith("✗ "), error_lines(error)
            failed += bool(errors)
    assert failed >= 1, "the mistake fails at least its own self-check"
    explorer = next(c for c in nb.cells if nbgrader_meta(c).get("grade_id") in ("explorer", "explore"))
    assert [o for o in explorer.outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})], \
        "the explorer is drawn at the end"
