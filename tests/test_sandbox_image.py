"""The sandbox's image of the kernel's Python: a virtual environment built on a system Python under /usr."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from autograder.sandbox.image import INSIDE_VENV, python_image

SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin")


@pytest.mark.skipif(SYSTEM_PYTHON is None, reason="no Python under /usr/bin on this machine")
def test_a_venv_on_a_system_python_under_usr_points_home_at_that_python(tmp_path):
    """The hub's environments are venvs on Debian's /usr/bin/python3: /usr is bound where it is, so the image's
    pyvenv.cfg keeps /usr/bin as its home (this used to fail with a TypeError and stop every student's grading)."""
    venv = tmp_path / "venv"
    subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True)
    base = subprocess.run([str(venv / "bin" / "python"), "-c", "import sys; print(sys.base_prefix)"],
                          check=True, capture_output=True, text=True).stdout.strip()
    image = python_image(str(venv / "bin" / "python"), str(venv), base, ())
    mounted = dict((inside, host) for host, inside in image.mounts)
    config = (Path(mounted[INSIDE_VENV]) / "pyvenv.cfg").read_text()
    assert f"home = {Path(base).resolve() / 'bin'}" in config
