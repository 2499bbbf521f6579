"""nbgrader's ``Execute`` step, with the learner's kernel in a sandbox and the run kept under control.

:class:`SandboxedExecute` replaces nbgrader's ``Execute`` in
``c.Autograde.autograde_preprocessors``. It runs the notebook in the kernel
of :class:`~autograder.sandbox.manager.SandboxedKernelManager` (bubblewrap,
no network, no course files, resource limits; started by the sandbox's kernel
provisioner) and adds what a hostile or broken submission needs on the
grader's side:

* a **wall-clock limit per notebook** (``wall_clock_limit``): the per-cell
  timeout (``Execute.timeout``) only interrupts, and a loop that catches
  ``KeyboardInterrupt`` ignores interrupts, so after this many seconds the
  whole sandbox is killed (:mod:`autograder.sandbox.clock`);
* a kernel that **dies** (``os._exit``, a signal, the memory or CPU limit,
  the wall-clock kill) does not stop grading: the cell it died in gets an
  error output saying why, the remaining cells are skipped (left without
  outputs), and the run goes on with the next notebook;
* **output caps** (``max_cell_output_bytes``, ``max_notebook_output_bytes``;
  :mod:`autograder.sandbox.caps`): only that much output is kept in the
  grader's memory and in the graded notebook; the rest is dropped with a note
  "output truncated: N bytes dropped". Outputs that grading reads are never
  dropped, only trimmed;
* **code after the last cell, in the same kernel**: a callable in
  ``resources[AFTER_LAST_CELL]`` is called once the notebook's cells have run
  (and the kernel is alive), with a function that runs code in the kernel and
  returns that code's grading outputs (``grading_mime_types``); the grader's
  stand-in passes (:mod:`autograder.grader.stand_ins`) use it. That code is not
  stored in the notebook, and nothing else it outputs is kept — no text, no
  display, and no update of a display an earlier cell made — so what a
  learner's code sees then cannot reach the graded notebook or the feedback.
  The wall-clock limit covers it;
* a one-line record of how the run ended, for the grading table::

      nb.metadata["attention_lab"]["execution"] == {"status": "ok" | "killed" | "died",
                                                    "reason": "<one line in plain words>"}

Widget messages from the kernel are ignored (no widget state is stored):
graded notebooks do not need it, and it would be a way around the caps.

Only public hooks of nbconvert/nbclient are used: ``preprocess`` runs
nbconvert's own loop over the cells, and :meth:`SandboxedExecute.preprocess_cell`
(called for each cell) is where a dead kernel, a lost output and the code
after the last cell are handled; ``process_message`` and ``output`` keep the
caps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from queue import Empty
from typing import Callable

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import run_sync
from nbformat import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Bool, List, Unicode, default

from autograder.sandbox.caps import OutputCaps, display_bytes
from autograder.sandbox.clock import WallClock
from autograder.sandbox.errors import SandboxError
from autograder.sandbox.limits import MiB, RunLimits
from autograder.sandbox.manager import SandboxedKernelManager
from autograder.sandbox.provisioner import PROVISIONER_NAME
from autograder.sandbox.reasons import cell_label, why_it_stopped

PROBE_MIME = "application/vnd.attention-lab.probe+json"  # attention_lab.core.probe.MIME, not imported: no kernel code here
#: Key in nbconvert's resources of a callable ``after_last_cell(nb, run_code)`` (see the module docstring).
AFTER_LAST_CELL = "sandbox_after_last_cell"
#: Key in nbconvert's resources of the indices of the cells that get no per-cell wall-clock limit
#: (``Execute.timeout``): a test cell whose time limit counts CPU time (``Case.cpu_time``), which a busy machine
#: must not turn into a timeout. The notebook's wall clock (``wall_clock_limit``) still covers them.
NO_CELL_TIMEOUT = "sandbox_no_cell_timeout"
AFTER_THE_LAST_CELL = "the grader's second pass (after the last cell)"


@dataclass
class SandboxRun:
    """The state of one notebook's run (made new for each notebook)."""

    caps: OutputCaps
    manager: SandboxedKernelManager | None = None  # kept after nbclient lets go of it, for its log
    clock: WallClock | None = None
    started: bool = False  # the kernel answered and the first cell is about to run
    stopped: bool = False  # the kernel stopped: the remaining cells are skipped
    off_the_record: bool = False  # True while run_code's cell runs: only grading outputs are kept
    lost_messages: int = 0
    # (cell, label) of a cell that did not stop when interrupted: the kernel is still running it, so the cells
    # sent after it never ran, and a stop seen while waiting for one of them happened in this cell
    still_running: tuple[NotebookNode, str] | None = None
    outcome: dict = field(default_factory=lambda: {"status": "ok", "reason": "all cells ran"})


def never_ran(cell: NotebookNode) -> None:
    """Leave ``cell`` as if it had not been run (the kernel was busy with an earlier cell)."""
    if cell.cell_type == "code":
        cell.outputs = []
        cell.execution_count = None


def append_error(cell: NotebookNode, name: str, reason: str) -> None:
    """Add an error output ``name: reason`` to ``cell`` (what the grading table and the feedback show)."""
    cell.setdefault("outputs", []).append(
        NotebookNode(output_type="error", ename=name, evalue=reason, traceback=[f"{name}: {reason}"]))


class SandboxedExecute(RunLimits, Execute):
    """nbgrader's ``Execute``, with the kernel in a bubblewrap sandbox, a wall-clock limit and output caps.

    Configure it in ``nbgrader_config.py``, e.g.
    ``c.SandboxedExecute.wall_clock_limit = 120`` (the limits are in
    :mod:`autograder.sandbox.limits`; the kernel's are on
    ``c.SandboxedKernelManager``). ``Execute``'s own settings (``timeout``,
    ``interrupt_on_timeout``, ...) apply too.
    """

    grading_mime_types = List(
        Unicode(), [PROBE_MIME], help="Display outputs that grading reads: kept under their own cap."
    ).tag(config=True)
    store_widget_state = Bool(False, help="Ignored: widget messages are never stored while grading.")

    sandbox_run: SandboxRun | None = None

    @default("shutdown_kernel")
    def shut_down_immediately(self):
        return "immediate"  # nothing a graded notebook does at exit matters, and a busy kernel would cost 5 s

    def __init__(self, **kwargs):
        kwargs.setdefault("kernel_manager_class", SandboxedKernelManager)
        super().__init__(**kwargs)

    # ---- the run ---------------------------------------------------------------------------------

    def preprocess(self, nb: NotebookNode, resources=None, km=None):
        """Execute every cell of ``nb`` in a new sandboxed kernel.

        What the notebook's code does (errors, hangs, a dead kernel, floods of
        output) ends up in the notebook and in its ``execution`` record, not
        in an exception. nbgrader's ``execute_retries`` is not used: a kernel
        that died did so because of the notebook, and would again.

        Parameters
        ----------
        nb : nbformat.NotebookNode
            The notebook; changed in place.
        resources : dict, optional
            nbconvert resources; ``resources["metadata"]["path"]`` is the
            notebook's directory (it stays outside the sandbox).
        km : SandboxedKernelManager, optional
            A kernel manager to use instead of a new one.

        Returns
        -------
        nb : nbformat.NotebookNode
            The executed notebook, with ``nb.metadata["attention_lab"]["execution"]``.
        resources : dict
            The resources.

        Raises
        ------
        SandboxError
            If the sandbox cannot start on this machine (no bwrap, no user
            namespaces, a kernel that does not start, the provisioner not
            installed), or the kernel manager is not a sandboxed one.
        """
        manager = type(km) if km is not None else self.kernel_manager_class
        if not issubclass(manager, SandboxedKernelManager):
            raise SandboxError("SandboxedExecute only runs kernels of a SandboxedKernelManager, "
                               f"not {manager.__name__}")
        try:
            nb, resources = super().preprocess(nb, resources, km)  # nbconvert's loop: preprocess_cell per cell
        except ModuleNotFoundError as error:  # jupyter_client's factory did not find the provisioner's entry point
            raise SandboxError(f"the grading sandbox's kernel provisioner ({PROVISIONER_NAME}) is not installed: "
                               f"install this project (make install); {error}") from error
        except (RuntimeError, AssertionError) as error:
            run = self.sandbox_run
            if isinstance(error, SandboxError) or not run.started:
                log = self.kernel_log(run.manager or km).strip()
                raise SandboxError(f"the grading sandbox did not start: {error}"
                                   + (f"; the kernel said: {log[-500:]}" if log else "")) from error
            raise
        finally:
            if self.sandbox_run.clock is not None:
                self.sandbox_run.clock.stop()
        run = self.sandbox_run
        outcome = run.outcome
        dropped = [f"{run.caps.dropped_bytes} bytes dropped"] if run.caps.dropped_bytes else []
        if run.lost_messages:
            dropped.append(f"{run.lost_messages} message(s) over {run.manager.max_message_bytes // MiB} MiB lost")
        if dropped:
            outcome["reason"] += f" (output truncated: {'; '.join(dropped)})"
        nb.metadata.setdefault("attention_lab", {})["execution"] = outcome
        return nb, resources

    @staticmethod
    def kernel_log(manager: SandboxedKernelManager | None) -> str:
        """The end of the kernel's log, or "" if it never had one."""
        sandbox = manager.sandbox if manager is not None else None
        return sandbox.log_tail() if sandbox is not None else ""

    def create_kernel_manager(self):
        manager = super().create_kernel_manager()
        self.sandbox_run.manager = manager
        return manager

    def reset_execution_trackers(self) -> None:
        super().reset_execution_trackers()
        self.sandbox_run = SandboxRun(OutputCaps(self, self.grading_mime_types))
        self.clear_before_next_output = False  # nbclient sets it per cell; output() reads it

    def kernel_ready(self) -> None:
        """Before the first cell (the kernel has answered): seal its runtime directory, start the wall clock."""
        run = self.sandbox_run
        run.manager = self.km
        sandbox = self.km.sandbox
        sandbox.seal()
        run.started = True
        run.clock = WallClock(self.wall_clock_limit, sandbox.kill_now)
        run.clock.start()

    def preprocess_cell(self, cell: NotebookNode, resources, index: int):
        """Run one cell (nbconvert calls this for each); a stopped kernel, lost output or the end is handled here."""
        run = self.sandbox_run
        if not run.started:
            self.kernel_ready()
        if run.stopped:
            never_ran(cell)
            return cell, self.resources
        interrupts = self.km.interrupts
        per_cell = self.timeout
        if index in (self.resources or {}).get(NO_CELL_TIMEOUT, ()):
            self.timeout = None  # nbclient: no limit for this cell; the notebook's wall clock still runs
        try:
            cell, _ = super().preprocess_cell(cell, resources, index)
            lost = self.kc.lost_messages()
            if cell.cell_type == "code" and cell.source.strip():  # nbclient sent it (it skips empty ones) and
                run.still_running = None  # the kernel answered it, so it is done with the earlier ones
        except DeadKernelError:
            self.stopped_during(cell, index)
            return cell, self.resources
        except CellTimeoutError:
            # the kernel never said "idle" for this cell; nbgrader would give up on the notebook here
            if self.km.sandbox.exit_status() is not None:
                self.stopped_during(cell, index)
                return cell, self.resources
            lost = self.kc.lost_messages()
            if run.still_running is not None:  # still busy with an earlier cell: this one never ran
                never_ran(cell)
            elif lost:
                append_error(cell, "OutputIncomplete", (
                    f"the cell sent an output larger than {self.km.max_message_bytes // MiB} MiB: "
                    "it and the rest of the cell's output were lost"))
            elif self.km.interrupts > interrupts:
                append_error(cell, "CellTimeoutError", f"the cell was still running {self.timeout} s "
                             "after it started, and did not stop when interrupted")
                run.still_running = (cell, cell_label(cell, index))
            else:
                append_error(cell, "OutputIncomplete", "the cell's output did not arrive completely")
        finally:
            self.timeout = per_cell
        if lost:
            run.lost_messages += lost
            self.resubscribe()
        if index == len(self.nb.cells) - 1:
            self.after_last_cell()
        return cell, self.resources

    def stopped_during(self, cell: NotebookNode, index: int) -> None:
        """The kernel stopped while nbclient waited for ``cell``: in it, or in an earlier cell it was still running.

        Which wait sees the stop depends on timing (a per-cell timeout's interrupt and IOPub wait against the
        wall clock), so the stop is put where the kernel was, and the cells it never ran are left empty.
        """
        busy = self.sandbox_run.still_running
        if busy is None or busy[0] is cell:
            self.kernel_stopped(cell, cell_label(cell, index))
        else:
            never_ran(cell)
            self.kernel_stopped(*busy)

    def kernel_stopped(self, cell: NotebookNode, where: str) -> None:
        """Record why the kernel stopped during ``where``; the cell shows it, the cells after it are skipped."""
        run = self.sandbox_run
        run.stopped = True
        fired = run.clock is not None and run.clock.fired.is_set()
        status, reason = why_it_stopped(self.km.sandbox.exit_status(), self.km, where,
                                        self.wall_clock_limit if fired else None)
        run.outcome.update(status=status, reason=reason)
        if cell is not None:
            append_error(cell, "KernelStopped", reason)

    def after_last_cell(self) -> None:
        """Call ``resources[AFTER_LAST_CELL](nb, run_code)``; a kernel that stops meanwhile is recorded, the cells kept."""
        hook: Callable | None = (self.resources or {}).get(AFTER_LAST_CELL)
        if hook is None:
            return
        try:
            hook(self.nb, self.run_code)
        except DeadKernelError:
            self.kernel_stopped(None, AFTER_THE_LAST_CELL)

    def run_code(self, source: str) -> list[NotebookNode]:
        """Run ``source`` in the live kernel as a cell that is not stored in the notebook.

        Returns
        -------
        list of NotebookNode
            The cell's outputs of ``grading_mime_types``; every other output (and any display update) is
            dropped. Empty when the cell timed out.

        Raises
        ------
        DeadKernelError
            If the kernel died.
        """
        run = self.sandbox_run
        cell = NotebookNode(cell_type="code", source=source, metadata={}, outputs=[], execution_count=None)
        self.nb.cells.append(cell)  # nbclient's execute_cell stores the cell at its index: it must be ours
        index = len(self.nb.cells) - 1
        run.off_the_record = True
        try:
            self.execute_cell(cell, index, store_history=False)
        except CellTimeoutError:
            if self.km.sandbox.exit_status() is not None:
                raise DeadKernelError("Kernel died") from None
            return []
        finally:
            run.off_the_record = False
            self.nb.cells.pop()
            run.caps.forget_cell(index)
            self.clear_display_id_mapping(index)
        return [o for o in cell.outputs if o.get("output_type") == "display_data"
                and any(mime in o.get("data", {}) for mime in self.grading_mime_types)]

    def resubscribe(self, attempts: int = 5) -> None:
        """Reconnect to the kernel's output and wait until its messages arrive again."""
        self.kc.reconnect_iopub()
        for _ in range(attempts):  # a new subscription takes a moment: what the kernel says before is lost
            msg_id = self.kc.kernel_info()
            try:
                while True:
                    msg = run_sync(self.kc.iopub_channel.get_msg)(timeout=1)
                    if msg["parent_header"].get("msg_id") == msg_id:
                        return
            except Empty:
                continue

    # ---- output caps ----------------------------------------------------------------------------

    def process_message(self, msg: dict, cell: NotebookNode, cell_index: int):
        """As nbclient, except that no display an earlier cell made is updated off the record or over the cap."""
        content = msg["content"]
        transient = content.get("transient")
        display_id = transient.get("display_id") if transient else None
        if display_id and msg["msg_type"] in ("display_data", "execute_result", "update_display_data"):
            run = self.sandbox_run
            size = display_bytes(content)
            if run.off_the_record or size > self.max_cell_output_bytes:
                if msg["msg_type"] == "update_display_data":
                    if not run.off_the_record:
                        run.caps.dropped_bytes += size  # an update over the cap is ignored: the old display stays
                    return None
                # shown without its display id: nbclient then updates no earlier display with it
                msg = {**msg, "content": {**content, "transient": {}}}
        return super().process_message(msg, cell, cell_index)

    def clear_output(self, outs, msg, cell_index):
        if not msg["content"].get("wait"):
            self.sandbox_run.caps.forget_cell(cell_index)
        super().clear_output(outs, msg, cell_index)

    def output(self, outs, msg, display_id, cell_index):
        """Keep ``msg``'s output within the caps (trimmed or dropped with a note), then store it as nbclient does."""
        run = self.sandbox_run
        if self.clear_before_next_output:
            run.caps.forget_cell(cell_index)

        def store(message: dict):
            return super(SandboxedExecute, self).output(outs, message, display_id, cell_index)

        if run.off_the_record:
            content = msg["content"]
            if (msg["msg_type"] == "display_data" and run.caps.is_grading_output(content)
                    and run.caps.admit_grading_output(content)):
                return store(msg)
            return None
        return run.caps.admit(outs, msg, cell_index, store)

    def handle_comm_msg(self, outs, msg, cell_index):
        """Ignore widget messages: no widget state or Output-widget capture while grading."""
        return None
