"""`make student-env`: the student edition holds no grader, reference or solutions, and works without them."""

import json
import os
import subprocess
import sys
import zipfile

import pytest

from autograder import student_build


@pytest.fixture(scope="module")
def edition(tmp_path_factory):
    return student_build.build(tmp_path_factory.mktemp("student") / "attention-lab-student")


def test_it_holds_the_student_package_and_the_release_only(edition):
    assert sorted(p.name for p in edition.iterdir()) == [
        "README.md", "attention_lab", "environment.yml", "jupyter-config", "postBuild", "pyproject.toml", "release"]
    names = {p.name for p in edition.rglob("*")}
    assert "autograder" not in names and "source" not in names and "reference.py" not in names
    assert not any("BEGIN SOLUTION" in p.read_text() for p in (edition / "release").rglob("*.ipynb"))


def test_it_builds_a_wheel_with_only_attention_lab(edition, tmp_path):
    # no build isolation, as `make lite` builds this wheel (autograder/lite_build.py): the `lite` extra installs the
    # setuptools the edition's build-system asks for, so pip need not make a build environment from the index
    # (3.5 s of CPU and a download); what goes into the wheel is the edition's pyproject.toml's choice either way
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path), str(edition)], check=True, capture_output=True)
    wheel = next(tmp_path.glob("attention_lab_student-*.whl"))
    files = zipfile.ZipFile(wheel).namelist()
    assert "attention_lab/a01_attention/worked_cases.json" in files
    assert all(f.startswith(("attention_lab/", "attention_lab_student-")) for f in files), files


def test_the_package_works_where_the_grader_cannot_be_imported(edition):
    # drop this venv's editable-install finder, so only the edition's folder provides packages of ours
    code = f"""
import sys
sys.meta_path = [f for f in sys.meta_path if "editable" not in str(f).lower()]
sys.path.insert(0, {str(edition)!r})
import numpy as np
import attention_lab.a01_attention.checks, attention_lab.core.worked, attention_lab.a01_attention.visual, attention_lab.core.probe
assert attention_lab.__file__.startswith({str(edition)!r}), attention_lab.__file__
try:
    import autograder
except ImportError:
    print("no grader")
def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)
attention_lab.a01_attention.checks.check_softmax(softmax)
print("self-check ran")
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=edition.parent)
    assert result.returncode == 0, result.stderr
    assert "no grader" in result.stdout and "self-check ran" in result.stdout


def test_attention_lab_lab_puts_a_course_folders_jupyter_config_first(edition, tmp_path):
    from attention_lab.lab import lab_environment

    env = lab_environment(edition, {"JUPYTER_CONFIG_PATH": "/elsewhere", "PATH": "/bin"})
    assert env["JUPYTER_CONFIG_PATH"].split(os.pathsep) == [str(edition / "jupyter-config"), "/elsewhere"]
    assert env["OPENBLAS_NUM_THREADS"] == "1" and env["PATH"] == "/bin"
    assert "JUPYTER_CONFIG_PATH" not in lab_environment(tmp_path, {})  # the full course has no jupyter-config/
    assert lab_environment(tmp_path, {"OPENBLAS_NUM_THREADS": "4"})["OPENBLAS_NUM_THREADS"] == "4"


def test_the_editions_jupyter_config_switches_off_exactly_nbgraders_instructor_parts(edition):
    page = json.loads((edition / "jupyter-config" / "labconfig" / "page_config.json").read_text())
    assert page == {"disabledExtensions": {p: True for p in student_build.INSTRUCTOR_LAB_PLUGINS}}
    server = json.loads((edition / "jupyter-config" / "jupyter_server_config.d" / "attention-lab-student.json").read_text())
    assert server == {"ServerApp": {"jpserver_extensions": {e: False for e in student_build.INSTRUCTOR_SERVER_EXTENSIONS}}}
    assert "validate" not in " ".join(student_build.INSTRUCTOR_LAB_PLUGINS + student_build.INSTRUCTOR_SERVER_EXTENSIONS)
    postbuild = (edition / "postBuild").read_text()
    for plugin in student_build.INSTRUCTOR_LAB_PLUGINS:
        assert f"jupyter labextension disable --level=sys_prefix {plugin}" in postbuild
