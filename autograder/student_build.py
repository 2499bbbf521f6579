"""``make student-env``: the course as students may receive it — no grader, no reference, no solutions.

``python -m autograder.student_build [TARGET]`` writes a self-contained folder
(default ``dist/attention-lab-student/``) with

* ``attention_lab/`` — the student package (widgets, plots, visible
  self-checks with their stored worked cases, the grading probe);
* ``release/`` — the released notebooks;
* ``pyproject.toml`` / ``environment.yml`` / ``postBuild`` / ``README.md`` that
  install only ``attention_lab`` and its dependencies, for a pip venv, conda
  or Binder; ``python -m attention_lab.lab`` opens the course;
* ``jupyter-config/`` — Jupyter configuration that leaves students only the
  student side of nbgrader: the Formgrader, Create Assignment and course list
  lab plugins are disabled (``labconfig/page_config.json``) and the Formgrader and
  course-list server extensions are off (``jupyter_server_config.d/``), while the
  Validate button and the Assignment List stay. ``python -m attention_lab.lab``
  puts it on ``JUPYTER_CONFIG_PATH``; on Binder ``postBuild`` applies the same
  with ``jupyter labextension disable`` / ``jupyter server extension disable``.

Nothing from ``autograder/``, ``source/``, ``notebooks/`` (the self-study
notebooks run on the reference) or the tests is copied, and the build fails
if a copied file imports the grader or holds solution markers.
Push the folder as the students' repository.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Callable, Sequence

from attention_lab.lab import COURSE_CONFIG  # where `python -m attention_lab.lab` looks for a course's Jupyter config
from autograder.course import REPO

DEFAULT_TARGET = REPO / "dist" / "attention-lab-student"

# the student package's own dependencies (no nbgrader grading side; nbgrader stays for the Validate button)
DEPENDENCIES = [
    "numpy>=1.26,<3",
    "matplotlib>=3.8,<4",
    "ipywidgets>=8.1,<9",
    "ipykernel>=6.29,<8",
    "jupyterlab>=4.2,<5",
    "nbgrader>=0.9.6,<0.10",
]

# nbgrader's instructor parts, by their public plugin and server-extension names (nbgrader 0.9's
# "disabling extensions" docs): what students do not need and should not see
INSTRUCTOR_LAB_PLUGINS = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                          "@jupyter/nbgrader:course-list")
INSTRUCTOR_SERVER_EXTENSIONS = ("nbgrader.server_extensions.formgrader", "nbgrader.server_extensions.course_list")

# a line of code importing the grader (also inside a notebook's JSON strings), or solution markers
FORBIDDEN = re.compile(r'^\s*"?(?:from|import)\s+autograder\b|### BEGIN SOLUTION|### BEGIN HIDDEN TESTS', re.MULTILINE)

PACKAGE_DATA = """
[tool.setuptools.package-data]
"attention_lab" = ["a*/worked_cases.json", "a09_tiny_gpt/*.npz", "a09_tiny_gpt/*.json"]
"""


def pyproject_toml(name: str, description: str, dependencies: Sequence[str], packages: str, more: str = "") -> str:
    """The ``pyproject.toml`` of a package built from part of this repository: setuptools, attention_lab's version,
    the Python packages whose names start with ``packages``, then the TOML ``more``."""
    from attention_lab import __version__

    listed = "".join(f'\n    "{d}",' for d in dependencies)
    return f"""[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
version = "{__version__}"
description = "{description}"
requires-python = ">=3.11"
license = "MIT"
dependencies = [{listed}
]

[tool.setuptools.packages.find]
include = ["{packages}*"]
{more}"""

ENVIRONMENT = """name: attention-lab-student
channels:
  - conda-forge
dependencies:
  - python=3.11
  - pip
{dependencies}
  - pip:
      - -e .
"""

POSTBUILD = """#!/usr/bin/env bash
# Binder runs this after installing environment.yml: the students' copies in workspace/, saves that keep
# release/ as committed, and nbgrader's student side only (what jupyter-config/ does for attention_lab.lab).
set -euo pipefail
python -c "from pathlib import Path; from attention_lab.lab import prepare_workspace; prepare_workspace(Path.cwd())"
# (`jupyter server extension enable` only toggles extensions that already have a config file; this writes one)
python -c \"from jupyter_server.extension.serverextension import toggle_server_extension_python as toggle; toggle('attention_lab.clean_on_save', enabled=True, sys_prefix=True)\"
{disable}
"""

README = """# Attention Lab — student edition

Implement attention step by step in NumPy: scaled dot-product attention, multi-head attention,
positional encoding, masks and numerical stability, and incremental decoding with a KV cache.

    python3 -m venv .venv && .venv/bin/pip install -e .
    OPENBLAS_NUM_THREADS=1 .venv/bin/python -m attention_lab.lab

The second command copies each assignment from `release/` to `workspace/` (your work is never
overwritten) and opens JupyterLab, with nbgrader's student tools only (the Validate button and the
Assignment List; `jupyter-config/` switches the instructor tools off). Fill in the solution cells, run the self-checks beside them, use
the Validate button, and hand in the notebooks as your instructor says. With conda or Binder, use
`environment.yml` (Binder runs `postBuild`, which makes the same `workspace/`).
"""


def _copy_tree(source: Path, target: Path) -> None:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints"))


def write_jupyter_config(config_dir: Path) -> None:
    """Write the Jupyter configuration that switches nbgrader's instructor parts off, in JupyterLab's public formats.

    ``labconfig/page_config.json`` lists :data:`INSTRUCTOR_LAB_PLUGINS` under ``disabledExtensions`` (what
    ``jupyter labextension disable`` writes) and ``jupyter_server_config.d/attention-lab-student.json`` sets
    :data:`INSTRUCTOR_SERVER_EXTENSIONS` to false in ``ServerApp.jpserver_extensions``.
    """
    (config_dir / "labconfig").mkdir(parents=True)
    (config_dir / "jupyter_server_config.d").mkdir()
    page_config = {"disabledExtensions": {plugin: True for plugin in INSTRUCTOR_LAB_PLUGINS}}
    (config_dir / "labconfig" / "page_config.json").write_text(json.dumps(page_config, indent=2) + "\n")
    server_config = {"ServerApp": {"jpserver_extensions": {e: False for e in INSTRUCTOR_SERVER_EXTENSIONS}}}
    (config_dir / "jupyter_server_config.d" / "attention-lab-student.json").write_text(
        json.dumps(server_config, indent=2) + "\n")


def build(target: Path = DEFAULT_TARGET, repo: Path = REPO) -> Path:
    """Write the student edition into ``target`` (replacing it).

    Raises
    ------
    RuntimeError
        If a copied file imports ``autograder`` or holds solution / hidden-test markers.
    """
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    _copy_tree(repo / "attention_lab", target / "attention_lab")
    _copy_tree(repo / "release", target / "release")
    (target / "pyproject.toml").write_text(pyproject_toml(
        "attention-lab-student", "Attention Lab for students: the notebooks, widgets and self-checks, without the grader.",
        DEPENDENCIES, "attention_lab", PACKAGE_DATA))
    (target / "environment.yml").write_text(ENVIRONMENT.format(dependencies="\n".join(f"  - {d}" for d in DEPENDENCIES)))
    write_jupyter_config(target / COURSE_CONFIG)
    disable = [f"jupyter labextension disable --level=sys_prefix {p}" for p in INSTRUCTOR_LAB_PLUGINS]
    disable += [f"jupyter server extension disable --sys-prefix {e}" for e in INSTRUCTOR_SERVER_EXTENSIONS]
    (target / "postBuild").write_text(POSTBUILD.format(disable="\n".join(disable)))
    (target / "postBuild").chmod(0o755)
    (target / "README.md").write_text(README)
    leaks = [str(path.relative_to(target)) for path in target.rglob("*") if path.is_file()
             and FORBIDDEN.search(path.read_text(errors="ignore"))]
    if leaks:
        raise RuntimeError(f"the student edition would contain grader code or solutions: {', '.join(leaks)}")
    return target


def build_command(argv: list[str] | None, description: str, default: Path, build: Callable[[Path], Path],
                  usage: Callable[[Path], str]) -> int:
    """A build's command line, ``[target]`` (default ``default``): builds there, prints the path and ``usage(path)``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("target", nargs="?", type=Path, default=default)
    path = build(parser.parse_args(argv).target.resolve())
    print(f"wrote {path}{usage(path)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return build_command(argv, "Build the student edition of the course (no grader).", DEFAULT_TARGET, build,
                         lambda path: f"\n  students: pip install -e {path} && python -m attention_lab.lab")


if __name__ == "__main__":
    sys.exit(main())
