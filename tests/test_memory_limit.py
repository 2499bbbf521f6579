"""The grader's child process with a limited address space (autograder/grader/memory_limit.py).

Trusted code on a case sized against the sandbox's memory (Case.memory_limit) runs there: an allocation
the sandbox would refuse fails with MemoryError, one that fits returns, and a hang or a crash is reported.
"""

import os
import resource
import signal

import numpy as np
import pytest

from autograder.grader.memory_limit import ChildFailed, mapped_bytes, run_with_memory_limit

LIMIT = 256 * 2**20  # small, so the test allocates little


def _allocate(n_bytes):
    def thunk():
        try:
            return float(np.ones(n_bytes // 8).sum())
        except MemoryError as error:
            return f"MemoryError: {error}"
    return thunk


def test_an_allocation_over_the_limit_fails_and_one_under_it_returns():
    assert run_with_memory_limit(_allocate(64 * 2**20), LIMIT, 60) == 8 * 2**20
    refused = run_with_memory_limit(_allocate(2 * LIMIT), LIMIT, 60)
    assert refused.startswith("MemoryError")


def test_the_limit_is_added_to_what_the_process_maps_and_the_parent_is_untouched():
    before, limit = mapped_bytes(), resource.getrlimit(resource.RLIMIT_AS)
    assert before > 0  # /proc/self/status is readable here
    assert run_with_memory_limit(mapped_bytes, LIMIT, 60) >= before // 2  # the child maps what the parent did
    child = run_with_memory_limit(lambda: resource.getrlimit(resource.RLIMIT_AS)[0], LIMIT, 60)
    assert before + LIMIT <= child <= mapped_bytes() + LIMIT + 128 * 2**20
    assert resource.getrlimit(resource.RLIMIT_AS) == limit  # the parent's own limit is unchanged


def test_an_exception_the_call_does_not_catch_is_reported():
    with pytest.raises(ChildFailed, match="MemoryError"):
        run_with_memory_limit(lambda: np.ones(LIMIT // 4), LIMIT, 60)
    with pytest.raises(ChildFailed, match="ZeroDivisionError"):
        run_with_memory_limit(lambda: 1 / 0, LIMIT, 60)


def test_a_hang_is_stopped_and_a_crash_is_reported():
    with pytest.raises(ChildFailed, match="did not finish within 0.5 s"):
        run_with_memory_limit(lambda: signal.pause(), LIMIT, 0.5)
    with pytest.raises(ChildFailed, match=f"signal {int(signal.SIGKILL)}"):
        run_with_memory_limit(lambda: os.kill(os.getpid(), signal.SIGKILL), LIMIT, 60)


@pytest.mark.parametrize("limit, seconds, message", [(0, 1, "limit_bytes"), (True, 1, "limit_bytes"),
                                                      (LIMIT, 0, "seconds")])
def test_bad_arguments_name_themselves(limit, seconds, message):
    with pytest.raises(ValueError, match=message):
        run_with_memory_limit(lambda: None, limit, seconds)
