"""``make check``: a self-study learner grades their own ``workspace/`` notebooks with the hidden tests.

The class grader does the work (:func:`autograder.nbgrader.grading.grade_class`: nbgrader's
``NbGraderAPI`` in a budgeted child process, the sandboxed kernel, the comparison outside the kernel,
feedback), in a **private scratch course** ``workspace/.check/`` — its own ``nbgrader_config.py`` (the
course's), ``source/``, ``submitted/learner/``, gradebook and feedback — never the instructor's
``submitted/``, ``autograded/``, ``feedback/`` or ``gradebook.db``.

The scratch course is kept between runs, so that checking again after a fix takes seconds: the
gradebook keeps the generated assignment (``generate_assignment`` runs again only when ``source/`` or the
grader changed), and the fingerprints of the class grader (:mod:`autograder.nbgrader.fingerprints`)
re-grade only the notebooks that changed since their last check.

Each check prints, per assignment, the table of steps with the points and the known mistakes named, and
the path of the feedback file, copied to ``workspace/feedback/<assignment>/<notebook>.html`` where
JupyterLab shows it (it hides folders whose name starts with a dot).

Where bubblewrap cannot run, the learner's notebook is graded outside the sandbox
(:mod:`autograder.sandbox.unsandboxed`), and the report says so once: ``check`` grades only the
learner's own code, which they run anyway; the class grader refuses that configuration.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder import assignments
from autograder.nbgrader import grading
from autograder.nbgrader.fingerprints import tree_hash

LEARNER = "learner"  # the one student of the scratch course
SCRATCH = Path("workspace") / ".check"  # the scratch course, under the learner's course folder
FEEDBACK = Path("workspace") / "feedback"  # where the learner opens the feedback
UNSANDBOXED = ("bubblewrap cannot run on this machine, so `make check` runs your notebook outside the grading "
               "sandbox: as you, with your files and the network, as Run All does in JupyterLab "
               "(grading a class never does this; install bubblewrap to check in the sandbox)")


@dataclass
class StepCheck:
    """One step of a checked notebook: its title, points, and the known mistakes named there (descriptions)."""

    title: str
    score: float
    points: float
    mistakes: list[str] = field(default_factory=list)
    unanswered: bool = False


@dataclass
class AssignmentCheck:
    """The check of one assignment's notebook in ``workspace/``.

    ``steps`` is empty when it was not graded; ``problem`` then says why. ``regraded`` is False when the
    notebook was unchanged since its last check (its grades are those of that check).
    """

    assignment: str
    notebook: Path
    steps: list[StepCheck] = field(default_factory=list)
    feedback: Path | None = None
    regraded: bool = True
    problem: str = ""
    note: str = ""

    @property
    def score(self) -> float:
        return sum(step.score for step in self.steps)

    @property
    def points(self) -> float:
        return sum(step.points for step in self.steps)


@dataclass
class CheckReport:
    """What one ``check`` found: one :class:`AssignmentCheck` per assignment, and how the code ran."""

    course_dir: Path
    checks: list[AssignmentCheck]
    sandboxed: bool = True
    sandbox_problem: str = ""  # why bubblewrap cannot run here, when it cannot

    def text(self) -> str:
        """The report as ``make check`` prints it (paths relative to the course folder)."""
        lines = [f"note: {UNSANDBOXED}.\n  ({self.sandbox_problem})", ""] if not self.sandboxed else []
        for check in self.checks:
            lines += assignment_text(check, self.course_dir) + [""]
        return "\n".join(lines).rstrip() + "\n"


def assignment_text(check: AssignmentCheck, course_dir: Path) -> list[str]:
    """Lines for one assignment: a heading, the per-step table with the mistakes named, the feedback's path."""
    where = relative_path(check.notebook, course_dir)
    if not check.steps:
        return [f"{check.assignment}: not checked: {check.problem}", f"  ({where})"]
    status = "checked now" if check.regraded else "unchanged since its last check"
    rows = [(step.title, f"{step.score:g}/{step.points:g}",
             "; ".join(step.mistakes) if step.mistakes else ("not answered yet" if step.unanswered else ""))
            for step in check.steps]
    rows.append(("total", f"{check.score:g}/{check.points:g}", ""))
    headers = ("step", "points", "mistake found")
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(2)]
    table = [f"  {a.ljust(widths[0])}  {b.ljust(widths[1])}  {c}".rstrip() for a, b, c in [headers, *rows]]
    table.insert(1, f"  {'-' * widths[0]}  {'-' * widths[1]}  {'-' * len(headers[2])}")
    lines = [f"{check.assignment}: {where} ({status})", *table]
    if check.note:
        lines.append(f"  note: {check.note}")
    if check.feedback is not None:
        lines.append(f"  feedback: {relative_path(check.feedback, course_dir)}")
    return lines


def relative_path(path: Path, root: Path) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return str(path)


def sandbox_problem(course_dir: Path) -> str:
    """Why the course's grading sandbox cannot run on this machine, in one line, or "" when it can.

    The course's ``nbgrader_config.py`` names bubblewrap (``c.SandboxedKernelManager.bwrap``, default
    ``bwrap`` on PATH) and the kernel's uid.
    """
    from autograder.sandbox import SandboxError, SandboxedKernelManager, check_sandbox

    settings = SandboxedKernelManager(config=grading.course_config(course_dir))
    try:
        check_sandbox(settings.bwrap, settings.kernel_uid)
    except SandboxError as error:
        return " ".join(str(error).split())
    return ""


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _copy_if_changed(source: Path, target: Path) -> None:
    if not target.exists() or target.read_bytes() != source.read_bytes():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def prepare_scratch(course_dir: Path, assignment: str, sandboxed: bool) -> Path:
    """Make or update the scratch course for ``assignment``: the course's config and source, unchanged files kept.

    Files whose bytes are unchanged are not rewritten, so the fingerprints of the last check still hold.

    Returns
    -------
    Path
        The scratch course, ``<course_dir>/workspace/.check``.
    """
    from autograder.sandbox.unsandboxed import CONFIG_BLOCK

    scratch = course_dir / SCRATCH
    config = (course_dir / "nbgrader_config.py").read_text() + ("" if sandboxed else CONFIG_BLOCK)
    _write_if_changed(scratch / "nbgrader_config.py", config)
    source, copy = course_dir / "source" / assignment, scratch / "source" / assignment
    if tree_hash(source) != tree_hash(copy):
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    return scratch


def hand_in(course_dir: Path, scratch: Path, assignment: str) -> str:
    """Copy the learner's notebooks of ``assignment`` from ``workspace/`` into the scratch course's ``submitted/``.

    Only the notebooks the assignment has (the source's names) are copied; other files in the learner's
    folder are theirs. Returns "" or why there is nothing to grade.
    """
    names = sorted(p.name for p in (course_dir / "source" / assignment).glob("*.ipynb"))
    mine = course_dir / "workspace" / assignment
    target = scratch / "submitted" / LEARNER / assignment
    if not mine.is_dir():
        return f"no workspace/{assignment}/ folder yet (`make lab` copies the released assignments there)"
    missing = [name for name in names if not (mine / name).is_file()]
    if missing:
        return f"workspace/{assignment}/ has no {', '.join(missing)}"
    target.mkdir(parents=True, exist_ok=True)
    for old in target.iterdir():
        if old.name not in names:
            shutil.rmtree(old) if old.is_dir() else old.unlink()
    for name in names:
        _copy_if_changed(mine / name, target / name)
    return ""


def _graded_steps(scratch: Path, assignment: str, steps: list[str], scores: dict) -> list[StepCheck]:
    """The steps of the learner's graded notebook, with the known mistakes named in each (from its grading record)."""
    grading_record: dict = {}
    for path in sorted((scratch / "autograded" / LEARNER / assignment).glob("*.ipynb")):
        grading_record.update(nbformat.read(str(path), as_version=4).metadata.get("attention_lab", {}).get("grading", {}))
    try:
        mistakes = assignments.get(assignment).mistakes
    except KeyError:
        mistakes = {}
    checked = []
    for grade_id in steps:
        record = grading_record.get(grade_id, {})
        named = [mistakes[key].description if key in mistakes else key for key in record.get("named", [])]
        score, points = scores[grade_id]
        checked.append(StepCheck(grading.step_name(grade_id, assignment), score, points, named,
                                 bool(record.get("unanswered"))))
    return checked


def check_assignment(course_dir: Path, assignment: str, sandboxed: bool, progress: bool | None = None) -> AssignmentCheck:
    """Grade the learner's notebook of ``assignment`` in the scratch course; copy its feedback where they open it.

    Raises
    ------
    autograder.nbgrader.preflight.GradingStopped
        When the grading kernel cannot start or import what the probes need.
    """
    names = sorted(p.name for p in (course_dir / "source" / assignment).glob("*.ipynb"))
    notebook = course_dir / "workspace" / assignment / (names[0] if names else "")
    scratch = prepare_scratch(course_dir, assignment, sandboxed)
    problem = hand_in(course_dir, scratch, assignment)
    shown = course_dir / FEEDBACK / assignment
    if problem:
        shutil.rmtree(shown, ignore_errors=True)
        return AssignmentCheck(assignment, notebook, problem=problem)
    steps, (result,) = grading.grade_class(scratch, assignment, [LEARNER], workers=1, progress=progress,
                                           unsandboxed_ok=not sandboxed)
    if result.steps is None:
        shutil.rmtree(shown, ignore_errors=True)
        return AssignmentCheck(assignment, notebook, problem=result.note.removeprefix("not graded: "))
    check = AssignmentCheck(assignment, notebook, _graded_steps(scratch, assignment, steps, result.steps),
                            regraded=not result.unchanged, note=result.note)
    feedback = sorted((scratch / "feedback" / LEARNER / assignment).glob("*.html"))
    shutil.rmtree(shown, ignore_errors=True)
    for page in feedback:
        _copy_if_changed(page, shown / page.name)
    if feedback:
        check.feedback = shown / feedback[0].name
    return check


def check(course_dir: Path, assignment_ids: list[str] | None = None, progress: bool | None = None) -> CheckReport:
    """Grade the learner's ``workspace/`` notebooks with the hidden tests, in the scratch course.

    Parameters
    ----------
    course_dir : Path
        The learner's course folder (a clone of this repository): ``nbgrader_config.py``, ``source/``,
        ``workspace/``.
    assignment_ids : list of str, optional
        Assignment ids (folders of ``source/``) or their numbers (``"01"``, ``"1"``); default: every
        assignment with a folder in ``workspace/``, where one whose notebook is still the release's is
        reported "not started yet" without grading it.
    progress : bool, optional
        The class grader's progress bar on stderr (default: when stderr is a terminal).

    Returns
    -------
    CheckReport
        One :class:`AssignmentCheck` per assignment, ``sandboxed=False`` (with the reason) where
        bubblewrap cannot run.

    Raises
    ------
    ValueError
        If an entry of ``assignment_ids`` names no assignment of ``source/``.
    autograder.nbgrader.preflight.GradingStopped
        When the grading kernel cannot start or import what the probes need.
    """
    course_dir = Path(course_dir).resolve()
    known = sorted(p.name for p in (course_dir / "source").iterdir() if p.is_dir())
    chosen = [resolve_assignment(name, known) for name in assignment_ids] if assignment_ids else [
        name for name in known if (course_dir / "workspace" / name).is_dir()] or known
    # nbgrader shells out to `alembic`: this interpreter's bin/ first (as `make` does), also from a kernel
    os.environ.update({"PATH": grading.nbgrader_environment()["PATH"]})
    problem = sandbox_problem(course_dir)
    report = CheckReport(course_dir, [], sandboxed=not problem, sandbox_problem=problem)
    for assignment in chosen:
        if not assignment_ids and untouched(course_dir, assignment):
            notebook = course_dir / "workspace" / assignment / _notebooks(course_dir, assignment)[0]
            report.checks.append(AssignmentCheck(assignment, notebook, problem=NOT_STARTED))
            continue
        report.checks.append(check_assignment(course_dir, assignment, report.sandboxed, progress))
    return report


NOT_STARTED = "not started yet (your notebook is still the one in release/; `make check A=NN` grades it anyway)"


def _notebooks(course_dir: Path, assignment: str) -> list[str]:
    return sorted(p.name for p in (course_dir / "source" / assignment).glob("*.ipynb"))


def untouched(course_dir: Path, assignment: str) -> bool:
    """Whether every notebook of ``assignment`` in ``workspace/`` is byte for byte the one in ``release/``."""
    names = _notebooks(course_dir, assignment)
    pairs = [(course_dir / "workspace" / assignment / n, course_dir / "release" / assignment / n) for n in names]
    return bool(names) and all(mine.is_file() and released.is_file() and mine.read_bytes() == released.read_bytes()
                               for mine, released in pairs)


def resolve_assignment(name: str, known: list[str]) -> str:
    """The assignment id ``name`` means: an id of ``known``, or its number (``01``, ``1``).

    Raises
    ------
    ValueError
        If it means none or several of ``known``; the message lists them.
    """
    if name in known:
        return name
    matches = [k for k in known if name.isdigit() and k.split("_")[0].isdigit() and int(k.split("_")[0]) == int(name)]
    if len(matches) != 1:
        raise ValueError(f"A={name!r} names no assignment; give one of {', '.join(known)} or its number (A=01)")
    return matches[0]


def main(argv: list[str] | None = None) -> int:
    """``python -m autograder check [ASSIGNMENT ...]``: check the learner's own notebooks; print the report.

    Returns 0 when the notebooks were checked (a notebook that could not be graded is listed with its
    reason), 1 when checking could not start (one line on stderr says why), 2 for an unknown assignment.
    """
    from autograder.nbgrader.preflight import GradingStopped

    parser = argparse.ArgumentParser(description="Grade your own workspace/ notebooks with the hidden tests, in a "
                                                 "private scratch course (workspace/.check/), and print the result.")
    parser.add_argument("assignments", nargs="*", help="assignment ids or numbers (default: every one in workspace/)")
    parser.add_argument("--course-dir", type=Path, default=Path.cwd(), help="your course folder (default: here)")
    args = parser.parse_args(argv)
    course_dir = args.course_dir.resolve()
    if not (course_dir / "source").is_dir() or not (course_dir / "nbgrader_config.py").is_file():
        print(f"check stopped: {course_dir} is not the course folder (no source/ or nbgrader_config.py)", file=sys.stderr)
        return 1
    try:
        report = check(course_dir, args.assignments)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    except GradingStopped as stopped:
        print(f"check stopped: {stopped}", file=sys.stderr)
        return 1
    print(report.text(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
