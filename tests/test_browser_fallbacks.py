"""What the course does where a browser kernel (Pyodide, in JupyterLite) lacks CPython's pieces, simulated in
CPython: no signals (the time limit falls back to a trace function), no NumPy loaded yet, and an event loop
that cannot schedule a deferred redraw. tests/test_lite.py runs the time limit in the real browser kernel.
"""

import signal
import subprocess
import sys
import threading

import numpy as np
import pytest

from attention_lab.a01_attention import checks
from attention_lab.a01_attention import visual as ex
from attention_lab.core import worked
from attention_lab.core.calls import FunctionTimedOut, call_learner, time_limit


def loop_forever(*args, **kwargs):
    while True:
        pass


def loop_catching_nothing(x):
    total = 0
    for value in range(10**12):
        total += value
    return total


@pytest.fixture(params=["no setitimer", "emscripten"])
def no_signals(request, monkeypatch):
    """Python as in the browser: the signal module has no working alarm."""
    if request.param == "no setitimer":
        monkeypatch.delattr(signal, "setitimer")
    else:
        monkeypatch.setattr(sys, "platform", "emscripten")
    return request.param


def test_the_fallback_interrupts_an_infinite_loop_in_a_learners_function(no_signals):
    with pytest.raises(FunctionTimedOut, match="did not finish within 0.2 s"):
        call_learner(loop_forever, np.zeros(3), seconds=0.2)
    with pytest.raises(FunctionTimedOut):
        call_learner(loop_catching_nothing, 1, seconds=0.2)


def test_the_fallback_interrupts_a_loop_written_in_the_block_itself(no_signals):
    with pytest.raises(FunctionTimedOut):
        with time_limit(0.2):
            while True:
                pass


def test_the_fallback_uses_no_alarm_and_leaves_no_trace_function(no_signals):
    previous = sys.gettrace()
    with time_limit(5):
        if hasattr(signal, "getitimer"):
            assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # no SIGALRM armed
        assert sys.gettrace() is not None and sys.gettrace() is not previous
    assert sys.gettrace() is previous


def _calls_past_the_deadline(tracer, frame) -> list:
    """What the trace function does when it is called again and again after the deadline."""
    outcomes = []
    for event in ("line", "exception", "line", "opcode", "return"):
        try:
            outcomes.append(tracer(frame, event, None))
        except FunctionTimedOut:
            outcomes.append("raised")
    return outcomes


def test_the_fallback_raises_once_even_where_a_trace_function_that_raised_stays_installed(no_signals):
    """Python 3.12+ (Pyodide's 3.14) keeps a trace function that raised: were it to raise again at the next
    instruction — the `with`'s clean-up, or an `except` clause being matched — the learner's handler would be
    skipped (seen in the browser kernel: the loop's FunctionTimedOut escaped its `except`). CPython 3.11 removes
    it, so the later calls are made by hand here, with tracing switched off for this frame first."""
    import time

    here = sys._getframe()
    # a limit long enough for the first line to run before it on a loaded machine (0.01 s was not, in one run),
    # and a sleep past it
    with time_limit(0.5):
        tracer = sys.gettrace()
        time.sleep(0.6); sys.settrace(None); here.f_trace = None; outcomes = _calls_past_the_deadline(tracer, here)  # noqa: E702 — one line: no traced line past the deadline
    assert outcomes == ["raised", None, None, None, None]


def test_code_that_finishes_in_time_returns_its_result_under_the_fallback(no_signals):
    assert call_learner(lambda x: x.sum(), np.arange(4.0), seconds=5) == 6.0


def test_an_earlier_trace_function_is_restored(no_signals):
    events = []

    def tracer(frame, event, arg):
        events.append(event)
        return None

    sys.settrace(tracer)
    try:
        with pytest.raises(FunctionTimedOut):
            call_learner(loop_forever, seconds=0.2)
        assert sys.gettrace() is tracer
    finally:
        sys.settrace(None)


def test_a_self_check_reports_a_looping_function_instead_of_hanging(no_signals, capsys, monkeypatch):
    # the checks' limit, shortened to keep the test quick; the check stops at its worked cases, which take their
    # limit from attention_lab.core.worked when they run (checks.CALL_SECONDS alone left them 5 s per parameter)
    monkeypatch.setattr(checks, "CALL_SECONDS", 0.5)
    monkeypatch.setattr(worked, "CALL_SECONDS", 0.5)
    with pytest.raises(Exception) as failure:
        checks.check_softmax(loop_forever)
    said = str(failure.value) + capsys.readouterr().out
    assert "did not finish" in said


def test_outside_the_main_thread_a_time_limit_now_applies():
    outcome = []

    def run():
        try:
            call_learner(loop_forever, seconds=0.2)
        except FunctionTimedOut as error:
            outcome.append(str(error))

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(timeout=120)
    assert not worker.is_alive() and outcome and "did not finish within 0.2 s" in outcome[0]


def test_with_signals_the_alarm_is_used():
    with time_limit(5):
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 0
    with pytest.raises(FunctionTimedOut):
        call_learner(loop_forever, seconds=0.2)


def test_the_time_limit_needs_no_numpy():
    # as in a browser kernel that has not downloaded NumPy: importing it fails
    code = """
import sys
sys.modules["numpy"] = None
from attention_lab.core.calls import FunctionTimedOut, time_limit
try:
    with time_limit(0.2):
        while True:
            pass
except FunctionTimedOut:
    print("interrupted")
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "interrupted"


class LoopWithoutTimers:
    """An event loop that runs but cannot schedule timers (the bare asyncio.AbstractEventLoop interface)."""

    def call_later(self, delay, callback, *args):
        raise NotImplementedError


@pytest.mark.parametrize("loop", ["no running loop", "loop without timers"])
def test_without_a_usable_event_loop_every_change_redraws_at_once(loop, monkeypatch):
    import asyncio

    if loop == "loop without timers":
        monkeypatch.setattr(asyncio, "get_running_loop", LoopWithoutTimers)
    from test_explorer import FUNCTIONS

    explorer = ex.AttentionExplorer(*FUNCTIONS, T=10, d_head=16)
    start = explorer.redraws
    for T in range(11, 16):
        explorer.T_slider.value = T
        assert explorer.view.weights.shape == (T, T)  # drawn before the next change arrives
    assert explorer.redraws - start == 5
