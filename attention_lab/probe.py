"""The kernel's side of grading: call the learner's functions on hidden inputs, send back raw results.

At autograde time the grader replaces the hidden part of each autograder-test
cell with one call of :func:`run`, carrying that step's hidden inputs as
data. This module only *calls*: it holds no reference, no expected value and
no comparison, so nothing the learner's code does in the kernel can change
a verdict — at worst a result fails to arrive, and the step scores 0. The
grader (``autograder.comparison``) checks the results in its own process.

Each call runs on fresh copies of its inputs, with a time limit, with output
discarded, under NumPy's default error handling, ``np.errstate(all="warn", under="ignore")`` (so a learner's ``np.seterr``
does not change NumPy's behaviour) and with warnings recorded (some specs
forbid them).
"""

from __future__ import annotations

import contextlib
import io
import traceback
import warnings
from typing import Any

import numpy as np

from attention_lab import wire
from attention_lab.learner_calls import FunctionTimedOut, time_limit

#: MIME type of the display output that carries a step's results to the grader.
MIME = "application/vnd.attention-lab.probe+json"
MAX_WARNINGS = 5


def _where(error: BaseException, namespace: dict) -> str | None:
    """The innermost notebook function the error passed through (its name only, never source lines)."""
    name = None
    for frame, _ in traceback.walk_tb(error.__traceback__):
        code = frame.f_code
        if callable(namespace.get(code.co_name)) and getattr(namespace[code.co_name], "__code__", None) is code:
            name = code.co_name
    return name


def _describe_error(error: BaseException, namespace: dict) -> dict:
    try:
        message = str(error)[:500]
    except BaseException:  # noqa: BLE001 — a hostile __str__
        message = "(the message could not be printed)"
    return {"status": "raised", "type": type(error).__name__,
            "mro": [cls.__name__ for cls in type(error).__mro__], "message": message,
            "where": _where(error, namespace)}


def call_case(namespace: dict, case: dict) -> dict:
    """Call one case's function from ``namespace`` and describe what happened, as data.

    Parameters
    ----------
    namespace : dict
        The notebook's global namespace.
    case : dict
        ``{"function": name, "args": [encoded...], "kwargs": {name: encoded}, "seconds": limit}``.

    Returns
    -------
    dict
        ``{"status": "returned", "value": ..., "args_after": [...], "warnings": [...]}``,
        or ``{"status": "raised", "type": ..., "mro": [...], "message": ..., "where": ...}``,
        or ``{"status": "missing", "message": ...}``. Values are encoded with :mod:`attention_lab.wire`.
    """
    name = case["function"]
    function = namespace.get(name)
    if not callable(function):
        return {"status": "missing", "message": f"there is no function named {name} in the notebook"}
    args = [wire.decode(a) for a in case["args"]]
    kwargs = {key: wire.decode(value) for key, value in case["kwargs"].items()}
    sink = io.StringIO()
    try:
        with warnings.catch_warnings(record=True) as caught, np.errstate(all="warn", under="ignore"), \
                contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), \
                time_limit(float(case["seconds"])):
            warnings.simplefilter("always")
            value = function(*args, **kwargs)
            encoded = wire.encode(value)
            after = [wire.encode(a) if isinstance(a, np.ndarray) else None for a in args]
    except FunctionTimedOut as timeout:
        return {"status": "timeout", "message": str(timeout)}
    except BaseException as error:  # noqa: BLE001 — whatever it raises is a result, SystemExit and KeyboardInterrupt too
        return _describe_error(error, namespace)
    notes = []
    for record in caught[:MAX_WARNINGS]:
        try:
            notes.append(f"{record.category.__name__}: {str(record.message)[:200]}")
        except BaseException:  # noqa: BLE001
            notes.append("a warning")
    result = {"status": "returned", "value": encoded, "args_after": after, "warnings": notes}
    size = len(wire.dumps(result))
    if size > wire.MAX_BYTES:
        return {"status": "returned", "value": {"unsupported": f"a result of {size} bytes (far too large)"},
                "args_after": [None] * len(args), "warnings": notes}
    return result


def collect(namespace: dict, request: dict) -> dict:
    """Results of every case of one step's request, in order (``{"grade_id": ..., "results": [...]}``)."""
    return {"grade_id": request["grade_id"], "results": [call_case(namespace, case) for case in request["cases"]]}


def run(namespace: dict, payload: str) -> None:
    """Run a step's hidden cases in this kernel and publish the raw results for the grader.

    Parameters
    ----------
    namespace : dict
        The notebook's ``globals()``.
    payload : str
        The request, packed by the grader (:func:`attention_lab.wire.pack`).
    """
    from IPython.display import publish_display_data

    results = collect(namespace, wire.unpack(payload))
    publish_display_data({MIME: results, "text/plain": f"{len(results['results'])} result(s) sent to the grader"})


def results_in(outputs: list, grade_id: str) -> dict | None:
    """The last results for ``grade_id`` among a cell's outputs, or None if none arrived."""
    found = None
    for output in outputs:
        data = output.get("data", {}) if output.get("output_type") == "display_data" else {}
        results = data.get(MIME)
        if isinstance(results, dict) and results.get("grade_id") == grade_id:
            found = results
    return found
