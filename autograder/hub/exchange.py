"""nbgrader's ``collect``, taking only submissions that are what they claim to be.

nbgrader's filesystem exchange lets every student create folders in
``inbound/``, and ``nbgrader collect`` trusts their names: for each student it
takes the folder ``<student>+<assignment>+<timestamp>+...`` with the latest
timestamp. Its owner check only logs "cheating attempt?", so

* a student can **submit in another student's name** — a folder named for
  them with a later timestamp replaces their real submission in the
  gradebook;
* a submission that is, or contains, a **symbolic link** is followed by the
  instructor's copy: a link to ``source/<assignment>/<notebook>.ipynb`` (which
  only the instructor can read) turns the solutions into that student's
  submission, graded and shown back to them as feedback;
* a name whose timestamp does not parse stops the **whole collect** with an
  exception.

:class:`VerifiedCollect` moves such folders aside before nbgrader picks the
latest per student (renamed in place to ``quarantined-<...>``, with a warning
saying why; the instructor owns ``inbound/`` and may rename in it despite its
sticky bit), so each student's latest *genuine* submission is collected. Its
copy opens every file and folder with ``O_NOFOLLOW`` relative to its parent,
so a link swapped in while the instructor copies is refused, not followed.
Configured in the course's ``nbgrader_config.py``::

    c.ExchangeFactory.collect = "autograder.hub.exchange.VerifiedCollect"
"""

from __future__ import annotations

import os
import pwd
import secrets
import stat
from pathlib import Path

from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.utils import ignore_patterns, parse_utc

QUARANTINE_PREFIX = "quarantined-"
CHUNK = 1 << 20


def submission_problem(entry: Path) -> str | None:
    """Why the inbound folder ``entry`` is not a genuine submission, or None if it is.

    Genuine: its name parses as nbgrader's ``<student>+<assignment>+<timestamp>[+<random>]``,
    it is a real folder (not a link) owned by the Unix user ``<student>``, and nothing
    in it is a link, a device, a pipe or a socket.
    """
    parts = entry.name.rsplit("+", 3)
    if len(parts) < 3:
        return "its name is not <student>+<assignment>+<timestamp>"
    try:
        parse_utc(parts[2])
    except (ValueError, OverflowError):
        return f"its timestamp {parts[2]!r} does not parse"
    try:
        info = entry.lstat()
    except OSError as error:
        return f"it cannot be read ({error.strerror})"
    if not stat.S_ISDIR(info.st_mode):
        return "it is a symbolic link or a file, not a folder"
    try:
        owner = pwd.getpwuid(info.st_uid).pw_name
    except KeyError:
        owner = str(info.st_uid)
    if owner != parts[0]:
        return f"it claims to be {parts[0]}'s but belongs to {owner}"
    try:
        for folder, dirs, files in os.walk(entry, onerror=_raise):
            for name in dirs + files:
                mode = os.lstat(os.path.join(folder, name)).st_mode
                if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                    return f"{os.path.relpath(os.path.join(folder, name), entry)} is not a plain file or folder"
    except OSError as error:
        return f"it cannot be read ({error.strerror})"
    return None


def _raise(error: OSError) -> None:
    raise error


def copy_without_links(src_fd: int, src_path: str, dest: Path, ignore, budget: list[int], log) -> None:
    """Copy the folder open as ``src_fd`` to ``dest``, opening everything with ``O_NOFOLLOW`` relative to its parent.

    Links, devices, pipes and sockets are skipped with a warning; ``ignore`` is
    nbgrader's ignore function (course ignore/include globs, file size);
    ``budget`` holds the bytes still allowed (nbgrader's ``max_dir_size``).

    Raises
    ------
    RuntimeError
        If the files add up to more than the budget.
    """
    dest.mkdir(parents=True, exist_ok=True)
    with os.scandir(src_fd) as listing:
        entries = list(listing)
    skipped = set(ignore(src_path, [entry.name for entry in entries]))
    for entry in entries:
        if entry.name in skipped:
            continue
        where = os.path.join(src_path, entry.name)
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
        try:
            fd = os.open(entry.name, flags | (os.O_DIRECTORY if entry.is_dir(follow_symlinks=False) else 0),
                         dir_fd=src_fd)
        except OSError as error:  # ELOOP: it became a link; ENOTDIR: it changed kind
            log.warning("Not collecting %s: %s", where, error.strerror)
            continue
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                copy_without_links(fd, where, dest / entry.name, ignore, budget, log)
            elif stat.S_ISREG(mode):
                with open(dest / entry.name, "wb") as out:
                    while chunk := os.read(fd, CHUNK):
                        budget[0] -= len(chunk)
                        if budget[0] < 0:
                            raise RuntimeError(f"Directory size is too big: {src_path}")
                        out.write(chunk)
            else:
                log.warning("Not collecting %s: not a plain file or folder", where)
        finally:
            os.close(fd)


class VerifiedCollect(ExchangeCollect):
    """``nbgrader collect`` that sets forged, linked or unparseable inbound folders aside and copies without links."""

    def init_src(self) -> None:
        """Quarantine the inbound folders that are not genuine submissions, then let nbgrader choose as usual."""
        inbound = Path(self.root) / self.coursedir.course_id / "inbound"
        if inbound.is_dir():
            for entry in sorted(inbound.iterdir()):
                if entry.name.startswith(QUARANTINE_PREFIX):
                    continue
                problem = submission_problem(entry)
                if problem:
                    aside = inbound / f"{QUARANTINE_PREFIX}{secrets.token_hex(8)}"
                    entry.rename(aside)  # same folder: allowed to its owner even for another user's entry
                    self.log.warning("Not collecting %s: %s; moved aside as %s", entry.name, problem, aside.name)
        super().init_src()

    def do_copy(self, src: str, dest: str, log=None) -> None:
        """Copy one submission like nbgrader (ignore globs, size limits), never following a link."""
        ignore = ignore_patterns(exclude=self.coursedir.ignore, include=self.coursedir.include,
                                 max_file_size=self.coursedir.max_file_size, log=self.log)
        fd = os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            copy_without_links(fd, src, Path(dest), ignore, [1000 * self.coursedir.max_dir_size], self.log)
        finally:
            os.close(fd)
