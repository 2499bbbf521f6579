"""Comparing one learner array with the expected one, with a message in plain words.

Used by the grader (:mod:`autograder.grader.comparison`) in its own process. The
message names the first thing that is wrong — type, shape, dtype,
finiteness, values — and shows only the learner's values, never the
expected ones.
"""

from __future__ import annotations

import numpy as np


class CheckFailed(AssertionError):
    """A learner's result is wrong; the message says how, in plain words."""


def describe(array) -> str:
    """Short description of a value for messages: type, shape and dtype.

    Parameters
    ----------
    array : object
        A learner's result; only its type (and, for an array, shape and dtype) is looked at.

    Returns
    -------
    str
        ``"an array of shape (2, 3) and dtype float64"``, or the type's name.
    """
    if type(array) is np.ndarray:
        return f"an array of shape {array.shape} and dtype {array.dtype}"
    if isinstance(array, np.ndarray):
        return f"a {subclass_name(array)} (a subclass of numpy.ndarray; return a plain array, e.g. with np.asarray)"
    return f"a {type(array).__name__}"


def subclass_name(value) -> str:
    """The full name of ``value``'s class, as messages about ``ndarray`` subclasses give it.

    Parameters
    ----------
    value : object
        Typically a ``numpy.ndarray`` subclass instance (a masked array, a matrix).

    Returns
    -------
    str
        ``"numpy.ma.core.MaskedArray"``: the class's module and qualified name.
    """
    return f"{type(value).__module__}.{type(value).__qualname__}"


def is_number(value) -> bool:
    """Whether ``value`` is one real number: a Python or NumPy integer or float, not a boolean.

    Parameters
    ----------
    value : object
        A learner's result (after :func:`as_number`, a 0-d array counts).

    Returns
    -------
    bool
    """
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def as_number(value):
    """``value``, or its number when it is a 0-d NumPy array of integers or floats.

    ``np.abs(x).max()``, ``np.where(c, a, b)`` on scalars and ``np.asarray(number)`` give a 0-d array where a
    number is asked for; it holds one number, so the checks and the grader take it as that number.

    Parameters
    ----------
    value : object
        A learner's result.

    Returns
    -------
    object
        ``value[()]`` (a NumPy integer or float) for a plain 0-d array of kind ``i``, ``u`` or ``f``;
        otherwise ``value`` itself (a 0-d array of booleans, complex numbers or objects stays an array).
    """
    if type(value) is np.ndarray and value.ndim == 0 and value.dtype.kind in "iuf":
        return value[()]
    return value


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

    Raises
    ------
    CheckFailed
        Naming the first of type, shape, dtype, finiteness and values that is wrong, with the learner's
        value at the first wrong index (never the expected one).
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
            # the learner's value is not shown: at a hidden input it may echo that input (issue 12: a06's diag(p))
            raise CheckFailed(f"{len(wrong)} of the {got.size} entries of {what} are wrong, first at index {first}")
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
        raise CheckFailed(f"{int((~close).sum())} of the {got.size} values of {what} are wrong, first at index {first}")
