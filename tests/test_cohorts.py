"""Changing an assignment after submissions exist: refused in one line with nothing changed, or a new cohort.

Also: grading reads the assignment from the gradebook and the source loaded with it, never ``source/`` as it
is when a student is graded; and a cohort's seed of the hidden cases comes from ``cohort.json``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import warnings
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook
from sqlalchemy.exc import SAWarning
from traitlets import log as traitlets_log

from autograder import assignments
from autograder.course import COURSE_ID
from autograder.grader.in_process import grade_variant
from autograder.nbgrader import cohorts, fingerprints, gradebook_copy, grading, release
from autograder.nbgrader.gradebook_copy import sqlite_url
from autograder.nbgrader.gradebook_load import GenerateFailed, generate, planned_cells, refused_change
from autograder.nbgrader.notebook_cells import nbgrader_meta, read
from autograder.nbgrader.preprocessors import course_grader
from autograder.examples import example_class
from conftest import ASSIGNMENT, NOTEBOOK, REPO, SOURCE_NB

A1 = assignments.get(ASSIGNMENT)
NOTEBOOK_ID = NOTEBOOK.removesuffix(".ipynb")


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path → bytes): equal trees are byte-identical."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def read_only_cell(grade_id: str, text: str = "A note added after release."):
    cell = nbformat.v4.new_markdown_cell(text)
    cell.metadata["nbgrader"] = {"grade": False, "solution": False, "locked": True, "grade_id": grade_id,
                                 "schema_version": 3}
    return cell


def edit_source(course: Path, change) -> None:
    path = course / "source" / ASSIGNMENT / NOTEBOOK
    nb = read(path)
    change(nb)
    nbformat.write(nb, str(path))


def add_submission(gradebook: Gradebook, student: str) -> None:
    with warnings.catch_warnings():  # nbgrader's add_submission always trips SQLAlchemy's autoflush warning
        warnings.simplefilter("ignore", SAWarning)
        gradebook.update_or_create_student(student)
        gradebook.add_submission(ASSIGNMENT, student)


# ---- the check before nbgrader, the cohort's seed, the archive (in-process) --------------------------------------

def gradebook_like_nbgrader(course: Path) -> Gradebook:
    """A gradebook holding the source notebook's cells as generate_assignment records them (no nbgrader run)."""
    planned = planned_cells(read(SOURCE_NB))
    cell_types = {nbgrader_meta(c).get("grade_id"): c.cell_type for c in read(SOURCE_NB).cells}
    gradebook = Gradebook(sqlite_url(gradebook_copy.new_gradebook(course / "gradebook.db")), course_id=COURSE_ID)
    gradebook.add_assignment(ASSIGNMENT)
    gradebook.add_notebook(NOTEBOOK_ID, ASSIGNMENT)
    for name in planned["grade"]:
        gradebook.add_grade_cell(name, NOTEBOOK_ID, ASSIGNMENT, max_score=1, cell_type=cell_types[name])
    for name in planned["solution"]:
        gradebook.add_solution_cell(name, NOTEBOOK_ID, ASSIGNMENT)
    for name in planned["source"]:
        gradebook.add_source_cell(name, NOTEBOOK_ID, ASSIGNMENT, cell_type=cell_types[name], source="")
    return gradebook


@pytest.fixture
def course(tmp_path):
    return grading.copy_course(REPO, tmp_path / "course")


@pytest.mark.slow  # making a gradebook runs nbgrader's `alembic heads` (seconds)
def test_the_check_refuses_an_added_or_removed_cell_or_notebook_once_there_are_submissions_only(course):
    def undo():
        shutil.copy(SOURCE_NB, course / "source" / ASSIGNMENT / NOTEBOOK)

    with gradebook_like_nbgrader(course) as gradebook:
        assert refused_change(course, ASSIGNMENT) is None, "the source as loaded: nothing changes"
        edit_source(course, lambda nb: nb.cells.append(read_only_cell("extra_note")))
        assert refused_change(course, ASSIGNMENT) is None, "no submission yet: nbgrader may change the cells"
        add_submission(gradebook, "alice")
    assert refused_change(course, ASSIGNMENT) == (
        f"source/{ASSIGNMENT}/{NOTEBOOK} adds cell 'extra_note' but the gradebook holds 1 submission(s) of {ASSIGNMENT}")
    undo()
    solution = next(c for c in read(SOURCE_NB).cells if nbgrader_meta(c).get("solution"))
    removed = nbgrader_meta(solution)["grade_id"]
    edit_source(course, lambda nb: nb.cells.remove(next(c for c in nb.cells if nbgrader_meta(c).get("grade_id") == removed)))
    assert f"{NOTEBOOK} removes cell '{removed}' but" in refused_change(course, ASSIGNMENT)
    undo()

    def grade_the_answer(nb):
        cell = next(c for c in nb.cells if nbgrader_meta(c).get("grade_id") == removed)
        cell.metadata["nbgrader"].update(grade=True, points=1)
    edit_source(course, grade_the_answer)
    assert f"{NOTEBOOK} changes whether cell '{removed}' is graded, an answer, a task or read-only but" in \
        refused_change(course, ASSIGNMENT)
    undo()

    def reword(nb):
        for cell in nb.cells:
            if nbgrader_meta(cell).get("solution") or nbgrader_meta(cell).get("grade"):
                cell.source += "\n# reworded"
    edit_source(course, reword)
    assert refused_change(course, ASSIGNMENT) is None, "the same cells with other text: nbgrader allows it"
    undo()
    shutil.copy(SOURCE_NB, course / "source" / ASSIGNMENT / "extra.ipynb")
    assert refused_change(course, ASSIGNMENT).startswith(f"source/{ASSIGNMENT}/ adds notebook 'extra.ipynb' but")


def test_the_grader_takes_its_seed_from_cohort_json(course):
    from traitlets.config import Config

    config = Config()
    config.CourseDirectory.root = str(course)
    resources = {"nbgrader": {"assignment": ASSIGNMENT}}
    assert course_grader(config, resources).seed is None, "no cohort.json: the course's own seeds"
    default_request = course_grader(config, resources).request("test_softmax")
    (course / "cohort.json").write_text(json.dumps({"seed": 12345, "started": "2027-01-01T00:00:00+00:00"}))
    grader = course_grader(config, resources)
    assert grader.seed == 12345
    assert grader.request("test_softmax") != default_request, "another seed gives other hidden inputs"
    assert course_grader(config, resources).request("test_softmax") == grader.request("test_softmax")
    (course / "cohort.json").write_text('{"seed": "12345"}')
    with pytest.raises(ValueError, match="integer"):
        course_grader(config, resources)


def test_a_new_seed_makes_every_submission_due_for_grading_again(course):
    before = fingerprints.grader_version(course)
    (course / "cohort.json").write_text(json.dumps({"seed": 1}))
    assert fingerprints.grader_version(course) != before


def fake_class(course: Path) -> dict[str, bytes]:
    """The files a graded class leaves (bytes made up: nothing here runs nbgrader)."""
    for relative, text in {"gradebook.db": "db", "gradebook-hashes.json": "{}",
                           f"gradebook-source/source/{ASSIGNMENT}/{NOTEBOOK}": "nb",
                           f"submitted/alice/{ASSIGNMENT}/{NOTEBOOK}": "alice's", f"autograded/alice/{ASSIGNMENT}/{NOTEBOOK}": "g",
                           f"feedback/alice/{ASSIGNMENT}/{NOTEBOOK_ID}.html": "f", f"grades-{ASSIGNMENT}.csv": "csv",
                           "grading.log": "log", f"release/{ASSIGNMENT}/{NOTEBOOK}": "release"}.items():
        (course / relative).parent.mkdir(parents=True, exist_ok=True)
        (course / relative).write_text(text)
    return tree_bytes(course)


def test_new_cohort_archives_the_class_rotates_the_seed_and_restores(course, capsys):
    before = fake_class(course)
    assert cohorts.main(["--course-dir", str(course), "--label", "autumn", "--seed", "7"]) == 0
    out = capsys.readouterr().out
    assert "cohorts/autumn/" in out and "--restore autumn" in out and "seed 7" in out
    archive = course / "cohorts" / "autumn"
    for name in {relative.split("/")[0] for relative in before} - set(cohorts.COPIED) - {"nbgrader_config.py"}:
        assert not (course / name).exists() and (archive / name).exists(), name
    assert not list(course.glob("grades*.csv"))
    assert tree_bytes(archive / "release") == tree_bytes(course / "release"), "release/ copied, still in place"
    assert tree_bytes(archive / "source") == tree_bytes(course / "source")
    assert json.loads((archive / "cohort.json").read_text())["seed"] is None, "graded with the course's own seeds"
    assert cohorts.cohort_seed(course) == 7
    # the next cohort: the date as label, another seed
    assert cohorts.main(["--course-dir", str(course)]) == 0
    labels = sorted(p.name for p in (course / "cohorts").iterdir())
    assert len(labels) == 2 and cohorts.cohort_seed(course) not in (None, 7)
    assert json.loads((course / "cohorts" / labels[0] / "cohort.json").read_text())["seed"] == 7
    # refusals: one line, nothing changed
    state = tree_bytes(course)
    assert cohorts.main(["--course-dir", str(course), "--label", "autumn"]) == 1
    assert cohorts.main(["--course-dir", str(course), "--seed", str(cohorts.cohort_seed(course))]) == 1
    assert cohorts.main(["--course-dir", str(course), "--restore", "spring"]) == 1
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 3 and all(line.startswith("new-cohort stopped: ") for line in errors), errors
    assert tree_bytes(course) == state
    # restore the first: its class and release come back as they were, the current cohort is archived
    (course / "release" / ASSIGNMENT / NOTEBOOK).write_text("a later release")
    assert cohorts.main(["--course-dir", str(course), "--restore", "autumn"]) == 0
    restored = tree_bytes(course)
    assert {k: v for k, v in restored.items() if not k.startswith("cohorts/")} == before
    assert not (course / "cohort.json").exists(), "the restored cohort used the course's own seeds"


# ---- nbgrader end to end -----------------------------------------------------------------------------------

@pytest.mark.slow
def test_generate_runs_nbgrader_in_this_process_and_leaves_the_caller_s_log_output_path_and_folder_alone(
        tmp_path, monkeypatch, capfd):
    """nbgrader's log stays in its result (the refusal quotes it), and a caller sees no sign that it ran here."""
    course = grading.copy_course(REPO, tmp_path / "course")
    commands = []

    class Recorded(subprocess.Popen):
        def __init__(self, args, *rest, **kwargs):
            commands.append(list(args) if isinstance(args, (list, tuple)) else [args])
            super().__init__(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", Recorded)
    class Kept(logging.Handler):  # a caller that logs everything (pytest's own caplog also sees non-propagating loggers)
        records = []

        def emit(self, record):
            self.records.append(record)

    monkeypatch.setattr(logging.root, "handlers", [Kept(logging.DEBUG)])
    monkeypatch.setattr(logging.root, "level", logging.DEBUG)
    shared_log = traitlets_log.get_logger()
    before = {"PATH": os.environ["PATH"], "cwd": os.getcwd(), "traitlets level": shared_log.level}

    generate(course, ASSIGNMENT)
    # nbgrader's `alembic heads` runs for the first new gradebook of this process only (gradebook_copy.new_gradebook)
    assert [Path(str(command[0])).name for command in commands] in ([], ["alembic"]), (
        "no `python -m nbgrader`: at most nbgrader's `alembic heads`, for a new gradebook")
    assert tree_bytes(course / "release") == {f"{ASSIGNMENT}/{name}": data for name, data in
                                              tree_bytes(REPO / "release" / ASSIGNMENT).items()}, "as committed"
    with Gradebook(sqlite_url(course / "gradebook.db"), course_id=COURSE_ID) as gradebook:
        assert [nb.name for nb in gradebook.find_assignment(ASSIGNMENT).notebooks] == [NOTEBOOK_ID]

    twin = next(c for c in read(SOURCE_NB).cells if nbgrader_meta(c).get("locked") and not nbgrader_meta(c).get("grade"))
    edit_source(course, lambda nb: nb.cells.append(read_only_cell(nbgrader_meta(twin)["grade_id"])))
    state = {"release": tree_bytes(course / "release"), "gradebook.db": (course / "gradebook.db").read_bytes()}
    with pytest.raises(GenerateFailed) as failed:
        generate(course, ASSIGNMENT, what="make grade")
    assert str(failed.value) == (f"make grade stopped: nbgrader generate_assignment {ASSIGNMENT} failed (ValidationError: "
                                 f"Duplicate grade id: {nbgrader_meta(twin)['grade_id']}); release/ and the gradebook "
                                 "are unchanged")
    assert tree_bytes(course / "release") == state["release"]
    assert (course / "gradebook.db").read_bytes() == state["gradebook.db"]
    assert not list(course.glob(".release-*")), "the scratch folders are gone"

    from_nbgrader = [r.getMessage()[:200] for r in Kept.records if {"nbgrader", "nbconvert"} & set(Path(r.pathname).parts)]
    assert from_nbgrader == []
    assert Kept.records, "the caller's log still has its own records (traitlets' config loader's)"
    assert capfd.readouterr() == ("", ""), "nothing printed: no nbgrader line, no warning"
    assert {"PATH": os.environ["PATH"], "cwd": os.getcwd(), "traitlets level": shared_log.level} == before


@pytest.mark.slow
def test_a_refused_release_changes_nothing_and_a_new_cohort_makes_it_work(tmp_path, capsys):
    course = grading.copy_course(REPO, tmp_path / "course", folders=("source", "release"))
    release.generate_release(course, [ASSIGNMENT])  # the gradebook, as `make release` leaves it
    with Gradebook(sqlite_url(course / "gradebook.db"), course_id=COURSE_ID) as gradebook:
        add_submission(gradebook, "alice")
    assert refused_change(course, ASSIGNMENT) is None, "the check reads the cells as nbgrader recorded them"
    (course / "submitted" / "alice" / ASSIGNMENT).mkdir(parents=True)
    shutil.copy(REPO / "release" / ASSIGNMENT / NOTEBOOK, course / "submitted" / "alice" / ASSIGNMENT / NOTEBOOK)
    edit_source(course, lambda nb: nb.cells.append(read_only_cell("extra_note")))
    state = {"release": tree_bytes(course / "release"), "gradebook.db": (course / "gradebook.db").read_bytes()}

    assert release.main(["--course-dir", str(course), ASSIGNMENT]) == 1
    assert grading.main(["--course-dir", str(course), ASSIGNMENT]) == 1
    captured = capsys.readouterr()
    errors = captured.err.strip().splitlines()
    assert len(errors) == 2 and "Traceback" not in captured.err + captured.out, captured.err
    for line, command in zip(errors, ["make release", "make grade"]):
        assert line.startswith(f"{command} stopped: source/{ASSIGNMENT}/{NOTEBOOK} adds cell 'extra_note' "
                               f"but the gradebook holds 1 submission(s)"), line
        assert "make new-cohort" in line
    assert tree_bytes(course / "release") == state["release"]
    assert (course / "gradebook.db").read_bytes() == state["gradebook.db"]

    # any other failure of nbgrader (here: two cells with one grade_id) leaves both as they were too
    edit_source(course, lambda nb: nb.cells.pop())
    twin = next(c for c in read(SOURCE_NB).cells if nbgrader_meta(c).get("locked") and not nbgrader_meta(c).get("grade"))
    edit_source(course, lambda nb: nb.cells.append(read_only_cell(nbgrader_meta(twin)["grade_id"])))
    assert release.main(["--course-dir", str(course), ASSIGNMENT]) == 1
    error = capsys.readouterr().err.strip().splitlines()
    assert error == [f"make release stopped: nbgrader generate_assignment {ASSIGNMENT} failed (ValidationError: "
                     f"Duplicate grade id: {nbgrader_meta(twin)['grade_id']}); release/ and the gradebook are unchanged"]
    assert tree_bytes(course / "release") == state["release"]
    assert (course / "gradebook.db").read_bytes() == state["gradebook.db"]

    # a new cohort: the old one archived, then the release with the added cell works
    edit_source(course, lambda nb: nb.cells.pop())
    edit_source(course, lambda nb: nb.cells.append(read_only_cell("extra_note")))
    assert cohorts.main(["--course-dir", str(course), "--label", "first"]) == 0
    assert (course / "cohorts" / "first" / "gradebook.db").read_bytes() == state["gradebook.db"]
    assert tree_bytes(course / "cohorts" / "first" / "release") == state["release"]
    assert not (course / "submitted").exists()
    assert release.main(["--course-dir", str(course), ASSIGNMENT]) == 0
    released = read(course / "release" / ASSIGNMENT / NOTEBOOK)
    assert nbgrader_meta(released.cells[-1]).get("grade_id") == "extra_note"
    assert refused_change(course, ASSIGNMENT) is None


@pytest.mark.slow
def test_editing_source_after_the_gradebook_is_loaded_changes_no_student_s_grade(tmp_path, monkeypatch):
    course = grading.copy_course(REPO, tmp_path / "course", folders=("source", "release"))
    mistaken = next(s for s in example_class.end_to_end_sample(A1)
                    if example_class.students_of(A1)[s] in A1.mistakes.values())
    variant = example_class.students_of(A1)[mistaken]
    example_class.build_submissions(course, A1, students=[mistaken])
    edited_cell = next(iter(variant.cells))  # the mistake's cell: the grader builds the mistake into it
    loaded = grading.load_into_gradebook

    def load_then_edit(course_dir, assignment):
        kept = loaded(course_dir, assignment)
        # mid-run, after generate and before the student: the instructor deletes that solution cell and
        # makes every other solution return something else
        def edit(nb):
            nb.cells = [c for c in nb.cells if nbgrader_meta(c).get("grade_id") != edited_cell]
            for cell in nb.cells:
                if nbgrader_meta(cell).get("solution"):
                    cell.source = cell.source.replace("return ", "return 2 * ")
        edit_source(course_dir, edit)
        return kept

    monkeypatch.setattr(grading, "load_into_gradebook", load_then_edit)
    steps, results = grading.grade_class(course, ASSIGNMENT, [mistaken], workers=1, progress=False)
    assert edited_cell not in {nbgrader_meta(c).get("grade_id") for c in read(course / "source" / ASSIGNMENT / NOTEBOOK).cells}
    (result,) = results
    assert result.steps is not None, result.note
    expected = grade_variant(A1, variant, REPO)  # the unedited course, in-process (equal to nbgrader elsewhere)
    assert {g: score for g, (score, _) in result.steps.items()} == {g: v.score for g, v in expected.items()}
    named = [key for verdict in expected.values() for key in verdict.named]
    assert result.named == list(dict.fromkeys(named)) and result.named
