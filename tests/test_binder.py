"""Binder: `postBuild` run in a fresh virtual environment made from the pip equivalent of environment.yml (what
repo2docker installs) leaves JupyterLab set up as `make lab` does; the README's launch link opens the start page.

The fresh environment is a venv without pip of its own, filled by this environment's pip (``pip --python``) in
repo2docker's two steps: the packages environment.yml lists (pip, setuptools and the rest, as conda installs
them), then its ``pip:`` section (``-e .``), built with the setuptools the first step installed (the same
``setuptools>=77`` pyproject.toml's build-system asks for) instead of in a build environment of its own. It
downloads every package from the index: pip's cache does not keep them where the index's answers carry no
caching headers (this machine's proxy).
"""

import json
import os
import re
import subprocess
import sys
import urllib.parse

import pytest
import yaml

from clone_support import make_clone
from conftest import REPO


def pip_equivalent(environment: dict, project: str) -> tuple[list[str], list[str]]:
    """pip arguments installing what a conda environment file lists, in repo2docker's two steps: its packages
    (pip included; conda-forge names are the PyPI names here), then its `pip:` section (`-e .` is the project
    folder ``project``)."""
    packages, pip_section = [], []
    for dependency in environment["dependencies"]:
        if isinstance(dependency, dict):
            for entry in dependency["pip"]:
                pip_section += ["-e", project] if entry == "-e ." else [entry]
        elif not dependency.startswith("python="):
            packages.append(dependency)
    return packages, pip_section


def test_the_pip_equivalent_lists_every_package_and_the_editable_project():
    environment = yaml.safe_load((REPO / "environment.yml").read_text())
    packages, pip_section = pip_equivalent(environment, "/course")
    assert pip_section == ["-e", "/course"]
    assert "jupyterlab>=4.2,<5" in packages and "nbgrader>=0.9.6,<0.10" in packages
    assert "pip" in packages and "setuptools>=77" in packages  # what the second step runs and builds with
    assert not any(a.startswith("python=") or a.startswith("-") for a in packages)


@pytest.fixture(scope="module")
def binder(tmp_path_factory):
    """A clone of the course after a fresh environment.yml install and its postBuild; returns (clone, venv bin)."""
    root = tmp_path_factory.mktemp("binder")
    clone = make_clone(REPO, root / "attention-lab")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)  # pip comes from the list
    packages, pip_section = pip_equivalent(yaml.safe_load((clone / "environment.yml").read_text()), str(clone))
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet", "--no-compile"]
    subprocess.run([*pip, *packages], check=True, cwd=clone)
    subprocess.run([*pip, "--no-build-isolation", *pip_section], check=True, cwd=clone)
    env = dict(os.environ, PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
               JUPYTER_CONFIG_DIR=str(root / "jupyter-config"), VIRTUAL_ENV=str(venv))
    result = subprocess.run(["bash", "postBuild"], cwd=clone, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    return clone, venv / "bin", env


def test_postbuild_gives_learners_their_copies_of_the_release(binder):
    clone, _, _ = binder
    released = sorted(p.relative_to(clone / "release") for p in (clone / "release").rglob("*.ipynb"))
    assert released
    for notebook in released:
        assert (clone / "workspace" / notebook).read_bytes() == (clone / "release" / notebook).read_bytes()


def test_postbuild_enables_the_extension_that_keeps_committed_notebooks_clean(binder):
    clone, bin_dir, env = binder
    # what the fresh environment's Jupyter server would load (jupyter_server's own config reader), and that it
    # imports there; quicker than `jupyter server extension list`, which imports every extension
    code = """
import importlib, json
from jupyter_core.paths import jupyter_config_path
from jupyter_server.extension.config import ExtensionConfigManager
enabled = ExtensionConfigManager(read_config_path=jupyter_config_path()).get_jpserver_extensions()
module = importlib.import_module("attention_lab.clean_on_save")
print(json.dumps({"enabled": enabled, "points": module._jupyter_server_extension_points()}))
"""
    result = subprocess.run([str(bin_dir / "python"), "-c", code], env=env, cwd=clone.parent,
                            capture_output=True, text=True, check=True)
    found = json.loads(result.stdout)
    assert found["enabled"].get("attention_lab.clean_on_save") is True, found
    assert found["enabled"].get("nbgrader.server_extensions.validate_assignment") is True
    assert found["points"] == [{"module": "attention_lab.clean_on_save"}]
    labextensions = subprocess.run([str(bin_dir / "jupyter"), "labextension", "list"], env=env,
                                   capture_output=True, text=True, check=True)
    for extension in ("@jupyter/nbgrader", "@jupyter-widgets/jupyterlab-manager"):
        line = next(l for l in (labextensions.stdout + labextensions.stderr).splitlines() if extension in l)
        assert "enabled" in line and "OK" in line, line


def test_binders_start_script_gives_kernels_one_blas_thread(binder):
    clone, bin_dir, env = binder
    env = {k: v for k, v in env.items() if k != "OPENBLAS_NUM_THREADS"}
    result = subprocess.run(["bash", "start", str(bin_dir / "python"), "-c",
                             "import os; print(os.environ['OPENBLAS_NUM_THREADS'])"],
                            cwd=clone, env=env, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "1"


def test_the_readme_binder_link_opens_the_start_page():
    readme = (REPO / "README.md").read_text()
    links = re.findall(r"https://mybinder\.org/v2/\S+?\?urlpath=([^)\s`]+)", readme)
    assert links, "README.md has no Binder launch link"
    for urlpath in links:
        path = urllib.parse.unquote(urlpath)
        assert path == "lab/tree/notebooks/00_start_here.ipynb", path
        assert (REPO / path.removeprefix("lab/tree/")).exists()
