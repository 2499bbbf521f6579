"""The machinery behind hidden tests: run a learner's function, compare, score.

A hidden-test cell hands the learner's function and some hidden inputs to a
grading function (see ``autograder.assignment1``). That function builds a list
of :class:`Check` objects, and :func:`run_checks` runs each one, prints one line
per check in plain words and returns the partial credit as a plain Python
``float`` (nbgrader parses the cell's output as the score; a NumPy scalar
would print as ``np.float64(...)`` under NumPy 2 and be misread as full marks).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable

import numpy as np

from attention_lab.learner_calls import FunctionTimedOut, call_learner


class CheckFailed(AssertionError):
    """A learner's result is wrong; the message says how, in plain words."""


@dataclass(frozen=True)
class Check:
    """One graded property of a learner's function.

    Attributes
    ----------
    description : str
        What is checked, shown to the learner ("matches the reference on ...").
    run : callable
        Called with no arguments; raises :class:`CheckFailed` when the
        learner's result is wrong. Any other exception the learner's code
        raises is reported as such.
    weight : float
        Relative share of the cell's points.
    """

    description: str
    run: Callable[[], None]
    weight: float = 1.0


def run_checks(title: str, checks: list[Check], points: float) -> float:
    """Run ``checks``, print a report and return the score in ``[0, points]``.

    Parameters
    ----------
    title : str
        Name of the step, printed as the report's heading.
    checks : list of Check
        Non-empty; their weights set each check's share of ``points``.
    points : float
        The cell's points in nbgrader metadata.

    Returns
    -------
    float
        ``points × (weight passed / total weight)``, rounded to 4 decimals,
        as a built-in ``float``.
    """
    total = sum(check.weight for check in checks)
    earned = 0.0
    lines = []
    for check in checks:
        try:
            # The learner may have called np.seterr(all="raise"); the comparison must not depend on it.
            with np.errstate(all="ignore"):
                check.run()
        except CheckFailed as failure:
            lines.append(f"  ✗ {check.description}: {failure}")
        except Exception as error:  # the learner's code raised: report it, keep grading
            lines.append(f"  ✗ {check.description}: your function raised {type(error).__name__}: {error}")
        else:
            earned += check.weight
            lines.append(f"  ✓ {check.description}")
    score = round(float(points) * earned / total, 4)
    print(f"{title}: {score:g} / {float(points):g} points")
    print("\n".join(lines))
    return float(score)


CALL_SECONDS = 3.0  # per call of a learner's function; correct code takes milliseconds on the hidden inputs


def call_quietly(function: Callable, *args, **kwargs):
    """Call a learner's function quietly, for at most :data:`CALL_SECONDS` (see ``call_learner``).

    Raises
    ------
    CheckFailed
        If the function runs longer than :data:`CALL_SECONDS`.
    """
    try:
        return call_learner(function, *args, seconds=CALL_SECONDS, **kwargs)
    except FunctionTimedOut as timeout:
        raise CheckFailed(f"your function {timeout}") from None


@contextlib.contextmanager
def using_reference_pieces(function: Callable, pieces: dict[str, Callable]):
    """Temporarily replace names in a learner function's globals with reference pieces.

    Grading each step on its own: when ``scaled_dot_product_attention`` calls
    the learner's ``softmax``, a mistake in ``softmax`` would be charged twice.
    While this context is active the notebook's ``softmax`` (and the other
    names in ``pieces``) are the reference ones; afterwards the learner's
    definitions are restored.
    """
    namespace = getattr(function, "__globals__", None)
    if namespace is None:
        yield
        return
    missing = object()
    saved = {name: namespace.get(name, missing) for name in pieces}
    namespace.update(pieces)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is missing:
                namespace.pop(name, None)
            else:
                namespace[name] = value


def describe(array) -> str:
    """Short description of a value for messages: type, shape and dtype."""
    if type(array) is np.ndarray:
        return f"an array of shape {array.shape} and dtype {array.dtype}"
    if isinstance(array, np.ndarray):
        return (f"a {type(array).__module__}.{type(array).__name__} (a subclass of numpy.ndarray; "
                f"return a plain array, e.g. with np.asarray)")
    return f"a {type(array).__name__}"


def expect_array(
    what: str,
    got,
    expected: np.ndarray,
    *,
    rtol: float = 1e-4,
    atol: float = 1e-6,
    kind: str = "f",
) -> None:
    """Compare a learner's array with the expected one; raise :class:`CheckFailed` if it differs.

    The order of checks is type, shape, dtype, finiteness, values, so the
    message names the first thing that is wrong. Tolerances accept float32
    arithmetic (relative error up to about 1e-4) while every known mistake
    on the hidden inputs is off by far more.

    Parameters
    ----------
    what : str
        Name of the result in messages ("the weights").
    got : object
        The learner's result.
    expected : numpy.ndarray
        The reference result.
    rtol, atol : float
        Tolerances as in :func:`numpy.allclose`.
    kind : {"f", "b"}
        Required dtype kind: floating point or boolean.
    """
    if type(got) is not np.ndarray:
        raise CheckFailed(f"{what} should be a NumPy array (numpy.ndarray), but it is {describe(got)}")
    if got.shape != expected.shape:
        raise CheckFailed(f"{what} should have shape {expected.shape}, but it has shape {got.shape}")
    if kind == "b" and got.dtype != np.bool_:
        raise CheckFailed(f"{what} should have dtype bool (True/False), but it has dtype {got.dtype}")
    if kind == "f" and got.dtype.kind != "f":
        raise CheckFailed(f"{what} should be floating point, but it has dtype {got.dtype}")
    if kind == "b":
        wrong = np.argwhere(got != expected)
        if wrong.size:
            first = tuple(int(i) for i in wrong[0])
            raise CheckFailed(
                f"{len(wrong)} of the {got.size} entries of {what} are wrong, "
                f"first at index {first}: got {bool(got[first])}, expected {bool(expected[first])}"
            )
        return
    finite = np.isfinite(got)
    if not finite.all():
        first = tuple(int(i) for i in np.argwhere(~finite)[0])
        raise CheckFailed(
            f"{int((~finite).sum())} value(s) of {what} are NaN or infinite, first at index {first} "
            f"({got[first]}); a correct result is finite everywhere"
        )
    with np.errstate(all="ignore"):
        close = np.isclose(got, expected, rtol=rtol, atol=atol)
    if not close.all():
        first = tuple(int(i) for i in np.argwhere(~close)[0])
        raise CheckFailed(
            f"{int((~close).sum())} of the {got.size} values of {what} are wrong, "
            f"first at index {first}: got {float(got[first]):.6g}"
        )


def expect_unchanged(what: str, before: np.ndarray, after: np.ndarray) -> None:
    """Raise :class:`CheckFailed` if a learner's function modified an input array in place."""
    if not np.array_equal(before, after, equal_nan=True):
        raise CheckFailed(f"your function modified its input {what} in place; work on a copy instead")


def expect_pair(what: str, got) -> tuple:
    """Check that a learner's function returned a pair ``(output, weights)`` (a tuple, or a list of two)."""
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        raise CheckFailed(f"{what} should return a tuple (output, weights), but it returned {describe(got)}")
    return tuple(got)
