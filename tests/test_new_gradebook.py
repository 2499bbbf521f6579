"""A new gradebook is the file nbgrader makes, written from one made earlier in the process (no `alembic` run).

:func:`gradebook_copy.new_gradebook` keeps the bytes of the first empty gradebook nbgrader made for a course id
and schema; these tests check that a gradebook written from them holds what nbgrader's own holds, that no
subprocess runs for it, and that another course id or other migration scripts make nbgrader build it again; and
that with ``EMPTY_GRADEBOOKS`` set, a new process writes it from the one an earlier process made.
"""

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from autograder.course import COURSE_ID
from autograder.nbgrader import gradebook_copy

pytestmark = pytest.mark.slow  # nbgrader's `alembic heads` runs for each empty gradebook it makes: seconds


def dump(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return list(db.iterdump())


@pytest.fixture
def subprocesses(monkeypatch):
    """The commands started while the test runs; an empty cache of gradebooks to start, in this process only."""
    monkeypatch.setattr(gradebook_copy, "_empty_gradebooks", {})
    monkeypatch.delenv(gradebook_copy.EMPTY_GRADEBOOKS, raising=False)  # the suite's own (tests/conftest.py)
    commands = []

    class Recorded(subprocess.Popen):
        def __init__(self, args, *rest, **kwargs):
            commands.append(Path(str(args[0])).name)
            super().__init__(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", Recorded)
    return commands


def test_a_new_gradebook_holds_what_nbgrader_s_own_holds_and_runs_alembic_once(tmp_path, subprocesses):
    with Gradebook(gradebook_copy.sqlite_url(tmp_path / "nbgrader.db"), course_id=COURSE_ID):
        pass
    assert subprocesses == ["alembic"]
    first = gradebook_copy.new_gradebook(tmp_path / "first.db")
    second = gradebook_copy.new_gradebook(tmp_path / "second.db")
    assert subprocesses == ["alembic", "alembic"], "nbgrader made the first; the second is written from it"
    assert dump(first) == dump(second) == dump(tmp_path / "nbgrader.db")
    with Gradebook(gradebook_copy.sqlite_url(second), course_id=COURSE_ID) as gradebook:
        gradebook.add_student("ada")  # nbgrader takes it as a gradebook of its own, no migration
        assert [s.id for s in gradebook.students] == ["ada"]
    assert subprocesses == ["alembic", "alembic"]


def test_another_course_id_is_made_by_nbgrader_again(tmp_path, subprocesses):
    gradebook_copy.new_gradebook(tmp_path / "ours.db")
    other = gradebook_copy.new_gradebook(tmp_path / "other.db", course_id="another_course")
    assert subprocesses == ["alembic", "alembic"]
    with sqlite3.connect(other) as db:
        assert db.execute("SELECT id FROM course").fetchall() == [("another_course",)]


def test_changed_migration_scripts_make_nbgrader_build_it_again(tmp_path, subprocesses, monkeypatch):
    gradebook_copy.new_gradebook(tmp_path / "before.db")
    gradebook_copy.new_gradebook(tmp_path / "cached.db")
    assert subprocesses == ["alembic"]
    scripts = tmp_path / "alembic"
    shutil.copytree(gradebook_copy.ALEMBIC_DIR, scripts, ignore=shutil.ignore_patterns("__pycache__"))
    (scripts / "versions" / "ffffffffffff_a_new_migration.py").write_text("revision = 'ffffffffffff'\n")
    monkeypatch.setattr(gradebook_copy, "ALEMBIC_DIR", str(scripts))  # where schema_key reads them
    gradebook_copy.new_gradebook(tmp_path / "after.db")
    assert subprocesses == ["alembic", "alembic"], "another schema: the kept bytes are not used"


#: A new process making a new gradebook, run with PATH naming no folder (the venv not activated); it prints the
#: names of the commands it started.
NEW_PROCESS = """
import subprocess, sys
from pathlib import Path
started, Popen = [], subprocess.Popen
class Recorded(Popen):
    def __init__(self, args, *rest, **kwargs):
        started.append(Path(str(args[0])).name)
        super().__init__(args, *rest, **kwargs)
subprocess.Popen = Recorded
from autograder.nbgrader import gradebook_copy
gradebook_copy.new_gradebook(sys.argv[1])
print(*started)
"""


def test_with_a_directory_of_empty_gradebooks_a_new_process_runs_no_alembic(tmp_path, subprocesses, monkeypatch):
    monkeypatch.setenv(gradebook_copy.EMPTY_GRADEBOOKS, str(tmp_path / "kept"))
    first = gradebook_copy.new_gradebook(tmp_path / "first.db")
    assert subprocesses == ["alembic"]
    assert [p.read_bytes() for p in (tmp_path / "kept").iterdir()] == [first.read_bytes()]

    def new_process(name: str) -> list[str]:
        done = subprocess.run([sys.executable, "-c", NEW_PROCESS, str(tmp_path / name)], env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        assert dump(tmp_path / name) == dump(first)
        return done.stdout.split()

    env = {"PATH": str(tmp_path / "no-bin"), gradebook_copy.EMPTY_GRADEBOOKS: str(tmp_path / "kept")}
    assert new_process("child.db") == []  # written from the kept one
    # nothing kept there: nbgrader must run, and finds this environment's alembic although PATH does not name it
    # (`.venv/bin/python -m autograder grade` with the venv not activated stopped here with a traceback)
    env[gradebook_copy.EMPTY_GRADEBOOKS] = str(tmp_path / "elsewhere")
    assert new_process("missed.db") == ["alembic"]
    gradebook_copy.new_gradebook(tmp_path / "other.db", course_id="another_course")
    python = Path(sys.executable).name  # the two children above
    assert subprocesses == ["alembic", python, python, "alembic"], "another course id: not the kept one"
    assert len(list((tmp_path / "kept").iterdir())) == 2


def test_a_directory_of_empty_gradebooks_that_cannot_be_made_is_as_if_none_were_named(tmp_path, subprocesses,
                                                                                        monkeypatch):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv(gradebook_copy.EMPTY_GRADEBOOKS, str(tmp_path / "a-file" / "kept"))  # below a file
    made = gradebook_copy.new_gradebook(tmp_path / "made.db")
    assert subprocesses == ["alembic"]
    with Gradebook(gradebook_copy.sqlite_url(made), course_id=COURSE_ID) as gradebook:
        assert list(gradebook.students) == []
