"""What a sandboxed kernel sees of the host: the directories bound into it, the packages masked, the image.

Only a whitelist exists inside: read-only system directories (``/usr``, the
``/bin`` and ``/lib*`` links, a few files of ``/etc``), the kernel's Python and
the student package ``attention_lab``, by default at neutral paths from an image
(``/opt/python``, ``/opt/venv``, ``/opt/packages``; :mod:`autograder.sandbox.image`).
A copy of ``autograder`` reachable from a bound path (a non-editable install in
``site-packages``) is masked by a package that refuses to import. The
command that binds them is built in :mod:`autograder.sandbox.command`.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import py_compile
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from traitlets import Bool, HasTraits, List, Unicode

from autograder.sandbox.errors import SandboxError
from autograder.sandbox.image import INSIDE_PACKAGES, Image, python_image

#: Host directories that the kernel may read, if they exist (system libraries and programs).
SYSTEM_DIRS = ("/usr",)


class KernelView(HasTraits):
    """Settings of what the kernel sees (``c.SandboxedKernelManager.<name>``)."""

    student_packages = List(Unicode(), ["attention_lab"],
                            help="Packages whose directory the kernel may read (the student package).").tag(config=True)
    hidden_packages = List(Unicode(), ["autograder"],
                           help="Packages masked if importable from any bound directory.").tag(config=True)
    extra_read_only_paths = List(Unicode(), [],
                                 help="More host paths the kernel may read (same path inside).").tag(config=True)
    hide_host_paths = Bool(True, help="Mount the kernel's Python and the student packages at neutral paths "
                                      "(/opt/python, /opt/venv, /opt/packages) from an image outside the course "
                                      "directory, so that /proc/self/mountinfo names neither the course nor the "
                                      "user (autograder/sandbox/image.py).").tag(config=True)


def within(path: Path, roots: list[Path]) -> bool:
    """Whether ``path`` is one of ``roots`` or lies inside one."""
    return any(path == root or root in path.parents for root in roots)


def reachable(path: Path, uid: int) -> bool:
    """Whether ``uid`` can look up ``path`` with the permission bits alone.

    Parameters
    ----------
    path : pathlib.Path
        An absolute path.
    uid : int
        An unprivileged uid, assumed to be in none of the directories' groups.

    Returns
    -------
    bool
        True if every parent directory lets others (or ``uid``, as its owner) search it.
    """
    for parent in [*reversed(path.parents)]:
        mode = os.stat(parent)
        if not (mode.st_mode & 0o001 or (mode.st_uid == uid and mode.st_mode & 0o100)):
            return False
    return True


@functools.lru_cache(maxsize=None)
def python_prefixes(python: str) -> list[Path]:
    """Where the Python at ``python`` lives: its environment and its installation.

    Parameters
    ----------
    python : str
        Path of a Python executable.

    Returns
    -------
    list of pathlib.Path
        Its ``sys.prefix`` and ``sys.base_prefix`` (equal outside a virtual environment).

    Raises
    ------
    SandboxError
        If that Python does not run.
    """
    if python == sys.executable:
        return [Path(sys.prefix), Path(sys.base_prefix)]
    try:
        done = subprocess.run([python, "-I", "-c", "import sys; print(sys.prefix); print(sys.base_prefix)"],
                              capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError) as error:
        raise SandboxError(f"the kernel's Python {python!r} does not run: {error}") from error
    return [Path(line) for line in done.stdout.splitlines()[:2]]


def package_dir(name: str) -> Path | None:
    """Where the grader would import ``name`` from, without importing it.

    Parameters
    ----------
    name : str
        A top-level package or module name.

    Returns
    -------
    pathlib.Path or None
        The package's directory (or the module's file), or None if it is not importable.
    """
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0]).resolve()
    return Path(spec.origin).resolve() if spec.origin else None


def hidden_copies(name: str, roots: list[Path]) -> list[Path]:
    """Every copy of module/package ``name`` that the kernel could import from the bound ``roots``.

    Parameters
    ----------
    name : str
        The package to hide (``autograder``).
    roots : list of pathlib.Path
        The host paths bound into the sandbox.

    Returns
    -------
    list of pathlib.Path
        Copies found in the grader's ``sys.path`` directories that lie inside a
        bound root (``site-packages`` of a non-editable install), and where the
        grader itself imports ``name`` from if that is inside a bound root.
    """
    found: set[Path] = set()
    candidates = [package_dir(name)]
    for entry in sys.path:
        base = Path(entry or os.getcwd()).resolve()
        if base.is_dir() and within(base, roots):
            candidates += [base / name, base / f"{name}.py", *base.glob(f"{name}.*.so")]
    for path in candidates:
        if path is not None and path.exists() and within(path, roots):
            found.add(path)
    return sorted(found)


def bound_roots(view: KernelView, python: str) -> list[Path]:
    """The host directories bound read-only into the sandbox, at the same path inside.

    Parameters
    ----------
    view : KernelView
        The settings (``hide_host_paths``, ``student_packages``, ``extra_read_only_paths``).
    python : str
        The kernel's interpreter, on the host.

    Returns
    -------
    list of pathlib.Path
        ``/usr`` and ``extra_read_only_paths`` (with ``hide_host_paths``
        off, also the kernel's Python environment and installation and
        the student packages), resolved, without any that another one contains.

    Raises
    ------
    SandboxError
        If the kernel's Python does not run.
    """
    roots: list[Path] = []
    wanted = [Path(d) for d in SYSTEM_DIRS]
    if view.hide_host_paths:  # the image replaces them (kernel_image()), except an installation under /usr
        wanted += [p for p in python_prefixes(python) if within(p.resolve(), [Path("/usr")])]
    else:
        wanted += python_prefixes(python) + [p for p in map(package_dir, view.student_packages) if p]
    wanted += [Path(p) for p in view.extra_read_only_paths]
    for path in wanted:
        path = path.resolve()
        if path.exists() and not within(path, roots):
            roots = [r for r in roots if not within(r, [path])] + [path]
    return sorted(roots)


def kernel_image(view: KernelView, python: str) -> Image | None:
    """The kernel's Python at neutral paths (:mod:`autograder.sandbox.image`), or None with ``hide_host_paths`` off."""
    if not view.hide_host_paths:
        return None
    prefix, base = python_prefixes(python)
    return python_image(python, str(prefix), str(base), tuple(view.hidden_packages))


def package_copies(view: KernelView, folder: Path) -> Path | None:
    """Fresh copies of the student packages in ``folder`` (for ``/opt/packages``), or None if there are none to copy."""
    found = [p for p in map(package_dir, view.student_packages) if p is not None]
    if not view.hide_host_paths or not found:
        return None
    for package in found:
        if package.is_dir():
            shutil.copytree(package, folder / package.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            folder.mkdir(exist_ok=True)
            shutil.copy(package, folder / package.name)
    add_bytecode(folder, INSIDE_PACKAGES)
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return folder


def add_bytecode(folder: Path, inside: Path) -> None:
    """Put next to each module of ``folder`` its compiled code, where the kernel's Python looks for it.

    The kernel cannot write bytecode (its packages are bound read-only, ``PYTHONDONTWRITEBYTECODE``), so without
    it every import compiles the module's source again, and each autograder cell's probe imports its modules
    afresh (:data:`autograder.nbgrader.preprocessors.PROBE_LINE`): about 10 ms of the kernel's CPU a probe.
    The files are hash-checked (PEP 552): the kernel's Python uses one only if the source next to it hashes
    to what it was compiled from, and compiles the source itself otherwise (another Python version looks for
    its own file names and finds none). The code is compiled once per process and source
    (:func:`compiled_module`): the grading process compiles it before it forks the students' jobs
    (:func:`autograder.nbgrader.job_warmup.compile_student_packages`).

    Parameters
    ----------
    folder : Path
        The package copies on the host.
    inside : Path
        Where the kernel sees ``folder`` (the modules' file names in tracebacks).
    """
    for source in sorted(folder.rglob("*.py")):
        relative = source.relative_to(folder)
        code = compiled_module(source.read_bytes(), str(inside / relative))
        if code is not None:
            cached = Path(importlib.util.cache_from_source(str(source), optimization=""))
            cached.parent.mkdir(exist_ok=True)
            cached.write_bytes(code)


@functools.lru_cache(maxsize=256)
def compiled_module(source: bytes, filename: str) -> bytes | None:
    """A hash-checked ``.pyc`` file's bytes for a module's ``source`` (None if it does not compile).

    Parameters
    ----------
    source : bytes
        The module's source.
    filename : str
        The module's path as the importing Python sees it (recorded in its code objects).
    """
    with tempfile.TemporaryDirectory(prefix="attention-lab-bytecode-") as scratch:
        module, compiled = Path(scratch) / "module.py", Path(scratch) / "module.pyc"
        module.write_bytes(source)
        try:
            py_compile.compile(str(module), cfile=str(compiled), dfile=filename, doraise=True, optimize=0,
                               invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
        except py_compile.PyCompileError:
            return None  # the kernel reports the syntax error when it imports the source
        return compiled.read_bytes()


@functools.lru_cache(maxsize=None)
def matplotlib_font_cache() -> tuple[str, bytes] | None:
    """The grader's matplotlib font list, to copy into each sandbox.

    A fresh sandbox has an empty ``MPLCONFIGDIR``: without this copy, every
    graded notebook that imports matplotlib would spend seconds rebuilding it.

    Returns
    -------
    tuple of (str, bytes) or None
        The cache file's name and content (matplotlib builds it on import if
        missing), or None when the grader has no matplotlib.
    """
    try:
        import matplotlib
        from matplotlib import font_manager
    except ImportError:
        return None
    path = Path(matplotlib.get_cachedir()) / f"fontlist-v{font_manager.FontManager.__version__}.json"
    return (path.name, path.read_bytes()) if path.is_file() else None
