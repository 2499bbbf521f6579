"""The grading kernel's Python, seen inside the sandbox at neutral paths that name neither the course nor the user.

A bind mount shows its source path in ``/proc/self/mountinfo`` whatever its
mount point is, and this course's Python environment lives in the course
directory (``.venv``), its interpreter often in the grader's home
(``~/.pyenv``). So the kernel does not get those directories bound: it gets
an *image* of them — a tree of hard links (a copy where the file system
refuses links) under ``<tmp>/attention-lab-sandbox/<fingerprint>/`` — mounted
at ``/opt/python`` (the interpreter's installation) and ``/opt/venv`` (the
virtual environment). In the image, ``pyvenv.cfg``, the ``bin/`` symlinks and
scripts point to those neutral paths, and the files through which an editable
install finds its source (``__editable__*``, ``direct_url.json``, path lines of
``.pth`` files) are emptied; the packages the grader hides (``autograder``) are
left out. The image is built once per environment (its fingerprint changes
when packages are installed) and shared by every kernel; an image whose
environment has been deleted is removed when the next image is built.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

INSIDE_PYTHON = Path("/opt/python")
INSIDE_VENV = Path("/opt/venv")
INSIDE_PACKAGES = Path("/opt/packages")
#: In an image's folder, beside the trees that are mounted (so never inside the sandbox): the host directories it
#: copies, for :func:`_prune`.
SOURCES = "sources.json"


@dataclass(frozen=True)
class Image:
    """Where the kernel's Python is inside the sandbox, and what to mount there."""

    mounts: tuple[tuple[Path, Path], ...]  # (host directory in the image, mount point inside)
    python: str  # the interpreter to run, inside
    bin_dir: str  # for PATH, inside
    hidden: tuple[Path, ...]  # host prefixes the image replaces (for mapping paths)
    library_dir: str = ""  # for LD_LIBRARY_PATH: the interpreter's RUNPATH names its host path, absent inside


def _inside(path: Path, mapping: list[tuple[Path, Path]]) -> Path | None:
    for host, inside in mapping:
        if path == host or host in path.parents:
            return inside / path.relative_to(host)
    return None


def _fingerprint(prefixes: list[Path], hidden: tuple[str, ...]) -> str:
    """Changes whenever a package is installed or removed in one of the prefixes."""
    digest = hashlib.sha256(repr((prefixes, hidden)).encode())
    for prefix in prefixes:
        for folder in [prefix, *prefix.glob("lib/python*"), *prefix.glob("lib/python*/site-packages")]:
            stat = folder.stat()
            digest.update(f"{folder}:{stat.st_mtime_ns}:{stat.st_ino}".encode())
    return digest.hexdigest()[:16]


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system, or links refused: a copy
        shutil.copy2(source, target)


def _replace(path: Path, text: str) -> None:
    """Give the image its own file (never write through a hard link into the real environment)."""
    path.unlink()
    path.write_text(text)
    path.chmod(0o644)


def _scrub(tree: Path, mapping: list[tuple[Path, Path]], hosts: list[Path]) -> None:
    """Point the image's links, scripts and config at the neutral paths; empty what names the source tree."""
    host_text = re.compile("|".join(re.escape(str(h)) for h in sorted(hosts, key=lambda p: -len(str(p)))))

    def neutral(text: str) -> str:
        return host_text.sub(lambda m: str(_inside(Path(m.group(0)), mapping)), text)

    for path in tree.rglob("*"):
        if path.is_symlink():
            target = Path(os.readlink(path))
            moved = _inside(target, mapping) if target.is_absolute() else None
            if moved is not None:
                path.unlink()
                path.symlink_to(moved)
    for script in (tree / "bin").glob("*") if (tree / "bin").is_dir() else []:
        if script.is_file() and not script.is_symlink():
            head = script.read_bytes()[:2]
            if head == b"#!":
                _replace(script, neutral(script.read_text(errors="replace")))
                script.chmod(0o755)
    for site in tree.glob("lib/python*/site-packages"):
        for path in site.iterdir():
            if path.name.startswith("__editable__") and path.is_file():
                _replace(path, "")
            elif path.suffix == ".pth" and path.is_file():
                lines = path.read_text(errors="replace").splitlines()
                kept = [line for line in lines if line.startswith("import ") or not line.strip().startswith("/")
                        or _inside(Path(line.strip()), mapping) is not None]
                if kept != lines:
                    _replace(path, "\n".join(kept) + "\n")
        for record in site.glob("*.dist-info/direct_url.json"):
            _replace(record, "{}")


def _build(target: Path, prefixes: list[tuple[Path, Path]], hidden: tuple[str, ...], base: Path,
           venv: Path | None) -> None:
    work = Path(tempfile.mkdtemp(prefix=".building-", dir=target.parent))
    try:
        names = {inside: inside.name for _, inside in prefixes}
        for host, inside in prefixes:
            def ignore(folder, entries):
                if Path(folder).name != "site-packages":
                    return []
                return [e for e in entries if e in hidden or e.split(".")[0] in hidden]
            shutil.copytree(host, work / names[inside], symlinks=True, copy_function=_link_or_copy, ignore=ignore)
        mapping = [(host, inside) for host, inside in prefixes]
        hosts = [host for host, _ in prefixes]
        for _, inside in prefixes:
            _scrub(work / names[inside], mapping, hosts)
        if venv is not None:
            config = (venv / "pyvenv.cfg").read_text()
            version = re.search(r"^version\w*\s*=\s*(\S+)", config, re.M)
            # a base installation under /usr is bound where it is (a system directory), so it keeps its own path
            home = _inside(base, mapping) or base
            _replace(work / names[INSIDE_VENV] / "pyvenv.cfg",
                     f"home = {home / 'bin'}\ninclude-system-site-packages = false\n"
                     + (f"version = {version.group(1)}\n" if version else ""))
        (work / SOURCES).write_text(json.dumps({"prefixes": [str(host) for host, _ in prefixes]}))
        os.chmod(work, 0o755)
        try:
            work.rename(target)
        except OSError:  # built meanwhile by another grader: use that one
            shutil.rmtree(work, ignore_errors=True)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def _prune(root: Path) -> None:
    """Remove the images in ``root`` whose environment is gone.

    An image is a tree of hard links into its environment, so it keeps the environment's files on disk after the
    environment is deleted: every fresh clone's ``.venv`` that ran the test suite and was removed left one behind
    (a machine that did so for two days held 43 GiB of them in /tmp). An image whose environment still exists is
    kept, even if it is out of date: a running grader may still mount it.
    """
    for image in root.iterdir():
        try:
            prefixes = json.loads((image / SOURCES).read_text())["prefixes"]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # being built, not an image, or one from before the record was written: left alone
        if not all(Path(prefix).is_dir() for prefix in prefixes):
            shutil.rmtree(image, ignore_errors=True)


def _own_directory(path: Path) -> bool:
    """Make ``path`` a directory if it is not there; True if it is a real directory (no link) owned by this user."""
    try:
        path.mkdir(mode=0o755, exist_ok=True)
        status = path.lstat()
    except OSError:  # a file of that name, or a link to somewhere that cannot be made
        return False
    return stat.S_ISDIR(status.st_mode) and status.st_uid == os.geteuid()


def image_root() -> Path:
    """Where this user's images are kept, readable by the kernel's uid.

    ``<tmp>/attention-lab-sandbox`` when this user owns it; when another user does (several graders on one
    machine, e.g. a hub's instructors), ``<tmp>/attention-lab-sandbox-uid<N>``, this user's own, so that each
    user builds an image once and keeps it, as the first one does. Only when neither can be this user's
    (a link or another user's directory in the way) a private directory is made for this process, and removed
    when it ends: an image is hundreds of MiB, and one left behind by every grading process fills the disk.
    """
    tmp = Path(tempfile.gettempdir())
    for root in (tmp / "attention-lab-sandbox", tmp / f"attention-lab-sandbox-uid{os.geteuid()}"):
        if _own_directory(root):
            return root
    root = Path(tempfile.mkdtemp(prefix="attention-lab-sandbox-"))
    root.chmod(0o755)
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


@functools.lru_cache(maxsize=None)
def python_image(python: str, prefix: str, base_prefix: str, hidden: tuple[str, ...] = ()) -> Image:
    """The image of the Python at ``python`` (built if needed) and where it goes inside the sandbox.

    Parameters
    ----------
    python : str
        The kernel's interpreter, on the host.
    prefix, base_prefix : str
        Its ``sys.prefix`` and ``sys.base_prefix`` (equal outside a virtual environment).
    hidden : tuple of str
        Top-level packages left out of the image's ``site-packages``.

    Returns
    -------
    Image
        Mounts for ``/opt/python`` (and ``/opt/venv``), and the interpreter's path inside. An
        installation under ``/usr`` (bound as a system directory) is used where it is.
    """
    base, venv = Path(base_prefix).resolve(), Path(prefix).resolve()
    venv = None if venv == base else venv
    prefixes = ([] if base == Path("/usr") or Path("/usr") in base.parents else [(base, INSIDE_PYTHON)])
    if venv is not None:
        prefixes.append((venv, INSIDE_VENV))
    if not prefixes:
        return Image((), python, str(Path(python).parent), ())
    target = image_root() / _fingerprint([host for host, _ in prefixes], hidden)
    if not target.is_dir():
        _build(target, prefixes, hidden, base, venv)
        _prune(target.parent)
    mapping = [(host, inside) for host, inside in prefixes]
    # the interpreter as the kernel's command names it: the venv's bin/python keeps sys.prefix at the venv
    host_python = Path(python).absolute()
    inside_python = _inside(host_python, mapping) or _inside(host_python.resolve(), mapping) or Path(python)
    mounts = tuple((target / inside.name, inside) for _, inside in prefixes)
    # a shared-library build (pyenv's) finds libpython through a RUNPATH that names the host path; without
    # this the loader would take another libpython of the same version (Debian's) and mix two builds
    library = INSIDE_PYTHON / "lib" if any(inside == INSIDE_PYTHON for _, inside in prefixes) and any(
        (base / "lib").glob("libpython*.so*")) else None
    return Image(mounts, str(inside_python), str(inside_python.parent), tuple(host for host, _ in prefixes),
                 str(library) if library else "")
