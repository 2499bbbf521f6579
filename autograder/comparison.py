"""The grader's side: compare a learner's raw results with the reference, name known mistakes, score.

Runs in the grader's own process, never in the learner's kernel. For each
step (one autograder-test cell) and each of its hidden cases:

1. the learner's result (decoded from the kernel's output) is checked against
   the reference's: type, structure, shape, dtype, finiteness, values; a
   required exception; no warnings where the spec forbids them; inputs left
   unmodified;
2. a wrong result is compared with what the solution gives when the learner's
   mistakes already identified in earlier steps are put into it ("correct
   given your earlier function": one mistake costs points once);
3. otherwise with what each known mistake gives on the same inputs; a match
   names the mistake and its hint;
4. otherwise the step's ``diagnose`` says which property fails.

Messages show the learner's values and the case's description, never hidden
inputs, expected values or reference code.
"""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from attention_lab import wire
from attention_lab.learner_calls import FunctionTimedOut, time_limit
from autograder.answers import REPO, answer_namespace
from autograder.checking import CheckFailed, describe, expect_array
from autograder.spec import Assignment, Case, Step, Variant

CALL_SECONDS = 3.0  # per hidden call in the kernel; correct code takes milliseconds on the hidden inputs


@dataclass(frozen=True)
class Raised:
    """An expected or observed exception, by class name (and base-class names)."""

    type: str
    mro: tuple[str, ...] = ()
    message: str = ""
    where: str | None = None


@dataclass
class StepResult:
    """The verdict on one step: score, the lines the learner reads, the mistakes named."""

    grade_id: str
    title: str
    score: float
    points: float
    lines: list[str] = field(default_factory=list)
    named: list[str] = field(default_factory=list)

    def text(self) -> str:
        """The feedback block for this step, as printed in the autograded notebook."""
        return "\n".join([f"{self.title}: {self.score:g} / {self.points:g} points", *self.lines])


def _quiet_call(function, args, kwargs):
    """Trusted code (reference, solution, known mistakes) called on copies, quietly."""
    copies = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
            warnings.catch_warnings(), np.errstate(all="ignore"), time_limit(CALL_SECONDS * 3):
        warnings.simplefilter("ignore")
        try:
            return function(*copies, **dict(kwargs))
        except FunctionTimedOut:
            raise
        except Exception as error:  # noqa: BLE001 — the expected outcome may be an exception
            return Raised(type(error).__name__, tuple(c.__name__ for c in type(error).__mro__), str(error))


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _expect(case: Case, name: str, got, expected) -> None:
    """Raise :class:`CheckFailed` unless ``got`` is an acceptable learner value for ``expected``."""
    if isinstance(got, wire.Unsupported):
        raise CheckFailed(f"{name} should be {_kind(expected)}, but it is {got.what}")
    if isinstance(expected, tuple):
        if not isinstance(got, (tuple, list)):
            raise CheckFailed(f"the function should return {len(expected)} values "
                              f"({', '.join(case.outputs)}), but it returned {_what(got)}")
        if len(got) != len(expected):
            raise CheckFailed(f"the function should return {len(expected)} values ({', '.join(case.outputs)}), "
                              f"but it returned {len(got)}")
        _expect_order(case, got, expected)
        for label, got_item, expected_item in zip(case.outputs, got, expected):
            _expect(case, label, got_item, expected_item)
        return
    if isinstance(expected, np.ndarray):
        if isinstance(got, wire.ArrayFromSubclass):
            raise CheckFailed(f"{name} should be a plain NumPy array, but it is a {got.source_class} "
                              "(a subclass of numpy.ndarray; return np.asarray(...))")
        if case.exact_dtype and isinstance(got, np.ndarray) and got.dtype != expected.dtype:
            raise CheckFailed(f"{name} should have dtype {expected.dtype} (the input's), but it has dtype {got.dtype}")
        kind = "b" if expected.dtype == np.bool_ else "i" if expected.dtype.kind in "iu" else "f"
        if kind == "i":
            _expect_integers(name, got, expected)
        else:
            expect_array(name, got, expected, rtol=case.rtol, atol=case.atol, kind=kind)
        return
    if _is_number(expected):
        if not _is_number(got):
            raise CheckFailed(f"{name} should be a number, but it is {_what(got)}")
        if not np.isfinite(float(got)):
            raise CheckFailed(f"{name} is {float(got)}; a correct result is finite")
        if not np.isclose(float(got), float(expected), rtol=case.rtol, atol=case.atol):
            raise CheckFailed(f"{name} is wrong: got {float(got):.6g}")
        return
    if isinstance(expected, (bool, np.bool_)):
        if not isinstance(got, (bool, np.bool_)) or bool(got) != bool(expected):
            raise CheckFailed(f"{name} is wrong: got {_what(got)}")
        return
    if got != expected:  # None, strings
        raise CheckFailed(f"{name} is wrong: got {_what(got)}")


def _expect_integers(name, got, expected) -> None:
    if type(got) is not np.ndarray:
        raise CheckFailed(f"{name} should be a NumPy array, but it is {describe(got)}")
    if got.shape != expected.shape:
        raise CheckFailed(f"{name} should have shape {expected.shape}, but it has shape {got.shape}")
    if got.dtype.kind not in "iu":
        raise CheckFailed(f"{name} should have an integer dtype, but it has dtype {got.dtype}")
    wrong = np.argwhere(got != expected)
    if wrong.size:
        first = tuple(int(i) for i in wrong[0])
        raise CheckFailed(f"{len(wrong)} of the {got.size} entries of {name} are wrong, first at index {first}: "
                          f"got {got[first]}")


def _expect_order(case: Case, got, expected) -> None:
    """Name swapped return values instead of reporting two shape mismatches."""
    shapes = [getattr(item, "shape", None) for item in got]
    wanted = [item.shape if isinstance(item, np.ndarray) else None for item in expected]
    if len(got) == 2 and shapes == wanted[::-1] and wanted[0] != wanted[1]:
        raise CheckFailed(f"the function returned ({case.outputs[1]}, {case.outputs[0]}); "
                          f"return ({case.outputs[0]}, {case.outputs[1]}) in that order")


def _kind(expected) -> str:
    if isinstance(expected, np.ndarray):
        return "a NumPy array"
    if isinstance(expected, tuple):
        return f"a tuple of {len(expected)} values"
    return "a number" if _is_number(expected) else f"a {type(expected).__name__}"


def _what(value) -> str:
    if isinstance(value, wire.Unsupported):
        return value.what
    if isinstance(value, np.ndarray):
        return describe(np.asarray(value))
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)} values"
    if value is None:
        return "None"
    return f"a {type(value).__name__} ({str(value)[:40]})"


def same(a, b, case: Case) -> bool:
    """Whether two results agree (NaN and ±inf in the same places count as equal); used to match mistakes."""
    if isinstance(a, Raised) or isinstance(b, Raised):
        return isinstance(a, Raised) and isinstance(b, Raised) and a.type == b.type
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same(x, y, case) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        if a.shape != b.shape or (a.dtype == np.bool_) != (b.dtype == np.bool_):
            return False
        if a.dtype.kind not in "fciub" or b.dtype.kind not in "fciub":
            return False
        with np.errstate(all="ignore"):
            return bool(np.allclose(a.astype(float), b.astype(float), rtol=case.rtol, atol=case.atol, equal_nan=True)
                        and np.array_equal(np.isinf(a.astype(float)), np.isinf(b.astype(float))))
    if _is_number(a) and _is_number(b):
        return bool(np.isclose(float(a), float(b), rtol=case.rtol, atol=case.atol, equal_nan=True))
    return type(a) is type(b) and a == b


class Grader:
    """Grades one assignment's steps from the results a kernel sent back.

    One instance per grading run; the reference's and the known mistakes'
    outputs on the hidden cases are computed once and reused for every
    learner.

    Parameters
    ----------
    assignment : Assignment
    course_dir : Path
        Where ``source/<assignment>/<notebook>`` is (its solution cells are
        the base the known mistakes are put into).
    """

    def __init__(self, assignment: Assignment, course_dir: Path = REPO):
        self.assignment = assignment
        self.course_dir = Path(course_dir)
        self.cases: dict[str, list[Case]] = {step.grade_id: list(step.cases()) for step in assignment.steps}
        self._expected: dict[tuple[str, int], Any] = {}
        self._outputs: dict[tuple, Any] = {}
        self._namespaces: dict[frozenset, dict] = {}

    # what the kernel is asked to do
    def request(self, grade_id: str) -> dict:
        """The data sent into the kernel for step ``grade_id``: function names and hidden inputs, nothing else."""
        return {"grade_id": grade_id, "cases": [
            {"function": case.function, "args": [wire.encode(a) for a in case.args],
             "kwargs": {key: wire.encode(value) for key, value in case.kwargs.items()},
             "seconds": CALL_SECONDS}
            for case in self.cases[grade_id]]}

    # what the right answer and the known wrong answers give
    def expected(self, grade_id: str, index: int):
        key = (grade_id, index)
        if key not in self._expected:
            case = self.cases[grade_id][index]
            self._expected[key] = _quiet_call(self.assignment.reference[case.function], case.args, case.kwargs)
        return self._expected[key]

    def output_of(self, cells: Mapping[str, str], grade_id: str, index: int):
        """What the source solution with ``cells`` replaced returns on a case (cached)."""
        cells_key = frozenset(cells.items())
        key = (cells_key, grade_id, index)
        if key not in self._outputs:
            if cells_key not in self._namespaces:
                self._namespaces[cells_key] = answer_namespace(
                    self.assignment.name, self.assignment.notebook, dict(cells), self.course_dir)
            case = self.cases[grade_id][index]
            function = self._namespaces[cells_key].get(case.function)
            self._outputs[key] = (_quiet_call(function, case.args, case.kwargs) if callable(function)
                                  else Raised("NameError"))
        return self._outputs[key]

    # the verdicts
    def grade(self, results: Mapping[str, dict | None], points: Mapping[str, float],
              missing_reason: str | None = None) -> dict[str, StepResult]:
        """Grade every step.

        Parameters
        ----------
        results : dict
            grade_id → the kernel's results for that step (:func:`attention_lab.probe.collect`),
            or None when none arrived.
        points : dict
            grade_id → the cell's points.
        missing_reason : str, optional
            Why results may be missing (the kernel was stopped, ...), for the messages.
        """
        identified: dict[str, str] = {}  # solution cells of the mistakes named so far
        verdicts = {}
        for step in self.assignment.steps:
            if step.grade_id not in points:
                continue
            verdicts[step.grade_id] = self._grade_step(step, results.get(step.grade_id), float(points[step.grade_id]),
                                                       identified, missing_reason)
        return verdicts

    def _grade_step(self, step: Step, raw: dict | None, points: float, identified: dict[str, str],
                    missing_reason: str | None) -> StepResult:
        cases = self.cases[step.grade_id]
        records = (raw or {}).get("results") if isinstance(raw, dict) else None
        if not isinstance(records, list) or len(records) != len(cases):
            why = missing_reason or "the cell did not run to the end, or its output was removed"
            return StepResult(step.grade_id, step.title, 0.0, points,
                              [f"  ✗ no result reached the grader ({why})"])
        lines, named, passed, found = [], [], 0, {}
        for index, (case, record) in enumerate(zip(cases, records)):
            ok, message, mistake = self._grade_case(step, index, case, record, identified)
            passed += ok
            lines.append(f"  {'✓' if ok else '✗'} {case.description}" + (f": {message}" if message else ""))
            if mistake is not None and mistake[0] not in named:
                named.append(mistake[0])
                found.update(mistake[1].cells)
        identified.update(found)  # later steps are graded given these mistakes
        score = round(points * passed / len(cases), 4)
        return StepResult(step.grade_id, step.title, float(score), points, lines, named)

    def _grade_case(self, step: Step, index: int, case: Case, record: Any, identified: dict[str, str]):
        """(passed, message, (mistake key, Variant) or None) for one case."""
        expected = self.expected(step.grade_id, index)
        try:
            got = _learner_value(case, record)
            _check(case, got, expected, record)
            return True, "", None
        except CheckFailed as failure:
            message = str(failure)
        except _Unreadable as failure:
            return False, str(failure), None
        earlier = {cell: source for cell, source in identified.items() if not _defines(source, case.function)}
        if earlier:
            given = self.output_of(earlier, step.grade_id, index)
            if not same(given, expected, case) and same(got, given, case):
                return True, "correct given your earlier function(s), whose mistake is counted in its own step", None
        for key, variant in self._mistakes_for(step):
            output = self.output_of({**earlier, **variant.cells}, step.grade_id, index)
            if not same(output, expected, case) and same(got, output, case):
                if step.grade_id in variant.breaks:
                    return False, (f"{message}\n      This looks like a known mistake: {variant.description}."
                                   f"\n      Hint: {variant.hint}"), (key, variant)
                if not any(_defines(source, case.function) for source in variant.cells.values()):
                    return True, f"correct given your earlier function(s) ({variant.description})", None
        if step.diagnose is not None and not isinstance(got, Raised):
            try:
                found = step.diagnose(case, got, expected)
            except Exception:  # noqa: BLE001 — a diagnosis must never break grading
                found = []
            if found:
                message += "\n" + "\n".join(f"      {line}" for line in found)
        return False, message, None

    def _mistakes_for(self, step: Step) -> list[tuple[str, Variant]]:
        """Mistakes charged in this step first, then the others (whose effect here is forgiven)."""
        mistakes = list(self.assignment.mistakes.items())
        return ([m for m in mistakes if step.grade_id in m[1].breaks]
                + [m for m in mistakes if step.grade_id not in m[1].breaks])


def _defines(source: str, function: str) -> bool:
    """Whether a cell's source defines ``function`` (its own mistakes are never "earlier" for it)."""
    return re.search(rf"^\s*def\s+{re.escape(function)}\s*\(", source, re.MULTILINE) is not None


class _Unreadable(Exception):
    """The kernel's record could not be read; nothing to compare."""


def _learner_value(case: Case, record: Any):
    """The learner's result as a value (or :class:`Raised`), decoded from the kernel's record."""
    if not isinstance(record, dict):
        raise _Unreadable("the result could not be read")
    status = record.get("status")
    if status == "missing":
        raise _Unreadable(str(record.get("message", "the function is missing"))[:200])
    if status == "timeout":
        return Raised("FunctionTimedOut", ("FunctionTimedOut",), f"did not finish within {CALL_SECONDS:g} s")
    if status == "raised":
        return Raised(str(record.get("type", "?"))[:80], tuple(str(n)[:80] for n in record.get("mro", []))[:20],
                      str(record.get("message", ""))[:300], record.get("where"))
    if status == "returned":
        try:
            return wire.decode(record.get("value"))
        except Exception as error:  # noqa: BLE001 — garbage from a tampered kernel
            raise _Unreadable(f"the result could not be read ({type(error).__name__})") from None
    raise _Unreadable("the result could not be read")


def _check(case: Case, got, expected, record: dict) -> None:
    """Raise :class:`CheckFailed` unless the learner's value and behaviour are right for the case."""
    if isinstance(expected, Raised) and case.raises is None:
        raise RuntimeError(f"the reference raised {expected.type} on case {case.description!r}: {expected.message}")
    if case.raises is not None:
        if isinstance(got, Raised):
            if case.raises in got.mro:
                return
            raise CheckFailed(f"it should raise {case.raises}, but it raised {got.type}: {got.message}")
        raise CheckFailed(f"it should raise {case.raises}, but it returned {_what(got)}")
    if isinstance(got, Raised):
        inside = f" in {got.where}" if got.where and got.where != case.function else ""
        if got.type == "FunctionTimedOut":
            raise CheckFailed(f"{case.function} did not finish within {CALL_SECONDS:g} s (an infinite loop?)")
        hint = (f" — {got.where} is another function of this notebook; finish it first"
                if inside and got.type == "NotImplementedError" else "")
        raise CheckFailed(f"your function raised {got.type}{inside}: {got.message}{hint}")
    _expect(case, case.outputs[0] if len(case.outputs) == 1 else "the result", got, expected)
    if case.no_warnings and record.get("warnings"):
        raise CheckFailed(f"it emitted a warning ({record['warnings'][0]}); this step must run without any")
    after = record.get("args_after") or []
    for position, (original, encoded) in enumerate(zip(case.args, after)):
        if isinstance(original, np.ndarray) and encoded is not None:
            try:
                now = wire.decode(encoded)
            except Exception:  # noqa: BLE001
                raise CheckFailed("its arguments could not be read back after the call") from None
            if not (isinstance(now, np.ndarray) and now.shape == original.shape
                    and np.array_equal(now, original, equal_nan=original.dtype.kind == "f")):
                raise CheckFailed(f"it modified its argument {position + 1} in place; "
                                  "compute a new array instead (the caller's data must stay unchanged)")
