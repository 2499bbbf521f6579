"""``make release``: regenerate ``release/`` from ``source/`` with nbgrader.

nbgrader's ``generate_assignment`` (with this course's ``nbgrader_config.py``,
which also drops saved widget state) writes the student version of each
assignment. The committed ``release/`` must equal what this produces; the
tests regenerate it into a scratch folder and compare.
"""

from __future__ import annotations

import sys
from pathlib import Path

from autograder.grading import run_nbgrader

REPO = Path(__file__).resolve().parent.parent


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
    RuntimeError
        If nbgrader fails (its log is in the message).
    """
    extra = [f"--CourseDirectory.release_directory={release_dir}"] if release_dir else []
    for assignment in assignments:
        run_nbgrader(course_dir, "generate_assignment", assignment, "--force", *extra)


def main(argv: list[str] | None = None) -> int:
    assignments = (argv if argv is not None else sys.argv[1:]) or sorted(
        p.name for p in (REPO / "source").iterdir() if p.is_dir())
    generate_release(REPO, assignments)
    for assignment in assignments:
        print(f"release/{assignment}/ regenerated from source/{assignment}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
