"""The kernel's side of grading: call the learner's functions on hidden inputs, send back raw results.

At autograde time the grader replaces the hidden part of each autograder-test
cell with one call of :func:`run`, carrying that step's hidden inputs as
data. This module only *calls*: it holds no reference, no expected value and
no comparison, so nothing the learner's code does in the kernel can change
a verdict — at worst a result fails to arrive, and the step scores 0. The
grader (``autograder.grader.comparison``) checks the results in its own process.
The only reference values that ever reach the kernel are a later pass's
stand-in answers for earlier functions (below).

Each call runs on fresh copies of its inputs, with a time limit, with output
discarded, under NumPy's default error handling, ``np.errstate(all="warn", under="ignore")`` (so a learner's ``np.seterr``
does not change NumPy's behaviour) and with warnings recorded (some specs
forbid them).

Earlier course functions: a request names the functions graded in earlier
steps (``"earlier"``). While a case runs, those names in the notebook's
namespace are replaced by wrappers, and so is each other reference to the same
function objects that the notebook's code can reach: another global name
(``attend = attend_with_cache``), a default argument or a closure cell of a
function defined in the notebook (otherwise such a call would bypass the
stand-in and a mistake of the earlier function would cost points twice):

* in the **first pass** (no ``"stand_ins"`` in the request) a wrapper records
  the arguments of each call the graded function makes (and what the learner's
  own function returned), then calls the learner's function as usual;
* in a **later pass** the request carries ``"stand_ins"``: values the grader
  computed with the reference for exactly the recorded arguments, keyed by
  :func:`call_digest`. A wrapper then returns the stored value for its
  arguments without calling the learner's function; for arguments it has no
  value for, it records them and stops the case (status ``"incomplete"``), so
  that the grader can compute them for the next pass.

Only calls made by the graded function's own code are recorded or answered:
calls that an earlier function makes inside itself are left alone.

A question's case (``"reads": true``) calls nothing: it reads the answer variable the case names and sends
its value (a set as a list of its members: order does not matter to a set), :func:`read_answer`.
"""

from __future__ import annotations

import builtins
import traceback
import types
from typing import Any

import numpy as np

from attention_lab.core import values as wire
from attention_lab.core.calls import FunctionTimedOut, call_learner

#: MIME type of the display output that carries a step's results to the grader.
MIME = "application/vnd.attention-lab.probe+json"
MAX_WARNINGS = 5
MAX_CALLS = 64  # calls of earlier course functions recorded per case; correct code makes a few
MAX_CALL_BYTES = 4 * 2**20  # encoded arguments and results recorded per case


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


def call_digest(function: str, args: list, kwargs: dict) -> str:
    """The key of one call of an earlier function: SHA-256 of its name and its encoded arguments.

    Parameters
    ----------
    function : str
        The function's name.
    args : list
        Positional arguments, encoded with :func:`attention_lab.core.values.encode`.
    kwargs : dict
        Keyword arguments, encoded; their order does not matter.

    Returns
    -------
    str
        64 hexadecimal digits (:func:`attention_lab.core.values.digest`). The kernel and the grader compute it from
        the same encoded data.
    """
    return wire.digest([function, list(args), sorted(kwargs.items())])


class _NoStandInValue(BaseException):
    """A stand-in was called with arguments the grader has no value for yet (a BaseException, so that a
    learner's ``except Exception`` does not hide it); the case stops and is run again in the next pass."""


def _fresh(value):
    """A copy of a stored stand-in value, so that a caller that modifies it cannot change the next call's."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, (tuple, list)):
        return type(value)(_fresh(item) for item in value)
    if isinstance(value, dict):
        return {key: _fresh(item) for key, item in value.items()}
    return value


def _stored(entry: dict):
    """A stand-in's answer for one digest: a function returning a fresh copy of the value, or raising."""
    if "raises" in entry:
        kind = getattr(builtins, str(entry["raises"].get("type", "")), None)
        kind = kind if isinstance(kind, type) and issubclass(kind, Exception) else RuntimeError
        message = str(entry["raises"].get("message", ""))

        def answer():
            raise kind(message)
        return answer
    value = wire.decode(entry["value"])
    return lambda: _fresh(value)


class _EarlierFunctions:
    """While one case runs: each earlier course function's name in the namespace replaced by a wrapper.

    ``values`` None: record and call the learner's functions (first pass); else a dict digest → answer
    (:func:`_stored`) for the stand-ins of a later pass. ``calls`` lists the recorded calls.
    """

    def __init__(self, namespace: dict, names, values: dict | None):
        self.namespace, self.names, self.values = namespace, [str(n) for n in names], values
        self.depth = 0  # > 0 while an earlier function runs: its own calls are not the graded function's
        self.calls: list[dict] = []
        self.dropped = 0
        self.answered: list[str] = []  # a later pass: the digests of the calls a stand-in answered, in order
        self.answered_dropped = 0
        self._bytes = 0
        self._saved: dict[str, Any] = {}

    def __enter__(self):
        missing = object()
        # id of an earlier function → its wrapper (the functions stay alive in self._saved, so no id is reused)
        wrappers: dict[int, Any] = {}
        for name in self.names:
            self._saved[name] = self.namespace.get(name, missing)
            original = self._saved[name]
            self.namespace[name] = self._wrapper(name, original if callable(original) else None)
            if callable(original):
                wrappers.setdefault(id(original), self.namespace[name])
        self._missing = missing
        self._aliases = self._wrap_aliases(wrappers)
        return self

    def _wrap_aliases(self, wrappers: dict) -> list:
        """Put the wrappers wherever else the notebook's code holds an earlier function: under another global
        name, as a default argument or in a closure cell of a function defined in the notebook. Returns what to
        put back."""
        def wrapped(value):
            return wrappers.get(id(value), value)

        undo = []
        if not wrappers:
            return undo
        for key, value in list(self.namespace.items()):
            if key in self.names:
                continue
            if wrapped(value) is not value:
                undo.append(("global", key, value))
                self.namespace[key] = wrapped(value)
            elif type(value) is types.FunctionType and value.__globals__ is self.namespace:
                defaults = value.__defaults__ or ()
                if any(wrapped(d) is not d for d in defaults):
                    undo.append(("defaults", value, defaults))
                    value.__defaults__ = tuple(map(wrapped, defaults))
                keywords = value.__kwdefaults__ or {}
                if any(wrapped(d) is not d for d in keywords.values()):
                    undo.append(("kwdefaults", value, dict(keywords)))
                    value.__kwdefaults__ = {k: wrapped(d) for k, d in keywords.items()}
                for cell in value.__closure__ or ():
                    try:
                        contents = cell.cell_contents
                    except ValueError:  # an empty cell
                        continue
                    if wrapped(contents) is not contents:
                        undo.append(("cell", cell, contents))
                        cell.cell_contents = wrapped(contents)
        return undo

    def __exit__(self, *exc):
        for name, original in self._saved.items():
            if original is self._missing:
                self.namespace.pop(name, None)
            else:
                self.namespace[name] = original
        for kind, where, value in reversed(self._aliases):
            if kind == "global":
                self.namespace[where] = value
            elif kind == "defaults":
                where.__defaults__ = value
            elif kind == "kwdefaults":
                where.__kwdefaults__ = value
            else:
                where.cell_contents = value
        return False

    def _record(self, call: dict) -> dict | None:
        size = wire.size(call)
        if len(self.calls) >= MAX_CALLS or self._bytes + size > MAX_CALL_BYTES:
            self.dropped += 1
            return None
        self._bytes += size
        self.calls.append(call)
        return call

    def _wrapper(self, name: str, original):
        def earlier_function(*args, **kwargs):
            if self.depth:
                if original is None:
                    raise NameError(f"name {name!r} is not defined")
                return original(*args, **kwargs)
            encoded = {"function": name, "args": [wire.encode(a) for a in args],
                       "kwargs": {key: wire.encode(value) for key, value in kwargs.items()}}
            if self.values is not None:
                # the digest only in a later pass: the first pass records the call, which the grader digests itself
                digest = call_digest(name, encoded["args"], encoded["kwargs"])
                if digest in self.values:
                    if len(self.answered) < MAX_CALLS:
                        self.answered.append(digest)
                    else:
                        self.answered_dropped += 1
                    return self.values[digest]()
                self._record(encoded)
                raise _NoStandInValue(name)
            call = self._record(encoded)
            if original is None:
                if call is not None:
                    call["raised"] = "NameError"
                raise NameError(f"name {name!r} is not defined")
            self.depth += 1
            try:
                value = original(*args, **kwargs)
            except Exception as error:
                if call is not None:
                    call["raised"] = type(error).__name__
                raise
            finally:
                self.depth -= 1
            if call is not None:
                returned = wire.encode(value)
                size = wire.size(returned)
                if self._bytes + size <= MAX_CALL_BYTES:
                    self._bytes += size
                    call["returned"] = returned
            return value

        earlier_function.__name__ = earlier_function.__qualname__ = name
        return earlier_function


def read_answer(namespace: dict, case: dict) -> dict:
    """Read a question's answer variable ``case["function"]`` from ``namespace`` and describe it, as data.

    Returns
    -------
    dict
        ``{"status": "returned", "value": ..., "args_after": [], "warnings": []}`` (a ``set`` or ``frozenset``
        sent as a list of its members), or ``{"status": "missing", "message": ...}`` when the variable is not
        set (the answer cell still raises ``NotImplementedError``); both with empty ``"calls"``.
    """
    name = case["function"]
    missing = object()
    value = namespace.get(name, missing)
    if value is missing:
        result = {"status": "missing", "message": f"{name} is not set in the notebook"}
    else:
        def encode():  # within the time limit: encoding an ndarray subclass can run its code
            return wire.encode(list(value) if type(value) in (set, frozenset) else value)
        try:
            result = {"status": "returned", "value": call_learner(encode, seconds=float(case["seconds"])),
                      "args_after": [], "warnings": []}
        except FunctionTimedOut as timeout:
            result = {"status": "timeout", "message": str(timeout)}
        except BaseException as error:  # noqa: BLE001
            result = _describe_error(error, namespace)
    result.update(calls=[], calls_dropped=0)
    return result


def call_case(namespace: dict, case: dict, earlier=(), stand_ins: dict | None = None) -> dict:
    """Call one case's function from ``namespace`` and describe what happened, as data.

    Parameters
    ----------
    namespace : dict
        The notebook's global namespace.
    case : dict
        ``{"function": name, "args": [encoded...], "kwargs": {name: encoded}, "seconds": limit}``, and ``"cpu_time": true`` when the limit counts CPU time.
    earlier : sequence of str
        Names of the course functions graded in earlier steps; their calls are recorded or answered.
    stand_ins : dict, optional
        digest → ``{"value": encoded}`` or ``{"raises": {"type", "message"}}``: the stand-ins' answers
        (a later pass). Without it, calls of earlier functions are recorded and run as written.

    Returns
    -------
    dict
        ``{"status": "returned", "value": ..., "args_after": [...], "warnings": [...]}``,
        or ``{"status": "raised", "type": ..., "mro": [...], "message": ..., "where": ...}``,
        or ``{"status": "missing", "message": ...}``, or ``{"status": "incomplete"}`` (a stand-in had no
        value). Each also has ``"calls"`` (the recorded calls of earlier functions: in the first pass
        every call, with ``"returned"`` or ``"raised"``; in a later pass the calls without a value) and
        ``"calls_dropped"`` (calls over the recording limits); a later pass's also ``"answered"`` (the
        digests of the calls a stand-in answered, in order) and ``"answered_dropped"``. Values are encoded with
        :mod:`attention_lab.core.values`.
    """
    if case.get("reads"):
        return read_answer(namespace, case)
    name = case["function"]
    function = namespace.get(name)
    if not callable(function):
        return {"status": "missing", "message": f"there is no function named {name} in the notebook"}
    args = [wire.decode(a) for a in case["args"]]
    kwargs = {key: wire.decode(value) for key, value in case["kwargs"].items()}
    values = None if stand_ins is None else {digest: _stored(entry) for digest, entry in stand_ins.items()}
    earlier_functions = _EarlierFunctions(namespace, [n for n in earlier if n != name], values)

    def call_and_encode():
        value = function(*args, **kwargs)
        # encoded within the call's time limit, output discarded: encoding an ndarray subclass can run its code
        return wire.encode(value), [wire.read_back(a, sent) for a, sent in zip(args, case["args"])]

    caught = []
    try:
        with earlier_functions:
            encoded, after = call_learner(call_and_encode, seconds=float(case["seconds"]), record_warnings=caught,
                                              cpu_time=bool(case.get("cpu_time")))
        if values is not None and (earlier_functions.calls or earlier_functions.dropped):
            raise _NoStandInValue(name)  # the learner's code caught a stand-in's stop and went on
    except _NoStandInValue:
        result = {"status": "incomplete"}
    except FunctionTimedOut as timeout:
        result = {"status": "timeout", "message": str(timeout)}
    except BaseException as error:  # noqa: BLE001 — whatever it raises is a result, SystemExit and KeyboardInterrupt too
        result = _describe_error(error, namespace)
    else:
        notes = []
        for record in caught[:MAX_WARNINGS]:
            try:
                notes.append(f"{record.category.__name__}: {str(record.message)[:200]}")
            except BaseException:  # noqa: BLE001
                notes.append("a warning")
        result = {"status": "returned", "value": encoded, "args_after": after, "warnings": notes}
    result.update(calls=earlier_functions.calls, calls_dropped=earlier_functions.dropped)
    if values is not None:
        result.update(answered=earlier_functions.answered, answered_dropped=earlier_functions.answered_dropped)
    size = wire.size(result)
    if size > wire.MAX_BYTES:
        return {"status": "returned", "value": {"unsupported": f"a result of {size} bytes (far too large)"},
                "args_after": [None] * len(args), "warnings": [], "calls": [], "calls_dropped": 0}
    return result


def collect(namespace: dict, request: dict) -> dict:
    """Results of every case of one step's request, in order (``{"grade_id": ..., "results": [...]}``).

    A later pass's request (with ``"stand_ins"``) carries only some of the step's cases; each result
    then has the case's ``"index"`` in the step.

    Parameters
    ----------
    namespace : dict
        The notebook's global namespace.
    request : dict
        ``{"grade_id", "cases", "earlier"?, "stand_ins"?}`` as the grader packs it.

    Returns
    -------
    dict
        Each result as :func:`call_case` describes it.
    """
    earlier, stand_ins = request.get("earlier", ()), request.get("stand_ins")
    results = []
    for case in request["cases"]:
        result = call_case(namespace, case, earlier, stand_ins)
        if "index" in case:
            result["index"] = case["index"]
        results.append(result)
    return {"grade_id": request["grade_id"], "results": results}


def run(namespace: dict, payload: str) -> None:
    """Run a step's hidden cases in this kernel and publish the raw results for the grader.

    Parameters
    ----------
    namespace : dict
        The notebook's ``globals()``.
    payload : str
        The request, packed by the grader (:func:`attention_lab.core.values.pack`).
    """
    from IPython.display import publish_display_data

    results = collect(namespace, wire.unpack(payload))
    publish_display_data({MIME: results, "text/plain": f"{len(results['results'])} result(s) sent to the grader"})

