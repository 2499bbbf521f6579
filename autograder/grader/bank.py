"""Known mistakes written as small edits of a solution (old text → new text), and running answer cells.

An answer bank (``autograder/assignments/a0N_…/bank.py``) holds the solution cells of an
assignment as source strings (grade_id → source) and writes each known mistake as one or more
:class:`Edit` s of them, so that the mistake is read as the exact change a learner made, and so
that a test fails as soon as an edit no longer applies exactly once. :meth:`Mistake.variant`
turns a mistake into the :class:`autograder.grader.spec.Variant` the grader uses (the edited cells).

A graded assignment's solution is its source notebook's solution cells (:func:`source_solution`),
never a copy; a draft's (assignments 6–9, no notebook yet) is written in its bank.
tests/test_mistake_edits.py checks every mistake of every bank that uses edits.
"""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np

from autograder.course import REPO
from autograder.grader.answers import run_cell, source_solutions
from autograder.grader.questions import Questions
from autograder.grader.spec import Assignment, Variant


@dataclass(frozen=True)
class Edit:
    """Replace the text ``old`` (which occurs exactly once) by ``new`` in solution cell ``cell``."""

    cell: str
    old: str
    new: str


@dataclass(frozen=True)
class Mistake:
    """A known mistake as edits of the solution cells.

    Attributes
    ----------
    description : str
        What is wrong, in words (shown to instructors).
    step : str
        grade_id of the autograder-test cell where the mistake is charged.
    hint : str
        What the learner reads when their output matches this mistake's: the idea, no code.
    edits : tuple of Edit
        The change, applied in order.
    evidence : str
        Where the mistake is seen in public code or writing (``owner/repo#N``), or "".
    passes : frozenset of str
        Descriptions of the hidden cases of ``step`` that do not involve what the mistake gets
        wrong (a causal mistake on a case without the mask, a batch-only mistake on one row), on
        which its output is right. On every other case of the step it must be wrong; a test
        checks both, so this list is exactly where the mistake keeps points.
    also_breaks : frozenset of str
        grade_ids of further autograder-test cells that lose points because they grade the same
        values again. Empty in every bank: a step that grades another aspect of an earlier step's
        function (assignment 1's scaling of ``attention_scores``) is ``values_graded_earlier``
        (:class:`~autograder.grader.spec.Step`), so that the value mistake is charged once.
        :attr:`breaks` is ``{step} | also_breaks``.
    """

    description: str
    step: str
    hint: str
    edits: tuple[Edit, ...]
    evidence: str = ""
    passes: frozenset[str] = field(default_factory=frozenset)
    also_breaks: frozenset[str] = field(default_factory=frozenset)

    @property
    def breaks(self) -> frozenset[str]:
        """Every step where the mistake loses points: its own step and :attr:`also_breaks`."""
        return frozenset({self.step}) | self.also_breaks

    def cells(self, solution: Mapping[str, str]) -> dict[str, str]:
        """The solution cells this mistake changes, edited (grade_id → new source)."""
        return apply_edits(solution, self.edits)

    def variant(self, solution: Mapping[str, str]) -> Variant:
        """The grader's form of this mistake: edited cells, :attr:`breaks`, hint."""
        return Variant(self.description, self.cells(solution), self.breaks, self.hint)


def variants(mistakes: Mapping[str, Mistake], solution: Mapping[str, str]) -> dict[str, Variant]:
    """name → :meth:`Mistake.variant` of each mistake: the ``MISTAKES`` an assignment spec hands the grader."""
    return {name: mistake.variant(solution) for name, mistake in mistakes.items()}


def source_solution(bank_module: str, course_dir: Path = REPO) -> dict[str, str]:
    """The solution cells (grade_id → source, notebook order) of the source notebook of a bank's assignment.

    The assignment folder ``autograder/assignments/aNN_<topic>/`` grades ``source/NN_<name>/``, whose
    only notebook holds the solution (the banks cannot import their spec, which imports them; a test
    checks that this is the notebook the spec names).

    Parameters
    ----------
    bank_module : str
        The bank's ``__name__`` (``"autograder.assignments.a01_attention.bank"``).
    course_dir : Path
        The course directory (default: this repository).

    Raises
    ------
    ValueError
        If the module is not in an ``aNN_<topic>`` folder, or not exactly one ``source/NN_*`` folder
        with exactly one notebook exists.
    """
    match = re.search(r"\.a(\d\d)_\w+\.", bank_module)
    if match is None:
        raise ValueError(f"bank_module must be a module of an aNN_<topic> folder; got {bank_module!r}")
    folders = sorted(Path(course_dir, "source").glob(f"{match.group(1)}_*"))
    notebooks = [p for folder in folders for p in folder.glob("*.ipynb")]
    if len(folders) != 1 or len(notebooks) != 1:
        raise ValueError(f"{bank_module}: expected one source/{match.group(1)}_* folder with one notebook, "
                         f"found {[str(p) for p in folders + notebooks]}")
    return source_solutions(notebooks[0].parent.name, notebooks[0].name, Path(course_dir))


def apply_edits(solution: Mapping[str, str], edits: tuple[Edit, ...]) -> dict[str, str]:
    """Apply ``edits`` to copies of the solution cells; return only the cells they change.

    Raises
    ------
    KeyError
        If an edit names a cell the solution does not have.
    ValueError
        If an edit's ``old`` text does not occur exactly once in its cell (as edited so far),
        or an edit changes nothing.
    """
    changed: dict[str, str] = {}
    for edit in edits:
        if edit.cell not in solution:
            raise KeyError(f"no solution cell {edit.cell!r}; cells: {sorted(solution)}")
        source = changed.get(edit.cell, solution[edit.cell])
        count = source.count(edit.old)
        if count != 1:
            raise ValueError(f"the text to replace occurs {count} times in cell {edit.cell!r} (must be once): "
                             f"{edit.old!r}")
        if edit.old == edit.new:
            raise ValueError(f"an edit of cell {edit.cell!r} changes nothing: {edit.old!r}")
        changed[edit.cell] = source.replace(edit.old, edit.new)
    return changed


def describe_edit(edit: Edit) -> str:
    """One line for a design note or a report: ``old`` → ``new``, lines joined by ⏎, indentation dropped."""
    def one_line(text: str) -> str:
        return " ⏎ ".join(line.strip() for line in text.strip("\n").splitlines())

    return f"`{one_line(edit.old)}` → " + (f"`{one_line(edit.new)}`" if edit.new.strip() else "(deleted)")


def run_cells(cells: Mapping[str, str]) -> dict:
    """A fresh namespace (``np`` imported) with ``cells`` run in order, quietly; a failing cell raises.

    Unlike a kernel (and :func:`autograder.grader.answers.namespace_with`), an error is not skipped:
    the bank's own cells must all run.
    """
    namespace = {"np": np, "__name__": "__main__"}
    for grade_id, source in cells.items():
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                run_cell(source, namespace)
            except Exception as error:
                raise RuntimeError(f"cell {grade_id!r} failed: {type(error).__name__}: {error}") from error
    return namespace


#: (assignment, mistake key, autograder-test grade_id) → why the visible self-check cannot see the mistake:
#: the known mistakes that lose points in a step although that step's visible self-check passes, each with
#: the reason only the hidden inputs can expose it (``tests/test_checks_agree_with_grader.py`` checks every
#: other mistake against the self-checks, and README.md's developer section shows this list). The questions'
#: wrong answers need no entry here: :func:`hidden_inputs_only` adds them.
HIDDEN_INPUTS_ONLY: dict[tuple[str, str, str], str] = {}


def hidden_inputs_only(assignments: Iterable[Assignment]) -> dict[tuple[str, str, str], str]:
    """Every known mistake of ``assignments`` that only hidden inputs expose, with the reason.

    Parameters
    ----------
    assignments : iterable of Assignment

    Returns
    -------
    dict
        (assignment, mistake key, grade_id) → reason: the entries of :data:`HIDDEN_INPUTS_ONLY`, and each wrong
        answer of each question of ``assignments`` (:attr:`Assignment.questions`), whose visible check tests the
        format only (:data:`autograder.grader.questions.QUESTION_REASON`).
    """
    entries = dict(HIDDEN_INPUTS_ONLY)
    for assignment in assignments:
        entries.update(Questions(assignment.questions).hidden_inputs_only(assignment.name))
    return entries
