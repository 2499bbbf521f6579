"""A throw-away git repository holding this worktree's files, as a fresh clone of it would."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

GIT = ["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid", "-c", "init.defaultBranch=main"]


def git(*args: str, cwd: Path) -> str:
    return subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def make_clone(repo: Path, target: Path) -> Path:
    """Copy the files git tracks or would track (not the ignored ones) from ``repo`` to ``target`` and commit them.

    Unlike ``git clone`` this includes changes not committed yet, so a test sees the tree as it is.
    """
    listed = git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=repo).split("\0")
    for name in filter(None, listed):
        if (repo / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(repo / name, target / name)
    git("init", "-q", cwd=target)
    git("add", "-A", cwd=target)
    git("commit", "-q", "-m", "clone", cwd=target)
    return target
