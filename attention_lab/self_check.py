"""Helpers shared by the visible self-check modules (``checks``, ``multi_head_checks``, ...).

A self-check prints one line per passed test and stops at the first failure
with a :class:`~attention_lab.worked.SelfCheckFailed` in plain words. The
helpers set ``__tracebackhide__`` so that IPython shows learners that
message rather than the frames of this package.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from attention_lab.learner_calls import call_learner
from attention_lab.worked import SelfCheckFailed, describe_exception

CALL_SECONDS = 5.0  # a correct answer takes milliseconds on the checks' inputs


def fail(message: str) -> None:
    """Stop the self-check with ``message``.

    Raises
    ------
    SelfCheckFailed
        Always.
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    raise SelfCheckFailed(message)


def ok(message: str) -> None:
    """Print one passed test as a ticked line."""
    print(f"✓ {message}")


def learner_name(function) -> str:
    """The name a message uses for a learner's function."""
    return getattr(function, "__name__", "your function")


def call(function: Callable, *args, seconds: float = CALL_SECONDS, copy_arrays: bool = True, **kwargs):
    """Call a learner's function quietly, with a time limit; an exception becomes one plain-words failure.

    Parameters
    ----------
    function : callable
    *args, **kwargs
        Passed on to ``function``.
    seconds : float
        Time limit for the call.
    copy_arrays : bool
        Pass copies of array arguments, so a function that modifies its
        inputs cannot spoil the inputs of later tests.

    Returns
    -------
    object
        What ``function`` returned.

    Raises
    ------
    SelfCheckFailed
        If the function raises or runs out of time, naming the function and the error.
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    try:
        return call_learner(function, *args, seconds=seconds, copy_arrays=copy_arrays, **kwargs)
    except Exception as error:  # noqa: BLE001 — any failure of learners' code becomes a message
        raise SelfCheckFailed(f"{learner_name(function)} raised {describe_exception(error)}") from None


def float_array(what: str, value, shape: tuple[int, ...], *, sep: str = "; ", kinds: str = "f",
                finite: bool = False) -> np.ndarray:
    """``value`` if it is a NumPy array of ``shape`` with a floating-point dtype; otherwise a failure.

    Parameters
    ----------
    what : str
        How the messages name the value, e.g. ``"the output of multi_head_attention"``.
    value : object
    shape : tuple of int
    sep : str
        Joins each expectation to what was found (``"; "`` or ``", but "``);
        every assignment keeps the wording its tests and notebooks show.
    kinds : str
        Accepted ``dtype.kind`` letters (``"f"``, or ``"fb"`` to accept bool too).
    finite : bool
        Also fail on NaN or inf.

    Returns
    -------
    numpy.ndarray
        ``value`` itself.

    Raises
    ------
    SelfCheckFailed
        Saying what the value should be and what it is.
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    if not isinstance(value, np.ndarray):
        fail(f"{what} should be a NumPy array of shape {shape}{sep}it is a {type(value).__name__}")
    if value.shape != shape:
        fail(f"{what} should have shape {shape}{sep}it has shape {value.shape}")
    if value.dtype.kind not in kinds:
        fail(f"{what} should be a floating-point array{sep}its dtype is {value.dtype}")
    if finite and not np.all(np.isfinite(value)):
        fail(f"{what} contains NaN or inf")
    return value
