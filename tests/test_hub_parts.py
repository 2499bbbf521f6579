"""The hub's pieces that need no root and no browser: the late-penalty policy, the LMS exports on a real
nbgrader gradebook, and the configuration files set-up writes. The whole hub runs in tests/test_hub.py."""

import csv
import os
import sys
from datetime import datetime
from pathlib import Path

import pytest
from nbgrader.api import Gradebook
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from autograder import hub
from autograder.hub.envs import render
from autograder.hub.exchange import copy_without_links, submission_problem
from autograder.hub.users import HubError, create_user
from autograder.nbgrader import gradebook_copy
from autograder.nbgrader.late_penalty import PercentPerDayLate
from autograder.nbgrader.lms_export import CanvasExportPlugin, MoodleExportPlugin

DAY = 86400


@pytest.mark.parametrize("seconds_late, score, penalty", [
    (1, 10.0, 1.0),            # one second late is a started day
    (DAY, 10.0, 1.0),          # exactly one day
    (DAY + 1, 10.0, 2.0),      # into the second day
    (3.5 * DAY, 8.0, 3.2),     # 4 started days of 10 % of 8 points
    (30 * DAY, 7.5, 7.5),      # never more than the score
    (2 * DAY, 0.0, 0.0),
])
def test_late_penalty_is_a_share_of_the_score_per_started_day(seconds_late, score, penalty):
    assert PercentPerDayLate().late_submission_penalty("s", score, seconds_late) == pytest.approx(penalty)


def test_late_penalty_reads_its_percentage_from_the_config_and_refuses_a_negative_one():
    config = Config()
    config.PercentPerDayLate.percent_per_day = 25
    assert PercentPerDayLate(config=config).late_submission_penalty("s", 8.0, DAY + 1) == pytest.approx(4.0)
    with pytest.raises(ValueError, match="percent_per_day"):
        PercentPerDayLate(percent_per_day=-5).late_submission_penalty("s", 8.0, 10)


@pytest.fixture
def gradebook(tmp_path, monkeypatch):
    """Two assignments, three students: one on time, one late with a penalty, one who submitted nothing."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # nbgrader runs alembic
    gradebook_copy.new_gradebook(tmp_path / "gradebook.db", "attention-lab")  # alembic once per run, not per test
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}", course_id="attention-lab") as gb:
        for name, points in (("a1", (2.0, 8.0)), ("a2", (5.0,))):
            gb.add_assignment(name, duedate=datetime(2030, 1, 1))
            gb.add_notebook("nb", name)
            for i, maximum in enumerate(points):
                gb.add_grade_cell(f"test_{i}", "nb", name, max_score=maximum, cell_type="code")
        gb.add_student("ada", first_name="Ada", last_name="Lovelace, Countess", email="ada@example.org", lms_user_id="4711")
        gb.add_student("bob", first_name="Bob", last_name="Babbage")
        gb.add_student("cy")
        for student, scores, penalty in (("ada", (2.0, 6.25), 0.0), ("bob", (1.0, 8.0), 0.9)):
            gb.add_submission("a1", student)
            for i, score in enumerate(scores):
                gb.find_grade(f"test_{i}", "nb", "a1", student).auto_score = score
            gb.find_submission_notebook("nb", "a1", student).late_submission_penalty = penalty
        gb.db.commit()
        yield gb


def read_csv(path):
    with open(path, newline="") as handle:
        return list(csv.reader(handle))


def test_canvas_export_has_canvas_columns_points_row_and_scores_after_the_late_penalty(gradebook, tmp_path):
    target = tmp_path / "canvas.csv"
    CanvasExportPlugin(to=str(target), assignment_columns={"a1": "Attention 1 (123)"}).export(gradebook)
    rows = read_csv(target)
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Attention 1 (123)", "a2"]
    assert rows[1] == ["    Points Possible", "", "", "", "", "10", "5"]
    assert rows[2:] == [
        ["Lovelace, Countess, Ada", "4711", "", "ada", "", "8.25", "0"],  # the comma stays inside its field
        ["Babbage, Bob", "", "", "bob", "", "8.1", "0"],                  # 9 - 0.9 late
        ["cy", "", "", "cy", "", "0", "0"],                               # nothing submitted: 0
    ]


def test_moodle_export_has_moodle_columns_and_the_same_scores(gradebook, tmp_path):
    target = tmp_path / "moodle.csv"
    MoodleExportPlugin(to=str(target), assignment=["a1"]).export(gradebook)
    assert read_csv(target) == [
        ["First name", "Last name", "Username", "ID number", "Email address", "a1"],
        ["Ada", "Lovelace, Countess", "ada", "4711", "ada@example.org", "8.25"],
        ["Bob", "Babbage", "bob", "", "", "8.1"],
        ["", "", "cy", "", "", "0"],
    ]


def test_export_rounds_to_the_configured_decimals(gradebook, tmp_path):
    gradebook.find_grade("test_1", "nb", "a1", "ada").auto_score = 6.0 + 1 / 3
    gradebook.db.commit()
    target = tmp_path / "canvas.csv"
    CanvasExportPlugin(to=str(target), student=["ada"], decimals=1).export(gradebook)
    assert read_csv(target)[2][5:] == ["8.3", "0"]


def load_config(path):
    loader = PyFileConfigLoader(path.name, str(path.parent))
    return loader.load_config()


def test_course_config_loads_the_grading_pipeline_and_sets_exchange_and_late_policy(tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    (course / "nbgrader_config.py").write_text(render(
        "course_nbgrader_config.py", pipeline=str(hub.REPO / "nbgrader_config.py"), course=str(course),
        course_id="attention-lab", exchange=str(course / "exchange")))
    config = load_config(course / "nbgrader_config.py")
    assert config.Exchange.root == str(course / "exchange")
    assert config.CourseDirectory.root == str(course)
    assert config.AssignLatePenalties.plugin_class == "autograder.nbgrader.late_penalty.PercentPerDayLate"
    assert config.ExchangeFactory.collect == "autograder.hub.exchange.VerifiedCollect"
    # the repository's pipeline came along: nbgrader's Execute is replaced by the sandboxed one
    assert "SandboxedExecute" in [p.__name__ for p in config.Autograde.autograde_preprocessors]


def test_course_config_refuses_to_load_without_the_grading_pipeline(tmp_path):
    (tmp_path / "nbgrader_config.py").write_text(render(
        "course_nbgrader_config.py", pipeline=str(tmp_path / "gone.py"), course=str(tmp_path),
        course_id="attention-lab", exchange=str(tmp_path / "exchange")))
    with pytest.raises(FileNotFoundError, match="grading pipeline"):
        load_config(tmp_path / "nbgrader_config.py")


def test_student_config_points_at_the_exchange_and_nothing_of_the_course(tmp_path):
    (tmp_path / "nbgrader_config.py").write_text(render(
        "student_nbgrader_config.py", course_id="attention-lab", exchange="/srv/x/course/exchange"))
    config = load_config(tmp_path / "nbgrader_config.py")
    assert config.Exchange.root == "/srv/x/course/exchange"
    assert config.CourseDirectory.course_id == "attention-lab"
    assert "root" not in config.CourseDirectory  # students never get the course directory


def test_invalid_user_names_are_refused_before_anything_is_created():
    for name in ("Root", "1abc", "a b", "x" * 33, "../etc"):
        with pytest.raises(HubError, match="not valid"):
            create_user(name)


def me() -> str:
    import pwd

    return pwd.getpwuid(os.geteuid()).pw_name


def test_only_genuine_inbound_folders_are_submissions(tmp_path):
    stamp = "2026-12-01 09:19:44.909505 UTC"
    genuine = tmp_path / f"{me()}+a1+{stamp}+r4nd"
    (genuine / "sub").mkdir(parents=True)
    (genuine / "nb.ipynb").write_text("{}")
    assert submission_problem(genuine) is None
    someone_else = tmp_path / f"not-{me()}+a1+{stamp}+r4nd"
    someone_else.mkdir()
    assert "claims to be not-" in submission_problem(someone_else)
    link = tmp_path / f"{me()}+a1+{stamp}+link"
    link.symlink_to(genuine)
    assert "symbolic link" in submission_problem(link)
    inner = tmp_path / f"{me()}+a1+{stamp}+inner"
    inner.mkdir()
    (inner / "nb.ipynb").symlink_to(genuine / "nb.ipynb")
    assert "nb.ipynb is not a plain file" in submission_problem(inner)
    assert "does not parse" in submission_problem(tmp_path / f"{me()}+a1+yesterday-ish+x")
    assert "name is not" in submission_problem(tmp_path / "just-a-name")


class Log:
    def __init__(self):
        self.lines = []

    def warning(self, message, *args):
        self.lines.append(message % args)


def test_collect_copy_never_follows_links_and_keeps_nbgrader_limits(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the solutions")
    src = tmp_path / "submission"
    (src / "sub").mkdir(parents=True)
    (src / "nb.ipynb").write_text('{"cells": []}')
    (src / "sub" / "notes.txt").write_text("mine")
    (src / "stolen.ipynb").symlink_to(secret)
    (src / "stolen-dir").symlink_to(tmp_path)
    (src / "big.bin").write_bytes(b"x" * 3000)
    os.mkfifo(src / "pipe")
    (src / "ignored.pyc").write_text("")
    log = Log()
    fd = os.open(src, os.O_RDONLY | os.O_DIRECTORY)
    try:
        from nbgrader.utils import ignore_patterns

        copy_without_links(fd, str(src), tmp_path / "out", ignore_patterns(exclude=["*.pyc"], max_file_size=2),
                           [10_000], log)
    finally:
        os.close(fd)
    copied = sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*"))
    assert copied == ["nb.ipynb", "sub", "sub/notes.txt"]  # no link followed, no pipe, nothing over 2 kB, no .pyc
    assert (tmp_path / "out" / "sub" / "notes.txt").read_text() == "mine"
    assert sum("Not collecting" in line for line in log.lines) == 3  # the two links and the pipe
    fd = os.open(src, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(RuntimeError, match="too big"):
            copy_without_links(fd, str(src), tmp_path / "out2", lambda d, names: [], [100], log)
    finally:
        os.close(fd)


def test_an_environment_is_up_to_date_only_while_its_constraints_requirements_and_inputs_are_unchanged(tmp_path,
                                                                                                      monkeypatch):
    from autograder.hub import envs

    spec = envs.EnvSpec(tmp_path / "env", ("-e", "/course"), ("pyproject 1",))
    spec.target.mkdir()
    assert not spec.up_to_date("numpy==2.4.6\n")  # never built
    spec.stamp_file.write_text(spec.stamp("numpy==2.4.6\n"))
    assert spec.up_to_date("numpy==2.4.6\n")
    assert not spec.up_to_date("numpy==2.4.7\n")  # another version of a pinned package
    assert not envs.EnvSpec(spec.target, ("jupyterhub", "/course"), spec.stamp_inputs).up_to_date("numpy==2.4.6\n")
    assert not envs.EnvSpec(spec.target, spec.requirements, ("pyproject 2",)).up_to_date("numpy==2.4.6\n")
    # the student edition is built afresh in a temporary folder by every set-up: its content counts, not its path
    edition = envs.EnvSpec(tmp_path / "student", ("jupyterhub",), ("digest 1",),
                           ("/tmp/attention-lab-student-a/edition",))
    edition.target.mkdir()
    edition.stamp_file.write_text(edition.stamp("numpy==2.4.6\n"))
    assert envs.EnvSpec(edition.target, ("jupyterhub",), ("digest 1",),
                        ("/tmp/attention-lab-student-b/edition",)).up_to_date("numpy==2.4.6\n")
    assert not envs.EnvSpec(edition.target, ("jupyterhub",), ("digest 2",), edition.local_projects).up_to_date(
        "numpy==2.4.6\n")
    assert edition.installs == ("jupyterhub", "/tmp/attention-lab-student-a/edition")
    # up to date: nothing is removed, downloaded or installed
    monkeypatch.setattr(envs, "pinned_versions", lambda: "numpy==2.4.6\n")
    monkeypatch.setattr(envs, "_run", lambda *args: pytest.fail(f"ran {args}"))
    assert envs.build_envs([spec]) == [False]
    assert spec.stamp_file.exists()


def test_the_environments_are_in_the_class_s_folder_or_in_the_folder_built_ahead(tmp_path):
    own = hub.Layout(tmp_path / "class")
    assert (own.student_env, own.instructor_env) == (tmp_path / "class" / "student-env",
                                                     tmp_path / "class" / "instructor-env")
    ahead = hub.Layout(tmp_path / "class", tmp_path / "envs")
    assert (ahead.student_env, ahead.instructor_env) == (tmp_path / "envs" / "student-env",
                                                         tmp_path / "envs" / "instructor-env")
    assert ahead.course == own.course and ahead.state == own.state  # the class itself stays in its folder


def test_environments_built_ahead_are_one_folder_per_checkout_unless_named(monkeypatch, tmp_path):
    from autograder.hub import envs

    monkeypatch.delenv(envs.ENVS_VARIABLE, raising=False)
    here, other = envs.prebuilt_dir(), envs.prebuilt_dir(tmp_path / "another-checkout")
    assert here.parent == other.parent == Path("/var/tmp/attention-lab-hub-envs") and here != other
    assert envs.prebuilt_dir() == here  # the same folder for `make hub-envs` and the test, every time
    monkeypatch.setenv(envs.ENVS_VARIABLE, str(tmp_path / "mine"))  # `make hub-envs HUB_ENVS=...`
    assert envs.prebuilt_dir() == tmp_path / "mine"


def test_building_ahead_records_the_checkout_and_only_gone_checkouts_environments_are_removed(tmp_path, monkeypatch):
    from autograder.hub import envs

    parent = tmp_path / "hub-envs"
    monkeypatch.setattr(envs.os, "geteuid", lambda: 0)  # build_ahead runs as root; the build itself is recorded
    monkeypatch.setattr(envs, "build_user_envs", lambda *args: (args[0].mkdir(), args[1].mkdir()))
    here = envs.build_ahead(parent / envs.checkout_key(envs.REPO))
    assert (here / envs.CHECKOUT_RECORD).read_text() == f"{envs.REPO.resolve()}\n"
    monkeypatch.undo()

    def built_for(checkout: Path, name: str | None = None, record: bool = True) -> Path:
        folder = parent / (name or envs.checkout_key(checkout))
        (folder / "student-env").mkdir(parents=True)
        if record:
            (folder / envs.CHECKOUT_RECORD).write_text(f"{checkout}\n")
        return folder

    alive = tmp_path / "alive-clone"
    alive.mkdir()
    kept = [here, built_for(alive), built_for(tmp_path / "gone-but-unrecorded", record=False),
            built_for(tmp_path / "gone-under-another-name", name="0123456789ab")]
    gone = [built_for(tmp_path / "gone-clone"), built_for(tmp_path / "another-gone-clone")]
    linked = parent / envs.checkout_key(tmp_path / "linked-gone")  # a link is never followed into
    linked.symlink_to(gone[0], target_is_directory=True)
    lines = []
    assert envs.prune_built_ahead(parent, log=lines.append) == sorted(gone)
    assert all(folder.is_dir() for folder in kept) and not any(folder.exists() for folder in gone)
    assert linked.is_symlink() and len(lines) == 2 and "gone-clone, a checkout that no longer exists" in lines[-1]
    assert envs.prune_built_ahead(tmp_path / "missing") == []
    parent.chmod(0o777)  # a parent others can write in: what is in it may be theirs, nothing is removed
    doomed = built_for(tmp_path / "third-gone-clone")
    assert envs.prune_built_ahead(parent) == [] and doomed.is_dir()
    parent.chmod(0o755)


def test_the_environments_folder_must_be_ours_and_closed_to_other_users(tmp_path):
    from autograder.hub.envs import safe_folder

    made = safe_folder(tmp_path / "a" / "envs")
    assert made.is_dir() and made.stat().st_mode & 0o777 == 0o755
    assert safe_folder(made) == made  # an existing safe folder is kept
    open_to_all = tmp_path / "open"
    open_to_all.mkdir()
    open_to_all.chmod(0o777)
    with pytest.raises(HubError, match="writable by other users"):
        safe_folder(open_to_all)  # anyone could swap the environments in it
    with pytest.raises(HubError, match="writable by other users"):
        safe_folder(open_to_all / "envs")  # or the folder itself, from its parent
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)  # like /var/tmp: others cannot rename what is ours in it
    assert safe_folder(sticky / "envs").is_dir()
    with pytest.raises(HubError, match="writable by other users"):
        safe_folder(sticky)
    if os.geteuid() == 0:  # only root can give a folder away
        taken = tmp_path / "taken"
        taken.mkdir()
        os.chown(taken, 65534, 65534)
        with pytest.raises(HubError, match="belongs to user id 65534"):
            safe_folder(taken / "envs")


def test_setup_builds_or_reuses_the_environments_in_the_envs_folder_and_the_hub_runs_those(tmp_path, monkeypatch):
    """`hub setup --envs DIR` in-process, with users, pip and nbgrader replaced by recorders."""
    import json

    calls = {}
    monkeypatch.setattr(hub.os, "geteuid", lambda: 0)
    monkeypatch.setattr(hub, "create_user", lambda name: False)
    monkeypatch.setattr(hub, "build_user_envs", lambda *args: calls.setdefault("envs", args[:3]))
    monkeypatch.setattr(hub, "prepare_course", lambda layout, instructor: None)
    monkeypatch.setattr(hub, "add_students_to_gradebook", lambda *args: None)
    monkeypatch.setattr(hub, "readable_by_others", lambda path: False)
    # checked for real in the test above (here it would see this user's folders through a faked root's eyes)
    monkeypatch.setattr(hub, "safe_folder", lambda folder: calls.setdefault("checked", folder))
    settings = hub.setup(tmp_path / "class", "teach", ["ada"], envs=tmp_path / "envs", log=lambda line: None)
    student, instructor = tmp_path / "envs" / "student-env", tmp_path / "envs" / "instructor-env"
    assert calls["checked"] == tmp_path / "envs"
    assert calls["envs"] == (student, instructor, tmp_path / "class" / "course" / "exchange")
    assert (settings["student_env"], settings["instructor_env"]) == (str(student), str(instructor))
    written = json.loads((tmp_path / "class" / "jupyterhub" / "settings.json").read_text())
    assert written["student_env"] == str(student)  # what hub/jupyterhub_config.py spawns students' servers from


def test_the_command_line_passes_the_environments_folder_on(tmp_path, monkeypatch, capsys):
    from autograder.hub import envs

    seen = []
    monkeypatch.setattr(hub, "setup", lambda root, instructor, students, roster, folder: seen.append(folder))
    monkeypatch.setattr(hub, "build_ahead", lambda folder: seen.append(folder) or folder)
    monkeypatch.setattr(hub, "prune_built_ahead", lambda: seen.append("pruned"))
    monkeypatch.delenv(envs.ENVS_VARIABLE, raising=False)
    assert hub.main(["setup", "--root", str(tmp_path), "--students", "ada", "--envs", str(tmp_path / "e")]) == 0
    assert hub.main(["setup", "--root", str(tmp_path), "--students", "ada"]) == 0
    assert hub.main(["envs", "--envs", str(tmp_path / "e")]) == 0  # a folder of the user's: nothing else touched
    assert hub.main(["envs"]) == 0  # `make hub-envs`: where the hub test looks, then the gone checkouts' removed
    assert seen == [tmp_path / "e", None, tmp_path / "e", envs.prebuilt_dir(), "pruned"]
    assert f"current in {envs.prebuilt_dir()}" in capsys.readouterr().out
