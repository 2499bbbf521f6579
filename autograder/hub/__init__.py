"""``make hub``: a class in a box — JupyterHub with nbgrader's exchange for this course, on one machine.

::

    python -m autograder hub setup    --root DIR --instructor NAME --students NAME ... [--roster CSV] [--envs ENVS]
    python -m autograder hub start    --root DIR [--port N]          # foreground; Ctrl-C stops it
    python -m autograder hub up       ...                            # setup, then start (`make hub`)
    python -m autograder hub teardown --root DIR [--purge]
    python -m autograder hub envs     [--envs ENVS]                  # both environments, built ahead (make hub-envs)

Run as root: set-up creates Unix users and the hub starts each user's server as
that user (JupyterHub's ``LocalProcessSpawner``). Everything lives under one
folder (default ``/srv/attention-lab``):

======================  =====  =====================================================================
path                    mode   why
======================  =====  =====================================================================
``course/``             0711   the nbgrader course directory, owned by the instructor: students may
                               pass through it to the exchange but not list it
``course/<private>``    0700   ``source/``, ``release/``, ``submitted/``, ``autograded/``,
                               ``feedback/``, ``gradebook.db``, ``nbgrader_config.py``: instructor only
``course/exchange/``    1777   nbgrader's exchange root; nbgrader insists students can write here, the
                               sticky bit stops anyone renaming or removing the course's folder in it
``exchange/<course>/``  0755   ``outbound/`` 0755 (released assignments, readable by everyone),
                               ``inbound/`` 3733 (students create submissions but cannot list them or
                               remove others'; setgid gives them the instructor's group; collect takes
                               only genuine ones, :mod:`autograder.hub.exchange`),
                               ``feedback/`` 0711 (files named by a per-submission secret)
``student-env/``        0755   students' Python: the student edition (no grader, no solutions),
                               JupyterLab and nbgrader without Formgrader or Create Assignment
``instructor-env/``     0755   the instructor's Python: this repository, installed editable
                               (both environments go in ``ENVS/`` instead with ``--envs ENVS``: built
                               ahead by ``hub envs``, root's, no folder on the way writable by others)
``jupyterhub/``         0700   the hub's settings, passwords, database, cookie secret, pid files (root)
======================  =====  =====================================================================

nbgrader gives what it writes modes of its own (a collected submission's
folder 0777, feedback 0644, autograded notebooks 0444), so the private
folders above, not those modes, keep students out; every server also starts
with umask 077, so new top-level files (grades exports, logs) are private too.
The exchange's modes are set by nbgrader where students need them.

The repository itself stays the instructor's: students' servers run from
``student-env/`` and need nothing from it, so keep the checkout unreadable for
them (``chmod o-rwx``); set-up warns when it is not. The Unix users are
:mod:`autograder.hub.users`, the two environments :mod:`autograder.hub.envs`.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import re
import secrets
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from autograder.course import COURSE_ID, REPO
from autograder.hub.envs import (ENVS_VARIABLE, build_ahead, build_user_envs, prebuilt_dir, prune_built_ahead,
                                 render, safe_folder)
from autograder.hub.users import (NOBODY, SYSTEM_PATH, UMASK, HubError, create_user, end_processes, remove_user,
                                  run_as)

HUB_FILES = REPO / "hub"
DEFAULT_ROOT = Path("/srv/attention-lab")
#: Folders of the course directory that only the instructor may enter (nbgrader's defaults).
PRIVATE_DIRS = ("source", "release", "submitted", "autograded", "feedback")


def _inside(folder: str, name: str) -> property:
    """A :class:`Layout` path: ``name`` inside the layout's ``folder`` (``"root"`` or another of its paths)."""
    return property(lambda layout: getattr(layout, folder) / name)


@dataclass(frozen=True)
class Layout:
    """Where the hub keeps everything, under one ``root`` folder: the folders and files named in the table above."""

    root: Path
    #: the folder of ``student-env/`` and ``instructor-env/`` when not ``root`` (``--envs``: built ahead, ``hub envs``)
    envs: Path | None = None

    @property
    def envs_folder(self) -> Path:
        """Where the two environments are: :attr:`envs`, or ``root``."""
        return self.envs or self.root

    course = _inside("root", "course")  #: the nbgrader course directory
    exchange = _inside("course", "exchange")
    course_exchange = _inside("exchange", COURSE_ID)
    student_env = _inside("envs_folder", "student-env")
    instructor_env = _inside("envs_folder", "instructor-env")
    state = _inside("root", "jupyterhub")
    settings = _inside("state", "settings.json")
    users_file = _inside("state", "users.json")
    hub_pid_file = _inside("state", "jupyterhub.pid")
    proxy_pid_file = _inside("state", "proxy.pid")


def nbgrader_as(layout: Layout, user: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """``nbgrader ARGS`` as the instructor ``user`` in the course directory, with the instructor's environment."""
    env = layout.instructor_env
    return run_as(user, [str(env / "bin" / "python"), "-m", "nbgrader", *args], cwd=layout.course, check=check,
                  prefix=env)


# ---- the pieces --------------------------------------------------------------------------------------

def write_private(path: Path, text: str, owner: str | None = None, mode: int = 0o600) -> None:
    """Write ``text`` to ``path`` with ``mode`` (default 0600), owned by Unix user ``owner`` (default: root)."""
    path.write_text(text)
    path.chmod(mode)
    if owner:
        shutil.chown(path, owner, pwd.getpwnam(owner).pw_gid)


def prepare_course(layout: Layout, instructor: str) -> None:
    """Create or repair the course directory and the exchange with the modes in this module's table.

    Existing content is kept: ``source/`` is copied from the repository and
    ``nbgrader_config.py`` written only when missing.
    """
    owner = pwd.getpwnam(instructor)
    course = layout.course
    course.mkdir(parents=True, exist_ok=True)
    if not (course / "source").exists():
        shutil.copytree(REPO / "source", course / "source",
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    for name in PRIVATE_DIRS:
        (course / name).mkdir(exist_ok=True)
    config = course / "nbgrader_config.py"
    if not config.exists():
        config.write_text(render("course_nbgrader_config.py", pipeline=str(REPO / "nbgrader_config.py"),
                                 course=str(course), course_id=COURSE_ID, exchange=str(layout.exchange)))
    for name in (*PRIVATE_DIRS, "nbgrader_config.py"):
        subprocess.run(["chown", "-R", f"{owner.pw_uid}:{owner.pw_gid}", str(course / name)], check=True)
        subprocess.run(["chmod", "-R", "go-rwx", str(course / name)], check=True)
    exchange_modes = [(layout.exchange, 0o1777), (layout.course_exchange, 0o755),
                      (layout.course_exchange / "outbound", 0o755), (layout.course_exchange / "inbound", 0o3733),
                      (layout.course_exchange / "feedback", 0o711)]
    for path, mode in [(course, 0o711), *exchange_modes]:
        path.mkdir(exist_ok=True)
        os.chown(path, owner.pw_uid, owner.pw_gid)
        path.chmod(mode)
    home = Path(owner.pw_dir)
    (home / ".jupyter").mkdir(exist_ok=True)
    shutil.chown(home / ".jupyter", instructor, owner.pw_gid)
    write_private(home / ".jupyter" / "nbgrader_config.py",
                  render("instructor_nbgrader_config.py", course=str(course)), owner=instructor)


def add_students_to_gradebook(layout: Layout, instructor: str, students: list[str], roster: Path | None) -> None:
    """Put the class in the gradebook (``nbgrader db student add`` / ``import``), as the instructor."""
    if roster is not None:
        copy = layout.course / "roster.csv"
        shutil.copy(roster, copy)
        os.chown(copy, pwd.getpwnam(instructor).pw_uid, pwd.getpwnam(instructor).pw_gid)
        copy.chmod(0o600)
        nbgrader_as(layout, instructor, "db", "student", "import", str(copy))
    known = nbgrader_as(layout, instructor, "db", "student", "list").stdout
    for student in students:
        if not re.search(rf"^{re.escape(student)} \(", known, re.M):
            nbgrader_as(layout, instructor, "db", "student", "add", student)


def roster_ids(roster: Path) -> list[str]:
    """The ``id`` column of an nbgrader roster CSV (``id,first_name,last_name,email,lms_user_id``)."""
    import csv

    with open(roster, newline="") as handle:
        rows = list(csv.DictReader(handle))
    if not rows or "id" not in rows[0]:
        raise HubError(f"{roster} has no 'id' column (nbgrader's roster: id,first_name,last_name,email,lms_user_id)")
    return [row["id"].strip() for row in rows if row["id"].strip()]


def load_json(path: Path, default):
    """The JSON in ``path``, or ``default`` when the file does not exist."""
    return json.loads(path.read_text()) if path.exists() else default


def setup(root: Path, instructor: str, students: list[str], roster: Path | None = None, envs: Path | None = None,
          log=print) -> dict:
    """Set up the class under ``root``: users, students' environment, course directory, exchange, hub settings.

    Safe to run again (after adding students, or to repair modes); existing Unix
    users are used as they are and are never removed by :func:`teardown`.

    Parameters
    ----------
    root : Path
        Folder for everything (see the module's table); created if missing.
    instructor : str
        Unix user name of the instructor (JupyterHub admin, owner of the course).
    students : list of str
        Unix user names of the students (added to the roster's, if any).
    roster : Path, optional
        nbgrader roster CSV (``id,first_name,last_name,email,lms_user_id``), imported into the gradebook.
    envs : Path, optional
        Folder of the two environments instead of ``root`` (e.g. built ahead by ``hub envs``, :func:`envs.build_ahead`):
        each is reused when current, else built there; the students' is configured for this class's exchange, so
        give each class a folder of its own. Created if missing; it and the folders above must be root's and not
        writable by others (:func:`envs.safe_folder`).

    Returns
    -------
    dict
        The hub's settings (also written to ``jupyterhub/settings.json``).

    Raises
    ------
    HubError
        If not run as root, a name is invalid or used twice, the ``envs`` folder is not safe, or a step fails.
    """
    if os.geteuid() != 0:
        raise HubError("the hub's set-up creates Unix users and files for them: run it as root")
    students = list(dict.fromkeys([*(roster_ids(roster) if roster else []), *students]))
    if not students:
        raise HubError("no students: give --students NAME ... or --roster FILE")
    if instructor in students:
        raise HubError(f"{instructor!r} cannot be both the instructor and a student")
    layout = Layout(root.resolve(), safe_folder(envs) if envs is not None else None)
    layout.root.mkdir(parents=True, exist_ok=True)
    layout.root.chmod(0o755)
    layout.state.mkdir(exist_ok=True)
    layout.state.chmod(0o700)
    users = load_json(layout.users_file, {"created": []})
    for name in [instructor, *students]:
        if create_user(name):
            users["created"].append(name)
            log(f"created Unix user {name}")
    write_private(layout.users_file, json.dumps(users, indent=2))
    build_user_envs(layout.student_env, layout.instructor_env, layout.exchange, log)
    prepare_course(layout, instructor)
    add_students_to_gradebook(layout, instructor, students, roster)
    passwords = load_json(layout.state / "passwords.json", None) or {
        "students": secrets.token_urlsafe(12), "instructor": secrets.token_urlsafe(32)}
    write_private(layout.state / "passwords.json", json.dumps(passwords, indent=2))
    settings = {"course": str(layout.course), "exchange": str(layout.exchange), "course_id": COURSE_ID,
                "instructor": instructor, "students": students, "student_env": str(layout.student_env),
                "instructor_env": str(layout.instructor_env), "state": str(layout.state), "umask": UMASK,
                "passwords": passwords}
    write_private(layout.settings, json.dumps(settings, indent=2))
    if readable_by_others(REPO / "nbgrader_config.py"):
        log(f"warning: every user can read {REPO} (solutions in source/, references in autograder/); "
            f"students need nothing from it: `chgrp -R {instructor} {REPO} && chmod -R o-rwx {REPO}`")
    return settings


def readable_by_others(path: Path) -> bool:
    """Whether a user with no rights of its own (nobody) can read ``path``."""
    return subprocess.run(["test", "-r", str(path)], user=NOBODY, group=NOBODY, extra_groups=[]).returncode == 0


# ---- running the hub ---------------------------------------------------------------------------------

def free_ports(count: int) -> list[int]:
    """``count`` different TCP ports on 127.0.0.1 that nothing listens on right now."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:  # all bound at once, so the system hands out different ports
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def hub_command(layout: Layout, port: int = 0) -> tuple[list[str], dict[str, str]]:
    """The ``jupyterhub`` command line and environment for the hub of ``layout``, on 127.0.0.1.

    ``port`` 0 picks a free port; the hub's own API and the proxy's API get free
    ports too, so that several hubs (or tests) can run on one machine.
    """
    if not layout.settings.exists():
        raise HubError(f"{layout.root} is not set up: run `python -m autograder hub setup --root {layout.root} ...`")
    public, hub_api, proxy_api = free_ports(3)
    command = [str(Path(sys.prefix) / "bin" / "jupyterhub"), "-f", str(HUB_FILES / "jupyterhub_config.py"),
               f"--JupyterHub.bind_url=http://127.0.0.1:{port or public}",
               f"--JupyterHub.hub_port={hub_api}",
               f"--ConfigurableHTTPProxy.api_url=http://127.0.0.1:{proxy_api}"]
    env = dict(os.environ, ATTENTION_LAB_HUB_SETTINGS=str(layout.settings),
               PATH=f"{Path(sys.prefix) / 'bin'}:{os.environ.get('PATH', SYSTEM_PATH)}")
    return command, env


def check_proxy() -> None:
    """Raise :class:`HubError` saying how to install it when configurable-http-proxy is not on PATH."""
    if shutil.which("configurable-http-proxy") is None:
        raise HubError("configurable-http-proxy is not installed: `npm install -g configurable-http-proxy` "
                       "(`make hub` does this when run as root)")


def start(root: Path, port: int = 0) -> None:
    """Run the hub in the foreground (this process becomes ``jupyterhub``); print how to log in first."""
    check_proxy()
    layout = Layout(root.resolve())
    running = running_pid(layout.hub_pid_file, "jupyterhub")
    if running:
        raise HubError(f"the hub of {layout.root} already runs (process {running}); stop it first (Ctrl-C there, "
                       f"or `python -m autograder hub teardown --root {layout.root}`)")
    command, env = hub_command(layout, port)
    settings = json.loads(layout.settings.read_text())
    url = command[3].split('=', 1)[1]
    print(f"\nAttention Lab hub: {url}/  (Ctrl-C stops it)\n"
          f"  instructor {settings['instructor']}  password {settings['passwords']['instructor']}\n"
          f"  students   {', '.join(settings['students'])}  password {settings['passwords']['students']}\n"
          f"  (the passwords are in {layout.state / 'passwords.json'})\n",
          flush=True)
    os.chdir(layout.state)
    os.execve(command[0], command, env)


def running_pid(pid_file: Path, program: str) -> int | None:
    """The process id in ``pid_file`` if that process still runs ``program``, else None.

    A pid file left by a crash may name a process id that is now someone else's: its command line tells.
    """
    try:
        pid = int(pid_file.read_text().strip())
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return pid if program.encode() in command else None


def stop(layout: Layout) -> None:
    """Stop a hub of ``layout`` still running (and its proxy), by the ids in their pid files."""
    for pid_file, program in ((layout.hub_pid_file, "jupyterhub"), (layout.proxy_pid_file, "configurable-http-proxy")):
        pid = running_pid(pid_file, program)
        if pid:
            end_processes([pid])


def teardown(root: Path, purge: bool = False, log=print) -> None:
    """Stop the hub if it runs, remove the Unix users set-up created (and their homes); ``purge`` removes ``root`` too.

    Users that existed before set-up are left alone. Without ``purge`` the
    course directory (gradebook, submissions) stays.
    """
    if os.geteuid() != 0:
        raise HubError("tear-down removes Unix users: run it as root")
    layout = Layout(root.resolve())
    stop(layout)
    users = load_json(layout.users_file, {"created": []})
    for name in list(users["created"]):
        remove_user(name)
        users["created"].remove(name)
        log(f"removed Unix user {name}")
    if purge:
        shutil.rmtree(layout.root, ignore_errors=True)
        log(f"removed {layout.root}")
    elif layout.state.exists():
        write_private(layout.users_file, json.dumps(users, indent=2))


def main(argv: list[str] | None = None) -> int:
    """``python -m autograder hub setup|start|up|teardown|envs``; returns the exit code (1 with one line on error)."""
    parser = argparse.ArgumentParser(prog="python -m autograder hub", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("setup", "up"):
        sub = commands.add_parser(name, help="set up the class" + (" and start the hub" if name == "up" else ""))
        sub.add_argument("--root", type=Path, default=DEFAULT_ROOT)
        sub.add_argument("--instructor", default="instructor")
        sub.add_argument("--students", nargs="*", default=[])
        sub.add_argument("--roster", type=Path, help="nbgrader roster CSV: id,first_name,last_name,email,lms_user_id")
        sub.add_argument("--envs", type=Path, help="folder of the two environments (default: inside --root), "
                                                   "e.g. built ahead by `hub envs`; one per class")
        if name == "up":
            sub.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    sub = commands.add_parser("start", help="start the hub of a set-up class (foreground)")
    sub.add_argument("--root", type=Path, default=DEFAULT_ROOT)
    sub.add_argument("--port", type=int, default=0)
    sub = commands.add_parser("teardown", help="stop the hub and remove the Unix users set-up created")
    sub.add_argument("--root", type=Path, default=DEFAULT_ROOT)
    sub.add_argument("--purge", action="store_true", help="also delete the root folder (course, gradebook, exchange)")
    sub = commands.add_parser("envs", help="build the users' two environments ahead (make hub-envs)")
    sub.add_argument("--envs", type=Path, default=None,
                     help="where (default: $ATTENTION_LAB_HUB_ENVS or /var/tmp/attention-lab-hub-envs/<checkout>, "
                          "where the hub test looks)")
    args = parser.parse_args(argv)
    try:
        if args.command in ("setup", "up"):
            setup(args.root, args.instructor, args.students, args.roster, args.envs)
            if args.command == "up":
                start(args.root, args.port)
        elif args.command == "start":
            start(args.root, args.port)
        elif args.command == "envs":
            print(f"the hub users' environments are current in {build_ahead(args.envs or prebuilt_dir())}")
            if args.envs is None and not os.environ.get(ENVS_VARIABLE):  # the per-checkout folders' parent
                prune_built_ahead()
        else:
            teardown(args.root, args.purge)
    except HubError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
