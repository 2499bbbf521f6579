"""Cohorts: start a new class on the same course without breaking the gradebook, and rotate the hidden cases.

nbgrader refuses to add or remove cells of an assignment that has submissions (their grades would no longer
line up with its cells). A new cohort starts from an empty gradebook: :func:`new_cohort` (``make new-cohort``,
``python -m autograder new-cohort [--label L] [--seed N]``)

* moves what belongs to the class being graded — ``gradebook.db``, ``gradebook-hashes.json``, the
  source the gradebook was loaded from (``gradebook-source/``), ``submitted/``, ``autograded/``,
  ``feedback/``, ``refused/``, ``grades*.csv``, ``grading.log`` and ``cohort.json`` — into
  ``cohorts/<label>/`` (label: the given one, else today's date, UTC; ``-2``, ``-3``, ... if taken), and
  copies ``release/`` and ``source/`` there as that cohort had them;
* writes a new ``cohort.json`` at the course root with a new seed for the hidden cases (the threat model:
  a learner's code sees the hidden inputs of its own step, so a cohort should not be graded on the
  inputs an earlier one saw). Every step's cases are built from that seed (``Step.cases(seed)``) when
  grading, so grades stay reproducible within a cohort; without ``cohort.json`` the course's original
  seeds are used.

:func:`restore_cohort` (``python -m autograder new-cohort --restore LABEL``) moves an archived cohort back (the
current one, if it has anything, is archived first), ``release/`` included; ``source/`` is never
overwritten (the archived copy stays in ``cohorts/<label>/source/`` to compare).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import secrets
import shutil
import sys
from pathlib import Path

COHORT_FILE = "cohort.json"
ARCHIVE = "cohorts"
#: moved into the archive: the state of the class being graded (what nbgrader and `make grade` write)
MOVED = ("gradebook.db", "gradebook-hashes.json", "gradebook-source", "submitted", "autograded", "feedback",
         "refused", "grading.log", COHORT_FILE)
MOVED_PATTERNS = ("grades*.csv",)
#: copied into the archive: what the students of that cohort were given, and what it was made from
COPIED = ("release", "source")


def read_cohort(course_dir: Path) -> dict:
    """The course's ``cohort.json`` (``{"seed", "started", "archived_as"}``), or ``{}`` when there is none.

    Raises
    ------
    ValueError
        If the file exists but is not a JSON object with an integer ``seed`` (grading must not silently
        fall back to other hidden cases than the cohort's).
    """
    path = Path(course_dir) / COHORT_FILE
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except ValueError as error:
        raise ValueError(f"{path} is not valid JSON ({error}): restore it from cohorts/ or run make new-cohort") from None
    if not isinstance(data, dict) or type(data.get("seed")) is not int:
        raise ValueError(f"{path} must hold an integer \"seed\", got {data!r}")
    return data


def cohort_seed(course_dir: Path) -> int | None:
    """The seed of the hidden cases for the course's current cohort (``cohort.json``), or None: the course's own.

    Raises
    ------
    ValueError
        If ``cohort.json`` is malformed (see :func:`read_cohort`).
    """
    return read_cohort(course_dir).get("seed")


def _has_class(course_dir: Path) -> bool:
    return any((course_dir / name).exists() for name in MOVED if name != COHORT_FILE) or any(
        course_dir.glob(pattern) for pattern in MOVED_PATTERNS)


def _free_label(course_dir: Path, label: str | None) -> str:
    archive = course_dir / ARCHIVE
    if label is not None:
        if not label or "/" in label or label.startswith(".") or label != label.strip():
            raise ValueError(f"--label must be a plain folder name, got {label!r}")
        if (archive / label).exists():
            raise FileExistsError(f"{ARCHIVE}/{label}/ exists already: choose another --label")
        return label
    base = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    label, n = base, 1
    while (archive / label).exists():
        n += 1
        label = f"{base}-{n}"
    return label


def archive_cohort(course_dir: Path, label: str | None = None) -> Path:
    """Move the current class's state into ``cohorts/<label>/`` and copy ``release/`` and ``source/`` there.

    Returns
    -------
    Path
        The archive folder.

    Raises
    ------
    FileExistsError
        If ``label`` is given and ``cohorts/<label>/`` exists.
    ValueError
        If ``label`` is not a plain folder name.
    """
    course_dir = Path(course_dir)
    label = _free_label(course_dir, label)
    target = course_dir / ARCHIVE / label
    (course_dir / ARCHIVE).mkdir(mode=0o700, exist_ok=True)  # students' work and solutions: the instructor's only
    partial = course_dir / ARCHIVE / f".{label}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    for name in COPIED:  # copies first: if one fails, nothing of the class has moved yet
        if (course_dir / name).is_dir():
            shutil.copytree(course_dir / name, partial / name, symlinks=True)
    os.replace(partial, target)
    moved = [course_dir / name for name in MOVED if (course_dir / name).exists()]
    moved += [path for pattern in MOVED_PATTERNS for path in sorted(course_dir.glob(pattern))]
    for path in moved:  # renames on one file system: each entry is either here or there
        os.replace(path, target / path.name)
    if not (target / COHORT_FILE).exists():  # a cohort graded with the course's original seeds
        (target / COHORT_FILE).write_text(json.dumps({"seed": None, "note": "the course's original seeds"}) + "\n")
    return target


def new_cohort(course_dir: Path, label: str | None = None, seed: int | None = None) -> tuple[Path, int]:
    """Archive the current cohort (:func:`archive_cohort`) and start a new one with a new seed.

    Parameters
    ----------
    course_dir : Path
        The course root.
    label : str, optional
        The archive's folder name under ``cohorts/`` (default: today's date, UTC).
    seed : int, optional
        The new cohort's seed of the hidden cases (default: a random one, different from the current).

    Returns
    -------
    (Path, int)
        The archive folder and the new seed.

    Raises
    ------
    ValueError
        If ``seed`` is negative or equals the current cohort's, or ``label`` is not a plain folder name.
    FileExistsError
        If ``cohorts/<label>/`` exists.
    """
    course_dir = Path(course_dir)
    old = read_cohort(course_dir) if (course_dir / COHORT_FILE).exists() else {}
    if seed is not None and (seed < 0 or seed == old.get("seed")):
        raise ValueError(f"--seed must be a new non-negative integer, got {seed}"
                         + (" (the current cohort's)" if seed == old.get("seed") else ""))
    while seed is None or seed == old.get("seed"):
        seed = secrets.randbelow(2**31)
    archive = archive_cohort(course_dir, label)
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    new = course_dir / f".{COHORT_FILE}.partial"
    new.write_text(json.dumps({"seed": seed, "started": started}, indent=1) + "\n")
    os.replace(new, course_dir / COHORT_FILE)
    return archive, seed


def restore_cohort(course_dir: Path, label: str) -> Path | None:
    """Move ``cohorts/<label>/`` back into the course (``release/`` too); archive the current cohort first.

    Returns
    -------
    Path or None
        Where the current cohort was archived, or None when it had nothing to archive.

    Raises
    ------
    FileNotFoundError
        If ``cohorts/<label>/`` does not exist.
    """
    course_dir = Path(course_dir)
    source = course_dir / ARCHIVE / label
    if not label or "/" in label or not (source / COHORT_FILE).is_file():
        raise FileNotFoundError(f"no archived cohort {ARCHIVE}/{label}/ (python -m autograder new-cohort made them)")
    current = archive_cohort(course_dir) if _has_class(course_dir) or (course_dir / COHORT_FILE).exists() else None
    archived = json.loads((source / COHORT_FILE).read_text())
    for name in (*MOVED, "release"):
        if name == COHORT_FILE and archived.get("seed") is None:
            (source / COHORT_FILE).unlink()  # that cohort was graded with the course's original seeds
            continue
        if (source / name).exists():
            if name == "release" and (course_dir / name).exists():
                os.replace(course_dir / name, source / ".release.replaced")
            os.replace(source / name, course_dir / name)
    for path in [p for pattern in MOVED_PATTERNS for p in source.glob(pattern)]:
        os.replace(path, course_dir / path.name)
    shutil.rmtree(source / ".release.replaced", ignore_errors=True)
    return current


def main(argv: list[str] | None = None) -> int:
    """``python -m autograder new-cohort [--label L] [--seed N] | --restore LABEL [--course-dir DIR]``.

    Returns 0 when done, 1 (one line on stderr saying why) when nothing was changed.
    """
    parser = argparse.ArgumentParser(
        prog="python -m autograder new-cohort",
        description="Start a new cohort: move the gradebook, submissions, autograded work and feedback to "
                    "cohorts/<label>/ (with copies of release/ and source/), and rotate the hidden cases' seed "
                    "(cohort.json). With --restore LABEL, bring cohorts/LABEL/ back instead.")
    parser.add_argument("--label", help="the archive's folder name under cohorts/ (default: today's date, UTC)")
    parser.add_argument("--seed", type=int, help="the new cohort's seed of the hidden cases (default: a random one)")
    parser.add_argument("--restore", metavar="LABEL",
                        help="move cohorts/LABEL/ back into the course instead (the current cohort, if it has "
                             "anything, is archived first; source/ is left as it is)")
    parser.add_argument("--course-dir", type=Path, default=Path.cwd())
    args = parser.parse_args(argv)
    course_dir = args.course_dir.resolve()
    if args.restore is not None and (args.label is not None or args.seed is not None):
        parser.error("--restore takes no --label or --seed")
    try:
        if args.restore is not None:
            current = restore_cohort(course_dir, args.restore)
        else:
            archive, seed = new_cohort(course_dir, args.label, args.seed)
    except (ValueError, OSError) as refused:
        print(f"new-cohort stopped: {refused}", file=sys.stderr)
        return 1
    if args.restore is not None:
        kept = f"; the one it replaced is in {current.relative_to(course_dir)}/" if current else ""
        print(f"Cohort {args.restore} restored (gradebook, submissions, feedback, release/){kept}. "
              f"source/ is unchanged: the cohort's own is in {ARCHIVE}/{args.restore}/source/.")
    else:
        print(f"The previous cohort is in {archive.relative_to(course_dir)}/ "
              f"(python -m autograder new-cohort --restore {archive.name} brings it back).\n"
              f"New cohort: hidden cases from seed {seed} ({COHORT_FILE}). Edit source/, then make release.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
