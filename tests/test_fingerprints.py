"""What a re-run of ``make grade`` compares: the hashes of a submission, its assignment's source and spec, the grader."""

import shutil

from autograder.nbgrader import fingerprints, gradebook_copy
from autograder.nbgrader.fingerprints import GradingRecord, fingerprint, grader_version, tree_hash
from conftest import ASSIGNMENT, REPO


def make_course(tmp_path):
    course = tmp_path / "course"
    (course / "source").mkdir(parents=True)
    shutil.copytree(REPO / "source" / ASSIGNMENT, course / "source" / ASSIGNMENT)
    shutil.copy(REPO / "nbgrader_config.py", course / "nbgrader_config.py")
    submission = course / "submitted" / "amy" / ASSIGNMENT
    submission.mkdir(parents=True)
    (submission / "notebook.ipynb").write_text("{}")
    return course, submission


def test_each_part_of_the_fingerprint_follows_what_it_hashes(tmp_path):
    course, submission = make_course(tmp_path)
    first = fingerprint(course, ASSIGNMENT, "amy")
    assert fingerprint(course, ASSIGNMENT, "amy") == first and all(first.values())
    (submission / "timestamp.txt").write_text("2026-12-01 10:00:00 UTC")  # the late penalty depends on it
    changed = fingerprint(course, ASSIGNMENT, "amy")
    assert {k for k in first if first[k] != changed[k]} == {"submission"}
    (course / "source" / ASSIGNMENT / "extra.txt").write_text("a new file in the assignment")
    assert {k for k in first if fingerprint(course, ASSIGNMENT, "amy")[k] != changed[k]} == {"source"}
    with open(course / "nbgrader_config.py", "a") as config:
        config.write("\nc.Execute.timeout = 31\n")
    assert grader_version(course) != first["grader"]


def test_caches_do_not_count_and_a_renamed_file_does(tmp_path):
    tree = tmp_path / "tree"
    (tree / "__pycache__").mkdir(parents=True)
    (tree / "a.py").write_text("x = 1")
    before = tree_hash(tree)
    (tree / "__pycache__" / "a.pyc").write_bytes(b"cache")
    (tree / ".ipynb_checkpoints").mkdir()
    assert tree_hash(tree) == before
    (tree / "a.py").rename(tree / "b.py")
    assert tree_hash(tree) != before
    assert tree_hash(tmp_path / "missing") == ""


def test_every_assignment_has_its_own_spec_hash_and_an_unknown_one_none():
    from autograder import assignments

    hashes = {name: fingerprints.spec_hash(name) for name in assignments.all_assignments()}
    assert all(hashes.values()) and len(set(hashes.values())) == len(hashes)
    assert fingerprints.spec_hash("not-an-assignment") == ""


def test_the_record_keeps_what_was_graded_next_to_the_gradebook(tmp_path):
    record = GradingRecord(tmp_path)
    print_ = {"submission": "1", "source": "2", "spec": "3", "grader": "4"}
    assert not record.unchanged(ASSIGNMENT, "amy", print_)
    record.graded(ASSIGNMENT, "amy", print_, ["extra files not copied: a.py"])
    again = GradingRecord(tmp_path)
    assert (tmp_path / fingerprints.RECORD_NAME).is_file()
    assert again.unchanged(ASSIGNMENT, "amy", print_) and not again.unchanged(ASSIGNMENT, "amy", {**print_, "spec": "x"})
    assert again.notes(ASSIGNMENT, "amy") == ["extra files not copied: a.py"]
    again.forget(ASSIGNMENT, "amy")
    assert not GradingRecord(tmp_path).unchanged(ASSIGNMENT, "amy", print_)
    (tmp_path / fingerprints.RECORD_NAME).write_text("not json")
    assert not GradingRecord(tmp_path).unchanged(ASSIGNMENT, "amy", print_)


def test_generate_assignment_is_skipped_only_for_the_source_the_gradebook_holds(tmp_path):
    from nbgrader.api import Gradebook

    from autograder.course import COURSE_ID
    from autograder.nbgrader.grading import already_loaded

    course, _ = make_course(tmp_path)
    grader = grader_version(course)
    record = GradingRecord(course)
    assert not already_loaded(course, ASSIGNMENT, record, grader)  # no gradebook yet
    gradebook_copy.new_gradebook(course / "gradebook.db")  # the run's empty gradebook: no `alembic heads`
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", course_id=COURSE_ID) as gradebook:
        gradebook.add_assignment(ASSIGNMENT)
        gradebook.add_notebook("notebook", ASSIGNMENT)
        gradebook.add_grade_cell("test_softmax", "notebook", ASSIGNMENT, max_score=1, cell_type="code")
    assert not already_loaded(course, ASSIGNMENT, record, grader)  # in the gradebook, but from which source?
    record.loaded(ASSIGNMENT, fingerprints.loaded_source_fingerprint(course, ASSIGNMENT, grader))
    assert already_loaded(course, ASSIGNMENT, GradingRecord(course), grader)
    assert not already_loaded(course, ASSIGNMENT, record, "another grader")
    (course / "source" / ASSIGNMENT / "extra.txt").write_text("an edited source")
    assert not already_loaded(course, ASSIGNMENT, record, grader)
    (course / "source" / ASSIGNMENT / "extra.txt").unlink()
    assert already_loaded(course, ASSIGNMENT, record, grader)
    (course / "gradebook.db").unlink()  # a new cohort's empty gradebook: load it again
    assert not already_loaded(course, ASSIGNMENT, record, grader)


def test_where_the_gradebook_is_and_comments_are_not_part_of_the_grader_s_version(tmp_path):
    """A Dask worker's job (and a PostgreSQL class) add a db_url line: the same grader must keep the same version,
    or feedback graded there would name another grader than the local run's; a real setting changes it."""
    shutil.copy(REPO / "nbgrader_config.py", tmp_path)
    before = fingerprints.grader_version(tmp_path)
    with open(tmp_path / "nbgrader_config.py", "a") as config:
        config.write("\n# added by the worker: this job's private gradebook\n"
                     "c.CourseDirectory.db_url = 'sqlite:////tmp/job/gradebook.db'\n")
    assert fingerprints.grader_version(tmp_path) == before
    with open(tmp_path / "nbgrader_config.py", "a") as config:
        config.write("c.ExecutePreprocessor.timeout = 5\n")
    assert fingerprints.grader_version(tmp_path) != before
