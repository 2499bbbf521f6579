"""What arrives from the kernel is checked before it is graded: forged probe output is named, strings are capped.

The probe (:mod:`attention_lab.core.probe`) runs in the learner's kernel, so its
output is only data the learner's code could have shaped. Before the grader
reads a step's results, :func:`screen` checks that they have the form the
genuine probe gives for that step's request (one result per case, the
fields each status has, one probe output in the cell) and caps every string
a learner controls (exception class names and messages, warning texts, type
names), so feedback never echoes more than a line of it. :func:`why_missing`
says why a step has no results, in the cell's own terms.
"""

from __future__ import annotations

import re

from attention_lab.core.probe import MIME

#: Longest learner-controlled string kept, by field (characters).
CAPS = {"type": 80, "where": 80, "message": 300, "warning": 200, "name": 120, "text": 2000}
MAX_MRO = 20
MAX_WARNINGS = 5
STATUSES = {"returned", "raised", "missing", "timeout", "incomplete"}
MAX_CALLS = 64  # recorded calls of earlier functions per case (attention_lab.core.probe.MAX_CALLS)


class Forged(ValueError):
    """The probe output does not have the form the genuine probe gives."""


def _text(value, cap: str) -> str:
    if not isinstance(value, str):
        raise Forged(f"a {cap} that is not text")
    return value[:CAPS[cap]] + ("…" if len(value) > CAPS[cap] else "")


def _value(data, depth: int = 0):
    """An encoded value (:mod:`attention_lab.core.values`) with its strings capped; its arrays are checked when decoded."""
    if depth > 4:
        raise Forged("a value nested deeper than the probe sends")
    if isinstance(data, str):
        return _text(data, "text")
    if data is None or type(data) in (bool, int, float):
        return data
    if isinstance(data, dict):
        if "ndarray" in data:
            return {"ndarray": data["ndarray"], **({"class": _text(data["class"], "name")} if "class" in data else {})}
        if "unsupported" in data:
            return {"unsupported": _text(data["unsupported"], "name")}
        if set(data) in ({"tuple"}, {"list"}):
            (kind, items), = data.items()
            if not isinstance(items, list):
                raise Forged(f"a {kind} that is not a list")
            return {kind: [_value(item, depth + 1) for item in items]}
        if set(data) in ({"scalar"}, {"float"}):
            return data
        if set(data) in ({"seeded_normal"}, {"package_array"}):  # an argument read back unchanged: its recipe
            return data
        if set(data) == {"dict"}:  # [key, value] pairs: a model's parameters passed to an earlier function
            pairs = data["dict"]
            if not isinstance(pairs, list) or not all(isinstance(pair, list) and len(pair) == 2 for pair in pairs):
                raise Forged("a dict that is not a list of [key, value] pairs")
            return {"dict": [[_text(key, "name"), _value(item, depth + 1)] for key, item in pairs]}
    raise Forged("a value the probe does not send")


def _call(call) -> dict:
    """One recorded call of an earlier function (the stand-in passes read it): its arguments and outcome."""
    if not isinstance(call, dict) or not isinstance(call.get("args"), list) or not isinstance(call.get("kwargs"), dict):
        raise Forged("a recorded call without its arguments")
    kept = {"function": _text(call.get("function"), "name"), "args": [_value(a) for a in call["args"]],
            "kwargs": {_text(key, "name"): _value(value) for key, value in call["kwargs"].items()}}
    if "returned" in call:
        kept["returned"] = _value(call["returned"])
    if "raised" in call:
        kept["raised"] = _text(call["raised"], "type")
    return kept


def _stand_in_fields(record: dict) -> dict:
    """The fields every result carries for the stand-in passes: recorded calls, how many were dropped, the index."""
    calls, dropped = record.get("calls", []), record.get("calls_dropped", 0)
    if not isinstance(calls, list) or len(calls) > MAX_CALLS or type(dropped) is not int or dropped < 0:
        raise Forged("a result whose recorded calls are not what the probe records")
    kept = {"calls": [_call(call) for call in calls], "calls_dropped": dropped}
    if "answered" in record:  # a later pass: the digests of the calls its stand-ins answered, in order
        answered, over = record["answered"], record.get("answered_dropped")
        if not isinstance(answered, list) or len(answered) > MAX_CALLS or type(over) is not int or over < 0 \
                or not all(isinstance(d, str) and re.fullmatch(r"[0-9a-f]{64}", d) for d in answered):
            raise Forged("a result whose answered calls are not what the probe records")
        kept.update(answered=list(answered), answered_dropped=over)
    if "index" in record:
        if type(record["index"]) is not int:
            raise Forged("a result whose case index is not a number")
        kept["index"] = record["index"]
    return kept


def _record(record, arguments: int) -> dict:
    if not isinstance(record, dict) or record.get("status") not in STATUSES:
        raise Forged("a result without a known status")
    return {**_outcome(record, arguments), **_stand_in_fields(record)}


def _outcome(record: dict, arguments: int) -> dict:
    status = record["status"]
    if status == "returned":
        after = record.get("args_after")
        warnings = record.get("warnings")
        if not isinstance(after, list) or len(after) != arguments:
            raise Forged(f"a result with {len(after) if isinstance(after, list) else 'no'} arguments read back "
                         f"for a call with {arguments}")
        if not isinstance(warnings, list) or len(warnings) > MAX_WARNINGS:
            raise Forged("a result whose warnings are not a short list")
        return {"status": status, "value": _value(record.get("value")),
                "args_after": [None if a is None else _value(a) for a in after],
                "warnings": [_text(w, "warning") for w in warnings]}
    if status == "raised":
        mro = record.get("mro")
        if not isinstance(mro, list) or not mro:
            raise Forged("an exception without its classes")
        where = record.get("where")
        return {"status": status, "type": _text(record.get("type"), "type"),
                "mro": [_text(name, "type") for name in mro[:MAX_MRO]],
                "message": _text(record.get("message", ""), "message"),
                "where": None if where is None else _text(where, "where")}
    if status == "incomplete":
        return {"status": status}
    return {"status": status, "message": _text(record.get("message", ""), "message")}


def probe_outputs(outputs: list, grade_id: str) -> list:
    """Every probe output for ``grade_id`` among a cell's outputs (the genuine probe sends exactly one)."""
    found = []
    for output in outputs:
        data = output.get("data", {}) if output.get("output_type") in ("display_data", "execute_result") else {}
        if isinstance(data, dict) and MIME in data:
            results = data[MIME]
            if not isinstance(results, dict) or results.get("grade_id") in (grade_id, None):
                found.append(results)
    return found


def screen(request: dict, outputs: list) -> tuple[dict | None, str | None]:
    """The step's results as the grader may read them, or why they cannot be trusted.

    Parameters
    ----------
    request : dict
        What the grader sent (:meth:`autograder.grader.comparison.Grader.request`).
    outputs : list
        The autograder cell's outputs after execution.

    Returns
    -------
    results : dict or None
        ``{"grade_id", "results"}`` with learner strings capped, or None.
    problem : str or None
        Why there are no results to grade when some arrived ("the probe's
        output was forged ..."); None when none arrived at all.
    """
    found = probe_outputs(outputs, request["grade_id"])
    if not found:
        return None, None
    if len(found) > 1:
        return None, (f"the probe's output was forged: the cell sent {len(found)} probe outputs for this step, "
                      "the grading probe sends one")
    return screen_results(request, found[0])


def screen_results(request: dict, results) -> tuple[dict | None, str | None]:
    """:func:`screen` for the one probe output of a step, already found (the in-process model uses it too)."""
    cases = request["cases"]
    try:
        if not isinstance(results, dict) or not isinstance(results.get("results"), list):
            raise Forged("it is not a list of results")
        if len(results["results"]) != len(cases):
            raise Forged(f"it has {len(results['results'])} results for {len(cases)} hidden cases")
        records = [_record(record, len(case["args"])) for record, case in zip(results["results"], cases)]
    except Forged as forged:
        return None, f"the probe's output was forged or tampered with ({forged})"
    return {"grade_id": request["grade_id"], "results": records}, None


def why_missing(cell, stopped: str | None) -> str:
    """Why an autograder cell sent no results, from what its execution left."""
    if stopped:
        return stopped
    errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    if errors:
        name = _text(str(errors[0].get("ename", "an error")), "type")
        return f"the cell stopped with {name} before the probe sent its results"
    if cell.get("execution_count") is None and not cell.get("outputs"):
        return "the cell did not run"
    return ("the cell ran to the end but the grading probe sent nothing: the notebook replaced the probe "
            "or removed its output")
