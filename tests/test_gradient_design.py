"""Assignment 6's DESIGN.md: its generated part (steps, cases, answer bank, measured curves, findings) is current.

Regenerate with ``.venv/bin/python -m autograder.assignments.a06_gradients.design``.
"""

import pytest

from autograder.assignments.a06_gradients import design, bank, findings
from autograder.grader.draft_rewrites import BEGIN, END, replace_generated


def test_design_note_is_current():
    text = design.DESIGN.read_text(encoding="utf-8")
    assert replace_generated(text, design.generated()) == text, (
        "autograder/assignments/a06_gradients/DESIGN.md is stale: run .venv/bin/python -m autograder.assignments.a06_gradients.design")


def test_design_note_names_every_variant_mistake_and_finding():
    text = design.DESIGN.read_text(encoding="utf-8")
    for name in [*bank.CORRECT, *bank.MISTAKES]:
        assert f"**{name}**" in text, name
    for finding in findings.FINDINGS:
        assert finding.sentence in text


def test_replace_generated_needs_both_markers_in_order():
    assert replace_generated(f"a\n{BEGIN}\nold\n{END}\nb", "new") == f"a\n{BEGIN}\nnew\n{END}\nb"
    with pytest.raises(ValueError, match="needs the markers"):
        replace_generated(f"{END}\n{BEGIN}", "x")
    with pytest.raises(ValueError, match="needs the markers"):
        replace_generated("no markers", "x")
