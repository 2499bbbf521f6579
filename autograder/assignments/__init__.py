"""The course's assignments: one folder each, and the registry that finds them.

An assignment is a folder ``autograder/assignments/aNN_<topic>/`` whose ``spec.py`` defines
``ASSIGNMENT`` (an :class:`~autograder.grader.spec.Assignment`); next to it are its ``reference.py``
and its answer bank ``bank.py``. A folder without ``spec.py`` is a draft (material for an assignment
that is not graded yet) and is not listed. Discovery keeps each assignment in its own folder: adding
one needs no edit here.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import re
from pathlib import Path

from autograder.grader.spec import Assignment

FOLDER = re.compile(r"a\d\d_\w+$")  #: an assignment's folder: aNN_<topic>


def folders() -> list[str]:
    """Names of the assignment folders (drafts included), in course order."""
    return sorted(info.name for info in pkgutil.iter_modules(__path__) if info.ispkg and FOLDER.match(info.name))


def folder_of(name: str) -> str:
    """The folder (``a01_attention``) of the assignment whose id is ``name``.

    Raises
    ------
    KeyError
        If no assignment has that id.
    """
    for folder, assignment in _by_folder().items():
        if assignment.name == name:
            return folder
    raise KeyError(f"unknown assignment {name!r}; known: {', '.join(all_assignments()) or 'none'}")


@functools.cache
def _by_folder() -> dict[str, Assignment]:
    found = {}
    for folder in folders():
        if not (Path(__path__[0]) / folder / "spec.py").is_file():
            continue  # a draft
        assignment = getattr(importlib.import_module(f"{__name__}.{folder}.spec"), "ASSIGNMENT", None)
        if isinstance(assignment, Assignment):
            found[folder] = assignment
    return found


def all_assignments() -> dict[str, Assignment]:
    """Assignment id (its folder under ``source/``, e.g. ``01_scaled_dot_product_attention``) → its spec, in course order."""
    return dict(sorted((a.name, a) for a in _by_folder().values()))


def get(name: str) -> Assignment:
    """The assignment whose id (folder under ``source/``) is ``name``.

    Raises
    ------
    KeyError
        If no assignment folder defines it; the message lists the known ones.
    """
    assignments = all_assignments()
    if name not in assignments:
        raise KeyError(f"unknown assignment {name!r}; known: {', '.join(assignments) or 'none'}")
    return assignments[name]
