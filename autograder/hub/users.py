"""Unix users for the hub (`autograder.hub`): create and remove them, run commands as them.

Set-up creates each student and the instructor as a Unix user with a private
home and a group of its own; tear-down ends their processes (by process id)
and removes them. :func:`run_as` runs a command as one of them the way the
hub starts their servers: their uid and group only, their home, umask 077.
"""

from __future__ import annotations

import os
import pwd
import re
import signal
import subprocess
import time
from pathlib import Path

from autograder.course import KERNEL_ENVIRONMENT

#: Unix user names set-up accepts (those of Debian's adduser, lower case).
USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
UMASK = 0o077
NOBODY = 65534
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


class HubError(RuntimeError):
    """Set-up, start or tear-down cannot go on; the message says what to do."""


def user_exists(name: str) -> bool:
    """Whether Unix user ``name`` exists."""
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def create_user(name: str) -> bool:
    """Create Unix user ``name`` with a private home (0700) and its own group; False if it already existed.

    Raises
    ------
    HubError
        If ``name`` is not a valid user name, or ``useradd`` fails.
    """
    if not USER_NAME.match(name):
        raise HubError(f"user name {name!r} is not valid: lower-case letters, digits, '-' and '_', "
                       "starting with a letter or '_', at most 32 characters")
    if user_exists(name):
        return False
    done = subprocess.run(["useradd", "--create-home", "--user-group", "--shell", "/bin/bash", name],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise HubError(f"useradd {name} failed: {done.stderr.strip()}")
    os.chmod(pwd.getpwnam(name).pw_dir, 0o700)
    return True


def user_processes(uid: int) -> list[int]:
    """Ids of the processes whose real user id is ``uid`` (read from ``/proc``)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:  # ended meanwhile
            continue
        uids = re.search(r"^Uid:\s+(\d+)", status, re.M)
        if uids and int(uids.group(1)) == uid:
            pids.append(int(entry.name))
    return pids


def end_processes(pids: list[int], timeout: float = 20) -> None:
    """SIGTERM each process, wait up to ``timeout`` seconds for all to end, then SIGKILL the rest."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in alive if Path(f"/proc/{pid}").exists()]
        if alive:
            time.sleep(0.2)
    for pid in alive:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def remove_user(name: str) -> None:
    """End the processes of Unix user ``name`` (by id), then remove the user, its group and its home."""
    if not user_exists(name):
        return
    end_processes(user_processes(pwd.getpwnam(name).pw_uid))
    done = subprocess.run(["userdel", "--remove", name], capture_output=True, text=True)
    if done.returncode != 0 and user_exists(name):
        raise HubError(f"userdel --remove {name} failed: {done.stderr.strip()}")


def run_as(user: str, argv: list[str], cwd: Path | None = None, env: dict[str, str] | None = None,
           check: bool = True, prefix: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``argv`` as Unix user ``user`` (its uid, group, no other groups, umask 077, its HOME).

    Parameters
    ----------
    prefix : Path, optional
        A Python environment whose ``bin/`` goes first on PATH (nbgrader shells out to ``alembic``).

    Raises
    ------
    HubError
        If ``check`` and the command exits non-zero; the message ends with its output.
    """
    account = pwd.getpwnam(user)
    path = f"{prefix / 'bin'}:{SYSTEM_PATH}" if prefix else SYSTEM_PATH
    environment = {"HOME": account.pw_dir, "USER": user, "LOGNAME": user, "PATH": path, "LANG": "C.UTF-8",
                   **KERNEL_ENVIRONMENT, **(env or {})}
    done = subprocess.run(argv, cwd=cwd or account.pw_dir, env=environment, user=account.pw_uid,
                          group=account.pw_gid, extra_groups=[], umask=UMASK, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if check and done.returncode != 0:
        raise HubError(f"`{' '.join(argv)}` as {user} failed:\n{done.stdout[-6000:]}")
    return done
