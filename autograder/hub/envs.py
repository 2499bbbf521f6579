"""The hub users' Python environments (`autograder.hub`): the students' and the instructor's.

Both are venvs on an interpreter every user can run, filled by this
environment's pip with this environment's versions of the Jupyter stack (from
one download of the wheels both need), and rebuilt only when what they are
built from changes. The students' holds the
student edition (no grader, no solutions) with Formgrader, Create Assignment
and the Course List switched off; the instructor's holds this repository.

They live in a class's own folder (``make hub``), or in a folder of their own
built ahead as an install step (``make hub-envs``, :func:`build_ahead`), where
the hub test and ``hub setup --envs DIR`` find them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from string import Template

from autograder import student_build
from autograder.course import COURSE_ID
from autograder.hub.users import NOBODY, HubError
from autograder.course import REPO

TEMPLATES = REPO / "hub" / "templates"
#: Packages whose versions the users' environments take from this one: the hub and its single-user
#: servers, the Jupyter stack the exchange and Formgrader run on, and what grading computes with; and
#: jsonschema, which pyproject.toml keeps below 4.25 (from 4.25 on, its format-nongpl extra, which
#: jupyter-events asks for, builds a Lark grammar on import: 2-3 s CPU in every process importing nbformat,
#: each user's server and nbgrader command; the student edition itself does not bound it).
PINNED = ("jupyterhub", "jupyterlab", "jupyter-server", "jupyter-client", "notebook", "nbgrader", "nbconvert",
          "nbformat", "nbclient", "ipykernel", "ipywidgets", "numpy", "matplotlib", "jsonschema")
#: JupyterLab plugins and server extensions that students do not get (Assignment List and Validate stay).
STUDENT_DISABLED_LABEXTENSIONS = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                                  "@jupyter/nbgrader:course-list")
STUDENT_DISABLED_SERVER_EXTENSIONS = ("nbgrader.server_extensions.formgrader", "nbgrader.server_extensions.course_list")


#: Where ``make hub-envs`` builds the two environments ahead, one folder per checkout (the instructor's is this
#: checkout installed editable, the students' holds its student edition), and where tests/test_hub.py looks for
#: them: outside the checkout, which stays unreadable for students, and outside any class's folder. Venvs cannot
#: be moved, so they are built where they are used. :data:`ENVS_VARIABLE` names another folder.
PREBUILT_PARENT = Path("/var/tmp/attention-lab-hub-envs")
ENVS_VARIABLE = "ATTENTION_LAB_HUB_ENVS"
#: The file of a folder built ahead that names the checkout it was built for (:func:`prune_built_ahead`).
CHECKOUT_RECORD = "checkout"


def checkout_key(repo: Path) -> str:
    """The name of the checkout ``repo``'s folder in :data:`PREBUILT_PARENT`: the first 12 hex digits of the
    SHA-256 of its resolved path."""
    return hashlib.sha256(str(Path(repo).resolve()).encode()).hexdigest()[:12]


def prebuilt_dir(repo: Path = REPO) -> Path:
    """The folder of the environments built ahead for the checkout ``repo``: ``$ATTENTION_LAB_HUB_ENVS`` if set,
    else ``/var/tmp/attention-lab-hub-envs/<first 12 hex digits of the SHA-256 of the checkout's path>``."""
    if os.environ.get(ENVS_VARIABLE):
        return Path(os.environ[ENVS_VARIABLE]).resolve()
    return PREBUILT_PARENT / checkout_key(repo)


def prune_built_ahead(parent: Path = PREBUILT_PARENT, log=print) -> list[Path]:
    """Remove the environments built ahead (``make hub-envs``) for checkouts that no longer exist.

    Each checkout gets its own ~1.2 GB folder in ``parent``, and nothing else ever removed one: every clone
    that ran ``make hub-envs`` (or the hub test) left its folder behind. A folder is removed only when it is
    a real directory of this user, its :data:`CHECKOUT_RECORD` (written when its build finished) names a
    checkout whose folder is gone, and its name is that checkout's :func:`checkout_key`. A folder without the
    record (built before records were kept, or still being built) or whose checkout is there is kept.

    Parameters
    ----------
    parent : Path
        The folder of the checkouts' folders (default :data:`PREBUILT_PARENT`); nothing happens if it is
        missing or is not :func:`safe_folder` (others could have planted what is in it).
    log : callable
        Called with one line per removed folder.

    Returns
    -------
    list of Path
        The folders removed.
    """
    parent = Path(parent)
    if parent.is_symlink() or not parent.is_dir():
        return []
    try:
        safe_folder(parent)
    except HubError:
        return []
    removed = []
    for folder in sorted(parent.iterdir()):
        record = folder / CHECKOUT_RECORD
        if folder.is_symlink() or not folder.is_dir() or folder.stat().st_uid != os.geteuid() \
                or record.is_symlink() or not record.is_file():
            continue
        checkout = Path(record.read_text().strip())
        if not checkout.is_absolute() or checkout.exists() or folder.name != checkout_key(checkout):
            continue
        shutil.rmtree(folder)
        removed.append(folder)
        log(f"removed {folder}: the hub environments of {checkout}, a checkout that no longer exists")
    return removed


def safe_folder(folder: Path) -> Path:
    """Create ``folder`` (0755) if missing and check that no other user can change what is in it; its resolved path.

    The environments' folder is shared by every user's server, and a place like
    ``/var/tmp`` lets anyone create a folder first: the folder and each folder
    above it must belong to root (or this user), and none may be writable by
    others, except a sticky one above it (``/var/tmp``, ``/tmp``, ``/dev/shm``),
    where nobody else can rename or remove what is ours.

    Raises
    ------
    HubError
        If ``folder`` or a folder above it is not a directory, belongs to another user, or others may write in it.
    """
    folder = folder.resolve()
    for path in reversed([folder, *folder.parents]):
        if not path.exists():
            path.mkdir(mode=0o755)
            path.chmod(0o755)  # whatever the umask
    for path in [folder, *folder.parents]:
        info = path.lstat()
        if not stat.S_ISDIR(info.st_mode):
            raise HubError(f"{path} is not a directory (the users' environments go in {folder})")
        if info.st_uid not in (0, os.geteuid()):
            raise HubError(f"{path} belongs to user id {info.st_uid}, who could replace the users' environments "
                           f"in {folder}: remove it or choose another folder")
        others_write = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if others_write and (path == folder or not info.st_mode & stat.S_ISVTX):
            raise HubError(f"{path} is writable by other users (mode {stat.S_IMODE(info.st_mode):04o}), who could "
                           f"replace the users' environments in {folder}: `chmod go-w {path}` or choose another folder")
    return folder


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


#: Builds the local projects (this repository, the student edition) in pip's build environment, which, offline,
#: takes it from the wheelhouse too: pyproject.toml's (and the edition's) build-system requirement.
BUILD_REQUIREMENT = "setuptools>=77"


@dataclass(frozen=True)
class EnvSpec:
    """One environment to build: its folder, what pip installs in it, and what else its stamp is made of.

    ``local_projects`` are folders pip installs too, built afresh in a temporary
    folder for each set-up: their paths change every time, so they stay out of
    the stamp, and a digest of their content goes in ``stamp_inputs`` instead.
    """

    target: Path
    requirements: tuple[str, ...]
    stamp_inputs: tuple[str, ...] = ()
    local_projects: tuple[str, ...] = ()

    def stamp(self, freeze: str) -> str:
        """Key of the built environment: the constraints, the requirements and the stamp inputs (hashed)."""
        return hashlib.sha256("\0".join([freeze, *self.requirements, *self.stamp_inputs]).encode()).hexdigest()

    @property
    def installs(self) -> tuple[str, ...]:
        """What ``pip install`` gets: the requirements and the local projects."""
        return (*self.requirements, *self.local_projects)

    @property
    def stamp_file(self) -> Path:
        return self.target / ".attention-lab-stamp"

    def up_to_date(self, freeze: str) -> bool:
        return self.stamp_file.exists() and self.stamp_file.read_text() == self.stamp(freeze)


def _run(step: list[str], what: Path, cwd: Path) -> None:
    done = subprocess.run(step, capture_output=True, text=True, cwd=cwd)
    if done.returncode != 0:
        raise HubError(f"building {what} failed at `{' '.join(step)}`:\n{(done.stdout + done.stderr)[-4000:]}")


def build_envs(specs: list[EnvSpec], log=print) -> list[bool]:
    """Make a venv for each spec not up to date, at this environment's versions; which were built (in order).

    Each venv is built on :func:`shared_interpreter` and filled by this
    environment's pip (``pip --python``) with :func:`pinned_versions` as
    constraints, so every server runs the hub's versions of the Jupyter stack.
    One is rebuilt only when its stamp (:meth:`EnvSpec.stamp`: the constraints,
    its requirements and its stamp inputs) changed. The environments share most
    of their packages, so pip downloads the wheels of all of them once (resolved
    together, for the shared interpreter) into a temporary wheelhouse, and each
    venv is then filled from that folder alone (``--no-index``), side by side.

    Raises
    ------
    HubError
        If pip fails.
    """
    freeze = pinned_versions()
    todo = [spec for spec in specs if not spec.up_to_date(freeze)]
    if not todo:
        return [False] * len(specs)
    for spec in todo:
        log(f"building {spec.target} (pip, a minute or two) ...")
        shutil.rmtree(spec.target, ignore_errors=True)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    with tempfile.TemporaryDirectory(prefix="attention-lab-env-") as scratch:
        scratch = Path(scratch)
        constraints, wheelhouse = scratch / "constraints.txt", scratch / "wheels"
        constraints.write_text(freeze)
        for spec in todo:
            _run([str(shared_interpreter()), "-m", "venv", "--without-pip", str(spec.target)], spec.target, scratch)
        # resolved and downloaded for the shared interpreter (`--python` of one of the new venvs): its patch
        # release may be older than this one, and some packages' newest versions need a newer one
        everything = list(dict.fromkeys(r for spec in todo for r in spec.installs if r != "-e"))
        _run([*pip, "--python", str(todo[0].target / "bin" / "python"), "download", "--quiet", "-c", str(constraints),
              "-d", str(wheelhouse), *everything, BUILD_REQUIREMENT], todo[0].target, scratch)

        def fill(spec: EnvSpec) -> None:
            _run([*pip, "--python", str(spec.target / "bin" / "python"), "install", "--quiet", "--no-index",
                  "--find-links", str(wheelhouse), "-c", str(constraints), *spec.installs], spec.target, scratch)
            spec.stamp_file.write_text(spec.stamp(freeze))

        with ThreadPoolExecutor(max_workers=2) as pool:  # unpacking and byte-compiling: set-up's slow part
            for done in [pool.submit(fill, spec) for spec in todo]:
                done.result()
    return [spec in todo for spec in specs]


def jupyter(env: Path, *args: str) -> None:
    """Run ``jupyter ARGS`` of environment ``env`` (JupyterLab's and Jupyter Server's own configuration commands)."""
    done = subprocess.run([str(env / "bin" / "jupyter"), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise HubError(f"`jupyter {' '.join(args)}` in {env} failed:\n{(done.stdout + done.stderr)[-4000:]}")


def student_edition(scratch: Path) -> tuple[Path, str]:
    """The student edition built in ``scratch``, and a digest of its files (its environment's stamp input)."""
    edition = student_build.build(scratch / "edition")
    digest = hashlib.sha256()
    for path in sorted(p for p in edition.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(edition)).encode() + path.read_bytes())
    return edition, digest.hexdigest()


def build_user_envs(student_env: Path, instructor_env: Path, exchange: Path | None, log=print) -> None:
    """Make ``student-env/`` and ``instructor-env/`` (:func:`build_envs`), then configure the students' one.

    Either is reused as it is when its stamp is current (e.g. built ahead by
    :func:`build_ahead`); the students' is configured again every time (for
    ``exchange``; ``None`` when built ahead, with no class yet).

    ``student-env/``: the student edition, JupyterHub's single-user server,
    JupyterLab and nbgrader. Nothing of ``autograder`` or ``source/`` is in it
    (the student edition's build refuses them). Formgrader, Create Assignment and
    the Course List are disabled for everyone using it with JupyterLab's and
    Jupyter Server's own commands (``--sys-prefix`` level, owned by root); the
    exchange is configured in its ``etc/jupyter/nbgrader_config.py``.

    ``instructor-env/``: this repository installed editable (grader, Formgrader,
    Create Assignment). A venv of its own because this one's interpreter may be
    unreadable for the instructor's Unix user; it imports ``autograder`` from the
    repository, so grading always runs the checked-out grader.

    Raises
    ------
    HubError
        If pip or one of the configuration commands fails.
    """
    with tempfile.TemporaryDirectory(prefix="attention-lab-student-") as scratch:
        edition, digest = student_edition(Path(scratch))
        _, instructor_built = build_envs(
            [EnvSpec(student_env, ("jupyterhub",), (digest,), (str(edition),)),
             EnvSpec(instructor_env, ("-e", str(REPO)), ((REPO / "pyproject.toml").read_text(),))], log=log)
    configure_student_env(student_env, exchange)
    if instructor_built:
        subprocess.run(["chmod", "-R", "a+rX,go-w", str(instructor_env)], check=True)


def build_ahead(folder: Path, log=print) -> Path:
    """``make hub-envs``: build (or keep, when current) both environments in ``folder``, ahead of any class.

    An install step: ``hub setup --envs FOLDER`` and tests/test_hub.py then only
    configure the students' one for their exchange. ``folder`` is checked with
    :func:`safe_folder`; the environments are root's and read-only for everyone else.

    Raises
    ------
    HubError
        If not run as root, ``folder`` is not safe, or a build step fails.
    """
    if os.geteuid() != 0:
        raise HubError("the users' environments are built as root (read-only for the hub's users): run it as root")
    folder = safe_folder(folder)
    build_user_envs(folder / "student-env", folder / "instructor-env", None, log)
    (folder / CHECKOUT_RECORD).write_text(f"{REPO.resolve()}\n")  # whose they are: prune_built_ahead
    return folder


def configure_student_env(env: Path, exchange: Path | None) -> None:
    """Switch off the instructor's parts of nbgrader in ``env``, configure its exchange, make it read-only for users.

    Applied on every set-up (cheap, idempotent), so that a changed setting reaches an existing environment;
    ``exchange`` None (environments built ahead, :func:`build_ahead`) writes no nbgrader configuration.

    Raises
    ------
    HubError
        If one of the configuration commands fails.
    """
    # locked, so that a student's own settings cannot switch them on again
    jupyter(env, "labextension", "disable", "--level=sys_prefix", *STUDENT_DISABLED_LABEXTENSIONS)
    jupyter(env, "labextension", "lock", "--level=sys_prefix", *STUDENT_DISABLED_LABEXTENSIONS)
    jupyter(env, "server", "extension", "disable", "--sys-prefix", *STUDENT_DISABLED_SERVER_EXTENSIONS)  # one command
    if exchange is not None:
        (env / "etc" / "jupyter" / "nbgrader_config.py").write_text(
            render("student_nbgrader_config.py", course_id=COURSE_ID, exchange=str(exchange)))
    settings = env / "share" / "jupyter" / "lab" / "settings"
    settings.mkdir(parents=True, exist_ok=True)
    # JupyterLab's defaults for everyone on this environment: no "news" pop-up covering the page
    (settings / "overrides.json").write_text(json.dumps(
        {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}}, indent=2))
    subprocess.run(["chmod", "-R", "a+rX,go-w", str(env)], check=True)
