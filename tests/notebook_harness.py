"""Run an assignment's cells in this process, as a fast model of the kernel (for the visible cells)."""

from __future__ import annotations

from attention_lab.a01_attention import checks
from attention_lab.core import plots
from autograder.grader import answers
from autograder.grader.answers import run_cell  # noqa: F401 — re-exported for the tests


def namespace_with(cells: dict[str, str]) -> dict:
    """A notebook namespace like the setup cell makes (``np``, ``checks``, ``plots``) with ``cells`` run."""
    namespace = answers.namespace_with(cells)
    namespace.update({"checks": checks, "plots": plots})
    return namespace
