"""The grader's side: compare a learner's raw results with the reference, name known mistakes, score.

Runs in the grader's own process, never in the learner's kernel. For each
step (one autograder-test cell) and each of its hidden cases:

1. the learner's result (decoded from the kernel's output) is checked against
   the reference's: type, structure, shape, dtype, finiteness, values; a
   required exception; no warnings where the spec forbids them; inputs left
   unmodified;
2. a wrong result of a case whose function calls functions of earlier steps
   is graded again on its own: the result of the second pass, in which the
   reference's values answered those calls (:mod:`autograder.grader.stand_ins`), is
   checked the same way ("one mistake, one charge", also for a mistake that
   has no name, an exception, a wrong shape or dtype);
3. a wrong result also passes when it equals what the solution gives with the
   mistakes *identified in the learner's own earlier steps* put into it (a
   later function that re-implements an earlier step's mistake itself);
4. otherwise it is compared with what each known mistake *of this step* gives
   on the same inputs; a match names the mistake and, once per step, its hint;
5. otherwise the step's ``diagnose`` says which property fails.

A question (a step whose ``question`` is set, :mod:`autograder.grader.questions`) has one case that reads
the learner's answer variable: its value is read with the question's format and compared with the
question's answer here; a known wrong answer is named with the misconception it shows.

An exception is never evidence of correctness: only a ``raises`` case is
answered by an exception, and not for a function that raises that exception
on every valid input too (it has shown no check). The step's score is its points times the weight of
the cases passed over the weight of all its cases (:attr:`Case.weight`).

Messages show the learner's values and the case's description, never hidden
inputs, expected values or reference code.
"""

from __future__ import annotations

import inspect
import re
import textwrap
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from attention_lab.core import values as wire
from attention_lab.core.calls import FunctionTimedOut, call_learner
from attention_lab.core.probe import call_digest
from autograder.grader.answers import REPO, answer_namespace
from autograder.grader.memory_limit import reachable_code, run_with_memory_limit
from attention_lab.core.compare import CheckFailed, as_number, describe, expect_array, is_number
from attention_lab.core.questions import AnswerFormatError
from autograder.grader.spec import Assignment, Case, Step, Variant

CALL_SECONDS = 3.0  # per hidden call in the kernel; correct code takes milliseconds on the hidden inputs
#: trusted code's limit on a memory-limited case (seconds of work each, at idle): generous, because a loaded
#: machine must not turn the reference's or a known mistake's slowness into a crash of the run
TRUSTED_LIMITED_SECONDS = 600.0
WIDTH = 100  # feedback lines are wrapped at this many columns
UNANSWERED = "not answered yet"
#: The key of a final stand-in record (:mod:`autograder.grader.stand_ins`) holding the calls of earlier functions
#: that pass made, in order, each answered by a stand-in (None when they could not all be named)
TRAIL = "calls_of_the_final_pass"
MAX_CACHED_STAND_INS = 4096  # the reference's answers to recorded calls, kept for the next submissions


@dataclass(frozen=True)
class Raised:
    """An expected or observed exception, by class name (and base-class names)."""

    type: str
    mro: tuple[str, ...] = ()
    message: str = ""
    where: str | None = None


@dataclass
class StepResult:
    """The verdict on one step: score, the lines the learner reads, the mistakes named.

    ``passed`` holds one flag per hidden case; ``unanswered`` is True when the
    step's functions are still the release's ``raise NotImplementedError()``
    (or not defined at all).
    """

    grade_id: str
    title: str
    score: float
    points: float
    lines: list[str] = field(default_factory=list)
    named: list[str] = field(default_factory=list)
    passed: list[bool] = field(default_factory=list)
    unanswered: bool = False

    def text(self) -> str:
        """The feedback block for this step, as printed in the autograded notebook (wrapped at :data:`WIDTH`)."""
        lines = [f"{self.title}: {self.score:g} / {self.points:g} points", *self.lines]
        return "\n".join(wrap(line) for text in lines for line in text.split("\n"))


def wrap(line: str, width: int = WIDTH) -> str:
    """One feedback line wrapped at ``width`` columns, its indentation kept (after a ✓/✗ mark, under the text)."""
    body = line.lstrip(" ")
    lead = line[: len(line) - len(body)]
    hang = lead + ("  " if body[:2] in ("✓ ", "✗ ") else "")
    return textwrap.fill(body, width=width, initial_indent=lead, subsequent_indent=hang,
                         break_long_words=False, break_on_hyphens=False) or line


def call_seconds(case: Case) -> float:
    """The time limit of one call of ``case`` in the learner's kernel: its own (:attr:`Case.seconds`) or the default."""
    return CALL_SECONDS if case.seconds is None else float(case.seconds)


def _quiet_call(function, args, kwargs, case: Case | None = None):
    """Trusted code (reference, solution, known mistakes) called as learners' code is (on copies, quietly, with a
    time limit: :func:`attention_lab.core.calls.call_learner`); an exception is a :class:`Raised`.

    On a case with a :attr:`~Case.memory_limit` the call runs in a child process under that limit, as the
    learner's call runs in the sandbox (a mistake that forms a T × T matrix raises MemoryError there too).
    """
    seconds = 3 * (CALL_SECONDS if case is None else call_seconds(case))
    if case is not None and case.memory_limit is not None:
        seconds = max(seconds, TRUSTED_LIMITED_SECONDS)

    def call():
        try:
            return call_learner(function, *args, seconds=seconds, copy_arrays=True, **dict(kwargs))
        except FunctionTimedOut:
            raise
        except Exception as error:  # noqa: BLE001 — the expected outcome may be an exception
            return Raised(type(error).__name__, tuple(c.__name__ for c in type(error).__mro__), str(error))

    if case is not None and case.memory_limit is not None:
        return run_with_memory_limit(call, case.memory_limit, seconds + 30)
    return call()


def boolean_masks(function, args: list, kwargs: dict) -> tuple[list, dict]:
    """The arguments of a stand-in's call, with a ``mask`` of 0s and 1s as the boolean mask it means.

    A learner's later function may build its mask as ``np.tril(np.ones((T, T)))``: the learner's own earlier
    function takes it (``np.where(mask, ...)`` reads 1 as True), the reference refuses anything but booleans.
    Its stand-in, which answers as a correct earlier function would, takes it as the learner's own would, so that
    the later step gets the points its code earns with a correct earlier function, and no message about the
    reference's own argument check. A mask with any other value (an additive 0/−inf one) is passed unchanged.

    Parameters
    ----------
    function : callable
        The reference of the earlier function.
    args : list
        The call's positional arguments.
    kwargs : dict
        Its keyword arguments.

    Returns
    -------
    (list, dict)
        The arguments to call the reference with (the same objects when there is no such mask, or they do not
        fit the reference's signature).
    """
    try:
        bound = inspect.signature(function).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return args, kwargs
    mask = bound.arguments.get("mask")
    if not (type(mask) is np.ndarray and mask.dtype.kind in "iuf" and mask.size
            and np.isin(mask, (0, 1)).all()):
        return args, kwargs
    bound.arguments["mask"] = mask.astype(bool)
    return list(bound.args), dict(bound.kwargs)


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
    if isinstance(expected, list):  # e.g. one (K, V) cache per layer (assignment 9): checked item by item
        if not isinstance(got, (list, tuple)) or len(got) != len(expected):
            raise CheckFailed(f"{name} should be a list of {len(expected)} values, but it is {_what(got)}")
        for index, (got_item, expected_item) in enumerate(zip(got, expected)):
            if isinstance(expected_item, tuple):
                if not isinstance(got_item, (tuple, list)) or len(got_item) != len(expected_item):
                    raise CheckFailed(f"{name}[{index}] should be {len(expected_item)} values, but it is "
                                      f"{_what(got_item)}")
                for part, (g, e) in enumerate(zip(got_item, expected_item)):
                    _expect(case, f"{name}[{index}][{part}]", g, e)
            else:
                _expect(case, f"{name}[{index}]", got_item, expected_item)
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
    if is_number(expected):
        got = as_number(got)  # a 0-d array holds one number (np.abs(x).max(), np.where on scalars)
        if not is_number(got):
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
    return "a number" if is_number(expected) else f"a {type(expected).__name__}"


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
    """Whether two *returned* results agree (NaN and ±inf in the same places count as equal).

    Used to match a learner's result with a known mistake's or with the solution given earlier
    mistakes. An exception is never a result here: two raised exceptions do not "agree", whatever
    their types, so an exception is never evidence of correctness (a ``raises`` case is checked by
    :func:`_check`, where the exception type is the answer).
    """
    if isinstance(a, Raised) or isinstance(b, Raised):
        return False
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same(x, y, case) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        if a.shape != b.shape or (a.dtype == np.bool_) != (b.dtype == np.bool_):
            return False
        if a.dtype.kind not in "fciub" or b.dtype.kind not in "fciub":
            return False
        kind = complex if "c" in (a.dtype.kind, b.dtype.kind) else float
        with np.errstate(all="ignore"):
            return bool(np.allclose(a.astype(kind), b.astype(kind), rtol=case.rtol, atol=case.atol, equal_nan=True)
                        and np.array_equal(np.isinf(a.astype(kind)), np.isinf(b.astype(kind))))
    a, b = as_number(a), as_number(b)
    if is_number(a) and is_number(b):
        return bool(np.isclose(float(a), float(b), rtol=case.rtol, atol=case.atol, equal_nan=True))
    return type(a) is type(b) and a == b


def looks_like(value, mistake_output, case: Case) -> bool:
    """Whether a learner's result matches what a known mistake gives, to *name* that mistake (never to credit).

    Like :func:`same`, and also when both raise the same exception type (a mistake that makes the code
    raise, e.g. ``K.T`` on a 3-D array).
    """
    if isinstance(value, Raised) and isinstance(mistake_output, Raised):
        return value.type == mistake_output.type
    return same(value, mistake_output, case)


@dataclass
class _Verdict:
    """One case: passed or not, the line's message, the known mistake named, the earlier functions stood in for."""

    ok: bool
    message: str = ""
    mistake: tuple[str, Variant] | None = None
    stood_in: frozenset[str] = frozenset()
    unanswered: str | None = None  # "stub": still raises NotImplementedError(); "missing": not defined
    matched: tuple | None = None  # (the learner's value, the cells it was matched with) when a mistake is named


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
    seed : int, optional
        Seed of the hidden cases (``Step.cases(seed)``); by default the seed
        the course has always used.
    """

    def __init__(self, assignment: Assignment, course_dir: Path = REPO, seed: int | None = None):
        self.assignment = assignment
        self.course_dir = Path(course_dir)
        self.seed = seed
        self.cases: dict[str, list[Case]] = {
            step.grade_id: list(step.cases() if seed is None else step.cases(seed)) for step in assignment.steps}
        self.earlier = self._earlier_functions()
        self._expected: dict[tuple[str, int], Any] = {}
        self._outputs: dict[tuple, Any] = {}
        self._limited_outputs: dict[tuple, Any] = {}  # memory-limited cases' outputs by reachable code
        self._namespaces: dict[frozenset, dict] = {}
        self._stand_ins: dict[str, dict | None] = {}
        self._limits: dict[str, tuple[int, int]] = {}

    def _earlier_functions(self) -> dict[str, tuple[str, ...]]:
        """grade_id → the course functions whose every graded step comes before it (they may be stood in for).

        Derived from the spec: a function is graded in the steps whose cases call it. One that is also
        graded in this step or later (``attention_scores`` in the scores and the scaling steps) is not
        "earlier" until its last step is done, so a stand-in for it is never available while any of its
        own cases is still being graded.
        """
        last = {}
        for position, step in enumerate(self.assignment.steps):
            for case in self.cases[step.grade_id]:
                if not case.reads:  # a question's answer variable is not a function to stand in for
                    last[case.function] = position
        return {step.grade_id: tuple(name for name, at in last.items() if at < position)
                for position, step in enumerate(self.assignment.steps)}

    # what the kernel is asked to do
    def request(self, grade_id: str, indices=None, stand_ins: Mapping[str, dict] | None = None) -> dict:
        """The data sent into the kernel for step ``grade_id``: function names and hidden inputs, nothing else.

        Parameters
        ----------
        indices : sequence of int, optional
            Only these cases (a later pass); each then carries its ``"index"``.
        stand_ins : dict, optional
            digest → the reference's value for one recorded call of an earlier function (a later pass;
            see :mod:`autograder.grader.stand_ins`).
        """
        chosen = range(len(self.cases[grade_id])) if indices is None else indices
        cases = []
        for index in chosen:
            case = self.cases[grade_id][index]
            if case.reads:
                cases.append({"function": case.function, "reads": True, "args": [], "kwargs": {},
                              "seconds": CALL_SECONDS, **({} if indices is None else {"index": index})})
                continue
            cases.append({"function": case.function, "args": [wire.encode(a) for a in case.args],
                          "kwargs": {key: wire.encode(value) for key, value in case.kwargs.items()},
                          "seconds": call_seconds(case), **({} if indices is None else {"index": index}),
                          **({} if case.memory_limit is None else {"memory_limit": case.memory_limit}),
                          **({"cpu_time": True} if case.cpu_time else {})})
        request = {"grade_id": grade_id, "earlier": list(self.earlier[grade_id]), "cases": cases}
        if stand_ins is not None:
            request["stand_ins"] = dict(stand_ins)
        return request

    # what the right answer and the known wrong answers give
    def expected(self, grade_id: str, index: int):
        key = (grade_id, index)
        question = self.assignment.step(grade_id).question
        if question is not None:
            return question.answer
        if key not in self._expected:
            case = self.cases[grade_id][index]
            self._expected[key] = _quiet_call(self.assignment.reference[case.function], case.args, case.kwargs, case)
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
            namespace = self._namespaces[cells_key]
            function = namespace.get(case.function)
            code = reachable_code(namespace, case.function) if case.memory_limit is not None else None
            if code is not None and (code, grade_id, index) in self._limited_outputs:
                self._outputs[key] = self._limited_outputs[code, grade_id, index]  # the same code ran on it already
            else:
                self._outputs[key] = (_quiet_call(function, case.args, case.kwargs, case) if callable(function)
                                      else Raised("NameError"))
                if code is not None:
                    self._limited_outputs[code, grade_id, index] = self._outputs[key]
        return self._outputs[key]

    def stand_in(self, grade_id: str, call: Any) -> tuple[str, dict] | None:
        """(digest, answer) for one call of an earlier function that the kernel recorded, or None.

        The answer is the reference's value for exactly those arguments (``{"value": encoded}``) or the
        exception it raises (``{"raises": {"type", "message"}}``). None when the call is not one a stand-in
        may answer: a function that is not earlier than the step (so no step can ever be answered with
        its own reference), arguments that cannot be read, or arguments far larger than the step's hidden
        inputs (so the reference never runs on inputs that could exhaust the grader's memory).
        """
        if not isinstance(call, dict) or call.get("function") not in self.earlier[grade_id]:
            return None
        args, kwargs = call.get("args"), call.get("kwargs")
        if not isinstance(args, list) or not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
            return None
        try:
            digest = call_digest(call["function"], args, kwargs)
        except (TypeError, ValueError):
            return None
        if digest not in self._stand_ins:
            if len(self._stand_ins) >= MAX_CACHED_STAND_INS:
                self._stand_ins.clear()  # shared by honest submissions; a hostile one must not grow it forever
            self._stand_ins[digest] = self._reference_answer(grade_id, call["function"], args, kwargs)
        answer = self._stand_ins[digest]
        return None if answer is None else (digest, answer)

    def _reference_answer(self, grade_id: str, function: str, args: list, kwargs: dict) -> dict | None:
        try:
            values = [_plain(wire.decode(a)) for a in args]
            keywords = {key: _plain(wire.decode(value)) for key, value in kwargs.items()}
        except Exception:  # noqa: BLE001 — garbage from a tampered kernel
            return None
        if grade_id not in self._limits:
            self._limits[grade_id] = _size_limits(self, grade_id)
        if not all(_within(value, self._limits[grade_id]) for value in [*values, *keywords.values()]):
            return None
        reference = self.assignment.reference[function]
        values, keywords = boolean_masks(reference, values, keywords)
        result = _quiet_call(reference, values, keywords)
        if isinstance(result, Raised):
            return {"raises": {"type": result.type, "message": result.message[:300]}}
        encoded = wire.encode(result)
        return None if wire.size(encoded) > wire.MAX_BYTES // 16 else {"value": encoded}

    def passes(self, grade_id: str, index: int, record: Any) -> bool:
        """Whether the kernel's record of one case is right as it stands (no second pass needed)."""
        case = self.cases[grade_id][index]
        question = self.assignment.step(grade_id).question
        if question is not None:
            return _grade_answer(question, case, record).ok
        try:
            _check(case, _learner_value(case, record), self.expected(grade_id, index), record, self._parameters(case))
        except (CheckFailed, _Unreadable):
            return False
        return True

    def _parameters(self, case: Case) -> list[str]:
        """Names of the positional parameters of the reference function of ``case`` (for messages)."""
        try:
            return list(inspect.signature(self.assignment.reference[case.function]).parameters)
        except (TypeError, ValueError):
            return []

    # the verdicts
    def grade(self, results: Mapping[str, dict | None], points: Mapping[str, float],
              missing_reason: str | None = None,
              stand_in_results: Mapping[str, Mapping[int, dict]] | None = None) -> dict[str, StepResult]:
        """Grade every step.

        Parameters
        ----------
        results : dict
            grade_id → the kernel's results for that step (:func:`attention_lab.core.probe.collect`),
            or None when none arrived.
        points : dict
            grade_id → the cell's points.
        missing_reason : str, optional
            Why results may be missing (the kernel was stopped, ...), for the messages.
        stand_in_results : dict, optional
            grade_id → {case index → the kernel's record of that case in the pass whose every call of an
            earlier function was answered by a stand-in} (:func:`autograder.grader.stand_ins.run_passes`).
        """
        identified: dict[str, str] = {}  # solution cells of the mistakes named so far
        never_returned = self._never_returned(results, stand_in_results or {})
        failed: dict[tuple[str, int], Any] = {}  # (grade_id, index) of a failed case → the learner's result there
        verdicts = {}
        for step in self.assignment.steps:
            if step.grade_id not in points:
                continue
            second = (stand_in_results or {}).get(step.grade_id) or {}
            raw = results.get(step.grade_id)
            verdicts[step.grade_id] = verdict = self._grade_step(
                step, raw, float(points[step.grade_id]), identified, missing_reason, second, never_returned, failed)
            records = raw.get("results") if isinstance(raw, dict) else None
            for index, ok in enumerate(verdict.passed):
                if not ok and isinstance(records, list) and index < len(records):
                    try:
                        failed[step.grade_id, index] = _learner_value(self.cases[step.grade_id][index], records[index])
                    except _Unreadable:
                        failed[step.grade_id, index] = Raised("unreadable")
        return verdicts

    def _never_returned(self, results: Mapping[str, dict | None],
                        stand_in_results: Mapping[str, Mapping[int, dict]]) -> dict[str, frozenset[str]]:
        """The functions that returned on no valid input the results hold (cases whose answer is a value, in the
        first pass or in a stand-in pass), each with the exception classes it raised on every one of them. A
        ``raises`` case of such a function earns nothing when its class is among them: a function that raises
        ``ValueError`` on everything has not shown that it checks its input (one that raises another exception on
        valid input and ``ValueError`` on bad input has). A function none of whose valid cases reached the grader
        is not among them (no evidence either way)."""
        returned, raised = set(), {}
        for step in self.assignment.steps:
            raw = results.get(step.grade_id)
            records = raw.get("results") if isinstance(raw, dict) else None
            cases = self.cases[step.grade_id]
            if step.question is not None or not isinstance(records, list) or len(records) != len(cases):
                continue
            second = stand_in_results.get(step.grade_id) or {}
            for index, (case, record) in enumerate(zip(cases, records)):
                if case.raises is not None:
                    continue
                both = [r for r in (record, second.get(index)) if isinstance(r, dict)]
                if any(r.get("status") == "returned" for r in both):
                    returned.add(case.function)
                classes = set().union(*(set(map(str, r.get("mro") or ())) for r in both if r.get("status") == "raised"))
                raised[case.function] = raised.get(case.function, classes) & classes
        return {function: frozenset(classes) for function, classes in raised.items() if function not in returned}

    def _grade_step(self, step: Step, raw: dict | None, points: float, identified: dict[str, str],
                    missing_reason: str | None, second: Mapping[int, dict],
                    never_returned: Mapping[str, frozenset[str]] | None = None,
                    failed: Mapping[tuple[str, int], Any] | None = None) -> StepResult:
        cases = self.cases[step.grade_id]
        records = (raw or {}).get("results") if isinstance(raw, dict) else None
        if not isinstance(records, list) or len(records) != len(cases):
            why = missing_reason or "the cell did not run to the end, or its output was removed"
            return StepResult(step.grade_id, step.title, 0.0, points,
                              [f"  ✗ no result reached the grader ({why})"], passed=[False] * len(cases))
        verdicts = [self._grade_case(step, index, case, record, identified, second.get(index), never_returned,
                                     failed or {}) for index, (case, record) in enumerate(zip(cases, records))]
        self._one_name_if_one_explains_all(step, verdicts)
        named, found = [], {}
        for verdict in verdicts:
            if verdict.mistake is not None and verdict.mistake[0] not in named:
                named.append(verdict.mistake[0])
                found.update(verdict.mistake[1].cells)
        identified.update(found)  # later steps may be graded given these mistakes
        total = sum(case.weight for case in cases)
        gained = sum(case.weight for case, verdict in zip(cases, verdicts) if verdict.ok)
        score = round(points * gained / total, 4) if total > 0 else 0.0
        kinds = {v.unanswered for v in verdicts}
        unanswered = None not in kinds
        if unanswered and len(kinds) == 1:
            functions = list(dict.fromkeys(case.function for case in cases))
            one = len(functions) == 1
            why = (("it still raises" if one else "they still raise") + " NotImplementedError" if kinds == {"stub"}
                   else ("it is" if one else "they are") + " not defined in the notebook")
            lines = [f"  ✗ {_names(functions)}: {UNANSWERED} ({why})"]
        else:
            lines = [f"  {'✓' if v.ok else '✗'} {case.description}" + (" (not scored)" if case.weight == 0 else "")
                     + (f": {v.message}" if v.message else "") for case, v in zip(cases, verdicts)]
        for key in named if step.question is None else ():  # a question's feedback is on its line already
            variant = self.assignment.mistakes[key]
            lines.append(f"  This looks like a known mistake: {variant.description}.\n    Hint: {variant.hint}")
        stood_in = sorted(set().union(*(v.stood_in for v in verdicts)))
        if stood_in:
            lines.append(_graded_on_its_own(stood_in))
        return StepResult(step.grade_id, step.title, float(score), points, lines, named,
                          [v.ok for v in verdicts], unanswered)

    def _grade_case(self, step: Step, index: int, case: Case, record: Any, identified: dict[str, str],
                    second: dict | None, never_returned: Mapping[str, frozenset[str]] | None = None,
                    failed: Mapping[tuple[str, int], Any] | None = None) -> _Verdict:
        never_returned = never_returned or {}
        if step.question is not None:
            verdict = _grade_answer(step.question, case, record)
            if verdict.mistake is not None:
                verdict.mistake = (verdict.mistake[0], self.assignment.mistakes[verdict.mistake[0]])
            return verdict
        expected = self.expected(step.grade_id, index)
        parameters = self._parameters(case)
        try:
            got = _learner_value(case, record)
        except _Unreadable as failure:
            return _unreadable(record, failure)
        try:
            _check(case, got, expected, record, parameters)
            if case.raises is not None and case.raises in never_returned.get(case.function, ()):
                return _Verdict(False, f"it raises {case.raises} here, but {case.function} raises on every valid "
                                f"input too ({case.raises}), so this does not show that it checks its input: make it "
                                "return a result first")
            broken = _calls_rule_broken(case, record, finished=True)
            return _Verdict(True) if broken is None else _Verdict(False, broken)
        except CheckFailed as failure:
            message = str(failure)
        # a right result below (stood in for, or given earlier mistakes) still keeps the case's rule on its calls
        broken = _calls_rule_broken(case, record, finished=not isinstance(got, Raised))
        wrong_earlier = frozenset(self._wrong_earlier_calls(step.grade_id, record)) if second is not None else frozenset()
        own = None  # the step's own result: the second pass's, where the earlier functions it calls were stood in for
        if second is not None:
            try:
                own = _learner_value(case, second)
                _check(case, own, expected, second, parameters)
                if TRAIL in second:  # the calls the deciding pass made, in order, to the end
                    trail = second[TRAIL]
                    broken = _calls_rule_broken(case, None if trail is None else {"calls": trail}, finished=True)
                if broken is not None:
                    return _Verdict(False, broken)
                called = frozenset(call.get("function") for call in record.get("calls") or [])
                return _Verdict(True, "", stood_in=wrong_earlier or called)
            except CheckFailed as failure:
                message = str(failure)
            except _Unreadable:
                own = None
        value = got if own is None else own
        earlier = dict(identified) if step.values_graded_earlier else \
            {cell: source for cell, source in identified.items() if not _defines(source, case.function)}
        if earlier:  # also where a stand-in pass ran: the step may repeat its earlier mistake and call another function
            given = self.output_of(earlier, step.grade_id, index)
            if not same(given, expected, case) and same(got, given, case):
                if broken is not None:
                    return _Verdict(False, broken)
                return _Verdict(True, "correct given your earlier function(s), whose mistake is counted in its own step")
        if case.twin is not None and case.twin in (failed or {}) and broken is None \
                and case.function not in never_returned:
            # the twin (an earlier step's case of the same kind of call) failed: its value mistake is charged there,
            # and this case grades what it is for, given the learner's own value there; an exception the twin
            # raised too is that mistake (but a function that raises on every input has shown nothing)
            twin = failed[case.twin]
            if isinstance(value, Raised):
                given_twin = None if isinstance(twin, Raised) and twin.type == value.type else message
            else:
                given_twin = case.given_twin(case, value, twin, expected)
            if given_twin is None:
                return _Verdict(True, f"right given your own {case.function} result on the same kind of input in "
                                      "an earlier step, whose mistake is counted there")
            message = given_twin or message  # "": nothing to grade it on, the case's own message stands
        base = {} if own is not None else earlier
        for key, variant in self._mistakes_of(step):
            output = self.output_of({**base, **variant.cells}, step.grade_id, index)
            if not same(output, expected, case) and looks_like(value, output, case):
                return _Verdict(False, message, (key, variant), wrong_earlier if own is not None else frozenset(),
                                matched=(value, base))
        if step.diagnose is not None and not isinstance(value, Raised):
            try:
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")  # a learner's odd dtype must not make the grader's log noisy
                    notes = step.diagnose(case, value, expected)
            except Exception:  # noqa: BLE001 — a diagnosis must never break grading
                notes = []
            if notes:
                message += "\n" + "\n".join(f"      {line}" for line in notes)
        unanswered = "stub" if _unanswered(case, value) else None
        return _Verdict(False, message, None, wrong_earlier if own is not None else frozenset(), unanswered)

    def _one_name_if_one_explains_all(self, step: Step, verdicts: list[_Verdict]) -> None:
        """When the cases name different known mistakes but one of them gives the learner's result on every case
        where a mistake was named, name that one everywhere: two mistakes can agree by chance on one case (the
        sorted CDF mapped back to ids and the unnormalised CDF pick the same token for one u), and a learner who
        made one mistake is told of that one. Mistakes that no single one explains stay named each."""
        matched = [(index, verdict) for index, verdict in enumerate(verdicts) if verdict.mistake is not None]
        if step.question is not None or len({verdict.mistake[0] for _, verdict in matched}) < 2:
            return
        for key in dict.fromkeys(verdict.mistake[0] for _, verdict in matched):
            variant = self.assignment.mistakes[key]
            if all(self._gives(step, index, variant, *verdict.matched) for index, verdict in matched):
                for _, verdict in matched:
                    verdict.mistake = (key, variant)
                return

    def _gives(self, step: Step, index: int, variant: Variant, value, base: Mapping[str, str]) -> bool:
        """Whether the known mistake ``variant`` (with ``base``'s cells) gives the learner's ``value`` on a case."""
        case, expected = self.cases[step.grade_id][index], self.expected(step.grade_id, index)
        output = self.output_of({**base, **variant.cells}, step.grade_id, index)
        return not same(output, expected, case) and looks_like(value, output, case)

    def _wrong_earlier_calls(self, grade_id: str, record: Any) -> set[str]:
        """The earlier functions that, in the first pass, returned something other than the reference (or raised)."""
        wrong = set()
        for call in (record.get("calls") or []) if isinstance(record, dict) else []:
            answer = self.stand_in(grade_id, call)
            if answer is None:
                continue
            if "raises" in answer[1] or "raised" in call or "returned" not in call:
                if call.get("raised") != answer[1].get("raises", {}).get("type"):
                    wrong.add(call["function"])  # raised where the reference returns, or the other way round
                continue
            try:
                mine, reference = wire.decode(call["returned"]), wire.decode(answer[1]["value"])
            except Exception:  # noqa: BLE001
                wrong.add(call["function"])
                continue
            if not same(mine, reference, Case("", call["function"])) or _differs_in_kind(mine, reference):
                wrong.add(call["function"])
        return wrong

    def _mistakes_of(self, step: Step) -> list[tuple[str, Variant]]:
        """The known mistakes charged in this step (other functions' mistakes never excuse a result here)."""
        return [(key, variant) for key, variant in self.assignment.mistakes.items() if step.grade_id in variant.breaks]


def _calls_rule_broken(case: Case, record: Any, finished: bool) -> str | None:
    """The message of the case's :attr:`~autograder.grader.spec.Case.calls_check` on a pass's calls (the first
    pass's record, or a stand-in pass's trail), or None (no rule, or kept). Calls that cannot all be read (over the probe's recording limits, or
    tampered with) break it: the rule cannot be seen to hold."""
    if case.calls_check is None:
        return None
    calls = record.get("calls") if isinstance(record, dict) else None
    if not isinstance(calls, list) or record.get("calls_dropped"):
        return f"{case.function} made more calls of this notebook's earlier functions than the grader records"
    decoded = []
    try:
        for call in calls:
            one = {"function": str(call["function"]), "args": [wire.decode(a) for a in call["args"]],
                   "kwargs": {str(key): wire.decode(value) for key, value in call["kwargs"].items()}}
            if "returned" in call:
                one["returned"] = wire.decode(call["returned"])
            decoded.append(one)
    except Exception:  # noqa: BLE001 — garbage from a tampered kernel
        return f"the calls {case.function} made of this notebook's earlier functions could not be read"
    try:
        return case.calls_check(case, decoded, finished)
    except Exception:  # noqa: BLE001 — a learner's odd argument must not break grading
        return f"the calls {case.function} made of this notebook's earlier functions could not be checked"


def _unreadable(record: Any, failure: Exception) -> "_Verdict":
    """The verdict on a value the kernel's record does not hold: unanswered (the name is missing) or unreadable."""
    missing = isinstance(record, dict) and record.get("status") == "missing"
    return _Verdict(False, f"{UNANSWERED} ({failure})" if missing else str(failure),
                    unanswered="missing" if missing else None)


def _grade_answer(question, case: Case, record: Any) -> _Verdict:
    """The verdict on a question's answer (the kernel's record of its variable); a named wrong answer's mistake
    is ``(key, None)`` here, the caller puts in the bank's variant."""
    try:
        got = _learner_value(case, record)
    except _Unreadable as failure:
        return _unreadable(record, failure)
    if isinstance(got, Raised):
        return _Verdict(False, f"the answer could not be read ({got.type})")
    if isinstance(got, wire.Unsupported):
        return _Verdict(False, f"the answer should be {question.format.describe()}, but it is {got.what}")
    try:
        answer = question.format.read(got)
    except AnswerFormatError as error:
        return _Verdict(False, str(error))
    if question.is_right(answer):
        return _Verdict(True)
    key, why = question.feedback(answer)
    message = f"your answer {question.format.show(answer)} is not right" + (f": {why}" if why else "")
    return _Verdict(False, message, None if key is None else (key, None))


def _differs_in_kind(mine, reference) -> bool:
    """Same values but not the same kind of result (dtype, container): still a different result."""
    if isinstance(mine, np.ndarray) and isinstance(reference, np.ndarray):
        return mine.dtype != reference.dtype
    if isinstance(mine, (tuple, list)) and isinstance(reference, (tuple, list)):
        return any(_differs_in_kind(a, b) for a, b in zip(mine, reference))
    return type(mine) is not type(reference)


def _graded_on_its_own(functions: list[str]) -> str:
    """The step's note when stand-ins answered its calls of wrong or unfinished earlier functions (the README's words)."""
    if len(functions) == 1:
        return (f"  Graded on its own: {functions[0]}, from an earlier step, is wrong or unfinished where this step "
                "calls it, so the grader answered those calls with the reference's values; its mistake costs points "
                "only in its own step.")
    return (f"  Graded on its own: {_names(functions)}, from earlier steps, are wrong or unfinished where this step "
            "calls them, so the grader answered those calls with the reference's values; their mistakes cost points "
            "only in their own steps.")


def _names(functions: list[str]) -> str:
    return functions[0] if len(functions) == 1 else ", ".join(functions[:-1]) + " and " + functions[-1]


def _unanswered(case: Case, value) -> bool:
    """Whether the case's own function is still the release's stub, ``raise NotImplementedError()``."""
    return (isinstance(value, Raised) and value.type == "NotImplementedError" and not value.message
            and value.where in (None, case.function))


def _size_limits(grader: Grader, grade_id: str) -> tuple[int, int]:
    """(elements, magnitude) a stand-in's arguments may have: 4× the largest array and the largest dimension
    or integer among the step's hidden inputs and expected results (at least 4096 and 64)."""
    elements, magnitude = 4096, 64
    for index, case in enumerate(grader.cases[grade_id]):
        for value in [*case.args, *case.kwargs.values(), grader.expected(grade_id, index)]:
            for item in _leaves(value):
                if isinstance(item, np.ndarray):
                    elements = max(elements, 4 * item.size)
                    magnitude = max(magnitude, 4 * max(item.shape, default=0))
                elif isinstance(item, (int, np.integer)) and not isinstance(item, bool):
                    magnitude = max(magnitude, 4 * abs(int(item)))
    return elements, magnitude


def _leaves(value):
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


def _plain(value):
    """A decoded argument with any array of an ``ndarray`` subclass as a plain array (what the reference is given)."""
    if isinstance(value, (tuple, list)):
        return type(value)(_plain(item) for item in value)
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value.view(np.ndarray) if isinstance(value, np.ndarray) and type(value) is not np.ndarray else value


def _within(value, limits: tuple[int, int]) -> bool:
    """Whether a decoded argument is small enough for the reference to run on it in the grader."""
    elements, magnitude = limits
    for item in _leaves(value):
        if isinstance(item, wire.Unsupported):
            return False
        if isinstance(item, np.ndarray):
            if item.size > elements or max(item.shape, default=0) > magnitude:
                return False
        elif isinstance(item, (int, np.integer)) and not isinstance(item, bool) and abs(int(item)) > magnitude:
            return False
    return True


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
    if status == "incomplete":
        raise _Unreadable("a call of an earlier function had no stand-in value")
    if status == "timeout":
        return Raised("FunctionTimedOut", ("FunctionTimedOut",), f"did not finish within {call_seconds(case):g} s")
    if status == "raised":
        return Raised(str(record.get("type", "?"))[:80], tuple(str(n)[:80] for n in record.get("mro", []))[:20],
                      str(record.get("message", ""))[:300], record.get("where"))
    if status == "returned":
        try:
            return wire.decode(record.get("value"))
        except Exception as error:  # noqa: BLE001 — garbage from a tampered kernel
            raise _Unreadable(f"the result could not be read ({type(error).__name__})") from None
    raise _Unreadable("the result could not be read")


def _check(case: Case, got, expected, record: dict, parameters: list[str] = ()) -> None:
    """Raise :class:`CheckFailed` unless the learner's value and behaviour are right for the case.

    ``parameters`` are the function's parameter names, so that a message can name an argument ("x").
    """
    if isinstance(expected, Raised) and case.raises is None:
        raise RuntimeError(f"the reference raised {expected.type} on case {case.description!r}: {expected.message}")
    if case.raises is not None:
        if isinstance(got, Raised):
            if case.raises in got.mro:
                return
            if _unanswered(case, got):
                raise CheckFailed(f"{UNANSWERED} ({case.function} still raises NotImplementedError)")
            raise CheckFailed(f"it should raise {case.raises}, but it raised {got.type}{_colon(got.message)}")
        raise CheckFailed(f"it should raise {case.raises}, but it returned {_what(got)}")
    if isinstance(got, Raised):
        inside = f" in {got.where}" if got.where and got.where != case.function else ""
        if got.type == "FunctionTimedOut":
            raise CheckFailed(f"{case.function} did not finish within {call_seconds(case):g} s"
                              f"{' of CPU time' if case.cpu_time else ''} "
                              f"({'too slow for this case' if case.seconds is not None else 'an infinite loop?'})")
        if _unanswered(case, got):
            raise CheckFailed(f"{UNANSWERED} ({case.function} still raises NotImplementedError)")
        if inside and got.type == "NotImplementedError":
            raise CheckFailed(f"{got.where}, another function of this notebook that it calls, is {UNANSWERED}: "
                              "finish it first")
        raise CheckFailed(f"your function raised {got.type}{inside}{_colon(got.message)}")
    _expect(case, case.outputs[0] if len(case.outputs) == 1 else "the result", got, expected)
    if case.no_warnings and record.get("warnings"):
        raise CheckFailed(f"it emitted a warning ({record['warnings'][0]}); this step must run without any")
    after = record.get("args_after") or []
    for position, (original, encoded) in enumerate(zip(case.args, after)):
        if isinstance(original, np.ndarray):
            try:  # the probe reads back every array argument: a missing one is not "unchanged"
                if encoded is None:
                    raise ValueError("not read back")
                now = wire.decode(encoded)
            except Exception:  # noqa: BLE001
                raise CheckFailed("its arguments could not be read back after the call") from None
            if not (isinstance(now, np.ndarray) and now.shape == original.shape
                    and np.array_equal(now, original, equal_nan=original.dtype.kind == "f")):
                name = parameters[position] if position < len(parameters) else f"argument {position + 1}"
                raise CheckFailed(f"it modified its argument {name} in place; "
                                  "compute a new array instead (the caller's data must stay unchanged)")


def _colon(message: str) -> str:
    """``": message"``, or nothing for an exception raised without a message (no empty text after a colon)."""
    message = str(message).strip()
    return f": {message}" if message else ""
