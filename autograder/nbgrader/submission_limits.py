"""Limits on what one submission may be, checked before nbgrader reads it.

A notebook of 300,000 Markdown cells (28 MB) once took 13 minutes and 4.7 GB
to grade. Each submission is checked here first, cheaply: the file's size
before it is read, then — after a parse bounded by that size — its cells and
outputs, before any preprocessor runs. Extra files in the submission folder
and the student id are checked too (both reach Formgrader's pages).

Defaults are at least 10× the largest honest notebook (measured by
``benchmarks/honest_notebooks.py``: 397 KiB, 45 cells, 17 outputs, the
executed solutions with their outputs and widget state); change them in
``nbgrader_config.py``, e.g. ``c.SubmissionLimits.max_cells = 2000``.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

from traitlets import Integer
from traitlets.config import Configurable

from autograder.nbgrader.sanitize import inert_text

#: Student ids that are safe in Formgrader's pages, URLs and scripts (it writes them unescaped).
SAFE_STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")


class SubmissionLimits(Configurable):
    """What one submitted notebook may hold (``c.SubmissionLimits.<name>`` in ``nbgrader_config.py``)."""

    max_notebook_bytes = Integer(8 * 2**20, help="Largest notebook file, bytes (checked before it is read).").tag(
        config=True)
    max_cells = Integer(1000, help="Most cells in one notebook.").tag(config=True)
    max_outputs = Integer(2000, help="Most outputs in one notebook, all cells together.").tag(config=True)


def byte_size(count: int) -> str:
    """``count`` bytes in words: ``"8.0 MiB"``, ``"1.5 GiB"``, ``"12.3 KiB"``."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} B"


def student_id_problem(student: str) -> str | None:
    """Why ``student`` cannot be graded under this id (shown inert), or None if it is a safe identifier."""
    if SAFE_STUDENT_ID.match(student):
        return None
    return (f"the student id {inert_text(student, 60)} is not a safe identifier (letters, digits, '.', '_', '@', '-'; "
            "at most 64)")


REFUSED = "refused"


def quarantine(course_dir: Path, student: str) -> Path:
    """Move ``submitted/<student>/`` (an unsafe id) to ``refused/student-<hash>/``, out of Formgrader's sight.

    Formgrader lists every folder of ``submitted/`` and links each to a page
    that writes the id into a script unescaped, so a folder named like HTML
    would run in the instructor's browser when clicked. The submission is
    kept, under a name that is safe, with the original id in ``student-id.txt``.
    """
    target = course_dir / REFUSED / f"student-{hashlib.sha256(student.encode()).hexdigest()[:12]}"
    target.parent.mkdir(exist_ok=True)
    if target.exists():
        shutil.rmtree(target)
    shutil.move(str(course_dir / "submitted" / student), str(target))
    (target / "student-id.txt").write_text(student + "\n")
    return target


def notebook_problem(path: Path, limits: SubmissionLimits) -> str | None:
    """Why the notebook at ``path`` is over a limit or unreadable, in one line, or None.

    The size is checked before the file is read; cells and outputs after
    ``json.loads`` of at most ``max_notebook_bytes``.
    """
    name = path.name
    size = path.stat().st_size
    if size == 0:
        return f"{name} is an empty file"
    if size > limits.max_notebook_bytes:
        return (f"{name} is over the file-size limit: {byte_size(size)} ({size} bytes), "
                f"limit {byte_size(limits.max_notebook_bytes)} (SubmissionLimits.max_notebook_bytes)")
    try:
        with open(path, "rb") as handle:
            nb = json.loads(handle.read(limits.max_notebook_bytes + 1))
    except (ValueError, UnicodeDecodeError) as error:
        return f"{name} is not a valid notebook ({type(error).__name__}: {str(error).splitlines()[0][:120]})"
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        return f"{name} is not a valid notebook (it has no list of cells)"
    if len(cells) > limits.max_cells:
        return (f"{name} is over the cell limit: {len(cells)} cells, limit {limits.max_cells} "
                "(SubmissionLimits.max_cells)")
    outputs = sum(len(c["outputs"]) for c in cells if isinstance(c, dict) and isinstance(c.get("outputs"), list))
    if outputs > limits.max_outputs:
        return (f"{name} is over the output limit: {outputs} outputs, limit {limits.max_outputs} "
                "(SubmissionLimits.max_outputs)")
    return None


def submission_problem(folder: Path, notebooks: list[str], limits: SubmissionLimits) -> str | None:
    """One line saying why the submission in ``folder`` cannot be graded as it stands, or None if it can.

    nbgrader would otherwise skip a misnamed notebook silently, fail on
    invalid JSON deep in its log, or take minutes and gigabytes on a huge one.
    """
    found = sorted(p.name for p in folder.glob("*.ipynb"))
    for name in notebooks:
        path = folder / name
        if not path.is_file():
            others = f"; found {', '.join(inert_text(f, 40) for f in found)} — rename it to {name}" if found else \
                "; the folder has no notebook"
            return f"missing {name}{others}"
        problem = notebook_problem(path, limits)
        if problem:
            return problem
    return None


def extra_files(folder: Path, notebooks: list[str]) -> list[str]:
    """Files in a submission folder other than its notebooks (nbgrader would copy them where Formgrader serves them)."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if p.is_file() and str(p.relative_to(folder)) not in notebooks)
