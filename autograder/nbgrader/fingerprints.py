"""What a grade was computed from, so that re-running ``make grade`` grades only what changed.

A submission's grade depends on four things, each hashed (SHA-256) by :func:`fingerprint`:

* ``submission`` — every file of ``submitted/<student>/<assignment>/`` (names and bytes, ``timestamp.txt``
  included: the late penalty depends on it);
* ``source`` — every file of ``source/<assignment>/`` (the cells and hidden tests the gradebook holds);
* ``spec`` — the assignment's folder ``autograder/assignments/aNN_*/`` (steps, hidden cases, reference,
  answer bank);
* ``grader`` — the grader's version: this package's version, nbgrader's, the code of ``autograder`` and
  ``attention_lab`` (the probes and self-checks run in the kernel), the course's ``nbgrader_config.py`` and its
  ``cohort.json`` (the seed of the hidden cases, :mod:`autograder.nbgrader.cohorts`).

:class:`GradingRecord` keeps, next to the gradebook (``gradebook-hashes.json``), the fingerprint of each
submission that was graded; a submission whose fingerprint is unchanged and whose grades are still in the
gradebook is not graded again (unless ``--force``). A submission that was not graded is always tried again,
and the reason it was not graded is kept for the class report. The record also keeps which source of each
assignment ``generate_assignment`` last loaded into the gradebook (:func:`loaded_source_fingerprint`), so that
a re-run with the same source does not load it again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from importlib import metadata
from pathlib import Path

from autograder import assignments
from autograder.course import COURSE_ID

RECORD_NAME = "gradebook-hashes.json"
SKIPPED_PARTS = {"__pycache__", ".ipynb_checkpoints"}
PACKAGES = (Path(__file__).resolve().parents[1], Path(__file__).resolve().parents[2] / "attention_lab")
#: pyproject.toml's name of this project's distribution, which provides the ``autograder`` package (the course is
#: named as the project: one constant, :data:`autograder.course.COURSE_ID`).
PROJECT_DISTRIBUTION = COURSE_ID


def tree_hash(root: Path, skip: frozenset[str] = frozenset()) -> str:
    """SHA-256 over the relative paths and bytes of every file under ``root`` ("" if it does not exist).

    Symbolic links are hashed by their target's text, never followed; caches (``__pycache__``,
    ``.ipynb_checkpoints``) and the top-level entries named in ``skip`` are left out.
    """
    root = Path(root)
    if not root.exists():
        return ""
    digest = hashlib.sha256()
    paths = [root] if root.is_file() else sorted(
        p for p in root.rglob("*") if not SKIPPED_PARTS & set(p.relative_to(root).parts)
        and p.relative_to(root).parts[0] not in skip)
    for path in paths:
        if path.is_dir() and not path.is_symlink():
            continue
        digest.update(str(path.relative_to(root) if path != root else path.name).encode() + b"\0")
        if path.is_symlink():
            digest.update(b"link:" + os.readlink(path).encode())
        else:
            with open(path, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()


@functools.lru_cache(maxsize=None)
def _code_hash() -> str:
    return hashlib.sha256("".join(tree_hash(p, frozenset({"examples"})) for p in PACKAGES).encode()).hexdigest()


@functools.lru_cache(maxsize=None)
def _distributions() -> tuple[tuple[str, str | None], ...]:
    """(name, installed version or None) of this package's distribution (pyproject.toml's name) and nbgrader's.

    Looked up by name (:data:`PROJECT_DISTRIBUTION`); only where no distribution of that name is installed (a fork
    installed under its own name) by ``packages_distributions``, which reads the metadata of every installed
    distribution (0.2-0.45 s, a share of a re-run's fixed cost). Once per process: every student's job asks twice
    (its graded notebook's label and the version in it); a job forked from ``make grade`` inherits what its parent
    found (installed packages do not change while a class is graded).
    """
    def version(package: str) -> str | None:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return None

    ours = PROJECT_DISTRIBUTION  # this project's own distribution, where it is installed as itself (0.002 s)
    if version(ours) is None:  # installed under another name (a fork): find what provides autograder
        ours = metadata.packages_distributions().get("autograder", ["?"])[0]
    return tuple((package, version(package)) for package in (ours, "nbgrader"))


def grader_version(course_dir: Path) -> str:
    """The grader's version as a hash: package versions, the grading code, the course's ``nbgrader_config.py``."""
    versions = [f"{package}={version or '?'}" for package, version in _distributions()]
    text = "|".join([*versions, _code_hash(), _grading_config_hash(Path(course_dir) / "nbgrader_config.py"),
                     tree_hash(Path(course_dir) / "cohort.json")])  # the cohort's seed of the hidden cases
    return hashlib.sha256(text.encode()).hexdigest()


#: A line of nbgrader_config.py that says where the gradebook is (a Dask worker's job adds one for its private
#: copy; a class may keep its gradebook on PostgreSQL): it changes no grade, so it is not part of the grader.
_GRADEBOOK_LINE = re.compile(r"^\s*c\.CourseDirectory\.db_url\s*=.*$", re.M)


def _grading_config_hash(config: Path) -> str:
    """Hash of the course's ``nbgrader_config.py`` without the lines that only say where the gradebook is, blank
    lines and comment lines."""
    if not config.is_file():
        return "none"
    lines = [line for line in _GRADEBOOK_LINE.sub("", config.read_text()).splitlines()
             if line.strip() and not line.lstrip().startswith("#")]  # nor blank lines and comments
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def grader_label(course_dir: Path) -> str:
    """The grader's version as people read it, for feedback and the class report.

    Returns
    -------
    str
        ``"attention-lab 0.1.0, nbgrader 0.9.6, grader 1a2b3c4d5e6f"``: the installed distributions and the
        first 12 hex digits of :func:`grader_version` (which also covers the grading code and the course's
        ``nbgrader_config.py``, so that two gradings with the same label used the same grader).
    """
    parts = [f"{package} {version or '(version unknown)'}" for package, version in _distributions()]
    return ", ".join([*parts, f"grader {grader_version(course_dir)[:12]}"])


def spec_hash(assignment: str) -> str:
    """Hash of the assignment's folder in ``autograder/assignments/`` ("" for an assignment the grader does not know)."""
    try:
        folder = assignments.folder_of(assignment)
    except KeyError:
        return ""
    return tree_hash(Path(assignments.__file__).parent / folder)


def fingerprint(course_dir: Path, assignment: str, student: str, grader: str | None = None,
                source: str | None = None, spec: str | None = None) -> dict[str, str]:
    """The four hashes a grade of ``student`` on ``assignment`` depends on (see the module docstring).

    Parameters
    ----------
    course_dir : Path
        The course root.
    assignment, student : str
        Which submission.
    grader : str, optional
        :func:`grader_version`, when the caller computed it once for the class.
    source, spec : str, optional
        The assignment's source hash (:func:`tree_hash` of ``source/<assignment>``) and :func:`spec_hash`, when
        the caller computed them once for the class (a class of 300 would hash them 300 times otherwise).

    Returns
    -------
    dict
        ``{"submission", "source", "spec", "grader"}`` → hex digest.
    """
    course_dir = Path(course_dir)
    return {"submission": tree_hash(course_dir / "submitted" / student / assignment),
            "source": source if source is not None else tree_hash(course_dir / "source" / assignment),
            "spec": spec if spec is not None else spec_hash(assignment),
            "grader": grader if grader is not None else grader_version(course_dir)}


def loaded_source_fingerprint(course_dir: Path, assignment: str, grader: str | None = None) -> str:
    """What the gradebook's copy of ``assignment`` (cells, hidden tests) was made from: its source folder and
    the grader's version (nbgrader's and the course configuration's preprocessors), as one hash."""
    grader = grader if grader is not None else grader_version(course_dir)
    return hashlib.sha256(f"{tree_hash(Path(course_dir) / 'source' / assignment)}|{grader}".encode()).hexdigest()


class GradingRecord:
    """The fingerprints and table notes of graded submissions, in ``<course>/gradebook-hashes.json``.

    Written only by the process that writes the gradebook, after each student's rows are in it
    (atomically: a new file renamed over the old one).
    """

    def __init__(self, course_dir: Path):
        self.path = Path(course_dir) / RECORD_NAME
        try:
            self.data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.data = {}
        if not isinstance(self.data.get("assignments"), dict):
            self.data = {"version": 1, "assignments": {}}

    def entry(self, assignment: str, student: str) -> dict | None:
        """``{"fingerprint", "notes"}`` stored when ``student``'s submission of ``assignment`` was graded, or None."""
        return self.data["assignments"].get(assignment, {}).get(student)

    def unchanged(self, assignment: str, student: str, current: dict[str, str]) -> bool:
        """Whether ``student`` was graded from exactly ``current`` (the same four hashes)."""
        entry = self.entry(assignment, student)
        return entry is not None and entry.get("fingerprint") == current

    def notes(self, assignment: str, student: str) -> list[str]:
        """The table notes of that grading (extra files left out, ...), shown again when it is not re-graded."""
        entry = self.entry(assignment, student) or {}
        return list(entry.get("notes", []))

    def graded(self, assignment: str, student: str, current: dict[str, str], notes: list[str]) -> None:
        """Record that ``student`` was graded from ``current`` (:func:`fingerprint`), with the table's ``notes``."""
        self.data["assignments"].setdefault(assignment, {})[student] = {"fingerprint": current, "notes": notes}
        self.data.get("failed", {}).get(assignment, {}).pop(student, None)
        self._save()

    def forget(self, assignment: str, student: str, reason: str | None = None) -> None:
        """Drop the record of ``student`` (not graded this time: the next run tries again).

        ``reason``, the one line saying why it was not graded, is kept for the class report
        (:meth:`failures`) until the student is graded.
        """
        dropped = self.data["assignments"].get(assignment, {}).pop(student, None) is not None
        if reason is not None:
            self.data.setdefault("failed", {}).setdefault(assignment, {})[student] = reason
        if dropped or reason is not None:
            self._save()

    def failures(self, assignment: str) -> dict[str, str]:
        """student → why their submission of ``assignment`` was not graded in the last run that tried it."""
        return dict(self.data.get("failed", {}).get(assignment, {}))

    def loaded_source(self, assignment: str) -> str | None:
        """The fingerprint of the assignment's source last loaded into the gradebook (:meth:`loaded`), or None."""
        return self.data.get("loaded", {}).get(assignment)

    def loaded(self, assignment: str, source: str) -> None:
        """Record that ``generate_assignment`` loaded ``assignment`` into the gradebook from a source with
        fingerprint ``source`` (the source folder's hash with the grader's version)."""
        self.data.setdefault("loaded", {})[assignment] = source
        self._save()

    def _save(self) -> None:
        partial = self.path.with_name(self.path.name + ".partial")
        partial.write_text(json.dumps(self.data, indent=1, sort_keys=True))
        os.replace(partial, self.path)
