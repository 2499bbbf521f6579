"""What a grade was computed from, so that re-running ``make grade`` grades only what changed.

A submission's grade depends on four things, each hashed (SHA-256) by :func:`fingerprint`:

* ``submission`` — every file of ``submitted/<student>/<assignment>/`` (names and bytes, ``timestamp.txt``
  included: the late penalty depends on it);
* ``source`` — every file of ``source/<assignment>/`` (the cells and hidden tests the gradebook holds);
* ``spec`` — the assignment's folder ``autograder/assignments/aNN_*/`` (steps, hidden cases, reference,
  answer bank);
* ``grader`` — the grader's version: this package's version, nbgrader's, the code of ``autograder`` and
  ``attention_lab`` (the probes and self-checks run in the kernel) and the course's ``nbgrader_config.py``.

:class:`GradingRecord` keeps, next to the gradebook (``gradebook-hashes.json``), the fingerprint of each
submission that was graded; a submission whose fingerprint is unchanged and whose grades are still in the
gradebook is not graded again (unless ``--force``). A submission that was not graded is always tried again.
The record also keeps, per assignment, :func:`source_key` of the source and grader that ``generate_assignment``
last loaded into the gradebook, so that a re-run (``make check`` after a fix) does not load it again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from importlib import metadata
from pathlib import Path

from autograder import assignments

RECORD_NAME = "gradebook-hashes.json"
SKIPPED_PARTS = {"__pycache__", ".ipynb_checkpoints"}
PACKAGES = (Path(__file__).resolve().parents[1], Path(__file__).resolve().parents[2] / "attention_lab")


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


def grader_version(course_dir: Path) -> str:
    """The grader's version as a hash: package versions, the grading code, the course's ``nbgrader_config.py``."""
    versions = []
    # this package's distribution (pyproject.toml's name) as installed, and nbgrader's
    ours = metadata.packages_distributions().get("autograder", ["?"])[0]
    for package in (ours, "nbgrader"):
        try:
            versions.append(f"{package}={metadata.version(package)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{package}=?")
    text = "|".join([*versions, _code_hash(), tree_hash(Path(course_dir) / "nbgrader_config.py")])
    return hashlib.sha256(text.encode()).hexdigest()


def spec_hash(assignment: str) -> str:
    """Hash of the assignment's folder in ``autograder/assignments/`` ("" for an assignment the grader does not know)."""
    try:
        folder = assignments.folder_of(assignment)
    except KeyError:
        return ""
    return tree_hash(Path(assignments.__file__).parent / folder)


def fingerprint(course_dir: Path, assignment: str, student: str, grader: str | None = None) -> dict[str, str]:
    """The four hashes a grade of ``student`` on ``assignment`` depends on (see the module docstring).

    Parameters
    ----------
    course_dir : Path
        The course root.
    assignment, student : str
        Which submission.
    grader : str, optional
        :func:`grader_version`, when the caller computed it once for the class.

    Returns
    -------
    dict
        ``{"submission", "source", "spec", "grader"}`` → hex digest.
    """
    course_dir = Path(course_dir)
    return {"submission": tree_hash(course_dir / "submitted" / student / assignment),
            "source": tree_hash(course_dir / "source" / assignment),
            "spec": spec_hash(assignment),
            "grader": grader if grader is not None else grader_version(course_dir)}


def source_key(course_dir: Path, assignment: str, grader: str | None = None) -> str:
    """What the gradebook's copy of ``assignment`` (``generate_assignment``) depends on: its source and the grader."""
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
        self._save()

    def loaded(self, assignment: str, key: str) -> bool:
        """Whether ``assignment`` was loaded into the gradebook from the source and grader that :func:`source_key` hashed."""
        return self.data.get("loaded", {}).get(assignment) == key

    def mark_loaded(self, assignment: str, key: str) -> None:
        """Record that ``generate_assignment`` loaded ``assignment`` into the gradebook from ``key`` (:func:`source_key`)."""
        self.data.setdefault("loaded", {})[assignment] = key
        self._save()

    def forget(self, assignment: str, student: str) -> None:
        """Drop the record of ``student`` (not graded this time: the next run tries again)."""
        if self.data["assignments"].get(assignment, {}).pop(student, None) is not None:
            self._save()

    def _save(self) -> None:
        partial = self.path.with_name(self.path.name + ".partial")
        partial.write_text(json.dumps(self.data, indent=1, sort_keys=True))
        os.replace(partial, self.path)
