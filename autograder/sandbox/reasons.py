"""How a sandboxed kernel stopped, in one line of plain words for the grading table."""

from __future__ import annotations

import signal

from nbformat import NotebookNode

from autograder.sandbox.limits import KernelLimits, MiB


def signal_name(number: int) -> str:
    """``"SIGKILL"`` for 9, or ``"signal N"``."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def cell_label(cell: NotebookNode, index: int) -> str:
    """``cell 7`` or ``cell 7 (test_softmax)`` — how a reason names the cell (numbered as in the notebook)."""
    grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
    return f"cell {index + 1}" + (f" ({grade_id})" if grade_id else "")


def why_it_stopped(code: int | None, limits: KernelLimits, where: str,
                   wall_clock_limit: int | None = None) -> tuple[str, str]:
    """``(status, reason)`` for a kernel that stopped during ``where``.

    Parameters
    ----------
    code : int or None
        The sandbox's exit status (:meth:`SandboxProvisioner.exit_status`): None if it still runs.
    limits : KernelLimits
        The limits it ran under, to name the one it hit.
    where : str
        Where it stopped ("cell 3 (test_softmax)").
    wall_clock_limit : int, optional
        Set when the wall clock killed it: its limit, seconds.

    Returns
    -------
    status : str
        ``"killed"`` (a limit of the grader stopped it) or ``"died"``.
    reason : str
        One line naming what happened, the limit and where.
    """
    if wall_clock_limit is not None:
        return "killed", (f"the notebook ran longer than the wall-clock limit of {wall_clock_limit} s, "
                          f"so its kernel was stopped in {where}")
    if code is None:
        return "died", f"the kernel stopped responding in {where}"
    if code < 0 or code > 128:
        name = signal_name(-code if code < 0 else code - 128)
        if name == "SIGKILL":
            return "died", (f"the kernel was killed (SIGKILL) in {where}: it ran out of memory "
                            f"(limit {limits.memory_limit // MiB} MiB), ignored the CPU-time limit, "
                            "or the code killed its own process")
        if name == "SIGXCPU":
            return "killed", f"the kernel used more than the CPU-time limit of {limits.cpu_time_limit} s in {where}"
        if name == "SIGXFSZ":
            return "died", (f"the kernel wrote a file over the size limit of {limits.file_size_limit // MiB} MiB "
                            f"in {where}")
        if name in ("SIGSEGV", "SIGBUS", "SIGABRT", "SIGILL", "SIGFPE"):
            return "died", f"the kernel crashed ({name}) in {where}"
        return "died", f"the kernel was stopped by {name} in {where}"
    return "died", (f"the notebook's code ended the kernel's process (exit code {code}) in {where}, "
                    "e.g. with os._exit(), exit() or quit()")
