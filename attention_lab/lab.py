"""``make lab``: give the learner copies of the released assignments and open JupyterLab on the start page.

``python -m attention_lab.lab [jupyter lab options]`` copies each
``release/<assignment>/`` to ``workspace/<assignment>/`` unless that folder
already exists (a learner's work is never overwritten), then runs JupyterLab
with the course folder as its root and ``notebooks/00_start_here.ipynb`` as the
page it opens, and with :mod:`attention_lab.clean_on_save` enabled, so that opening
and running the committed notebooks leaves the repository unchanged. A course
folder with a ``jupyter-config/`` folder (the student edition's, which switches
off nbgrader's instructor parts) has it added to ``JUPYTER_CONFIG_PATH``. The
browser tests start the server with :func:`lab_command` or this module, so they
check the same set-up.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

START_PAGE = "notebooks/00_start_here.ipynb"
# saves notebooks in the committed folders without outputs and kernel metadata (git status stays empty)
CLEAN_ON_SAVE = "attention_lab.clean_on_save"
# Jupyter configuration that ships with a course folder (the student edition's: no Formgrader, no Create Assignment)
COURSE_CONFIG = "jupyter-config"


def prepare_workspace(course_dir: Path) -> list[Path]:
    """Copy every ``release/<assignment>/`` that is not yet in ``workspace/``; return the new folders."""
    release = course_dir / "release"
    created = []
    if not release.is_dir():
        return created
    for assignment in sorted(p for p in release.iterdir() if p.is_dir()):
        target = course_dir / "workspace" / assignment.name
        if not target.exists():
            shutil.copytree(assignment, target)
            created.append(target)
    return created


def lab_command(course_dir: Path, *extra: str) -> list[str]:
    """The ``jupyter lab`` command line: course folder as root, opening on the start page, clean saves."""
    jupyter = Path(sys.executable).parent / "jupyter"
    start = START_PAGE if (course_dir / START_PAGE).exists() else "workspace"  # the student edition has no notebooks/
    return [str(jupyter), "lab", f"--ServerApp.root_dir={course_dir}",
            f"--LabApp.default_url=/lab/tree/{start}", f"--ServerApp.jpserver_extensions={CLEAN_ON_SAVE}=True",
            *extra]


def lab_environment(course_dir: Path, environ: dict[str, str]) -> dict[str, str]:
    """The environment ``jupyter lab`` runs in: ``environ`` plus the course's own Jupyter config and BLAS threads.

    Parameters
    ----------
    course_dir : Path
        The course folder; its ``jupyter-config/`` (if any) goes first on ``JUPYTER_CONFIG_PATH``, so its
        ``labconfig/page_config.json`` and ``jupyter_server_config.d/`` override the installed defaults.
    environ : dict
        The environment to start from (``os.environ``); not modified.

    Returns
    -------
    dict
        A new environment, with ``OPENBLAS_NUM_THREADS=1`` unless ``environ`` sets it (kernels inherit it:
        small matrix products stay fast on few cores).
    """
    env = dict(environ)
    config = course_dir / COURSE_CONFIG
    if config.is_dir():
        env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(filter(None, [str(config), environ.get("JUPYTER_CONFIG_PATH")]))
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    return env


def main(argv: list[str] | None = None) -> None:
    course_dir = Path.cwd()
    for folder in prepare_workspace(course_dir):
        print(f"copied {folder.relative_to(course_dir)}/ from release/ — do your work there")
    command = lab_command(course_dir, *(sys.argv[1:] if argv is None else argv))
    os.execve(command[0], command, lab_environment(course_dir, dict(os.environ)))


if __name__ == "__main__":
    main()
