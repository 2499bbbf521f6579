"""Import the new per-assignment packages (``autograder/assignments/a07_…``) before the layout issue lands.

Today ``autograder.assignments`` is the module ``autograder/assignments.py``, which a folder of the same
name cannot extend (a module wins over a folder without ``__init__.py``, and an ``__init__.py`` there
would hide the module). Each assignment folder is a regular package (its own ``__init__.py``, relative
imports inside), so it is registered under its future name from its files; once
``autograder/assignments/`` is a package, the plain import succeeds and this is not needed.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def import_assignment(folder: str, module: str):
    """``autograder.assignments.<folder>.<module>``, e.g. ``import_assignment("a07_tiled_attention", "reference")``."""
    package = f"autograder.assignments.{folder}"
    try:
        return importlib.import_module(f"{package}.{module}")
    except ModuleNotFoundError:
        pass  # autograder.assignments is still a plain module
    if package not in sys.modules:
        path = REPO / "autograder" / "assignments" / folder
        spec = importlib.util.spec_from_file_location(package, path / "__init__.py",
                                                      submodule_search_locations=[str(path)])
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[package] = loaded
        spec.loader.exec_module(loaded)
    return importlib.import_module(f"{package}.{module}")
