"""``make release``: regenerate ``release/`` from ``source/`` with nbgrader.

nbgrader's ``generate_assignment`` (with this course's ``nbgrader_config.py``,
which also drops saved widget state) writes the student version of each
assignment. It copies every other file of ``source/<assignment>/`` into the
release too (a reference solution or answer data left there would reach the
students), so only the files listed in ``c.ReleaseFiles.allowed`` may be
there: any other file stops the release with one line naming it and the
setting. The committed ``release/`` must equal what this produces; the tests
regenerate it into a scratch folder and compare. Each assignment is released all or nothing
(:mod:`autograder.nbgrader.gradebook_load`): a change nbgrader refuses once students have submitted
(a cell or notebook added or removed) stops the release with one line saying what to do, and
``release/`` and the gradebook stay as they were.
"""

from __future__ import annotations

import sys
from pathlib import Path

from nbgrader.coursedir import CourseDirectory
from nbgrader.utils import find_all_files
from traitlets import Dict, List, Unicode
from traitlets.config import Configurable

from autograder.nbgrader.gradebook_load import WHAT_TO_DO, AssignmentChanged, GenerateFailed, generate, refused_change
from autograder.nbgrader.grading import course_config
from autograder.course import REPO



class ReleaseFiles(Configurable):
    """Which helper files of ``source/<assignment>/`` are released (``c.ReleaseFiles.allowed`` in nbgrader_config.py)."""

    allowed = Dict(value_trait=List(Unicode()), default_value={},
                   help="assignment → paths relative to source/<assignment>/ that may be released besides "
                        "the notebooks, e.g. {'01_scaled_dot_product_attention': ['data/tokens.csv']}.").tag(config=True)


class UnlistedFile(RuntimeError):
    """A file in ``source/<assignment>/`` that is not on the release allow-list."""


def unlisted_files(course_dir: Path, assignment: str, allowed: dict[str, list[str]]) -> list[str]:
    """Files of ``source/<assignment>/`` that ``generate_assignment`` would release but nobody allowed.

    Notebooks and what nbgrader ignores anyway (``CourseDirectory.ignore``:
    checkpoints, ``__pycache__``, ...) are not counted.
    """
    folder = course_dir / "source" / assignment
    ignore = list(CourseDirectory.class_traits()["ignore"].default())
    files = (Path(f).relative_to(folder).as_posix() for f in find_all_files(str(folder), ignore + ["*.ipynb"]))
    return sorted(f for f in files if f not in set(allowed.get(assignment, [])))


def generate_release(course_dir: Path, assignments: list[str], release_dir: Path | None = None) -> None:
    """Run ``nbgrader generate_assignment --force`` for each assignment.

    Parameters
    ----------
    course_dir : Path
        Course root holding ``nbgrader_config.py`` and ``source/``.
    assignments : list of str
        Folder names under ``source/``.
    release_dir : Path, optional
        Where to write instead of ``course_dir/release`` (used to check staleness).

    Raises
    ------
    UnlistedFile
        If ``source/<assignment>/`` holds a file that ``c.ReleaseFiles.allowed`` does not list
        (checked for every assignment before anything is written).
    autograder.nbgrader.gradebook_load.AssignmentChanged
        If ``source/`` adds or removes cells or notebooks of an assignment that has submissions (checked for
        every assignment before anything is written; nbgrader would refuse it half-way).
    autograder.nbgrader.gradebook_load.GenerateFailed
        If nbgrader fails; that assignment's release folder and the gradebook are as they were.
    """
    allowed = ReleaseFiles(config=course_config(course_dir)).allowed
    for assignment in assignments:
        unlisted = unlisted_files(course_dir, assignment, allowed)
        if unlisted:
            raise UnlistedFile(f"source/{assignment}/{unlisted[0]} would be released but is not listed in "
                               f"c.ReleaseFiles.allowed['{assignment}'] (nbgrader_config.py): list it there, "
                               "or move it out of source/")
    for assignment in assignments:  # every refusal before anything is written
        refusal = refused_change(course_dir, assignment)
        if refusal:
            raise AssignmentChanged(f"make release stopped: {refusal}: {WHAT_TO_DO}; release/ and the gradebook "
                                    "are unchanged")
    for assignment in assignments:
        generate(course_dir, assignment, release_dir)


def main(argv: list[str] | None = None) -> int:
    """``python -m autograder release [assignment ...]``: regenerate release/ (default: every assignment)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m autograder release",
                                     description="Regenerate release/ from source/ with nbgrader generate_assignment.")
    parser.add_argument("assignments", nargs="*", help="assignment folders of source/ (default: all)")
    parser.add_argument("--course-dir", type=Path, default=REPO, help="the course root (default: this repository)")
    args = parser.parse_args(argv)
    course_dir = args.course_dir.resolve()
    assignments = args.assignments or sorted(p.name for p in (course_dir / "source").iterdir() if p.is_dir())
    try:
        generate_release(course_dir, assignments)
    except UnlistedFile as refused:
        print(f"make release stopped: {refused}", file=sys.stderr)
        return 1
    except (AssignmentChanged, GenerateFailed) as refused:
        print(refused, file=sys.stderr)
        return 1
    for assignment in assignments:
        print(f"release/{assignment}/ regenerated from source/{assignment}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
