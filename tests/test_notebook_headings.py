"""Every notebook a learner or an instructor opens has its headings in order: one title, then no skipped level.

Screen readers list a page by its headings; a jump from # to ### hides where a section belongs. The notebooks are
found in the folders (notebooks/, source/, release/), so new ones are checked too.
"""

import re

import nbformat
import pytest

from conftest import REPO

NOTEBOOKS = sorted(str(p.relative_to(REPO)) for folder in ("notebooks", "source", "release")
                   for p in (REPO / folder).rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def heading_levels(notebook) -> list[int]:
    """The levels of the Markdown headings (# … ######) of a notebook, in order, outside code fences."""
    levels = []
    for cell in notebook.cells:
        if cell.cell_type != "markdown":
            continue
        fenced = False
        for line in cell.source.splitlines():
            if line.lstrip().startswith("```"):
                fenced = not fenced
            match = None if fenced else re.match(r"^(#{1,6})\s+\S", line)
            if match:
                levels.append(len(match.group(1)))
    return levels


def skipped_levels(levels: list[int]) -> list[str]:
    problems = [] if levels[:1] == [1] else [f"starts with level {levels[:1]}, not one # title"]
    problems += [f"level {a} followed by level {b}" for a, b in zip(levels, levels[1:]) if b > a + 1]
    return problems


def test_the_checker_notices_a_skipped_level():
    assert skipped_levels([1, 2, 3, 2, 3]) == []
    assert skipped_levels([1, 3]) == ["level 1 followed by level 3"]
    assert skipped_levels([2, 3]) == ["starts with level [2], not one # title"]


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_headings_are_in_order(path):
    assert skipped_levels(heading_levels(nbformat.read(REPO / path, as_version=4))) == []
