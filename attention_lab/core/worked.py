"""Worked cases for the visible self-checks: stored numbers, no reference code.

Each assignment's worked cases are small, hand-checkable inputs. Their
expected results, and the results each known mistake gives on them, are
stored as numbers in ``attention_lab/<folder>/worked_cases.json``
(written by ``python -m autograder worked-cases``; the grader's reference
never reaches the student package). :func:`check_worked_cases` runs a
learner's function on those inputs and, when a result is wrong, says in plain
words what differs, which known mistake gives the same numbers (with a hint
that points to the idea without giving code), or which property fails.

The stored values are in the readable JSON form of
:func:`attention_lab.core.values.encode_stored` (``encode`` and ``decode`` here).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.resources
import inspect
import io
import json
import linecache
import numbers
import textwrap
from typing import Callable

import numpy as np

from attention_lab.core import values
from attention_lab.core.calls import FunctionTimedOut, call_learner
from attention_lab.core.compare import as_number, describe

CALL_SECONDS = 5.0  # per call of a learner's function in a self-check; a correct answer takes milliseconds
FORMAT = 2  # version of the JSON layout written by autograder.grader.worked_cases (2: cases carry exact_dtype)


class SelfCheckFailed(AssertionError):
    """A visible self-check failed; the message explains what is wrong.

    In a notebook the message is all the learner sees: :meth:`_render_traceback_`
    is IPython's documented protocol for an exception's own traceback
    ("Integrating your objects with IPython", custom exception tracebacks), so
    no frame of this package (and no path of the machine it is installed on)
    comes before or after it — also in nbgrader's Validate report and in the
    feedback of a graded notebook, which show the same lines.
    """

    WIDTH = 80  # nbgrader's Validate (width 90, indent 4) cuts longer lines; notebooks wrap them anyway

    def _render_traceback_(self) -> list[str]:
        """The lines IPython shows instead of a traceback: the message, marked as a failed check, wrapped."""
        lines = (str(self) or "the self-check failed").splitlines()
        lines[0] = f"✗ {lines[0]}"
        rendered = []
        for line in lines:
            lead = line[: len(line) - len(line.lstrip())]
            rendered += textwrap.wrap(line, self.WIDTH, subsequent_indent=lead + "  ", break_on_hyphens=False) or [""]
        return rendered


# ---------------------------------------------------------------- the stored values
encode, decode = values.encode_stored, values.decode_stored  # the worked cases' form of values (see values)


# ---------------------------------------------------------------- showing values small
def _item_text(value) -> str:
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    text = f"{float(value):.4g}"
    return "0" if text == "-0" else text


def _nested(array: np.ndarray) -> str:
    if array.ndim == 0:
        return _item_text(array.item())
    return "[" + ", ".join(_nested(a) for a in array) + "]"


def show(value, limit: int = 300) -> str:
    """``value`` on one line and short, for messages; a learner's own objects only by their type.

    Arrays appear as nested lists with 4 significant digits (the dtype named
    unless float64, bool or int64), arrays of more than 60 entries by their
    shape and dtype only; text longer than ``limit`` characters is cut.

    Parameters
    ----------
    value : object
        Anything; a learner's own object is shown as ``<TypeName object>``, its ``__repr__`` never run.
    limit : int
        Longest text returned, in characters (a cut ends with "…").

    Returns
    -------
    str
        One line.
    """
    try:
        if isinstance(value, np.ndarray):
            array = np.asarray(value)
            if array.dtype.kind not in "biuf":
                text = f"an array of dtype {array.dtype} and shape {array.shape}"
            elif array.size > 60:
                text = f"an array of shape {array.shape} and dtype {array.dtype}"
            else:
                text = _nested(array) + ("" if array.dtype.name in {"float64", "bool", "int64"}
                                         else f" ({array.dtype.name})")
        elif isinstance(value, tuple):
            text = "(" + ", ".join(show(v, limit) for v in value) + ("," if len(value) == 1 else "") + ")"
        elif isinstance(value, (float, np.floating)):
            text = _item_text(value)
        elif value is None or isinstance(value, (bool, int, str, np.generic)):
            text = repr(value)
        else:
            text = f"<{type(value).__name__} object>"  # never run a learner's object's own repr
    except Exception:  # noqa: BLE001 — an unusual value is still shown by its type
        text = f"<{type(value).__name__} object>"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _type_name(value) -> str:
    return "an array" if isinstance(value, np.ndarray) else f"{type(value).__name__}"


# ---------------------------------------------------------------- comparing a result with the expected one
def _where(flags: np.ndarray, limit: int = 4) -> str:
    """Index positions of the True entries of ``flags``, for messages ("at (0, 1), (0, 2)")."""
    positions = [tuple(int(i) for i in p) for p in np.argwhere(flags)[:limit]]
    text = ", ".join(str(p[0]) if len(p) == 1 else str(p) for p in positions)
    more = int(flags.sum()) - len(positions)
    return f"at {text}" + (f" and {more} more" if more > 0 else "")


def _number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _array_difference(got, want: np.ndarray, rtol: float, atol: float, name: str,
                      exact_dtype: bool = False) -> str | None:
    if not isinstance(got, np.ndarray):
        return f"wrong type for {name}: expected a NumPy array, got {_type_name(got)}"
    if type(got) is not np.ndarray:  # as the grader (autograder.grader.comparison): a masked array, a matrix
        return f"wrong type for {name}: expected a plain NumPy array, got {describe(got)}"
    if got.shape != want.shape:
        message = f"wrong shape for {name}: expected {want.shape}, got {got.shape}"
        swapped = want.shape[:-2] + want.shape[:-3:-1] if want.ndim >= 2 else None
        if got.shape == swapped and want.shape[-1] != want.shape[-2]:
            message += " (the expected shape with its last two axes swapped: are rows and columns exchanged?)"
        return message
    kinds = {"b": ("b", "a boolean"), "f": ("f", "a floating-point"), "i": ("iu", "an integer"),
             "u": ("iu", "an integer")}
    allowed, words = kinds[want.dtype.kind]
    if got.dtype.kind not in allowed:
        return f"wrong dtype for {name}: expected {words} array, got dtype {got.dtype}"
    if exact_dtype and got.dtype != want.dtype:
        return f"wrong dtype for {name}: expected {want.dtype}, the dtype of the input, got {got.dtype}"
    if want.dtype.kind != "f":
        wrong = got != want
        return f"wrong entries in {name} {_where(wrong)}" if wrong.any() else None
    finite = np.isfinite(want)
    if np.any(finite & ~np.isfinite(got)):
        return f"NaN or inf in {name} {_where(finite & ~np.isfinite(got))}, where finite numbers are expected"
    special_wrong = ~finite & ~((np.isnan(want) & np.isnan(got)) | (want == got))
    if special_wrong.any():
        return f"wrong values in {name}: expected NaN or inf {_where(special_wrong)}"
    with np.errstate(all="ignore"):
        far = np.isfinite(want) & ~(np.abs(got.astype(np.float64) - want) <= atol + rtol * np.abs(want))
    if far.any():
        largest = float(np.max(np.abs(got.astype(np.float64) - want)[far]))
        return f"wrong values in {name} {_where(far)} (largest difference {largest:.4g})"
    return None


def describe_difference(got, want, *, rtol: float = 1e-4, atol: float = 1e-6, name: str = "the result",
                        exact_dtype: bool = False) -> str | None:
    """The first way ``got`` differs from ``want``, in plain words, or None when they agree.

    Checks the type, then the structure (tuple length), shape, dtype kind,
    finiteness and values, in that order, so the message names the most basic
    difference. Never calls ``got``'s own ``==`` on non-NumPy objects.

    Parameters
    ----------
    got : object
        What a learner's function returned.
    want : object
        The expected value (as decoded from a worked case).
    rtol, atol : float
        Tolerances for floating-point values, as in :func:`numpy.allclose`.
    name : str, or tuple of str for tuple results
        How the value is called in the message ("the weights").
    exact_dtype : bool
        Arrays must have exactly the expected dtype (float16 in, float16 out),
        not only the same kind.

    Returns
    -------
    str or None
    """
    names = name if isinstance(name, tuple) else None
    if isinstance(want, tuple):
        names = names if names and len(names) == len(want) else tuple(f"item {i} of {name}" for i in range(len(want)))
        if not isinstance(got, (tuple, list)):
            return f"wrong type: expected a tuple ({', '.join(names)}), got {_type_name(got)}"
        if len(got) != len(want):
            return f"wrong number of values: expected a tuple of {len(want)} ({', '.join(names)}), got {len(got)}"
        for item, expected, item_name in zip(got, want, names):
            difference = describe_difference(item, expected, rtol=rtol, atol=atol, name=item_name,
                                             exact_dtype=exact_dtype)
            if difference:
                return difference
        return None
    name = names[0] if names else name
    if isinstance(want, np.ndarray):
        return _array_difference(got, want, rtol, atol, name, exact_dtype)
    if isinstance(want, (bool, np.bool_)):
        if not isinstance(got, (bool, np.bool_)):
            return f"wrong type for {name}: expected a boolean, got {_type_name(got)}"
        return None if bool(got) == bool(want) else f"wrong value for {name}: expected {bool(want)}, got {bool(got)}"
    if _number(want):
        got = as_number(got)
        if not _number(got):
            return f"wrong type for {name}: expected a number, got {_type_name(got)}"
        return _array_difference(np.asarray(float(got)), np.asarray(float(want)), rtol, atol, name)
    if isinstance(want, list):
        if not isinstance(got, (list, tuple)) or len(got) != len(want):
            return f"wrong type for {name}: expected a list of {len(want)} values, got {_type_name(got)}"
        for index, (item, expected) in enumerate(zip(got, want)):
            difference = describe_difference(item, expected, rtol=rtol, atol=atol, name=f"item {index} of {name}")
            if difference:
                return difference
        return None
    if type(got) is not type(want) or got != want:
        return f"wrong value for {name}: expected {show(want)}, got {show(got)}"
    return None


def failing_properties(got, want, *, rtol: float = 1e-4, atol: float = 1e-6) -> list[str]:
    """Plain-words properties of ``want`` that ``got`` breaks, for a wrong result that matches no known mistake.

    Looks at the first array in ``got`` that differs from ``want`` (with equal
    shapes): whether the result is the expected one times a constant k; whether
    rows that should sum to 1 do not (or the columns do instead); whether a
    future position (key j > query i) has weight or is allowed; whether
    entries that should be exactly 0 are not.

    Parameters
    ----------
    got : object
        What the learner's function returned.
    want : object
        The expected value: an array, or a tuple of them.
    rtol, atol : float
        Tolerances, as for :func:`describe_difference`.

    Returns
    -------
    list of str
        Empty when none of these describes the difference.
    """
    if isinstance(want, tuple) and isinstance(got, (tuple, list)) and len(got) == len(want):
        for item, expected in zip(got, want):
            if describe_difference(item, expected, rtol=rtol, atol=atol) is not None:
                return failing_properties(item, expected, rtol=rtol, atol=atol)
        return []
    if not (isinstance(want, np.ndarray) and isinstance(got, np.ndarray) and got.shape == want.shape
            and want.size and got.dtype.kind in "biuf"):
        return []
    got = np.asarray(got)
    found = []
    if want.dtype.kind == "b":
        if want.ndim >= 2 and want.shape[-1] == want.shape[-2] >= 2:
            future = np.triu(np.ones(want.shape[-2:], dtype=bool), 1)
            if not want[..., future].any() and got[..., future].any():
                found.append("a future position is allowed (key j > query i) " + _where(got & future))
            if want[..., ~future].all() and not got[..., np.eye(want.shape[-1], dtype=bool)].all():
                found.append("a position may not attend to itself (False on the diagonal)")
        return found
    with np.errstate(all="ignore"):
        got = got.astype(np.float64)
        if not (np.all(np.isfinite(got)) and np.all(np.isfinite(want))):
            return found
        close = lambda a, b: bool(np.allclose(a, b, rtol=rtol, atol=atol))  # noqa: E731
        norm = float(np.sum(want * want))
        k = float(np.sum(got * want)) / norm if norm > 0 else 0.0
        if norm > 0 and not close(k, 1.0) and close(got, k * want):
            found.append(f"the result is the expected one times a constant k ≈ {k:.4g}"
                         + (" (the sign is flipped)" if close(k, -1.0) else "")
                         + (" — all zeros" if close(k, 0.0) else ""))
        probabilities = want.ndim >= 1 and bool(np.all(want >= 0))
        along = [axis for axis in range(want.ndim) if probabilities and close(want.sum(axis=axis), 1.0)]
        for axis in along:
            if close(got.sum(axis=axis), 1.0):
                continue
            instead = [b for b in range(got.ndim) if b not in along and close(got.sum(axis=b), 1.0)]
            rows = "rows" if axis == want.ndim - 1 else f"the values along axis {axis}"
            if instead:
                found.append(f"{'the rows' if instead[0] == got.ndim - 1 else f'the values along axis {instead[0]}'}"
                             f" sum to 1 instead of {rows}: normalised along the wrong axis")
            else:
                found.append(f"{rows} don't sum to 1 (sums {show(np.round(got.sum(axis=axis), 4))})")
            break
        if along and np.any(got < -atol):
            found.append("some values are negative, where probabilities are expected")
        zero = (want == 0) & (np.abs(got) > atol)
        if want.ndim >= 2 and want.shape[-1] == want.shape[-2] >= 2:
            future = np.triu(np.ones(want.shape[-2:], dtype=bool), 1)
            if np.all(want[..., future] == 0) and np.any(zero[..., future]):
                found.append("a future position has weight (key j > query i) " + _where(zero & future))
                zero = zero & ~future
        if zero.any():
            found.append("entries that should be exactly 0 are not, " + _where(zero))
    return found


# ---------------------------------------------------------------- exceptions raised by a learner's function
# (an untouched answer and a time-out get their own words in describe_failure)
_EXCEPTION_HINTS = (
    ("could not be broadcast", "keep the axis you reduce over (keepdims=True) so that the shapes line up"),
    ("core dimension", "check the shapes you multiply: (..., n, k) @ (..., k, m); to transpose a batch of "
                       "matrices, transpose only the last two axes (np.swapaxes(a, -1, -2); a.T reverses all of them)"),
    ("shapes", "check the shapes you combine: (..., n, k) @ (..., k, m) for a matrix product"),
    ("is not defined", "run the cell that defines it first"),
)


def describe_exception(error: BaseException) -> str:
    """``"ValueError: message — hint"``: an exception from a learner's function, with a hint where one is known.

    An exception without a message is named by its type alone (``"ValueError"``),
    with no colon and no dash unless a hint follows.

    Parameters
    ----------
    error : BaseException
        What the learner's function raised.

    Returns
    -------
    str
        One line; the message is the exception's own ``str``.
    """
    message = str(error).strip()
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    hint = next((h for key, h in _EXCEPTION_HINTS if key in text), None)
    return text + (f" — {hint}" if hint else "")


def _innermost_learner_frame(function: Callable, error: BaseException):
    """The innermost traceback entry that runs code of the learner's notebook (where ``function`` was defined)."""
    namespace = getattr(function, "__globals__", None)
    found, tb = None, error.__traceback__
    while tb is not None:
        if namespace is not None and tb.tb_frame.f_globals is namespace:
            found = tb
        tb = tb.tb_next
    return found


def _raised_in(function: Callable, error: BaseException) -> str | None:
    """The other function of the learner's notebook that raised ``error`` inside ``function``, if any."""
    tb = _innermost_learner_frame(function, error)
    inner = tb.tb_frame.f_code.co_name if tb is not None else None
    return None if inner is None or inner.startswith("<") or inner == getattr(function, "__name__", None) else inner


def _line_of(tb) -> str:
    """``"line 3 of your softmax: return e / e.sum()"`` for one traceback entry of a learner's cell."""
    code = tb.tb_frame.f_code
    text = linecache.getline(code.co_filename, tb.tb_lineno).strip()
    return f"line {tb.tb_lineno} of your {code.co_name}" + (f": {text}" if text else "")


def describe_failure(function: Callable, error: BaseException, seconds: float = CALL_SECONDS,
                     indent: str = "  ") -> str:
    """What went wrong when a self-check called a learner's function, in plain words.

    An untouched answer (``raise NotImplementedError()``) is "not answered
    yet" — this function, or another function of the notebook it calls; a
    time-out names the limit; any other exception is named with its message
    (see :func:`describe_exception`), the other function of the notebook it
    came from, and the line of the learner's code that raised it.

    Parameters
    ----------
    function : callable
        The learner's function the self-check called.
    error : BaseException
        What the call raised.
    seconds : float
        The call's time limit, for the message of a time-out.
    indent : str
        Put before the second line (the line of the learner's code).

    Returns
    -------
    str
        One line, or two when the line of the learner's code is known.
    """
    name = getattr(function, "__name__", "your function")
    if isinstance(error, FunctionTimedOut):
        return f"{name} did not finish within {seconds:g} s — look for a loop that never ends"
    inner = _raised_in(function, error)
    if is_a(error, "NotImplementedError"):
        note = f" ({type(error).__name__}: {str(error).strip()})" if str(error).strip() else ""
        if inner is None:
            return (f"{name} is not answered yet{note}: write its code in place of `raise NotImplementedError()` "
                    "and run its cell again")
        return f"{name} calls {inner}, which is not answered yet{note}: answer {inner} first, then run this check again"
    text = describe_exception(error)
    if inner:  # "ValueError in softmax: message — hint"
        text = f"{type(error).__name__} in {inner}{text[len(type(error).__name__):]}"
    tb = _innermost_learner_frame(function, error)
    return f"{name} raised {text}" + (f"\n{indent}at {_line_of(tb)}" if tb is not None else "")


def changed_arguments(function: Callable, originals: tuple, used: tuple, kwargs: dict | None = None,
                      used_kwargs: dict | None = None, names: list[str] | None = None) -> list[str]:
    """Names of the array arguments a call changed in place (``used`` were passed, ``originals`` are copies).

    Parameters
    ----------
    function : callable
        The learner's function (its signature names the positional arguments).
    originals, used : tuple
        Untouched copies of the positional arguments, and the ones the function received.
    kwargs, used_kwargs : dict, optional
        The same for keyword arguments.
    names : list of str, optional
        Names of the positional arguments, when known better than from the signature.

    Returns
    -------
    list of str
        ``"x"``, ``"mask"``, ... (``"argument 3"`` only when the signature gives no name).
    """
    if names is None:
        try:
            names = [p.name for p in inspect.signature(function).parameters.values()
                     if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            names = []
    pairs = [(names[i] if i < len(names) else f"argument {i + 1}", a, b) for i, (a, b) in enumerate(zip(originals, used))]
    pairs += [(key, (kwargs or {})[key], (used_kwargs or {})[key]) for key in (kwargs or {})]
    changed = []
    for name, original, now in pairs:
        if isinstance(original, np.ndarray) and not (
                isinstance(now, np.ndarray) and now.shape == original.shape
                and np.array_equal(now, original, equal_nan=original.dtype.kind in "fc")):
            changed.append(name)
    return changed


def in_place_message(function_name: str, changed: list[str]) -> str:
    """The failure for a call that changed its inputs: names the arguments.

    Parameters
    ----------
    function_name : str
        The learner's function, as messages name it.
    changed : list of str
        The arguments it modified, as :func:`changed_arguments` names them (at least one).

    Returns
    -------
    str
    """
    what = " and ".join(changed)
    return (f"{function_name} modified its argument{'s' * (len(changed) > 1)} {what} in place; compute a new array "
            f"instead and leave {what} as {'they were' if len(changed) > 1 else 'it was'} (the caller still needs "
            f"{'them' if len(changed) > 1 else 'it'})")


def is_a(error: BaseException, class_name: str) -> bool:
    """Whether ``error`` is an instance of a class named ``class_name`` (or of a subclass of one).

    By name, because the worked cases store the exceptions a case or a known
    mistake raises as names (``"ValueError"``).

    Parameters
    ----------
    error : BaseException
    class_name : str
        ``"NotImplementedError"``, ``"ValueError"``, ...

    Returns
    -------
    bool
    """
    return any(cls.__name__ == class_name for cls in type(error).__mro__)


# ---------------------------------------------------------------- the stored cases
STORED = "worked_cases.json"  #: each assignment folder's file (``attention_lab/aNN_<topic>/worked_cases.json``)


@functools.lru_cache(maxsize=None)
def _stored_files() -> dict[str, str]:
    """Assignment id → the text of its stored worked cases, for every assignment folder of the package."""
    found = {}
    for folder in sorted(importlib.resources.files("attention_lab").iterdir(), key=lambda f: f.name):
        resource = folder / STORED
        if folder.is_dir() and resource.is_file():
            text = resource.read_text(encoding="utf-8")
            found[json.loads(text)["assignment"]] = text
    return found


def _stored(assignment_name: str) -> str:
    try:
        return _stored_files()[assignment_name]
    except KeyError:
        raise FileNotFoundError(
            f"no worked cases for assignment {assignment_name!r} in the attention_lab package (no "
            f"attention_lab/<folder>/{STORED} names it); the course maintainers create them with "
            "`python -m autograder worked-cases`") from None


def course_functions() -> tuple[str, ...]:
    """Every function learners write in the course, as the stored worked cases list them (sorted).

    Derived from the assignment specs when the worked cases are generated, so the student package
    knows the course's functions without importing the grader.
    """
    return tuple(sorted({name for text in _stored_files().values() for name in json.loads(text).get("functions", ())}))


def worked_cases(assignment_name: str, function_name: str | None = None) -> list[dict]:
    """The stored worked cases of an assignment (of one function, if named), as read from the package.

    Each case is a dict with ``function``, ``description``, ``arg_names``,
    ``args``, ``kwargs``, ``outputs``, ``rtol``, ``atol``, ``raises``,
    ``no_warnings``, ``exact_dtype``, ``expected`` and ``mistakes`` (values still encoded; see
    :func:`decode`).

    Parameters
    ----------
    assignment_name : str
        The assignment id the stored file names ("01_scaled_dot_product_attention").
    function_name : str, optional
        Only this function's cases.

    Returns
    -------
    list of dict
        In the stored order.

    Raises
    ------
    FileNotFoundError
        If the package holds no worked cases for the assignment.
    ValueError
        If the stored file has another format version than :data:`FORMAT`.
    """
    data = _parsed(_stored(assignment_name))
    if data.get("format") != FORMAT:
        raise ValueError(f"worked cases of {assignment_name} have format {data.get('format')!r}, expected {FORMAT}")
    # fresh containers on every call, as json.loads gave them: a caller may change the cases it was handed
    return [_fresh(case) for case in data["cases"] if function_name is None or case["function"] == function_name]


@functools.lru_cache(maxsize=16)
def _parsed(text: str) -> dict:
    """``json.loads(text)``, once per stored file's text (every self-check cell reads its assignment's cases; a
    model's stored arrays make that file tens of kilobytes). Never handed out: :func:`worked_cases` copies it."""
    return json.loads(text)


def _fresh(data):
    """A copy of parsed JSON data with new dicts and lists (strings, numbers, booleans and None are immutable)."""
    if isinstance(data, dict):
        return {key: _fresh(value) for key, value in data.items()}
    if isinstance(data, list):
        return [_fresh(item) for item in data]
    return data


# ---------------------------------------------------------------- running a learner's function on a case
def _run_case(function: Callable, case: dict, seconds: float):
    """``(result, error, warned, changed)`` of the learner's function on fresh copies of the case's inputs.

    ``changed`` names the array arguments the function modified in place.
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    args = decode(case["args"])
    kwargs = {k: decode(v) for k, v in case["kwargs"].items()}
    # a spec that forbids warnings (overflow, 0/0, log 0) has them recorded; otherwise they are silenced
    caught = [] if case["no_warnings"] else None
    try:
        result = call_learner(function, *args, seconds=seconds, record_warnings=caught, **kwargs)
    except Exception as error:  # noqa: BLE001 — any failure of learners' code becomes a message
        return None, error, [], []
    changed = changed_arguments(function, decode(case["args"]), args,
                                {k: decode(v) for k, v in case["kwargs"].items()}, kwargs, names=case["arg_names"])
    return result, None, [str(w.message) for w in caught or ()], changed


def _call_text(case: dict) -> str:
    args = decode(case["args"])
    names = case["arg_names"]
    parts = [f"{names[i]}={show(a, 120)}" if i < len(names) else show(a, 120) for i, a in enumerate(args)]
    parts += [f"{k}={show(decode(v), 120)}" for k, v in case["kwargs"].items()]
    return f"{case['function']}({', '.join(parts)})"


def _known_mistakes(case: dict, result, error) -> list[dict]:
    """The stored mistakes whose result on this case matches the learner's result (or exception)."""
    matches = []
    for mistake in case["mistakes"]:
        if "raises" in mistake:
            if error is not None and is_a(error, mistake["raises"]):
                matches.append(mistake)
        elif error is None and describe_difference(result, decode(mistake["result"]), rtol=case["rtol"],
                                                   atol=case["atol"], exact_dtype=case["exact_dtype"]) is None:
            matches.append(mistake)
    # a mistake made in the checked function itself comes first
    return sorted(matches, key=lambda m: case["function"] not in m.get("functions", m["cells"]))


def _mistake_text(case: dict, matches: list[dict]) -> str:
    lines = []
    for mistake in matches:
        defined = mistake.get("functions") or mistake["cells"]
        where = "" if case["function"] in defined else \
            f" (usually made in {', '.join(defined)}, which {case['function']} uses)"
        lines.append(f"This looks like a known mistake{where}: {mistake['description']}. Hint: {mistake['hint']}")
    return "\n".join(lines)


_NOTHING = object()  # no result to show (the function raised)


def _failure(case: dict, problem: str, details: list[str], received=_NOTHING) -> SelfCheckFailed:
    expected = decode(case["expected"]) if case["expected"] is not None else None
    lines = [f"{case['function']} fails the worked case \"{case['description']}\":",
             f"  call:     {_call_text(case)}"]
    if case["raises"] is None:
        lines.append(f"  expected: {show(expected)}")
    if received is not _NOTHING:
        lines.append(f"  received: {show(received)}")
    lines.append(f"  problem:  {problem}")
    lines += details
    return SelfCheckFailed("\n".join(lines))


def check_one_case(case: dict, function: Callable, seconds: float | None = None) -> None:
    """Run ``function`` on one stored worked case; raise :class:`SelfCheckFailed` with a plain-words message if wrong.

    Parameters
    ----------
    case : dict
        One of :func:`worked_cases`.
    function : callable
        The learner's function, called on fresh copies of the case's inputs.
    seconds : float, optional
        Time limit for the call (default :data:`CALL_SECONDS`).

    Raises
    ------
    SelfCheckFailed
        If the result differs from the stored expected result (or the function
        raises, warns on a ``no_warnings`` case, or returns where it must raise).
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    seconds = CALL_SECONDS if seconds is None else seconds
    result, error, warned, changed = _run_case(function, case, seconds)
    name = case["function"]
    if error is not None and is_a(error, "NotImplementedError"):  # this function, or one it calls, is a stub
        raise SelfCheckFailed(describe_failure(function, error, seconds))
    if changed:
        raise _failure(case, in_place_message(name, changed), [])
    if case["raises"] is not None:
        if error is not None and is_a(error, case["raises"]):
            return
        problem = (f"{name} should raise {case['raises']} on these inputs, but it raised "
                   f"{describe_failure(function, error, seconds, ' ' * 12).removeprefix(name + ' raised ')}"
                   if error is not None else
                   f"{name} should raise {case['raises']} on these inputs, but it returned {show(result)}")
        matches = _known_mistakes(case, result, error)
        raise _failure(case, problem, [_mistake_text(case, matches)] if matches else [])
    if error is not None:
        matches = _known_mistakes(case, None, error)
        raise _failure(case, describe_failure(function, error, seconds, indent=" " * 12),
                       [_mistake_text(case, matches)] if matches else [])
    expected = decode(case["expected"])
    outputs = tuple(case["outputs"])
    difference = describe_difference(result, expected, rtol=case["rtol"], atol=case["atol"],
                                     name=outputs if len(outputs) > 1 else outputs[0],
                                     exact_dtype=case["exact_dtype"])
    if difference is None:
        if case["no_warnings"] and warned:
            raise _failure(case, f"{name} returned the right result but warned: {warned[0]}", [
                "  these inputs should give a clean result without any warning (for example no overflow in exp)"])
        return
    matches = _known_mistakes(case, result, None)
    if matches:
        details = [_mistake_text(case, matches)]
    else:
        details = [f"  - {p}" for p in failing_properties(result, expected, rtol=case["rtol"], atol=case["atol"])]
    raise _failure(case, difference, details, received=result)


def check_worked_cases(assignment_name: str, function_name: str, function: Callable, *,
                       seconds: float | None = None, select: Callable[[dict], bool] | None = None) -> None:
    """Run a learner's function on the assignment's worked cases for it; print one ✓ line when all pass.

    The function is called on fresh copies of each case's inputs, quietly
    (its prints and warnings are discarded) and with a time limit per call.

    Parameters
    ----------
    assignment_name : str
        The assignment's folder name ("01_scaled_dot_product_attention").
    function_name : str
        The name of the function in the assignment ("softmax").
    function : callable
        The learner's function.
    seconds : float, optional
        Time limit per call (default :data:`CALL_SECONDS`).
    select : callable, optional
        ``select(case) -> bool`` keeps only some of the function's cases (a
        step that checks one feature of the function, e.g. ``scale=False``).

    Raises
    ------
    SelfCheckFailed (an AssertionError)
        At the first worked case the function gets wrong: the message shows
        the case's inputs, what was expected and what was received, and
        either names a known mistake that gives the same result, with a hint,
        or lists the properties the result breaks.
    LookupError
        If the assignment has no worked cases for ``function_name``.
    FileNotFoundError
        If the package holds no worked cases for the assignment.
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    cases = [case for case in worked_cases(assignment_name, function_name) if select is None or select(case)]
    if not cases:
        raise LookupError(f"assignment {assignment_name} has no worked cases for {function_name}")
    for case in cases:
        check_one_case(case, function, seconds)
    print(f"✓ {function_name} gives the expected result on {len(cases)} worked case{'s' * (len(cases) != 1)}")


def passes_worked_cases(assignment_name: str, function_name: str, function: Callable) -> bool:
    """Whether a learner's function passes its worked cases, found out silently (no ✓ line, no failure).

    For a self-check whose extra test needs another of the learner's
    functions to work (that function's own check reports what is wrong).

    Parameters
    ----------
    assignment_name, function_name : str
        As for :func:`check_worked_cases`.
    function : callable
        The learner's function.

    Returns
    -------
    bool
        False also when the worked cases cannot be run at all.
    """
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            check_worked_cases(assignment_name, function_name, function)
    except Exception:  # noqa: BLE001 — any failure (a SelfCheckFailed, no cases) means "does not pass"
        return False
    return True
