"""Before the first student: can the course's sandboxed kernel import what the probes need?

A course graded with a kernel that cannot import ``attention_lab`` (or NumPy) would give every student
zero with status "ok": every probe cell fails the same way, which looks like a class of wrong answers.
:func:`kernel_problem` runs one cell that imports them in a kernel started exactly as grading starts it (the
course's ``nbgrader_config.py``: :class:`~autograder.sandbox.SandboxedExecute` and its kernel settings),
and says in one line why it cannot, so that the run stops before the first student.

A check that passed is not run again for a kernel configured the same way (:func:`require_probe_kernel_once`,
keyed on :func:`preflight_key`: everything that can make it fail): not in this process, and not in a later run
in the same course directory, which keeps the keys' digests that passed in :data:`PASSED_NAME` — a re-run that
grades one added student then starts one kernel, the student's, not two (issue 14 §6: ≤ 5 s).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import os
import signal
import sys
import tempfile
import traceback
from pathlib import Path

from nbformat.v4 import new_code_cell, new_notebook

#: What a probe cell imports in the learner's kernel (autograder.nbgrader.preprocessors.PROBE_LINE).
PROBE_MODULES = ("numpy", "attention_lab.core.probe")
CHECK_CELL = "import " + ", ".join(PROBE_MODULES)
SECONDS = 300  # for starting a sandboxed kernel and importing two packages, on a loaded machine


class GradingStopped(RuntimeError):
    """Grading cannot start in this course directory; the message says why in one line."""


def _check(course_dir: Path) -> str | None:
    from autograder.nbgrader.grading import course_config, nbgrader_environment
    from autograder.sandbox import SandboxedExecute, SandboxError

    os.environ.update(nbgrader_environment())
    os.chdir(course_dir)
    nb = new_notebook(cells=[new_code_cell(CHECK_CELL)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    config = course_config(course_dir)
    # the executor of the course's pipeline (UnsandboxedExecute only in `check`'s scratch course), else the sandbox's
    pipeline = config.Autograde.get("autograde_preprocessors", [])
    executor_class = next((p for p in pipeline if isinstance(p, type) and issubclass(p, SandboxedExecute)),
                          SandboxedExecute)
    executor = executor_class(config=config)
    try:
        nb, _ = executor.preprocess(nb, {"metadata": {"path": str(course_dir)},
                                         "nbgrader": {"student": "preflight", "assignment": "preflight"}})
    except SandboxError as error:
        return f"the grading sandbox cannot start a kernel: {' '.join(str(error).split())[:300]}"
    errors = [o for o in nb.cells[0].get("outputs", []) if o.get("output_type") == "error"]
    if errors:
        return (f"the grading kernel cannot import what the probes need ({', '.join(PROBE_MODULES)}): "
                f"{errors[0].get('ename')}: {errors[0].get('evalue')}")
    execution = nb.metadata.get("attention_lab", {}).get("execution", {})
    if execution.get("status") not in (None, "ok"):
        return f"the grading kernel stopped while importing {', '.join(PROBE_MODULES)}: {execution.get('reason')}"
    return None


def _child(connection, course_dir: Path) -> None:
    os.setpgrp()
    try:
        problem = _check(course_dir)
    except BaseException:  # noqa: BLE001 — the parent gets one line
        problem = f"checking the grading kernel failed: {traceback.format_exc().strip().splitlines()[-1][:200]}"
    connection.send(problem)
    connection.close()


def kernel_problem(course_dir: Path) -> str | None:
    """Why the course's sandboxed kernel cannot run the probes, in one line, or None if it can.

    Runs ``import numpy, attention_lab.core.probe`` in a kernel started as grading starts it, in a forked
    child (so that the grader's process holds no kernel client when it forks the students' jobs).

    Parameters
    ----------
    course_dir : Path
        The course root (its ``nbgrader_config.py`` configures the kernel).

    Returns
    -------
    str or None
        E.g. "the grading kernel cannot import what the probes need (numpy, attention_lab.core.probe):
        ModuleNotFoundError: No module named 'attention_lab'".
    """
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(send, Path(course_dir).resolve()), daemon=True)
    process.start()
    send.close()
    problem = f"checking the grading kernel took longer than {SECONDS} s"
    if receive.poll(SECONDS):
        try:
            problem = receive.recv()
        except (EOFError, OSError):
            process.join(30)
            problem = f"checking the grading kernel failed: its process stopped (exit code {process.exitcode})"
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # and any kernel it left
    process.join()
    receive.close()
    return problem


def require_probe_kernel(course_dir: Path) -> None:
    """Raise :class:`GradingStopped` unless the course's kernel can import what the probes need.

    Raises
    ------
    GradingStopped
        With :func:`kernel_problem`'s line and what to do.
    """
    problem = kernel_problem(course_dir)
    if problem:
        raise GradingStopped(f"grading stopped before the first student: {problem} (install this project with "
                             "`make install` or `pip install -e <checkout>` in the Python that runs the grader, and "
                             "check c.SandboxedKernelManager in nbgrader_config.py)")



#: :func:`preflight_key` of every check that passed in this process.
_passed: set[tuple] = set()
#: The file, in the course directory next to the gradebook, holding the digests (:func:`key_digest`) of the
#: preflight keys whose check passed there; written only after a check passed, atomically (rename).
PASSED_NAME = "preflight-passed.json"
#: How many digests the file keeps, newest last: one per kernel configuration the course was graded with.
PASSED_KEPT = 16


def _tree_digest(path: Path) -> str:
    """SHA-256 of a package's files (relative paths and bytes; ``__pycache__`` left out, as the sandbox's copy)."""
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(
        p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")
    for file in files:
        digest.update(str(file.relative_to(path.parent)).encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()


def preflight_key(course_dir: Path) -> tuple:
    """Everything the outcome of :func:`kernel_problem` in ``course_dir`` depends on.

    The check starts the course's kernel and imports the probes' modules. What can make it fail, and so
    is in the key: the course's ``nbgrader_config.py`` (its text, the executor of its pipeline and the
    kernel manager's resolved settings: limits, what is bound, hidden and copied), the kernel's interpreter
    and its image (the image's path names the fingerprint of its installed packages,
    :mod:`autograder.sandbox.image`), the content of each student package (copied afresh into every kernel),
    the bound directories that hold the course directory (a sandbox that would show the course refuses to
    start) and the masked copies of hidden packages, and the environment the kernel is started from (PATH,
    where ``bwrap`` is found; nbgrader's variables; the temporary directory). The course directory's own
    path is not: two courses configured alike start the same kernel.

    Parameters
    ----------
    course_dir : Path
        The course root.

    Returns
    -------
    tuple
        Hashable; equal keys mean the same check.

    Raises
    ------
    Exception
        Whatever loading the configuration or finding the kernel's Python raises (then the check must run).
    """
    from autograder.nbgrader.grading import course_config, nbgrader_environment
    from autograder.sandbox import SandboxedExecute
    from autograder.sandbox.mounts import bound_roots, hidden_copies, kernel_image, package_dir, within

    course_dir = Path(course_dir).resolve()
    config_file = course_dir / "nbgrader_config.py"
    config = course_config(course_dir)
    pipeline = config.Autograde.get("autograde_preprocessors", [])
    executor_class = next((p for p in pipeline if isinstance(p, type) and issubclass(p, SandboxedExecute)),
                          SandboxedExecute)
    manager = executor_class(config=config).kernel_manager_class(config=config)
    settings = manager.sandbox_settings()
    roots = bound_roots(manager, manager.python)
    packages = tuple((name, str(path), _tree_digest(path)) for name, path in
                     ((name, package_dir(name)) for name in manager.student_packages) if path is not None)
    environment = nbgrader_environment()
    return (config_file.read_text() if config_file.exists() else "",
            f"{executor_class.__module__}.{executor_class.__qualname__}",
            f"{type(manager).__module__}.{type(manager).__qualname__}", repr(sorted(settings.items())),
            manager.python, sys.executable, kernel_image(manager, manager.python), packages,
            tuple(str(r) for r in roots if r == Path("/") or within(course_dir, [r])),
            tuple(str(c) for name in manager.hidden_packages for c in hidden_copies(name, roots)),
            tuple(environment.get(name) for name in ("PATH", "NBGRADER_EXECUTION", "NBGRADER_VALIDATING")),
            tempfile.gettempdir())


def key_digest(key: tuple) -> str:
    """SHA-256 (hex) of a :func:`preflight_key`: its ``repr``, which holds only strings, tuples and None."""
    return hashlib.sha256(repr(key).encode()).hexdigest()


def passed_digests(course_dir: Path) -> list[str]:
    """The digests :data:`PASSED_NAME` in ``course_dir`` holds (none when it is missing or unreadable)."""
    try:
        digests = json.loads((Path(course_dir) / PASSED_NAME).read_text()).get("passed", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [d for d in digests if isinstance(d, str)] if isinstance(digests, list) else []


def remember_passed(course_dir: Path, digest: str) -> None:
    """Add ``digest`` to :data:`PASSED_NAME` in ``course_dir`` (the newest :data:`PASSED_KEPT` are kept).

    Best effort: a course directory that cannot be written only loses the shortcut for the next run.
    """
    digests = [d for d in passed_digests(course_dir) if d != digest][-(PASSED_KEPT - 1):] + [digest]
    target = Path(course_dir) / PASSED_NAME
    temporary = target.with_name(f".{PASSED_NAME}.{os.getpid()}")
    try:
        temporary.write_text(json.dumps({"passed": digests}, indent=1) + "\n")
        os.replace(temporary, target)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink()


def require_probe_kernel_once(course_dir: Path) -> None:
    """:func:`require_probe_kernel`, skipped when a check with the same :func:`preflight_key` passed before: in
    this process, or in an earlier run in ``course_dir`` (:data:`PASSED_NAME`).

    A check that failed is not remembered: the next call checks again. Every input that can make the check fail
    is in the key, so that a changed configuration, interpreter, image, student package or environment is
    checked again.

    Raises
    ------
    GradingStopped
        As :func:`require_probe_kernel`.
    """
    try:
        key = preflight_key(course_dir)
    except Exception:  # noqa: BLE001 — no key, no shortcut: the check itself says what is wrong
        key = None
    if key is not None and key in _passed:
        return
    digest = key_digest(key) if key is not None else None
    if digest is not None and digest in passed_digests(course_dir):
        _passed.add(key)
        return
    require_probe_kernel(course_dir)
    if key is not None:
        _passed.add(key)
        remember_passed(course_dir, digest)
