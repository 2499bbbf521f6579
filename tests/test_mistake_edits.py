"""Every known mistake of every answer bank (assignments 1–9) is a small edit of the current solution.

Issue 11: "known mistakes are written as small edits of the solution; a test fails when an edit no longer
applies exactly once or no longer changes an output." For every mistake of every bank:

* each of its edits applies exactly once to the current solution (for a graded assignment: the source
  notebook's solution cells, which the bank reads, never a copy);
* the edited answer changes an output of its step on at least one hidden case (compared with the unedited
  solution's output, not with the reference: an edit that no longer changes anything fails here);
* for a graded assignment, the grader charges the mistake exactly where it says (its step, and
  ``also_breaks``) and names it there, and the spec hands the grader exactly these edited cells.

No bank may write a mistake as a whole copied function any more: a bank whose mistakes are not edits fails.
Only trusted code (the banks' own cells) runs here, in this process.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

from answer_bank_checks import call as call_on_case
from autograder import assignments
from autograder.grader import bank as edits, draft_rewrites
from autograder.grader.answers import answer_namespace, source_solutions
from autograder.grader.in_process import grade_variant
from a07_memory_stand_in import a07_memory_stand_in  # noqa: F401 — a fixture: a07's memory step on its stand-in case

pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning"), pytest.mark.usefixtures("a07_memory_stand_in")]

GRADED = {assignments.folder_of(name): a for name, a in assignments.all_assignments().items()}


def _bank(folder: str):
    return importlib.import_module(f"{assignments.__name__}.{folder}.bank")


@dataclass(frozen=True)
class BankMistake:
    """One mistake of one bank, in the one form every bank shares: a :class:`~autograder.grader.bank.Mistake`."""

    folder: str
    name: str
    mistake: edits.Mistake
    solution: dict
    #: ``outputs(cells, step)``: the answer's output (solution with ``cells`` replaced) on each hidden case of
    #: ``step``, in order; None for a step whose case only runs in a child process (a07's memory step)
    outputs: Callable[[dict, str], list | None]


def _graded(folder: str) -> list[BankMistake]:
    assignment, module = GRADED[folder], _bank(folder)
    steps = {step.grade_id: step.cases() for step in assignment.steps}

    def outputs(cells: dict, step: str) -> list | None:
        if any(case.memory_limit is not None for case in steps[step]):
            return None  # sized against the sandbox's memory: graded under its limit below, never run here
        namespace = answer_namespace(assignment.name, assignment.notebook, cells)
        return [call_on_case(namespace[case.function], case) if callable(namespace.get(case.function)) else None
                for case in steps[step]]

    return [BankMistake(folder, name, mistake, module.SOLUTION, outputs)
            for name, mistake in module.KNOWN_MISTAKES.items()]


def _edit_draft(folder: str) -> list[BankMistake]:
    """A draft bank whose ``MISTAKES`` are Mistakes of its own ``SOLUTION``, cases from ``hidden_cases()``."""
    module = _bank(folder)
    cases = module.hidden_cases(**({"include_memory_case": False} if folder.startswith("a07") else {}))

    def outputs(cells: dict, step: str) -> list | None:
        if not cases.get(step):  # a07: tests/test_tiled_attention_bank.py runs it under the sandbox's memory limit
            return None
        namespace = edits.run_cells({**module.SOLUTION, **cells})
        return [call_on_case(namespace[case.function], case) for case in cases[step]]

    return [BankMistake(folder, name, mistake, module.SOLUTION, outputs) for name, mistake in module.MISTAKES.items()]


def _rewrite_draft(folder: str) -> list[BankMistake]:
    """Assignments 6 and 9: ``MISTAKES`` are :class:`draft_rewrites.Edit` s, cases from ``STEPS[step].cases()``."""
    module = _bank(folder)

    def outputs(cells: dict, step: str) -> list:
        namespace = draft_rewrites.run_cells({**module.SOLUTION, **cells}, module.GIVEN)
        return [draft_rewrites.call(namespace, case.function, case.args, case.kwargs)
                for case in module.STEPS[step].cases()]

    return [BankMistake(folder, name, edit.mistake, module.SOLUTION, outputs) for name, edit in module.MISTAKES.items()]


def _kind(folder: str):
    module = _bank(folder)
    if folder in GRADED and hasattr(module, "KNOWN_MISTAKES"):
        return _graded
    mistakes = list(getattr(module, "MISTAKES", {}).values())
    if mistakes and all(isinstance(m, edits.Mistake) for m in mistakes):
        return _edit_draft
    if mistakes and all(isinstance(m, draft_rewrites.Edit) for m in mistakes):
        return _rewrite_draft
    return None


FOLDERS = assignments.folders()
ALL = [m for folder in FOLDERS if _kind(folder) for m in _kind(folder)(folder)]
GRADED_MISTAKES = [m for m in ALL if _kind(m.folder) is _graded]  # a06: its spec's mistakes, tests/test_grader.py


def test_every_bank_writes_its_mistakes_as_edits():
    assert len(FOLDERS) >= 9
    assert [folder for folder in FOLDERS if _kind(folder) is None] == []
    assert {m.folder for m in ALL} == set(FOLDERS)


#: graded assignments whose bank writes mistakes as Mistakes of the source notebook's solution (assignment 6's
#: bank keeps the draft form, draft_rewrites.Edit of its own reference-style solution: checked below)
EDITED_SOURCE = sorted(folder for folder in GRADED if hasattr(_bank(folder), "KNOWN_MISTAKES"))


def test_a_graded_draft_form_bank_hands_the_grader_exactly_its_edits():
    for folder in sorted(set(GRADED) - set(EDITED_SOURCE)):
        assignment, module = GRADED[folder], _bank(folder)
        assert _kind(folder) is _rewrite_draft, folder
        assert list(assignment.function_mistakes) == list(module.MISTAKES), folder
        for name, edit in module.MISTAKES.items():
            edited = draft_rewrites.apply_edit(module.SOLUTION, edit)[edit.cell]
            assert edited in assignment.mistakes[name].cells[edit.cell], (folder, name)
            assert assignment.mistakes[name].breaks == {f"test_{edit.breaks}"}, (folder, name)


@pytest.mark.parametrize("folder", EDITED_SOURCE)
def test_a_graded_banks_solution_is_its_source_notebooks_and_its_mistakes_are_its_edits(folder):
    assignment, module = GRADED[folder], _bank(folder)
    assert module.SOLUTION == source_solutions(assignment.name, assignment.notebook)
    # the spec hands the grader the bank's edited cells (and its questions' wrong answers, tests/test_questions.py)
    assert assignment.function_mistakes == module.MISTAKES and list(assignment.function_mistakes) == list(module.MISTAKES)
    assert list(module.MISTAKES) == list(module.KNOWN_MISTAKES)
    for name, mistake in module.KNOWN_MISTAKES.items():
        assert module.MISTAKES[name] == mistake.variant(module.SOLUTION), name
        assert mistake.edits and all(isinstance(edit, edits.Edit) for edit in mistake.edits), name


def _differs(a, b) -> bool:
    if isinstance(a, tuple) and len(a) == 2 and isinstance(a[0], str) and a[0] in ("ok", "raised"):  # draft call
        return a[0] != b[0] or (a[0] == "ok" and draft_rewrites.compare(a[1], b[1], 0.0, 0.0) != "equal") or \
            (a[0] == "raised" and a[1] != b[1])
    return not _identical(a, b)


def _identical(a, b) -> bool:
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_identical(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
    if hasattr(a, "type") and hasattr(b, "type"):  # two Raised
        return a.type == b.type
    return type(a) is type(b) and (a == b or (a != a and b != b))


def check_edits(m: BankMistake) -> None:
    """Each edit of ``m`` applies exactly once, and the edited answer changes an output of each step it breaks."""
    source = dict(m.solution)
    for edit in m.mistake.edits:  # as apply_edits does, one at a time, on the cell as edited so far
        assert edit.cell in source, f"{m.name}: no solution cell {edit.cell!r}"
        assert source[edit.cell].count(edit.old) == 1, f"{m.name}: {edits.describe_edit(edit)} must apply exactly once"
        assert edit.old != edit.new
        source[edit.cell] = source[edit.cell].replace(edit.old, edit.new)
    cells = m.mistake.cells(m.solution)
    assert cells == {cell: source[cell] for cell in cells} and cells
    for step in m.mistake.breaks:
        before, after = m.outputs({}, step), m.outputs(cells, step)
        if before is None:
            assert (m.folder, step) == ("a07_tiled_attention", "test_tiled_attention_memory")
            continue
        assert any(_differs(a, b) for a, b in zip(before, after)), \
            f"{m.folder}/{m.name}: the edited answer gives the solution's output on every hidden case of {step}"


@pytest.mark.parametrize("m", ALL, ids=lambda m: f"{m.folder}/{m.name}")
def test_each_edit_applies_exactly_once_and_changes_an_output_of_its_step(m):
    check_edits(m)


def test_an_edit_that_no_longer_changes_an_output_fails_the_check():
    m = next(m for m in GRADED_MISTAKES if m.name == "mask_flipped")
    cosmetic = edits.Mistake(m.mistake.description, m.mistake.step, m.mistake.hint,
                             (edits.Edit("causal_mask", "True where", "true where"),))
    with pytest.raises(AssertionError, match="gives the solution's output on every hidden case of test_causal_mask"):
        check_edits(BankMistake(m.folder, m.name, cosmetic, m.solution, m.outputs))
    twice = edits.Mistake(m.mistake.description, m.mistake.step, m.mistake.hint, (edits.Edit("causal_mask", "T", "T"),))
    with pytest.raises(AssertionError, match="must apply exactly once"):
        check_edits(BankMistake(m.folder, m.name, twice, m.solution, m.outputs))


@pytest.mark.parametrize("m", GRADED_MISTAKES, ids=lambda m: f"{m.folder}/{m.name}")
def test_the_grader_charges_each_edited_mistake_exactly_where_it_says(m):
    assignment = GRADED[m.folder]
    variant = m.mistake.variant(m.solution)
    if variant == assignment.mistakes.get(m.name) and variant.breaks == m.mistake.breaks:
        # the spec hands the grader this very variant (its cells, breaks and hint): tests/test_grader.py grades it
        # (test_mistake_loses_points_exactly_where_it_breaks_and_is_named_there: points lost in exactly its breaks,
        # named in each, a case failed there), in-process with a07's memory stand-in as here; not graded twice
        # (issue 11's budget). A variant that is not the spec's (a draft-form bank's own solution) is graded below.
        return
    results = grade_variant(assignment, variant)
    charged = {grade_id for grade_id, result in results.items() if result.score < result.points}
    assert charged == m.mistake.breaks, f"{m.folder}/{m.name}"
    for grade_id in m.mistake.breaks:
        assert m.name in results[grade_id].named, f"{m.folder}/{m.name} is not named in {grade_id}"
        assert not all(results[grade_id].passed)


def test_a_stale_edit_fails():
    """The check above fails when the solution changes under an edit: it no longer applies exactly once."""
    m = next(m for m in GRADED_MISTAKES if m.name == "mask_flipped")
    edit = m.mistake.edits[0]
    with pytest.raises(ValueError, match="occurs 0 times"):
        m.mistake.cells({**m.solution, edit.cell: m.solution[edit.cell].replace(edit.old, "np.tri(T, dtype=bool)")})
    with pytest.raises(ValueError, match="occurs 2 times"):
        m.mistake.cells({**m.solution, edit.cell: m.solution[edit.cell] + f"\n# {edit.old}\n"})


def test_a_mistake_of_a_function_two_steps_grade_is_charged_once():
    """K Qᵀ is a mistake of attention_scores, graded by the scores step and by the scaling step: it costs the
    scores step only (the scaling step takes the identified scores as given and grades the ÷√d_k), while the same
    learner's missing scaling still costs the scaling step."""
    from autograder.grader.in_process import grade_answers

    bank = _bank("a01_attention")
    mistake = bank.KNOWN_MISTAKES["keys_times_queries"]
    assert mistake.step == "test_attention_scores" and mistake.breaks == {"test_attention_scores"}
    assert not any(m.also_breaks for folder in GRADED for m in getattr(_bank(folder), 'KNOWN_MISTAKES', {}).values())
    a01 = assignments.get("01_scaled_dot_product_attention")
    transposed = mistake.cells(bank.SOLUTION)
    graded = grade_answers(a01, transposed)
    assert graded["test_attention_scores"].score == 0
    assert graded["test_scaling"].score == 1, graded["test_scaling"].text()
    assert "correct given your earlier function(s)" in graded["test_scaling"].text()
    unscaled = {"attention_scores": transposed["attention_scores"].replace("scores = scores / np.sqrt(Q.shape[-1])",
                                                                           "scores = scores")}
    assert unscaled != transposed
    assert grade_answers(a01, unscaled)["test_scaling"].score == 0


def test_the_draft_rewrites_edit_is_a_bank_mistake_of_one_edit():
    edit = _bank("a06_gradients").MISTAKES["jacobian_outer_plus"]
    solution = _bank("a06_gradients").SOLUTION
    assert edit.mistake == edits.Mistake(edit.description, edit.breaks, edit.hint,
                                         (edits.Edit(edit.cell, edit.old, edit.new),))
    assert draft_rewrites.apply_edit(solution, edit) == {**solution, **edits.apply_edits(solution, edit.mistake.edits)}


def test_source_solution_names_the_folder_it_cannot_find(tmp_path):
    with pytest.raises(ValueError, match="aNN_<topic>"):
        edits.source_solution("autograder.grader.bank")
    with pytest.raises(ValueError, match="one source/01_"):
        edits.source_solution("autograder.assignments.a01_attention.bank", tmp_path)


@pytest.mark.parametrize("slip, scores, scaling", [
    ("Q @ K.T", 0.5, 1.0),  # 2-D only: the batched case raises in both steps, charged in the scores step
    ("np.abs(Q @ np.swapaxes(K, -1, -2))", 0.0, 1.0),  # wrong values no bank entry names, scaled rightly
])
def test_a_scores_mistake_no_bank_entry_names_is_charged_once(slip, scores, scaling):
    """The scaling step grades the learner's scale=True scores against their own scale=False scores on the same Q
    and K (Case.twin): a mistake in the scores, named or not, costs the scores step only."""
    from autograder.grader.in_process import grade_answers

    solution = _bank("a01_attention").SOLUTION["attention_scores"]
    cells = {"attention_scores": solution.replace("Q @ np.swapaxes(K, -1, -2)", slip)}
    graded = grade_answers(assignments.get("01_scaled_dot_product_attention"), cells)
    assert (graded["test_attention_scores"].score, graded["test_scaling"].score) == (scores, scaling)


def test_scaling_graded_on_the_learners_own_scores_still_charges_a_wrong_divisor_and_an_always_raising_function():
    from autograder.grader.in_process import grade_answers

    a01 = assignments.get("01_scaled_dot_product_attention")
    solution = _bank("a01_attention").SOLUTION["attention_scores"]
    by_d = solution.replace("Q @ np.swapaxes(K, -1, -2)", "np.abs(Q @ np.swapaxes(K, -1, -2))").replace(
        "np.sqrt(Q.shape[-1])", "Q.shape[-1]")
    graded = grade_answers(a01, {"attention_scores": by_d})["test_scaling"]
    assert graded.score == 0 and "your own scale=False scores divided by 8" in " ".join(graded.text().split())
    raising = "def attention_scores(Q, K, scale=True):\n    raise ValueError('no')\n"
    assert grade_answers(a01, {"attention_scores": raising})["test_scaling"].score == 0


@pytest.mark.parametrize("body", ["return None", "return np.zeros((0, 0))", "return np.zeros(1)",
                                  "return np.full((Q.shape[-2], K.shape[-2]), np.nan)", "pass",
                                  "return np.zeros(Q.shape[:-1] + K.shape[-2:-1])"])
def test_scores_that_are_not_scores_earn_no_scaling_point(body):
    """The scaling step's twin relation (scaled = own unscaled ÷ √d_k) holds for None, empty, NaN or zero 'scores'
    too; they are graded as they are instead (a reviewer found None earned the scaling point)."""
    from autograder.grader.in_process import grade_answers

    graded = grade_answers(assignments.get("01_scaled_dot_product_attention"),
                           {"attention_scores": f"def attention_scores(Q, K, scale=True):\n    {body}\n"})
    assert graded["test_attention_scores"].score == 0 and graded["test_scaling"].score == 0, \
        graded["test_scaling"].text()
