"""The visible self-checks agree with the grader, for every assignment.

* Every known mistake of the answer bank that loses points in a step makes that step's self-check fail
  (in plain words), except the documented mistakes only hidden inputs can expose
  (:func:`autograder.grader.bank.hidden_inputs_only`).
* The same holds for every rule the grader charges without needing hidden inputs — inputs left unmodified,
  shape, dtype, leading batch dimensions, the ``axis`` argument, no warnings where the spec forbids them —
  each broken on purpose in every function of every assignment it applies to.
* Every correct variant, and the source solution, passes every self-check cell.

The grader is the in-process model of ``nbgrader autograde`` (:func:`autograder.grader.in_process.grade_answers`).
"""

from __future__ import annotations

import re
import textwrap

import numpy as np
import pytest

from autograder import assignments
from autograder.grader.answers import source_solutions
from autograder.grader.in_process import grade_answers, grader_for
from autograder.grader.bank import hidden_inputs_only
from autograder.grader.questions import QUESTION_REASON
from conftest import REPO
from self_check_harness import cells_of, namespace_for, verdict
from a07_memory_stand_in import a07_memory_stand_in, memory_stand_in  # noqa: F401 — a fixture: a07's memory step on its stand-in case

pytestmark = pytest.mark.usefixtures("a07_memory_stand_in")

ASSIGNMENTS = assignments.all_assignments()
HIDDEN_INPUTS_ONLY = hidden_inputs_only(ASSIGNMENTS.values())
BANK = [(name, key) for name, a in ASSIGNMENTS.items() for key in a.mistakes]
CORRECT = [(name, key) for name, a in ASSIGNMENTS.items() for key in a.correct]


def steps_losing_points(assignment, cells) -> dict[str, str]:
    """grade_id → feedback of every step that loses points with ``cells`` replaced."""
    return {grade_id: result.text() for grade_id, result in grade_answers(assignment, cells).items()
            if result.score < result.points}


def assert_self_checks_fail_where_points_are_lost(assignment, key, cells, lost: dict[str, str] | None = None):
    """``lost``: grade_id → feedback of the steps that lose points, when known without grading (see below)."""
    lost = steps_losing_points(assignment, cells) if lost is None else lost
    namespace = namespace_for(assignment, cells)
    structure = cells_of(assignment)
    for grade_id, feedback in lost.items():
        checks = structure.of_step[grade_id]
        assert checks, f"{assignment.name}: step {grade_id} has no self-check cell"
        verdicts = {check: verdict(namespace, structure.self_checks[check]) for check in checks}
        caught = any(message is not None for message in verdicts.values())
        reason = HIDDEN_INPUTS_ONLY.get((assignment.name, key, grade_id))
        if reason is None:
            assert caught, (f"{assignment.name}/{key} loses points in {grade_id} but its self-check "
                            f"{', '.join(checks)} passes; the grader said:\n{feedback}")
        else:
            assert not caught, f"{assignment.name}/{key} is listed in HIDDEN_INPUTS_ONLY but {grade_id}'s check fails"
    return lost


# ---------------------------------------------------------------- the answer bank
@pytest.mark.parametrize("name,key", BANK)
def test_a_bank_mistake_fails_the_self_check_of_every_step_where_it_loses_points(name, key):
    assignment = ASSIGNMENTS[name]
    mistake = assignment.mistakes[key]
    # Where a bank mistake loses points is its `breaks`, not graded again here (issue 11's budget): tests/test_grader.py
    # grades these very cells (test_mistake_loses_points_exactly_where_it_breaks_and_is_named_there, in-process, the
    # course's seed, a07's memory stand-in as here) and asserts that they lose points in exactly those steps, and
    # test_the_bank_is_as_large_as_promised that every mistake has some.
    lost = {grade_id: f"(loses points here: {key}.breaks, graded in tests/test_grader.py)"
            for grade_id in mistake.breaks}
    lost = assert_self_checks_fail_where_points_are_lost(assignment, key, dict(mistake.cells), lost)
    assert lost, f"{name}/{key} loses no points at all"


def test_every_listed_exception_is_a_bank_mistake_with_a_reason():
    for (name, key, grade_id), reason in HIDDEN_INPUTS_ONLY.items():
        assert key in ASSIGNMENTS[name].mistakes and grade_id in ASSIGNMENTS[name].mistakes[key].breaks
        assert len(reason) > 40, f"{name}/{key}: say why only hidden inputs expose it"


def test_the_readme_lists_every_mistake_only_hidden_inputs_expose():
    readme = " ".join((REPO / "README.md").read_text().split())
    section = readme[readme.index("### The self-checks agree with the grader"):readme.index("### Benchmarks")]
    assert "`HIDDEN_INPUTS_ONLY`" in section
    steps = {entry: reason for entry, reason in HIDDEN_INPUTS_ONLY.items() if not entry[2].startswith("question_")}
    if not steps:
        assert "none today" in section
    for (name, key, grade_id), reason in steps.items():
        assert f"`{key}`" in section and " ".join(reason.split()) in section, f"README should list {name}/{key}"
    # the questions' wrong answers, one reason for all (a question's check tests the format only)
    assert " ".join(QUESTION_REASON.split()) in section and "`question_*`" in section


def test_every_wrong_answer_of_every_question_is_listed_and_nothing_else_of_a_question():
    """A question's visible check tests the format only: each of its known wrong answers is on the list, with the
    questions' reason; the list holds no other entry for a question's step."""
    for name, assignment in ASSIGNMENTS.items():
        for step in assignment.steps:
            if step.question is None:
                continue
            wrong = {key for key, variant in assignment.mistakes.items() if step.grade_id in variant.breaks}
            assert len(wrong) >= len(step.question.wrong) >= 3, f"{name}/{step.grade_id}: name its typical wrong answers"
            listed = {key for (n, key, grade_id) in HIDDEN_INPUTS_ONLY if n == name and grade_id == step.grade_id}
            assert listed == wrong, f"{name}/{step.grade_id}"
            assert {HIDDEN_INPUTS_ONLY[(name, key, step.grade_id)] for key in wrong} == {QUESTION_REASON}


@pytest.mark.parametrize("name,key", CORRECT + [(name, None) for name in ASSIGNMENTS])
def test_a_correct_answer_passes_every_self_check_cell(name, key):
    assignment = ASSIGNMENTS[name]
    namespace = namespace_for(assignment, {} if key is None else dict(assignment.correct[key].cells))
    for grade_id, source in cells_of(assignment).self_checks.items():
        assert verdict(namespace, source) is None, f"{name}/{key}: {grade_id} fails"


# ---------------------------------------------------------------- every rule, broken on purpose
WRAPPER = '''
import functools as _broken_functools, inspect as _broken_inspect, numpy as _broken_np
_broken_original_{name} = {name}
@_broken_functools.wraps(_broken_original_{name})
def {name}(*args, **kwargs):
{body}
'''

BODIES = {
    # the result is right, then the first array argument is changed (what `x -= x.max(...)` does)
    "in_place": '''
result = _broken_original_{name}(*args, **kwargs)
for a in args:
    if isinstance(a, _broken_np.ndarray) and a.size and a.flags.writeable:
        first = a.flat[0]
        a.flat[0] = (not first) if a.dtype == bool else (first + 1 if _broken_np.isfinite(first) else 0)
        break
return result''',
    "extra_leading_axis": '''
result = _broken_original_{name}(*args, **kwargs)
if isinstance(result, tuple):
    return tuple(r[None] if isinstance(r, _broken_np.ndarray) else r for r in result)
return result[None] if isinstance(result, _broken_np.ndarray) else result''',
    "bool_as_int": '''
result = _broken_original_{name}(*args, **kwargs)
return result.astype(_broken_np.int8) if isinstance(result, _broken_np.ndarray) and result.dtype == bool else result''',
    "float64_whatever_the_input": '''
result = _broken_original_{name}(*args, **kwargs)
if isinstance(result, tuple):
    return tuple(r.astype(_broken_np.float64) if isinstance(r, _broken_np.ndarray) and r.dtype.kind == "f" else r
                 for r in result)
return result.astype(_broken_np.float64) if isinstance(result, _broken_np.ndarray) and result.dtype.kind == "f" \\
    else result''',
    "warns": '''
_broken_np.log(_broken_np.zeros(1))  # RuntimeWarning: divide by zero
return _broken_original_{name}(*args, **kwargs)''',
    "axis_ignored": '''
bound = _broken_inspect.signature(_broken_original_{name}).bind(*args, **kwargs)
bound.arguments["axis"] = -1
return _broken_original_{name}(*bound.args, **bound.kwargs)''',
    "no_leading_batch_dimensions": '''
if any(isinstance(a, _broken_np.ndarray) and a.ndim > base for a, base in zip(args, {base})):
    raise ValueError("only written for inputs without leading batch dimensions")
return _broken_original_{name}(*args, **kwargs)''',
}


def _cases_of(assignment, function):
    grader = grader_for(assignment)
    return [(step.grade_id, case) for step in assignment.steps for case in grader.cases[step.grade_id]
            if case.function == function]


def _base_dims(cases) -> tuple[int, ...]:
    """For each positional argument, the fewest dimensions a hidden case gives it (no batch dimensions)."""
    width = max(len(case.args) for case in cases)
    return tuple(min((c.args[i].ndim for c in cases if len(c.args) > i and isinstance(c.args[i], np.ndarray)),
                     default=99) for i in range(width))


def _outputs(assignment, case) -> list:
    if case.raises is not None:
        return []
    result = assignment.reference[case.function](*case.args, **dict(case.kwargs))
    return list(result) if isinstance(result, tuple) else [result]


def charged_on(rule, assignment, case, base) -> bool:
    """Whether the grader charges a function that breaks ``rule`` on this hidden case."""
    # the reference runs only for the rules about outputs: collection asks every rule of every function
    arrays = lambda: [o for o in _outputs(assignment, case) if isinstance(o, np.ndarray)]  # noqa: E731
    return {
        "in_place": lambda: any(isinstance(a, np.ndarray) for a in case.args),
        "extra_leading_axis": lambda: bool(arrays()),
        "bool_as_int": lambda: any(o.dtype == bool for o in arrays()),
        "float64_whatever_the_input": lambda: case.exact_dtype and any(o.dtype not in (bool, np.float64)
                                                                       for o in arrays()),
        "warns": lambda: case.no_warnings,
        "axis_ignored": lambda: case.kwargs.get("axis", -1) != -1,
        "no_leading_batch_dimensions": lambda: any(isinstance(a, np.ndarray) and a.ndim > base[i]
                                                   for i, a in enumerate(case.args)),
    }[rule]()


def rule_steps(rule, assignment, function) -> tuple[set[str], dict]:
    """The steps with a hidden case on which the grader charges ``rule`` in ``function``, and the template fields."""
    cases = _cases_of(assignment, function)
    base = _base_dims([case for _, case in cases])
    steps = {grade_id for grade_id, case in cases if charged_on(rule, assignment, case, base)}
    return steps, {"base": base}


def broken_cells(assignment, function, rule, fields) -> dict[str, str]:
    """The solution cell defining ``function``, with ``function`` wrapped so that it breaks ``rule``."""
    for grade_id, source in source_solutions(assignment.name, assignment.notebook).items():
        if re.search(rf"^def {function}\(", source, re.MULTILINE):
            body = textwrap.indent(BODIES[rule].strip("\n").format(name=function, **fields), "    ")
            return {grade_id: source + WRAPPER.format(name=function, body=body)}
    raise LookupError(f"{assignment.name}: no solution cell defines {function}")


with memory_stand_in():  # the hidden cases the tests grade on (a07_memory_stand_in): not T = 20 000 at collection
    RULE_MISTAKES = [(name, function, rule) for name, a in ASSIGNMENTS.items() for function in a.reference
                     for rule in BODIES if rule_steps(rule, a, function)[0]]


def test_every_rule_is_broken_in_every_assignment_it_applies_to():
    broken = {(name, rule) for name, _, rule in RULE_MISTAKES}
    assert {rule for _, rule in broken} == set(BODIES)
    assert {name for name, rule in broken if rule == "in_place"} == set(ASSIGNMENTS)


@pytest.mark.parametrize("name,function,rule", RULE_MISTAKES)
def test_a_broken_rule_fails_the_self_check_of_its_steps_and_of_every_step_where_it_loses_points(
        name, function, rule):
    assignment = ASSIGNMENTS[name]
    steps, fields = rule_steps(rule, assignment, function)
    cells = broken_cells(assignment, function, rule, fields)
    namespace = namespace_for(assignment, cells)
    structure = cells_of(assignment)
    for grade_id in steps:  # the grader charges the rule on one of this step's hidden cases
        verdicts = [verdict(namespace, structure.self_checks[check]) for check in structure.of_step[grade_id]]
        assert any(verdicts), f"{name}: {function} breaking {rule} passes the self-check of {grade_id}"
    assert_self_checks_fail_where_points_are_lost(assignment, f"{rule}:{function}", cells)


# ---------------------------------------------------------------- an ndarray subclass, in every assignment
MASKED = '''
result = _broken_original_{name}(*args, **kwargs)
if isinstance(result, tuple):
    return tuple(_broken_np.ma.asarray(r) if isinstance(r, _broken_np.ndarray) else r for r in result)
return _broken_np.ma.asarray(result) if isinstance(result, _broken_np.ndarray) else result'''


def first_array_function(assignment) -> str:
    """The first function of ``assignment`` with an array among its outputs on a hidden case."""
    return next(function for function in assignment.reference
                if rule_steps("extra_leading_axis", assignment, function)[0])


@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_a_masked_array_result_fails_the_self_check_wherever_the_grader_charges_it(name):
    """The grader takes plain arrays only (a masked array's hidden entries are not the answer's); the self-checks
    say so too, instead of passing what the grader then scores 0."""
    assignment = ASSIGNMENTS[name]
    function = first_array_function(assignment)
    for grade_id, source in source_solutions(assignment.name, assignment.notebook).items():
        if re.search(rf"^def {function}\(", source, re.MULTILINE):
            body = textwrap.indent(MASKED.strip("\n").format(name=function), "    ")
            cells = {grade_id: source + WRAPPER.format(name=function, body=body)}
            break
    lost = assert_self_checks_fail_where_points_are_lost(assignment, f"masked:{function}", cells)
    assert lost and all("plain NumPy array" in feedback for feedback in lost.values()), lost
