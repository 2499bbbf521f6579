"""Calling a learner's function safely: quietly, on copies if asked, and with a time limit.

Used by the visible self-checks, the explorer and the grader, so that "what a
call into learners' code looks like" is decided in one place.
"""

from __future__ import annotations

import contextlib
import io
import signal
import threading
import warnings
from typing import Callable

import numpy as np


class FunctionTimedOut(TimeoutError):
    """A learner's function ran longer than its time limit."""


@contextlib.contextmanager
def time_limit(seconds: float):
    """Interrupt the code inside after ``seconds`` with :class:`FunctionTimedOut`.

    Uses SIGALRM, so it works in the main thread, where notebook cells and
    widget callbacks run. The alarm repeats every second until the block ends,
    so code that catches the first one is interrupted again. Elsewhere (other
    threads, platforms without SIGALRM) the block runs without a limit.

    Raises
    ------
    FunctionTimedOut
        If the block is still running after ``seconds``.
    """
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def interrupt(signum, frame):
        raise FunctionTimedOut(f"did not finish within {seconds:g} s (an infinite loop?)")

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def call_learner(function: Callable, *args, seconds: float, copy_arrays: bool = False, **kwargs):
    """Call ``function(*args, **kwargs)`` the way every caller of learners' code should.

    Warnings and NumPy floating-point errors are silenced and anything the
    function prints is discarded (nbgrader scores any stderr output in a test
    cell as 0, and correct code may warn); an infinite loop is interrupted.

    Parameters
    ----------
    seconds : float
        Time limit.
    copy_arrays : bool
        Pass copies of ndarray arguments, so that a function that modifies its
        input cannot change the caller's arrays.

    Raises
    ------
    FunctionTimedOut
        If the call takes longer than ``seconds``.
    Exception
        Whatever ``function`` raises.
    """
    __tracebackhide__ = True  # IPython shows the learner's frames, not this module's
    if copy_arrays:
        args = tuple(np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args)
    sink = io.StringIO()
    with warnings.catch_warnings(), np.errstate(all="ignore"), time_limit(seconds):
        warnings.simplefilter("ignore")
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            return function(*args, **kwargs)
