"""Calling a learner's function safely: quietly, on copies if asked, and with a time limit.

Used by the visible self-checks, the explorer and the grader, so that "what a
call into learners' code looks like" is decided in one place. The time limit
needs no NumPy (it is imported where arrays are copied), so it also works in a
browser kernel that has not loaded NumPy yet.
"""

from __future__ import annotations

import contextlib
import dis
import functools
import inspect
import io
import signal
import sys
import threading
import time
import warnings
from typing import Callable


class FunctionTimedOut(TimeoutError):
    """A learner's function ran longer than its time limit."""


#: Seconds between the repeated alarms after the first (:func:`time_limit`): code that catches one interruption is
#: interrupted again this much later.
REPEAT_SECONDS = 1.0


def time_limit(seconds: float, cpu_time: bool = False):
    """Interrupt the code inside after ``seconds`` with :class:`FunctionTimedOut`; use as ``with time_limit(3):``.

    In the main thread of a CPython with signals (notebook cells and widget
    callbacks under ipykernel, the grader's probe) this uses SIGALRM; the alarm
    repeats every :data:`REPEAT_SECONDS` until the block ends, so code that catches the first
    one is interrupted again. Where there are no signals — Pyodide in the
    browser (JupyterLite), other threads, platforms without ``setitimer`` — it
    is a :class:`TracedTimeLimit`, which checks the clock on every line of
    Python run inside the block and raises there. Python then removes the trace
    function, so that fallback interrupts once: code that catches the exception
    and loops on is not stopped again (restarting the kernel still stops it).
    Time spent inside one call into compiled code (a NumPy routine) is not
    interrupted by either.

    Parameters
    ----------
    seconds : float
        Wall-clock limit, or with ``cpu_time`` the CPU time of this process (``ITIMER_PROF``, SIGPROF; the
        fallback reads :func:`time.process_time`): time the process waits while a busy machine runs other
        work does not count.
    cpu_time : bool
        Count CPU time instead of the wall clock.

    Returns
    -------
    context manager

    Raises
    ------
    FunctionTimedOut
        If the block is still running after ``seconds``.
    """
    if (threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer")
            or sys.platform in ("emscripten", "wasi")):  # WebAssembly: the signal module has no working alarm
        return TracedTimeLimit(seconds, cpu_time)
    return alarm_time_limit(seconds, cpu_time)


def _limit_text(seconds: float, cpu_time: bool) -> str:
    return f"did not finish within {seconds:g} s{' of CPU time' if cpu_time else ''} (an infinite loop?)"


@contextlib.contextmanager
def alarm_time_limit(seconds: float, cpu_time: bool = False):
    """:func:`time_limit` with SIGALRM, or SIGPROF for CPU time (main thread, platforms with ``signal.setitimer``)."""
    def interrupt(signum, frame):
        raise FunctionTimedOut(_limit_text(seconds, cpu_time))

    number, timer = (signal.SIGPROF, signal.ITIMER_PROF) if cpu_time else (signal.SIGALRM, signal.ITIMER_REAL)
    previous = signal.signal(number, interrupt)
    signal.setitimer(timer, seconds, REPEAT_SECONDS)
    try:
        yield
    finally:
        signal.setitimer(timer, 0)
        signal.signal(number, previous)


class TracedTimeLimit:
    """Interrupt the Python code inside after ``seconds`` with :class:`FunctionTimedOut`, without signals.

    The fallback of :func:`time_limit`: a :func:`sys.settrace` trace function on
    the frames of the block and on every call made in it raises at the first
    line past the deadline — or the first instruction, in code with a loop on
    one line (which produces no line events). Tracing slows pure-Python loops
    inside the block (about 10× for a tight loop in CPython 3.11), not NumPy's
    compiled routines. An earlier trace function (a debugger, coverage) is
    restored afterwards. It interrupts once: code that catches the interruption and
    keeps looping runs on (a kernel restart stops it). A class rather than a generator, so that leaving the
    block runs no traced frame of its own (:meth:`__exit__` is never
    interrupted). Run the code to limit in a function called from the block,
    as :func:`call_learner` does: on Python 3.12+ (Pyodide's is 3.14) an
    interruption raised in the block's *own* frame at a loop's backward jump
    can escape an ``except`` in that frame (about half of the runs of
    ``with ...: while True: pass`` on CPython 3.12.1 and 3.13.0), while one
    raised in a called function reaches the caller's ``except`` as any
    exception does (none of 600 runs escaped).

    Parameters
    ----------
    seconds : float
        Wall-clock limit, from entering the block.
    cpu_time : bool
        Count the process's CPU time (:func:`time.process_time`) instead of the wall clock.

    Raises
    ------
    FunctionTimedOut
        If Python code inside the block is still running after ``seconds``.
    """

    def __init__(self, seconds: float, cpu_time: bool = False):
        self.seconds = seconds
        self.clock = time.process_time if cpu_time else time.monotonic
        self.cpu_time = cpu_time

    def __enter__(self):
        clock = self.clock
        deadline = clock() + self.seconds
        message = _limit_text(self.seconds, self.cpu_time)
        exit_code = type(self).__exit__.__code__

        fired = []

        def check(frame, event, arg):
            if fired or frame.f_code is exit_code:
                return None
            if event == "call" and loops_within_one_line(frame.f_code):
                frame.f_trace_opcodes = True  # a one-line loop (`while True: pass`) produces no line events
            if clock() > deadline:
                # Once only: where a trace function that raised stays installed (Python 3.12+, Pyodide's 3.14),
                # raising again at the next instruction — in the `with`'s clean-up before __exit__, or while an
                # `except` clause matches — would escape the learner's handler and skip __exit__.
                fired.append(True)
                raise FunctionTimedOut(message)
            return check

        self.previous = sys.gettrace()
        # the frames already running (the with-block's own and its callers) are traced too; later calls by settrace
        self.frames = []
        frame = inspect.currentframe().f_back
        while frame is not None:
            self.frames.append((frame, frame.f_trace, frame.f_trace_opcodes))
            frame.f_trace = check
            frame.f_trace_opcodes = frame.f_trace_opcodes or loops_within_one_line(frame.f_code)
            frame = frame.f_back
        sys.settrace(check)
        return self

    def __exit__(self, *exc_info):
        sys.settrace(self.previous)
        for frame, trace, opcodes in self.frames:
            frame.f_trace, frame.f_trace_opcodes = trace, opcodes
        self.frames = []  # no references to the frames are kept
        return False



@functools.lru_cache(maxsize=4096)
def loops_within_one_line(code) -> bool:
    """Whether a code object jumps back to an instruction on the same line (a loop written on one line).

    Parameters
    ----------
    code : types.CodeType

    Returns
    -------
    bool
    """
    instructions = list(dis.get_instructions(code))
    line_at = {i.offset: i.positions.lineno for i in instructions}
    return any(i.opname.startswith("JUMP_BACKWARD") and line_at.get(i.argval) == i.positions.lineno
               for i in instructions)


def call_learner(function: Callable, *args, seconds: float, copy_arrays: bool = False,
                 record_warnings: list | None = None, cpu_time: bool = False, **kwargs):
    """Call ``function(*args, **kwargs)`` the way every caller of learners' code should.

    Anything the function prints is discarded (nbgrader scores any stderr
    output in a test cell as 0) and an infinite loop is interrupted. Warnings
    and NumPy floating-point errors are silenced (correct code may warn), or,
    with ``record_warnings``, recorded under NumPy's default error handling:
    overflow, invalid operations (0/0) and division by zero (log 0) warn,
    underflow to 0 is harmless and does not.

    Parameters
    ----------
    function : callable
        The learner's function (or a function of no arguments that calls it).
    *args, **kwargs
        Passed on to ``function``.
    seconds : float
        Time limit, wall clock.
    cpu_time : bool
        The limit counts this process's CPU time instead (:func:`time_limit`).
    copy_arrays : bool
        Pass copies of ndarray arguments (positional and keyword), so that a
        function that modifies its input cannot change the caller's arrays.
    record_warnings : list, optional
        If given, every warning the call emits is appended to it, as a
        :class:`warnings.WarningMessage`, in the order emitted (also when the
        call raises).

    Returns
    -------
    object
        What ``function`` returned.

    Raises
    ------
    FunctionTimedOut
        If the call takes longer than ``seconds``.
    BaseException
        Whatever ``function`` raises, unchanged.
    """
    __tracebackhide__ = True  # IPython shows the learner's frames, not this module's
    import numpy as np  # here, not at the top: the time limit above works before NumPy is loaded

    if copy_arrays:
        args = tuple(np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args)
        kwargs = {k: np.array(v, copy=True) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    recording = record_warnings is not None
    # NumPy's defaults when recording (a learner's np.seterr does not change what warns), else all silenced
    errors = dict(over="warn", divide="warn", invalid="warn", under="ignore") if recording else dict(all="ignore")
    sink, caught = io.StringIO(), None
    try:
        with warnings.catch_warnings(record=recording) as caught, np.errstate(**errors), time_limit(seconds, cpu_time):
            warnings.simplefilter("always" if recording else "ignore")
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                return function(*args, **kwargs)
    finally:  # after the time limit has ended, so that recording cannot be interrupted
        if recording and caught:
            record_warnings.extend(caught)
