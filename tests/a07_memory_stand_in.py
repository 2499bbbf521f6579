"""Assignment 7's memory step graded on its small stand-in case in tests that grade whole answers many times.

The real memory case (``bank.memory_case``: T = 20 000 in a forked child under the sandbox's 2 GiB) takes
seconds per answer; the in-process tests grade every variant, every mistake and every combination of both,
which re-runs it hundreds of times. Those tests use the fixture :func:`a07_memory_stand_in` instead: for the
module it swaps in ``bank.memory_stand_in_case`` (T = 4 000 under 24 MiB: the same rule — a T × T matrix
cannot fit, the tiles can — at a hundredth of the work). tests/test_tiled_attention_bank.py asserts that
every tiled_attention of the bank gets the same verdict on the stand-in as on the real case, and grades a
correct answer and the full-matrix mistake on the real one.
"""

from __future__ import annotations

import contextlib

import pytest

from autograder.assignments.a07_tiled_attention import bank as a07_bank
from autograder.grader import in_process

A07 = "07_tiled_attention"


def _forget_a07_graders() -> None:
    # a Grader keeps the cases it was built with: one built on the other memory case must not be reused
    for key in [key for key in in_process._GRADERS if key[0] == A07]:
        del in_process._GRADERS[key]


@contextlib.contextmanager
def memory_stand_in():
    """Within the block, a07's memory step is graded in-process on ``bank.memory_stand_in_case``."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(a07_bank, "memory_case", a07_bank.memory_stand_in_case)
        _forget_a07_graders()
        try:
            yield
        finally:
            _forget_a07_graders()


@pytest.fixture(scope="module")
def a07_memory_stand_in():
    """For one test module: a07's memory step is graded on ``bank.memory_stand_in_case``."""
    with memory_stand_in():
        yield
