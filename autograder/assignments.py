"""The course's assignments, found by module name: ``autograder.assignment<N>`` defines ``ASSIGNMENT``.

Discovery keeps each assignment in its own module: adding one needs no edit here.
"""

from __future__ import annotations

import importlib
import pkgutil
import re

import autograder
from autograder.spec import Assignment

_MODULE = re.compile(r"assignment\d+$")


def all_assignments() -> dict[str, Assignment]:
    """Assignment folder name → :class:`~autograder.spec.Assignment`, in course order."""
    found = {}
    for module in sorted(info.name for info in pkgutil.iter_modules(autograder.__path__) if _MODULE.match(info.name)):
        assignment = getattr(importlib.import_module(f"autograder.{module}"), "ASSIGNMENT", None)
        if isinstance(assignment, Assignment):
            found[assignment.name] = assignment
    return dict(sorted(found.items()))


def get(name: str) -> Assignment:
    """The assignment whose folder is ``name``.

    Raises
    ------
    KeyError
        If no ``autograder.assignment<N>`` module defines it; the message lists the known ones.
    """
    assignments = all_assignments()
    if name not in assignments:
        raise KeyError(f"unknown assignment {name!r}; known: {', '.join(assignments) or 'none'}")
    return assignments[name]
