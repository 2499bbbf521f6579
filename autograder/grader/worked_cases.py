"""Store each assignment's worked cases as numbers in the student package.

``python -m autograder worked-cases`` writes
``attention_lab/<folder>/worked_cases.json`` for every assignment (found
by :func:`autograder.assignments.all_assignments`) that has ``worked_cases``:
for each case its inputs, tolerances, the reference's result and the result
of every known mistake that differs from it (with the mistake's description
and hint). The visible self-checks (:mod:`attention_lab.core.worked`) read these
files, so students get the numbers, never the reference code.
``--check`` writes nothing and exits with status 1 when a file is missing,
stale or left over, or an assignment's worked cases cannot be computed.

The output is deterministic (sorted keys, cases in the assignment's order,
mistakes sorted by key), so the committed files can be compared with a fresh
generation.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import sys
from pathlib import Path
from typing import Callable, Mapping

import attention_lab
from attention_lab.core import worked
from attention_lab.core.calls import call_learner
from autograder.grader.answers import REPO, answer_namespace
from autograder.grader.spec import Assignment, Case

OUTPUT = Path(attention_lab.__file__).resolve().parent  # each file goes to <folder>/worked_cases.json in it
COMMAND = "python -m autograder worked-cases"
SECONDS = 60.0  # trusted code on tiny inputs; the limit only turns a hang into an error


class WorkedCaseError(ValueError):
    """An assignment's worked case is unusable (the reference fails on it, or its solution disagrees)."""


def _run(function: Callable, case_data: dict) -> dict:
    """What ``function`` gives on the stored inputs.

    ``{"result": encoded value}``, ``{"raises": exception class name, "error": it}``,
    or ``{"unstorable": why}`` for a value the JSON encoding cannot hold. The
    inputs are decoded from their stored form, so the numbers computed here
    are the ones a student's function is later compared with.
    """
    args = worked.decode(case_data["args"])
    kwargs = {k: worked.decode(v) for k, v in case_data["kwargs"].items()}
    try:
        value = call_learner(lambda: function(*args, **kwargs), seconds=SECONDS)
    except Exception as error:  # noqa: BLE001 — a mistake that raises is stored as such
        return {"raises": type(error).__name__, "error": error}
    try:
        return {"result": worked.encode(value)}
    except TypeError as error:
        return {"unstorable": str(error)}


def _arg_names(function: Callable, case: Case) -> list[str]:
    try:
        bound = inspect.signature(function).bind(*case.args, **case.kwargs)
    except (TypeError, ValueError) as error:
        raise WorkedCaseError(f"worked case {case.description!r} does not fit {case.function}'s signature: {error}")
    return list(bound.arguments)[: len(case.args)]


def _differs(case_data: dict, outcome: dict, expected: dict) -> bool:
    if "unstorable" in outcome:
        return True
    if "raises" in outcome or "raises" in expected:
        return outcome.get("raises") != expected.get("raises")
    return worked.describe_difference(worked.decode(outcome["result"]), worked.decode(expected["result"]),
                                      rtol=case_data["rtol"], atol=case_data["atol"],
                                      exact_dtype=case_data["exact_dtype"]) is not None


def case_data(assignment: Assignment, case: Case, namespaces: Mapping[str, dict], solution: dict) -> dict:
    """The stored form of one worked case: inputs, tolerances, expected result, and each distinguishable mistake.

    Parameters
    ----------
    assignment : Assignment
    case : Case
        One of ``assignment.worked_cases``.
    namespaces : mapping of str to dict
        Mistake key → the namespace of the source solution with that mistake's cells.
    solution : dict
        The namespace of the unchanged source solution.

    Raises
    ------
    WorkedCaseError
        If the case's function has no reference, the reference raises where
        the case expects a result (or the other way round), or the source
        notebook's solution does not give the reference's result.
    """
    if case.function not in assignment.reference:
        raise WorkedCaseError(f"{assignment.name}: worked case {case.description!r} names {case.function!r}, "
                              f"which has no reference (known: {', '.join(assignment.reference)})")
    reference = assignment.reference[case.function]
    data = {
        "function": case.function,
        "description": case.description,
        "arg_names": _arg_names(reference, case),
        "args": worked.encode(tuple(case.args)),
        "kwargs": {k: worked.encode(v) for k, v in case.kwargs.items()},
        "outputs": list(case.outputs),
        "rtol": case.rtol,
        "atol": case.atol,
        "raises": case.raises,
        "no_warnings": case.no_warnings,
        "exact_dtype": case.exact_dtype,
    }
    expected = _run(reference, data)
    if "unstorable" in expected:
        raise WorkedCaseError(f"{assignment.name}: the reference {case.function}'s result on worked case "
                              f"{case.description!r} cannot be stored: {expected['unstorable']}")
    if case.raises is None and "raises" in expected:
        raise WorkedCaseError(f"{assignment.name}: the reference {case.function} raises on worked case "
                              f"{case.description!r}: {expected['error']!r}")
    if case.raises is not None and not ("raises" in expected and worked.is_a(expected["error"], case.raises)):
        raise WorkedCaseError(f"{assignment.name}: worked case {case.description!r} expects {case.raises}, but the "
                              f"reference {case.function} " + (f"raises {expected['raises']}" if "raises" in expected
                                                               else "returns"))
    data["expected"] = expected.get("result")
    if case.function not in solution:
        raise WorkedCaseError(f"{assignment.name}: the source notebook's solution defines no {case.function}")
    if _differs(data, _run(solution[case.function], data), expected):
        raise WorkedCaseError(f"{assignment.name}: the source notebook's {case.function} disagrees with the reference "
                              f"on worked case {case.description!r}")
    mistakes = []
    for key in sorted(namespaces):
        function = namespaces[key].get(case.function)
        if not callable(function):
            continue
        outcome = _run(function, data)
        if "unstorable" not in outcome and _differs(data, outcome, expected):
            variant = assignment.mistakes[key]
            stored = {"key": key, "description": variant.description, "hint": variant.hint,
                      "cells": sorted(variant.cells),
                      # the functions the mistake's cells define (a pasted cell may define several)
                      "functions": sorted({name for source in variant.cells.values()
                                           for name in re.findall(r"^\s*def\s+(\w+)\s*\(", source, re.MULTILINE)})}
            stored.update({"raises": outcome["raises"]} if "raises" in outcome else {"result": outcome["result"]})
            mistakes.append(stored)
    data["mistakes"] = mistakes
    return data


def assignment_data(assignment: Assignment, course_dir: Path = REPO) -> dict:
    """The stored form of all worked cases of ``assignment`` (its source notebook is under ``course_dir``)."""
    solution = answer_namespace(assignment.name, assignment.notebook, course_dir=course_dir)
    namespaces = {key: answer_namespace(assignment.name, assignment.notebook, dict(variant.cells), course_dir)
                  for key, variant in assignment.mistakes.items()}
    return {
        "format": worked.FORMAT,
        "assignment": assignment.name,
        # every function learners write in this assignment: the self-checks' list of course functions
        "functions": sorted(assignment.reference),
        "generated_by": f"{COMMAND} (do not edit: the numbers come from autograder/)",
        "cases": [case_data(assignment, case, namespaces, solution) for case in assignment.worked_cases],
    }


def _dumps(value, indent: str = "") -> str:
    """JSON with sorted keys, one key per line, and each array on one line."""
    if isinstance(value, dict) and value and not ({"ndarray", "numpy_scalar"} & value.keys()):
        inner = indent + " "
        items = [f"{inner}{json.dumps(k, ensure_ascii=False)}: {_dumps(value[k], inner)}" for k in sorted(value)]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, list) and any(isinstance(v, dict) for v in value):
        inner = indent + " "
        return "[\n" + ",\n".join(inner + _dumps(v, inner) for v in value) + "\n" + indent + "]"
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(", ", ": "), sort_keys=True)


def render(assignment: Assignment, course_dir: Path = REPO) -> str:
    """The file contents for ``assignment``'s worked cases."""
    return _dumps(assignment_data(assignment, course_dir)) + "\n"


def _with_worked_cases(assignments: Mapping[str, Assignment] | None) -> dict[str, Assignment]:
    if assignments is None:
        from autograder.assignments import all_assignments
        assignments = all_assignments()
    return {name: a for name, a in assignments.items() if a.worked_cases}


def file_name(assignment_name: str) -> str:
    """Where an assignment's worked cases are stored inside the student package: ``<folder>/worked_cases.json``.

    The folder is the assignment's folder name (``a01_attention``), the same in ``autograder/assignments/``
    and in ``attention_lab/``; an assignment outside the registry (a test's) uses its id.
    """
    from autograder.assignments import folder_of

    try:
        folder = folder_of(assignment_name)
    except KeyError:
        folder = assignment_name
    return f"{folder}/{worked.STORED}"


def _same_numbers(committed: str, fresh: str) -> bool:
    """Whether two renderings agree up to the last bits of floating-point results (BLAS differs between CPUs)."""
    def agree(a, b) -> bool:
        if isinstance(a, float) or isinstance(b, float):
            return isinstance(a, (int, float)) and isinstance(b, (int, float)) and \
                abs(a - b) <= 1e-12 * max(abs(a), abs(b), 1e-300)
        if isinstance(a, dict):
            return isinstance(b, dict) and a.keys() == b.keys() and all(agree(a[k], b[k]) for k in a)
        if isinstance(a, list):
            return isinstance(b, list) and len(a) == len(b) and all(agree(x, y) for x, y in zip(a, b))
        return type(a) is type(b) and a == b

    try:
        return agree(json.loads(committed), json.loads(fresh))
    except ValueError:
        return False


def file_problems(directory: Path, assignment: Assignment, course_dir: Path = REPO) -> list[str]:
    """What is wrong with ``assignment``'s file in ``directory``: missing, stale, or not computable (empty if current).

    A file is current when it equals a fresh rendering, or differs from it
    only in the last bits of floating-point results (matrix products may
    round differently on another CPU).
    """
    path = directory / file_name(assignment.name)
    try:
        text = render(assignment, course_dir)
    except Exception as error:  # noqa: BLE001 — one broken assignment must not hide the others
        return [f"{assignment.name}: cannot compute the worked cases: {type(error).__name__}: {error}"]
    if not path.is_file():
        return [f"{path} is missing"]
    committed = path.read_text(encoding="utf-8")
    if committed != text and not _same_numbers(committed, text):
        return [f"{path} is stale"]
    return []


def left_overs(directory: Path, assignments: Mapping[str, Assignment] | None = None) -> list[Path]:
    """JSON files in ``directory`` that belong to no assignment with worked cases."""
    wanted = {file_name(name) for name in _with_worked_cases(assignments)}
    return [path for path in sorted(directory.glob(f"*/{worked.STORED}"))
            if path.relative_to(directory).as_posix() not in wanted] if directory.is_dir() else []


def problems(directory: Path = OUTPUT, assignments: Mapping[str, Assignment] | None = None,
             course_dir: Path = REPO) -> list[str]:
    """Everything :func:`file_problems` finds for each assignment, and each left-over file (empty when current)."""
    selected = _with_worked_cases(assignments)
    found = [line for assignment in selected.values() for line in file_problems(directory, assignment, course_dir)]
    return found + [f"{path} belongs to no assignment with worked cases" for path in left_overs(directory, selected)]


def write(directory: Path = OUTPUT, assignments: Mapping[str, Assignment] | None = None,
          course_dir: Path = REPO) -> list[str]:
    """Write each assignment's file to ``directory`` (only when it is not current) and delete left-over files.

    A file is current as :func:`file_problems` says: equal to a fresh rendering, or different from it only in
    the last bits of floating-point results (another CPU's rounding), so regenerating on another machine
    leaves the committed files as they are.

    Returns
    -------
    list of str
        One line per file written, unchanged or deleted, and per assignment
        whose worked cases could not be computed ("FAILED ..."; its file is
        left as it was).
    """
    selected = _with_worked_cases(assignments)
    directory.mkdir(parents=True, exist_ok=True)
    report = []
    for path in left_overs(directory, selected):
        path.unlink()
        report.append(f"deleted {path}")
    for name, assignment in selected.items():
        path = directory / file_name(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            text = render(assignment, course_dir)
        except Exception as error:  # noqa: BLE001 — one broken assignment must not stop the others
            report.append(f"FAILED {name}: {type(error).__name__}: {error}")
            continue
        committed = path.read_text(encoding="utf-8") if path.is_file() else None
        # A file that differs from the fresh rendering only in the last bits of floating-point results is
        # current (file_problems): rewriting it would make every other CPU's regeneration a change to commit.
        if committed is None or (committed != text and not _same_numbers(committed, text)):
            path.write_text(text, encoding="utf-8")
            report.append(f"wrote {path}")
        else:
            report.append(f"unchanged {path}")
    return report


def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit status (1 when a file is not current or an assignment fails)."""
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if the files are not current")
    parser.add_argument("--output", type=Path, default=OUTPUT, help=f"folder of the JSON files (default {OUTPUT})")
    options = parser.parse_args(argv)
    if options.check:
        found = problems(options.output)
        if found:
            print("\n".join(found) + f"\nThe worked cases are not current: run `{COMMAND}` and commit the result.",
                  file=sys.stderr)
            return 1
        print(f"worked cases are current ({options.output})")
        return 0
    report = write(options.output)
    print("\n".join(report))
    return 1 if any(line.startswith("FAILED") for line in report) else 0


if __name__ == "__main__":
    sys.exit(main())
