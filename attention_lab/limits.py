"""A time limit for calls into learners' code, so that an infinite loop becomes a message, not a hang."""

from __future__ import annotations

import contextlib
import signal
import threading


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
