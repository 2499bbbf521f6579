"""Before the first student: can the course's sandboxed kernel import what the probes need?

A course graded with a kernel that cannot import ``attention_lab`` (or NumPy) would give every student
zero with status "ok": every probe cell fails the same way, which looks like a class of wrong answers.
:func:`kernel_problem` runs one cell that imports them in a kernel started exactly as grading starts it (the
course's ``nbgrader_config.py``: :class:`~autograder.sandbox.SandboxedExecute` and its kernel settings),
and says in one line why it cannot, so that the run stops before the first student.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
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

