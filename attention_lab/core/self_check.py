"""Helpers shared by the visible self-check modules (``attention_lab/aNN_<topic>/checks.py``).

A self-check prints one line per passed test and stops at the first failure
with a :class:`~attention_lab.core.worked.SelfCheckFailed` in plain words, which a
notebook shows as that message alone (no frames of this package). Every call
into a learner's function goes through :func:`call_recording_warnings`, so
that each self-check checks what the grader charges without hidden inputs:
no exception, no endless loop, inputs left unchanged. :func:`self_check` makes
a check of one learner's function from the properties it tests: the worked
cases first, and the docstring every check has.
"""

from __future__ import annotations

import functools
import inspect
import textwrap
from typing import Callable

import numpy as np

from attention_lab.core.calls import call_learner
from attention_lab.core.compare import describe
from attention_lab.core.worked import CALL_SECONDS, SelfCheckFailed, changed_arguments, check_worked_cases, \
    describe_failure, in_place_message


def fail(message: str) -> None:
    """Stop the self-check with ``message``.

    Parameters
    ----------
    message : str
        What is wrong, in plain words; a notebook shows it alone, marked ✗.

    Raises
    ------
    SelfCheckFailed
        Always.
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    raise SelfCheckFailed(message)


def ok(message: str) -> None:
    """Print one passed test as a ticked line, ``✓ message``.

    Parameters
    ----------
    message : str
        What the learner's function does right.
    """
    print(f"✓ {message}")


LEARNER = "The learner's function"  #: how a check's docstring starts the paragraph on the function it checks
FAILS = "Fails "  #: how it starts the last paragraph, on when the check fails


def _section(title: str, entries: list[tuple[str, str]]) -> str:
    """A numpydoc section: its title, the underline, each entry's head and its text indented and wrapped."""
    lines = [title, "-" * len(title)]
    for head, text in entries:
        lines += [head, textwrap.fill(" ".join(text.split()), 100, initial_indent="    ", subsequent_indent="    ",
                                      break_long_words=False, break_on_hyphens=False)]
    return "\n".join(lines)


def _check_docstring(body: Callable, name: str, worked_cases: bool) -> str:
    """The numpydoc docstring of the check made of ``body`` (see :func:`self_check`)."""
    paragraphs = inspect.cleandoc(body.__doc__ or "").split("\n\n")
    if len(paragraphs) < 3 or not paragraphs[-2].startswith(LEARNER) or not paragraphs[-1].startswith(FAILS):
        raise TypeError(f"{body.__name__}'s docstring should end with a paragraph \"{LEARNER}…\" (what {name} takes "
                        f"and returns) and one \"{FAILS}when …\"")
    fails = paragraphs[-1].removeprefix(FAILS)
    raises = (f"At the first worked case it gets wrong (naming the known mistake where one matches), then {fails}"
              if worked_cases else fails[:1].upper() + fails[1:])
    return "\n\n".join([*paragraphs[:-2], _section("Parameters", [(f"{name} : callable", paragraphs[-2])]),
                        _section("Raises", [("SelfCheckFailed", raises)])]) + "\n"


def self_check(assignment: str, body: Callable | None = None, *, worked_cases: bool = True,
               select: Callable[[dict], bool] | None = None):
    """Make ``body(function, …)`` the self-check of a learner's function: its worked cases first, then the body.

    A decorator for the checks of an assignment (``@self_check(ASSIGNMENT)``, or with options
    ``@self_check(ASSIGNMENT, select=…)``). The learner's function is the first parameter of ``body``, named
    as the function (``check_softmax(softmax)``): the check runs that function's worked cases of
    ``assignment`` (:func:`~attention_lab.core.worked.check_worked_cases`, one ✓ line), then ``body``, which
    tests the properties every correct answer has.

    ``body``'s docstring says what is particular to the check: its summary (and any paragraph after it), then
    a paragraph "The learner's function: …" (what it takes and returns) and a last one "Fails when …". The
    check's docstring turns these two into the Parameters and Raises sections of numpydoc, which every
    self-check has, so that ``help(check_softmax)`` reads as any numpydoc docstring.

    Parameters
    ----------
    assignment : str
        The assignment whose worked cases are run ("01_scaled_dot_product_attention").
    body : callable, optional
        The checks of the properties; without it, the decorator with these options is returned.
    worked_cases : bool
        False for a check whose body runs the worked cases itself (after a test that must come first, or
        with an explanation of its own) or that has none.
    select : callable, optional
        ``select(case) -> bool`` keeps only some of the function's worked cases (a step that checks one
        feature of the function, e.g. ``scale=False``).

    Returns
    -------
    callable
        The check, with ``body``'s name and signature (or the decorator, without ``body``).

    Raises
    ------
    TypeError
        If ``body``'s docstring does not end with those two paragraphs.
    """
    if body is None:
        return functools.partial(self_check, assignment, worked_cases=worked_cases, select=select)
    name = next(iter(inspect.signature(body).parameters))

    @functools.wraps(body)
    def check(function: Callable, *args, **kwargs):
        __tracebackhide__ = True  # IPython then shows the message, not this module's frames
        if worked_cases:
            check_worked_cases(assignment, name, function, select=select)
        return body(function, *args, **kwargs)

    check.__doc__ = _check_docstring(body, name, worked_cases)
    return check


def learner_name(function) -> str:
    """The name a message uses for a learner's function.

    Parameters
    ----------
    function : callable

    Returns
    -------
    str
        Its ``__name__``, or ``"your function"`` for a callable without one.
    """
    return getattr(function, "__name__", "your function")


def _copy(value):
    return np.array(value, copy=True) if isinstance(value, np.ndarray) else value


def call_recording_warnings(function: Callable, *args, seconds: float = CALL_SECONDS,
                            **kwargs) -> tuple[object, list[str]]:
    """Call a learner's function on copies of its arrays, quietly and with a time limit; record its warnings.

    This is how every visible self-check calls learners' code, so that each
    checks what the grader charges without hidden inputs: the function must
    not raise, must finish in time and must leave its inputs unchanged.
    Warnings are recorded with NumPy's default error handling (overflow, 0/0
    and log 0 warn; underflow to 0 is harmless and does not).

    Parameters
    ----------
    function : callable
    *args, **kwargs
        Passed on to ``function``; arrays as copies, so a function that
        modifies its inputs cannot spoil the inputs of later tests.
    seconds : float
        Time limit for the call.

    Returns
    -------
    result : object
        What ``function`` returned.
    warnings : list of str
        ``"RuntimeWarning: overflow encountered in exp"``, ... in the order emitted.

    Raises
    ------
    SelfCheckFailed
        If the function raises (naming the error, or saying that it is not
        answered yet), runs out of time, or modifies an array argument in
        place (naming the argument).
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    used_args, used_kwargs = tuple(_copy(a) for a in args), {k: _copy(v) for k, v in kwargs.items()}
    caught = []
    try:
        result = call_learner(function, *used_args, seconds=seconds, record_warnings=caught, **used_kwargs)
    except Exception as error:  # noqa: BLE001 — any failure of learners' code becomes a message
        raise SelfCheckFailed(describe_failure(function, error, seconds)) from None
    changed = changed_arguments(function, args, used_args, kwargs, used_kwargs)
    if changed:
        fail(in_place_message(learner_name(function), changed))
    return result, [f"{w.category.__name__}: {w.message}" for w in caught]


def call(function: Callable, *args, seconds: float = CALL_SECONDS, **kwargs):
    """:func:`call_recording_warnings` without the warnings: what the function returned.

    Parameters
    ----------
    function, *args, seconds, **kwargs
        As for :func:`call_recording_warnings`.

    Returns
    -------
    object
        The learner's result.

    Raises
    ------
    SelfCheckFailed
        If the function raises, runs out of time, or modifies an array argument in place.
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    return call_recording_warnings(function, *args, seconds=seconds, **kwargs)[0]


def attempt(function: Callable, *args, seconds: float = CALL_SECONDS, **kwargs) -> tuple[object, Exception | None]:
    """Call a learner's function without failing the self-check: ``(result, None)`` or ``(None, error)``.

    For a self-check that looks at *how* a call fails (a ValueError it should
    raise, an error that comes from another step's function) or that only
    needs a working function for an extra test. The call is the usual one
    (:func:`~attention_lab.core.calls.call_learner`: quiet, on copies of its
    arrays, with a time limit); an in-place change is not reported here.

    Parameters
    ----------
    function : callable
    *args, **kwargs
        Passed on to ``function``; arrays as copies.
    seconds : float
        Time limit for the call.

    Returns
    -------
    result : object
        What ``function`` returned, or None if it raised.
    error : Exception or None
        What it raised (:class:`~attention_lab.core.calls.FunctionTimedOut` when out of time), or None.
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    try:
        return call_learner(function, *args, seconds=seconds, copy_arrays=True, **kwargs), None
    except Exception as error:  # noqa: BLE001 — the caller decides what a failure means
        return None, error


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
    if type(value) is not np.ndarray:  # as the grader (autograder.grader.comparison): a masked array, a matrix
        fail(f"{what} should be a plain NumPy array{sep}it is {describe(value)}")
    if value.shape != shape:
        fail(f"{what} should have shape {shape}{sep}it has shape {value.shape}")
    if value.dtype.kind not in kinds:
        fail(f"{what} should be a floating-point array{sep}its dtype is {value.dtype}")
    if finite and not np.all(np.isfinite(value)):
        fail(f"{what} contains NaN or inf")
    return value


def normal_arrays(seed: int, *shapes: tuple[int, ...]) -> list[np.ndarray]:
    """Arrays of standard normal draws, one per shape, from a generator seeded with ``seed`` (a check's inputs).

    Parameters
    ----------
    seed : int
    *shapes : tuple of int

    Returns
    -------
    list of numpy.ndarray
        float64 arrays of the given shapes, drawn in order from ``numpy.random.default_rng(seed)``.
    """
    rng = np.random.default_rng(seed)
    return [rng.normal(size=shape) for shape in shapes]
