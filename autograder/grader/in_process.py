"""Grade answers in this process — the model of ``nbgrader autograde`` used to test the tests.

The answers run in a plain namespace instead of a sandboxed kernel, but every
other part is the real pipeline: the same request data, the same kernel-side
calls (:func:`attention_lab.core.probe.collect`), a JSON round trip of the results
as they would leave the kernel, the same stand-in passes
(:func:`autograder.grader.stand_ins.run_passes`) and the same
:class:`~autograder.grader.comparison.Grader`. The end-to-end tests check that
nbgrader gives the same scores.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from attention_lab.core import probe, values as wire
from autograder.grader.answers import REPO, answer_namespace
from autograder.grader.comparison import TRUSTED_LIMITED_SECONDS, Grader, StepResult
from autograder.grader.memory_limit import reachable_code, run_with_memory_limit
from autograder.nbgrader.notebook_cells import read_json, test_cells
from autograder.grader.probe_output import screen_results
from autograder.grader.spec import Assignment, Variant
from autograder.grader.stand_ins import run_passes

_GRADERS: dict[tuple[str, str, int | None], Grader] = {}
#: answers by request and reachable code (:func:`kernel_results`); cleared when full
_ANSWERS: dict[tuple, dict] = {}
MAX_ANSWERS = 4096


def grader_for(assignment: Assignment, course_dir: Path = REPO, seed: int | None = None) -> Grader:
    """One :class:`Grader` per assignment, course directory and seed, so the reference's outputs are computed once."""
    key = (assignment.name, str(Path(course_dir).resolve()), seed)
    if key not in _GRADERS:
        _GRADERS[key] = Grader(assignment, course_dir, seed)
    return _GRADERS[key]


def points_of(assignment: Assignment, course_dir: Path = REPO) -> dict[str, float]:
    """grade_id → points of each autograder-test cell of the source notebook."""
    nb = read_json(Path(course_dir) / "source" / assignment.name / assignment.notebook)
    return {grade_id: points for grade_id, (_, points) in test_cells(nb).items()}


def json_round_trip(data):
    """``json.loads(json.dumps(data))``, what data is after it is sent as JSON text and read back, made faster.

    Plain JSON data — dicts with ``str`` keys, lists, tuples, ``str``, ``int``, ``bool``, ``None`` and finite
    ``float`` of exactly those types — is copied structure by structure (lists for tuples, the same immutable
    strings and numbers: what the round trip gives, at a twentieth of its cost on assignment 9's requests, whose
    stand-in values are megabytes of base64). Anything else (a NumPy number, a subclass, NaN, a non-string key,
    nesting deeper than :data:`_PLAIN_DEPTH`) takes the real round trip, so its conversions and its errors are
    JSON's own. Used for what crosses the kernel boundary in both directions (:func:`kernel_results`).
    """
    try:
        return _plain_copy(data, 0)
    except _NotPlain:
        return json.loads(json.dumps(data))


_PLAIN_DEPTH = 64  # far deeper than any request or result (tuples of arrays in a dict in a call record ...)


class _NotPlain(Exception):
    """Data that :func:`json_round_trip` leaves to JSON itself."""


def _plain_copy(data, depth: int):
    kind = type(data)
    if kind is str or kind is int or kind is bool or data is None:
        return data
    if kind is float:
        if data - data != 0.0:  # NaN or ±inf: JSON writes NaN/Infinity; left to it
            raise _NotPlain
        return data
    if depth >= _PLAIN_DEPTH:
        raise _NotPlain
    if kind is dict:
        copied = {}
        for key, value in data.items():
            if type(key) is not str:
                raise _NotPlain
            copied[key] = _plain_copy(value, depth + 1)
        return copied
    if kind is list or kind is tuple:
        return [_plain_copy(item, depth + 1) for item in data]
    raise _NotPlain


def kernel_results(namespace: dict, request: dict) -> dict | None:
    """What the grader reads of the kernel's answer to ``request``: the same JSON round trips and screening.

    A request with a case that has a memory limit (:attr:`~autograder.grader.spec.Case.memory_limit`) is
    answered in a child process under that limit, as the sandboxed kernel answers it under its own.

    Answers are kept by the request and the code each case's call can reach
    (:func:`~autograder.grader.memory_limit.reachable_code`): the answer banks grade one solution with many
    combinations of rewritten cells, and a step whose reachable code a combination leaves alone gets the answer
    it got before (tests/test_stand_ins.py grades every known mistake with every group of correct variants).
    A call that can reach anything but functions, modules, numbers and strings (a list, an array, an object
    whose state it may change) is run every time.
    """
    sent = json_round_trip(request)  # as wire.unpack(wire.pack(request)) gives it in the kernel
    limits = [case["memory_limit"] for case in request["cases"] if case.get("memory_limit")]
    codes = [reachable_code(namespace, case["function"], opaque=_stood_in(request, case["function"]))
             for case in request["cases"]]
    key = None if None in codes else (hashlib.sha256(wire.dumps(request).encode()).digest(), *codes)
    if key is not None and key in _ANSWERS:
        answer = _ANSWERS[key]  # read, not changed: the round trip below hands out a fresh copy
    else:
        if limits:
            # trusted answers on a machine that may be loaded (a test suite beside other work): the limit only turns
            # a hang into a result here; the sandbox holds learners to the case's own time
            for case in sent["cases"]:
                case["seconds"] = max(3 * float(case["seconds"]), TRUSTED_LIMITED_SECONDS)
            seconds = sum(float(case["seconds"]) for case in sent["cases"]) + 30
            answer = run_with_memory_limit(lambda: probe.collect(namespace, sent), max(limits), seconds)
        else:
            answer = probe.collect(namespace, sent)
        if key is not None:
            if len(_ANSWERS) >= MAX_ANSWERS:
                _ANSWERS.clear()
            _ANSWERS[key] = answer
    return screen_results(request, json_round_trip(answer))[0]


def _stood_in(request: dict, function: str) -> tuple[str, ...]:
    """The names whose code cannot matter to a later pass's answer for a case of ``function``.

    In a pass with stand-ins (the request carries ``"stand_ins"``) the probe replaces every earlier function but the
    case's own by a wrapper that answers from the stand-ins or stops the case, and never calls the notebook's
    function (:mod:`attention_lab.core.probe`): what those functions' code is, or whether they
    are defined at all, cannot change the answer (the request, which is in the key, says which they are).
    """
    if "stand_ins" not in request:
        return ()
    return tuple(name for name in request.get("earlier", ()) if name != function)


def grade_answers(assignment: Assignment, cells: dict[str, str], course_dir: Path = REPO, *,
                  stand_ins: bool = True, seed: int | None = None) -> dict[str, StepResult]:
    """Grade the source solution with ``cells`` (solution grade_id → source) replaced.

    Parameters
    ----------
    stand_ins : bool
        Run the stand-in passes (as grading does); False grades the first pass alone.
    seed : int, optional
        Seed of the hidden cases (default: the course's).

    Returns
    -------
    dict
        test-cell grade_id → :class:`~autograder.grader.comparison.StepResult`.
    """
    grader = grader_for(assignment, course_dir, seed)
    namespace = answer_namespace(assignment.name, assignment.notebook, cells, course_dir)
    points = points_of(assignment, course_dir)
    results = {grade_id: kernel_results(namespace, grader.request(grade_id)) for grade_id in points
               if grade_id in grader.cases}
    later = run_passes(grader, results, lambda request: kernel_results(namespace, request)) if stand_ins else {}
    return grader.grade(results, points, stand_in_results=later)


def grade_variant(assignment: Assignment, variant: Variant, course_dir: Path = REPO, **options) -> dict[str, StepResult]:
    """Grade one answer variant (see :func:`grade_answers`)."""
    return grade_answers(assignment, dict(variant.cells), course_dir, **options)
