"""The hub users' Python environments (`autograder.hub`): the students' and the instructor's.

Both are venvs on an interpreter every user can run, filled by this
environment's pip with this environment's versions of the Jupyter stack, and
rebuilt only when what they are built from changes. The students' holds the
student edition (no grader, no solutions) with Formgrader, Create Assignment
and the Course List switched off; the instructor's holds this repository.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from string import Template

from autograder import student_build
from autograder.course import COURSE_ID
from autograder.hub.users import NOBODY, HubError
from autograder.course import REPO

TEMPLATES = REPO / "hub" / "templates"
#: Packages whose versions the users' environments take from this one: the hub and its single-user
#: servers, the Jupyter stack the exchange and Formgrader run on, and what grading computes with.
PINNED = ("jupyterhub", "jupyterlab", "jupyter-server", "jupyter-client", "notebook", "nbgrader", "nbconvert",
          "nbformat", "nbclient", "ipykernel", "ipywidgets", "numpy", "matplotlib")
#: JupyterLab plugins and server extensions that students do not get (Assignment List and Validate stay).
STUDENT_DISABLED_LABEXTENSIONS = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                                  "@jupyter/nbgrader:course-list")
STUDENT_DISABLED_SERVER_EXTENSIONS = ("nbgrader.server_extensions.formgrader", "nbgrader.server_extensions.course_list")


def render(template: str, **values: str) -> str:
    """``hub/templates/<template>`` with ``$name`` placeholders filled in."""
    return Template((TEMPLATES / template).read_text()).substitute(values)


def shared_interpreter() -> Path:
    """A Python of this version that every user can run: the users' environments are built on it.

    This environment's own interpreter may live where only root can go (e.g.
    pyenv in ``/root``); then the system's ``/usr/bin/python3.X`` is used.

    Raises
    ------
    HubError
        If no such interpreter exists.
    """
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [Path(sys.base_prefix) / "bin" / f"python{version}", Path("/usr/bin") / f"python{version}",
                  Path("/usr/local/bin") / f"python{version}"]
    for candidate in candidates:
        try:
            if subprocess.run([str(candidate), "-c", "import venv"], user=NOBODY, group=NOBODY, extra_groups=[],
                              capture_output=True).returncode == 0:
                return candidate
        except OSError:  # missing, or not executable for that user
            continue
    raise HubError(f"no Python {version} that every user can run (tried {', '.join(map(str, candidates))}): "
                   f"install Debian's python{version} (apt-get install python{version}-venv)")


def pinned_versions() -> str:
    """``name==version`` lines of this environment for :data:`PINNED`: the users' environments get the same.

    Only these: the rest is left to pip, because the shared interpreter can be an
    older patch release that some pinned helper packages no longer support.
    """
    freeze = subprocess.run([sys.executable, "-m", "pip", "freeze", "--exclude-editable"],
                            capture_output=True, text=True, check=True).stdout
    lines = [line for line in freeze.splitlines()
             if line.split("==")[0].lower().replace("_", "-") in PINNED]
    return "\n".join(lines) + "\n"


def build_env(target: Path, requirements: list[str], stamp_inputs: list[str], log=print) -> bool:
    """Make a venv at ``target`` with ``requirements`` at this environment's versions; False if it was up to date.

    The venv is built on :func:`shared_interpreter` and filled by this
    environment's pip (``pip --python``) with :func:`pinned_versions` as
    constraints, so every server runs the hub's versions of the Jupyter stack.
    It is rebuilt only when the constraints or ``stamp_inputs`` change.

    Raises
    ------
    HubError
        If pip fails.
    """
    freeze = pinned_versions()
    stamp = hashlib.sha256("\0".join([freeze, *requirements, *stamp_inputs]).encode()).hexdigest()
    stamp_file = target / ".attention-lab-stamp"
    if stamp_file.exists() and stamp_file.read_text() == stamp:
        return False
    log(f"building {target} (pip, a minute or two) ...")
    shutil.rmtree(target, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="attention-lab-env-") as scratch:
        constraints = Path(scratch) / "constraints.txt"
        constraints.write_text(freeze)
        for step in ([str(shared_interpreter()), "-m", "venv", "--without-pip", str(target)],
                     [sys.executable, "-m", "pip", "--python", str(target / "bin" / "python"), "install", "--quiet",
                      "--disable-pip-version-check", "-c", str(constraints), *requirements]):
            done = subprocess.run(step, capture_output=True, text=True, cwd=scratch)
            if done.returncode != 0:
                raise HubError(f"building {target} failed at `{' '.join(step)}`:\n{(done.stdout + done.stderr)[-4000:]}")
    stamp_file.write_text(stamp)
    return True


def jupyter(env: Path, *args: str) -> None:
    """Run ``jupyter ARGS`` of environment ``env`` (JupyterLab's and Jupyter Server's own configuration commands)."""
    done = subprocess.run([str(env / "bin" / "jupyter"), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise HubError(f"`jupyter {' '.join(args)}` in {env} failed:\n{(done.stdout + done.stderr)[-4000:]}")


def build_student_env(env: Path, exchange: Path, log=print) -> None:
    """Make ``student-env/``: the student edition, JupyterHub's single-user server, JupyterLab and nbgrader.

    Nothing of ``autograder`` or ``source/`` is in it (the student edition's build
    refuses them). Formgrader, Create Assignment and the Course List are disabled
    for everyone using it with JupyterLab's and Jupyter Server's own commands
    (``--sys-prefix`` level, owned by root); the exchange is configured in its
    ``etc/jupyter/nbgrader_config.py``.

    Raises
    ------
    HubError
        If pip or one of the configuration commands fails.
    """
    config = render("student_nbgrader_config.py", course_id=COURSE_ID, exchange=str(exchange))
    with tempfile.TemporaryDirectory(prefix="attention-lab-student-") as scratch:
        edition = student_build.build(Path(scratch) / "edition")
        digest = hashlib.sha256()
        for path in sorted(p for p in edition.rglob("*") if p.is_file()):
            digest.update(str(path.relative_to(edition)).encode() + path.read_bytes())
        build_env(env, ["jupyterhub", str(edition)], [digest.hexdigest()], log=log)
    # applied every time (cheap, idempotent), so that a changed setting reaches an existing environment;
    # locked, so that a student's own settings cannot switch them on again
    jupyter(env, "labextension", "disable", "--level=sys_prefix", *STUDENT_DISABLED_LABEXTENSIONS)
    jupyter(env, "labextension", "lock", "--level=sys_prefix", *STUDENT_DISABLED_LABEXTENSIONS)
    for name in STUDENT_DISABLED_SERVER_EXTENSIONS:
        jupyter(env, "server", "extension", "disable", "--sys-prefix", name)
    (env / "etc" / "jupyter" / "nbgrader_config.py").write_text(config)
    settings = env / "share" / "jupyter" / "lab" / "settings"
    settings.mkdir(parents=True, exist_ok=True)
    # JupyterLab's defaults for everyone on this environment: no "news" pop-up covering the page
    (settings / "overrides.json").write_text(json.dumps(
        {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}}, indent=2))
    subprocess.run(["chmod", "-R", "a+rX,go-w", str(env)], check=True)


def build_instructor_env(env: Path, log=print) -> None:
    """Make ``instructor-env/``: this repository installed editable (grader, Formgrader, Create Assignment).

    A venv of its own because this one's interpreter may be unreadable for the
    instructor's Unix user; it imports ``autograder`` from the repository, so
    grading always runs the checked-out grader.
    """
    if build_env(env, ["-e", str(REPO)], [(REPO / "pyproject.toml").read_text()], log=log):
        subprocess.run(["chmod", "-R", "a+rX,go-w", str(env)], check=True)
