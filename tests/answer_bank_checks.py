"""Checks every edit-form answer bank must pass (assignments 7 and 8): used by tests/test_tiled_attention_bank.py
and tests/test_modern_attention_bank.py.

A bank module has ``STEPS``, ``REFERENCE``, ``SOLUTION``, ``CORRECT``, ``MISTAKES`` and hidden cases;
see ``autograder/assignments/a07_tiled_attention/bank.py``. Only trusted code (the bank's own
cells) runs here, in this process.
"""

from __future__ import annotations

import re
import warnings

import numpy as np

from autograder.grader.bank import apply_edits, describe_edit, run_cells
from autograder.grader.comparison import Raised, same as _same_returned


def same(a, b, case) -> bool:
    """Whether two trusted answers agree on a case: the same returned result, or the same exception class.

    (The grader never treats two exceptions as agreeing — an exception is no evidence of a learner's
    correctness — but between the reference and the bank's own variants, raising the same class is agreement.)
    """
    if isinstance(a, Raised) and isinstance(b, Raised):
        return a.type == b.type
    return _same_returned(a, b, case)


def call(function, case, *, quiet=True):
    """``function`` on copies of the case's inputs; an exception becomes :class:`Raised`.

    quiet=False keeps NumPy's default error state (underflow ignored) and turns warnings into
    errors, as a case with ``no_warnings`` fails on any warning the kernel reports.
    """
    args = [np.array(a, copy=True) if isinstance(a, np.ndarray) else
            [np.array(b, copy=True) for b in a] if isinstance(a, list) else a for a in case.args]
    with warnings.catch_warnings(), np.errstate(all="ignore") if quiet else np.errstate():
        warnings.simplefilter("ignore" if quiet else "error")
        try:
            return function(*args, **dict(case.kwargs))
        except Exception as error:  # noqa: BLE001 — a mistake may raise
            return Raised(type(error).__name__, message=str(error))


def agrees(result, expected, case) -> bool:
    """Whether a result is the reference's: the same values, or, in a case that must raise, the same exception.

    An exception is never evidence of a right result (:func:`autograder.grader.comparison.same`), except in a
    ``raises`` case, where the exception's type is the answer.
    """
    if case.raises is not None:
        return isinstance(result, Raised) and isinstance(expected, Raised) and result.type == expected.type
    return same(result, expected, case)


class BankChecks:
    """The checks for one bank, given its hidden cases (step grade_id → cases)."""

    def __init__(self, bank, cases: dict, design: str):
        self.bank, self.cases, self.design = bank, cases, design
        self.expected = {step: [call(bank.REFERENCE[c.function], c) for c in cs] for step, cs in cases.items()}

    def namespace(self, cells) -> dict:
        return run_cells({**self.bank.SOLUTION, **cells})

    def steps_and_cases(self, points: int) -> None:
        assert set(self.cases) <= set(self.bank.STEPS)
        assert sum(p for _, p in self.bank.STEPS.values()) == points
        for step, cases in self.cases.items():
            descriptions = [case.description for case in cases]
            assert len(set(descriptions)) == len(descriptions), step
            for case, expected in zip(cases, self.expected[step]):
                assert isinstance(expected, Raised) == (case.raises is not None), (case.description, expected)

    def agrees_on_hidden_cases(self, cells) -> None:
        functions = self.namespace(cells)
        for step, cases in self.cases.items():
            for case, expected in zip(cases, self.expected[step]):
                assert agrees(call(functions[case.function], case), expected, case), (step, case.description)

    def no_warnings(self, cells) -> None:
        functions = self.namespace(cells)
        for step, cases in self.cases.items():
            for case, expected in zip(cases, self.expected[step]):
                if case.no_warnings:
                    for function in (self.bank.REFERENCE[case.function], functions[case.function]):
                        assert agrees(call(function, case, quiet=False), expected, case), case.description

    def mistake_wrong_exactly_off_its_passes(self, name: str) -> None:
        """Wrong on every case of its step except those it declares it does not involve (there it is right)."""
        mistake = self.bank.MISTAKES[name]
        assert mistake.step in self.bank.STEPS
        cells = mistake.cells(self.bank.SOLUTION)
        assert len(cells) == 1  # one cell changed: the one that defines the step's function
        functions = self.namespace(cells)
        cases = self.cases[mistake.step]
        assert mistake.passes <= {case.description for case in cases}, "passes names a case the step does not have"
        for case, expected in zip(cases, self.expected[mistake.step]):
            right = agrees(call(functions[case.function], case), expected, case)
            assert right == (case.description in mistake.passes), case.description

    def mistakes_told_apart(self) -> None:
        """Two mistakes of one step differ on some case, so feedback names the right one."""
        outputs = {}
        for name, mistake in self.bank.MISTAKES.items():
            if mistake.step in self.cases:
                functions = self.namespace(mistake.cells(self.bank.SOLUTION))
                outputs[name] = [call(functions[c.function], c) for c in self.cases[mistake.step]]
        for a in outputs:
            for b in outputs:
                step = self.bank.MISTAKES[a].step
                if a < b and step == self.bank.MISTAKES[b].step:
                    assert not all(agrees(x, y, c) for x, y, c in zip(outputs[a], outputs[b], self.cases[step])), (a, b)

    def edits_apply_once(self) -> None:
        for name, mistake in self.bank.MISTAKES.items():
            assert apply_edits(self.bank.SOLUTION, mistake.edits), name

    def documented(self) -> None:
        assert len(self.bank.CORRECT) >= 9 and len(self.bank.MISTAKES) >= 12
        for name in [*self.bank.CORRECT, *self.bank.MISTAKES, *self.bank.STEPS]:
            assert f"`{name}`" in self.design, f"DESIGN.md does not describe {name}"
        for name, mistake in self.bank.MISTAKES.items():
            for edit in mistake.edits:
                assert describe_edit(edit) in self.design, (name, describe_edit(edit))
            for reference in re.findall(r"[\w.-]+/[\w.-]+#\d+", mistake.evidence):
                assert reference in self.design, (name, reference)


def assert_table_matches_steps(nb, steps) -> None:
    """The notebook's first cell's table lists each graded step in order — ``| n | … `function(` … | points |`` —
    with the points of its autograder cell, which are the bank's (``steps``: grade_id → (title, points))."""
    from autograder.nbgrader.notebook_cells import nbgrader_meta

    table = nb.cells[0].source
    points = {nbgrader_meta(c)["grade_id"]: nbgrader_meta(c)["points"] for c in nb.cells
              if nbgrader_meta(c).get("grade") and c.cell_type == "code"}
    graded = [g for g in points if g.startswith("test_")]
    assert graded == list(steps) and all(points[g] == steps[g][1] for g in graded)
    for number, grade_id in enumerate(graded):
        row = re.search(rf"^\| {number} \| (.*) \| (\d+) \|$", table, re.M)
        assert row and int(row.group(2)) == points[grade_id], grade_id
        if number:  # step 0 pastes earlier assignments' functions
            assert f"`{grade_id.removeprefix('test_')}(" in row.group(1), grade_id
