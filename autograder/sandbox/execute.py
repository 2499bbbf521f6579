"""nbgrader's ``Execute`` step, with the learner's kernel in a sandbox and the run kept under control.

:class:`SandboxedExecute` replaces nbgrader's ``Execute`` in
``c.Autograde.autograde_preprocessors``. It runs the notebook in the kernel
of :class:`~autograder.sandbox_kernel.SandboxedKernelManager` (bubblewrap,
no network, no course files, resource limits) and adds what a hostile or
broken submission needs on the grader's side:

* a **wall-clock limit per notebook** (``wall_clock_limit``): the per-cell
  timeout (``Execute.timeout``) only interrupts, and a loop that catches
  ``KeyboardInterrupt`` ignores interrupts, so after this many seconds the
  whole sandbox is killed;
* a kernel that **dies** (``os._exit``, a signal, the memory or CPU limit,
  the wall-clock kill) does not stop grading: the cell it died in gets an
  error output saying why, the remaining cells are skipped (left without
  outputs), and the run goes on with the next notebook;
* **output caps** (``max_cell_output_bytes``, ``max_notebook_output_bytes``):
  only that much output is kept in the grader's memory and in the graded
  notebook; the rest is dropped with a note "output truncated: N bytes
  dropped". Outputs that grading reads are never dropped, only trimmed:
  errors, the start of stderr, a cell's value (``execute_result``), and the
  probe results (``grading_mime_types``, their own larger cap);
* **code after the last cell, in the same kernel**: a callable in
  ``resources[AFTER_LAST_CELL]`` is called once the notebook's cells have run
  (and the kernel is alive), with a function that runs code in the kernel and
  returns that code's grading outputs (``grading_mime_types``); the grader's
  stand-in passes (:mod:`autograder.stand_ins`) use it. That code is not
  stored in the notebook, and nothing else it outputs is kept — no text, no
  display, and no update of a display an earlier cell made — so what a
  learner's code sees then cannot reach the graded notebook or the feedback.
  The wall-clock limit covers it;
* a one-line record of how the run ended, for the grading table::

      nb.metadata["attention_lab"]["execution"] == {"status": "ok" | "killed" | "died",
                                                    "reason": "<one line in plain words>"}

Widget messages from the kernel are ignored (no widget state is stored):
graded notebooks do not need it, and it would be a way around the caps.
"""

from __future__ import annotations

import json
import threading
from queue import Empty

from nbclient.client import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import run_sync
from nbformat import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Bool, Integer, List, Unicode, default

from autograder.sandbox.provisioner import SandboxedKernelManager, SandboxError, signal_name

PROBE_MIME = "application/vnd.attention-lab.probe+json"  # attention_lab.probe.MIME, not imported: no kernel code here
#: Key in nbconvert's resources of a callable ``after_last_cell(nb, run_code)`` (see the module docstring).
AFTER_LAST_CELL = "sandbox_after_last_cell"
MAX_ERROR_TEXT = 2000  # characters of an error's message kept
MAX_TRACEBACK = 20000  # characters of an error's traceback kept
MAX_VALUE_TEXT = 2000  # characters of a cell's value (text/plain) kept when over the caps


def text_bytes(text: str) -> int:
    """UTF-8 size of ``text`` without copying it when it is ASCII (the usual case for big outputs)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def data_bytes(value) -> int:
    """Size of one output's ``data`` or ``metadata`` value, as the notebook file would store it."""
    if isinstance(value, str):
        return text_bytes(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return sum(map(text_bytes, value))
    return len(json.dumps(value, default=str))


def head(text: str, limit: int) -> str:
    """The first ``limit`` bytes of ``text`` (UTF-8), cut at a character boundary."""
    if text_bytes(text) <= limit:
        return text
    if text.isascii():
        return text[:limit]
    return text.encode("utf-8", "surrogatepass")[:limit].decode("utf-8", "ignore")


def cell_label(cell: NotebookNode, index: int) -> str:
    """``cell 7`` or ``cell 7 (test_softmax)`` — how a reason names the cell."""
    grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
    return f"cell {index + 1}" + (f" ({grade_id})" if grade_id else "")


class SandboxedExecute(Execute):
    """nbgrader's ``Execute``, with the kernel in a bubblewrap sandbox, a wall-clock limit and output caps.

    Configure it in ``nbgrader_config.py``, e.g.
    ``c.SandboxedExecute.wall_clock_limit = 120`` (the kernel's limits are on
    ``c.SandboxedKernelManager``). ``Execute``'s own settings (``timeout``,
    ``interrupt_on_timeout``, ...) apply too.
    """

    wall_clock_limit = Integer(
        60, help="Seconds a whole notebook may run (after its kernel started) before the sandbox is killed."
    ).tag(config=True)
    max_cell_output_bytes = Integer(2 * 2**20, help="Output kept per cell, bytes.").tag(config=True)
    max_notebook_output_bytes = Integer(16 * 2**20, help="Output kept per notebook, bytes.").tag(config=True)
    grading_mime_types = List(
        Unicode(), [PROBE_MIME], help="Display outputs that grading reads: kept under their own cap."
    ).tag(config=True)
    max_grading_output_bytes = Integer(
        64 * 2**20, help="Output of grading_mime_types kept per notebook, bytes."
    ).tag(config=True)
    store_widget_state = Bool(False, help="Ignored: widget messages are never stored while grading.")

    @default("shutdown_kernel")
    def _shutdown_kernel_default(self):
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
            namespaces, a kernel that does not start), or the kernel manager
            is not a sandboxed one.
        """
        manager = km.__class__ if km is not None else self.kernel_manager_class
        if not issubclass(manager, SandboxedKernelManager):
            raise SandboxError("SandboxedExecute only runs kernels of a SandboxedKernelManager, "
                               f"not {manager.__name__}")
        NotebookClient.__init__(self, nb, km)
        self._sandbox = km
        self.reset_execution_trackers()
        self._check_assign_resources(resources)
        outcome = {"status": "ok", "reason": "all cells ran"}
        try:
            with self.setup_kernel():
                self._run_cells(outcome, resources)
        except RuntimeError as error:
            if isinstance(error, SandboxError) or not outcome.get("started"):
                log = getattr(self._sandbox, "last_log", "").strip()
                raise SandboxError(f"the grading sandbox did not start: {error}"
                                   + (f"; the kernel said: {log[-500:]}" if log else "")) from error
            raise
        outcome.pop("started", None)
        dropped = [f"{self._dropped_bytes} bytes dropped"] if self._dropped_bytes else []
        if self._lost_messages:
            dropped.append(f"{self._lost_messages} message(s) over {self._max_message_mib} MiB lost")
        if dropped:
            outcome["reason"] += f" (output truncated: {'; '.join(dropped)})"
        nb.metadata.setdefault("attention_lab", {})["execution"] = outcome
        return nb, self.resources

    def create_kernel_manager(self):
        self._sandbox = super().create_kernel_manager()  # kept after nbclient lets go of it, for its log
        return self._sandbox

    def _run_cells(self, outcome: dict, resources) -> None:
        km = self.km
        try:
            info = self.wait_for_reply(self.kc.kernel_info())
        except DeadKernelError as error:
            raise SandboxError(f"the kernel died while starting; it said: {km.log_tail().strip()[-500:]}") from error
        km.seal()
        outcome["started"] = True
        self._max_message_mib = km.max_message_bytes // 2**20
        if info is not None:
            self.nb.metadata["language_info"] = info["content"].get("language_info", {})
        fired = threading.Event()

        def stop_the_clock():
            fired.set()
            km.kill_sandbox()

        timer = threading.Timer(self.wall_clock_limit, stop_the_clock)
        timer.daemon = True
        timer.start()
        index = -1
        after_last_cell = (resources or {}).get(AFTER_LAST_CELL)
        try:
            for index, cell in enumerate(self.nb.cells):
                self._interrupted = False
                try:
                    self.preprocess_cell(cell, resources, index)
                    lost = self.kc.lost_messages()
                except CellTimeoutError:
                    # the kernel never said "idle" for this cell; nbgrader would give up on the notebook here
                    if self.km.exit_status() is not None:
                        raise DeadKernelError("Kernel died") from None
                    lost = self.kc.lost_messages()
                    if lost:
                        self._append_error(cell, "OutputIncomplete", (
                            f"the cell sent an output larger than {self.km.max_message_bytes // 2**20} MiB: "
                            "it and the rest of the cell's output were lost"))
                    elif self._interrupted:
                        self._append_error(cell, "CellTimeoutError", f"the cell was still running {self.timeout} s "
                                           "after it started, and did not stop when interrupted")
                    else:
                        self._append_error(cell, "OutputIncomplete", "the cell's output did not arrive completely")
                if lost:
                    self._lost_messages += lost
                    self._resubscribe()
            if after_last_cell is not None:
                self._after_last_cell(after_last_cell, fired, outcome)
        except DeadKernelError:
            status, reason = self._why_it_stopped(fired.is_set(), cell_label(self.nb.cells[index], index))
            outcome.update(status=status, reason=reason)
            self._append_error(self.nb.cells[index], "KernelStopped", reason)
            for later in self.nb.cells[index + 1:]:
                if later.cell_type == "code":
                    later.outputs = []
                    later.execution_count = None
        finally:
            timer.cancel()
        self.set_widgets_metadata()

    def _after_last_cell(self, after_last_cell, fired: threading.Event, outcome: dict) -> None:
        """Call ``after_last_cell(nb, run_code)``; a kernel that stops meanwhile is recorded, the cells are kept."""
        try:
            after_last_cell(self.nb, self.run_code)
        except DeadKernelError:
            status, reason = self._why_it_stopped(fired.is_set(), "the grader's second pass (after the last cell)")
            outcome.update(status=status, reason=reason)

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
        cell = NotebookNode(cell_type="code", source=source, metadata={}, outputs=[], execution_count=None)
        self.nb.cells.append(cell)  # nbclient's execute_cell stores the cell at its index: it must be ours
        index = len(self.nb.cells) - 1
        self._off_the_record = True
        try:
            self.execute_cell(cell, index, store_history=False)
        except CellTimeoutError:
            if self.km.exit_status() is not None:
                raise DeadKernelError("Kernel died") from None
            return []
        finally:
            self._off_the_record = False
            self.nb.cells.pop()
            self._forget_cell(index)
            self.clear_display_id_mapping(index)
        return [o for o in cell.outputs if o.get("output_type") == "display_data"
                and any(mime in o.get("data", {}) for mime in self.grading_mime_types)]

    def _why_it_stopped(self, wall_clock: bool, where: str) -> tuple[str, str]:
        """``(status, reason)`` for a kernel that stopped during ``where``."""
        if wall_clock:
            return "killed", (f"the notebook ran longer than the wall-clock limit of {self.wall_clock_limit} s, "
                              f"so its kernel was stopped in {where}")
        km = self.km
        code = km.exit_status()
        if code is None:
            return "died", f"the kernel stopped responding in {where}"
        if code < 0 or code > 128:
            number = -code if code < 0 else code - 128
            name = signal_name(number)
            if name == "SIGKILL":
                return "died", (f"the kernel was killed (SIGKILL) in {where}: it ran out of memory "
                                f"(limit {km.memory_limit // 2**20} MiB), ignored the CPU-time limit, "
                                "or the code killed its own process")
            if name == "SIGXCPU":
                return "killed", f"the kernel used more than the CPU-time limit of {km.cpu_time_limit} s in {where}"
            if name == "SIGXFSZ":
                return "died", (f"the kernel wrote a file over the size limit of {km.file_size_limit // 2**20} MiB "
                                f"in {where}")
            if name in ("SIGSEGV", "SIGBUS", "SIGABRT", "SIGILL", "SIGFPE"):
                return "died", f"the kernel crashed ({name}) in {where}"
            return "died", f"the kernel was stopped by {name} in {where}"
        return "died", (f"the notebook's code ended the kernel's process (exit code {code}) in {where}, "
                        "e.g. with os._exit(), exit() or quit()")

    def _resubscribe(self, attempts: int = 5) -> None:
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

    async def _async_handle_timeout(self, timeout, cell=None):
        self._interrupted = True
        return await super()._async_handle_timeout(timeout, cell)

    @staticmethod
    def _append_error(cell: NotebookNode, name: str, reason: str) -> None:
        cell.setdefault("outputs", []).append(
            NotebookNode(output_type="error", ename=name, evalue=reason, traceback=[f"{name}: {reason}"]))

    # ---- output caps ----------------------------------------------------------------------------

    def reset_execution_trackers(self) -> None:
        super().reset_execution_trackers()
        self._off_the_record = False  # True while run_code's cell runs: only grading outputs are kept
        self._kept = {}  # cell index -> bytes of ordinary output kept
        self._kept_total = 0
        self._grading_kept = 0
        self._dropped_bytes = 0
        self._lost_messages = 0
        self.clear_before_next_output = False
        self._notes = {}  # cell index -> (its "output truncated" note output, bytes dropped in the cell)

    def _room(self, cell_index: int) -> int:
        return max(0, min(self.max_cell_output_bytes - self._kept.get(cell_index, 0),
                          self.max_notebook_output_bytes - self._kept_total))

    def _keep(self, cell_index: int, size: int) -> None:
        self._kept[cell_index] = self._kept.get(cell_index, 0) + size
        self._kept_total += size

    def _drop(self, outs: list, cell_index: int, size: int) -> None:
        self._dropped_bytes += size
        note, dropped = self._notes.get(cell_index, (None, 0))
        if note is None or not any(o is note for o in outs):
            note, dropped = NotebookNode(output_type="stream", name="stdout", text=""), 0
            outs.append(note)
        self._notes[cell_index] = note, dropped + size
        note.text = f"\n[output truncated: {dropped + size} bytes dropped]\n"

    def _is_note(self, cell_index: int, output) -> bool:
        return output is self._notes.get(cell_index, (None, 0))[0]

    def _forget_cell(self, cell_index: int) -> None:
        self._kept_total -= self._kept.pop(cell_index, 0)
        self._notes.pop(cell_index, None)

    def clear_output(self, outs, msg, cell_index):
        if not msg["content"].get("wait"):
            self._forget_cell(cell_index)
        super().clear_output(outs, msg, cell_index)

    def output(self, outs, msg, display_id, cell_index):
        """Keep ``msg``'s output within the caps (trimmed or dropped with a note), then store it as nbclient does."""
        if self.clear_before_next_output:
            self._forget_cell(cell_index)
        msg_type = msg["msg_type"]
        content = msg["content"]
        if self._off_the_record:
            if msg_type == "display_data" and any(mime in content.get("data", {}) for mime in self.grading_mime_types):
                size = sum(data_bytes(v) for v in content["data"].values())
                if self._grading_kept + size <= self.max_grading_output_bytes:
                    self._grading_kept += size
                    return self._store(outs, {**msg, "content": {**content, "transient": {}}}, None, cell_index)
            return None
        if msg_type == "stream":
            text = content.get("text", "")
            size, room = text_bytes(text), self._room(cell_index)
            if size <= room:
                self._keep(cell_index, size)
                return self._store(outs, msg, display_id, cell_index)
            # over the cap: keep what fits; a stream that grading reads (stderr) keeps existing, even empty
            out = None
            if room > 0 or not any(o.get("output_type") == "stream" and o.get("name") == content.get("name")
                                   and not self._is_note(cell_index, o) for o in outs):
                content["text"] = head(text, room)
                self._keep(cell_index, text_bytes(content["text"]))
                out = self._store(outs, msg, display_id, cell_index)
            self._drop(outs, cell_index, size - text_bytes(content.get("text", "")) if out else size)
            return out
        if msg_type == "error":
            # an error decides a grade: the cell's first one is always kept (trimmed), more only while there is room
            content["evalue"] = head(str(content.get("evalue", "")), MAX_ERROR_TEXT)
            traceback, total = [], 0
            for line in content.get("traceback", []):
                total += len(line)
                if total > MAX_TRACEBACK:
                    traceback.append("... (traceback truncated)")
                    break
                traceback.append(line)
            content["traceback"] = traceback
            size = text_bytes(content["evalue"]) + sum(map(text_bytes, traceback))
            if size > self._room(cell_index) and any(o.get("output_type") == "error" for o in outs):
                self._drop(outs, cell_index, size)
                return None
            self._keep(cell_index, size)
            return self._store(outs, msg, display_id, cell_index)
        if msg_type in ("display_data", "execute_result"):
            data = content.get("data", {})
            size = sum(data_bytes(v) for v in data.values()) + data_bytes(content.get("metadata", {}))
            if any(mime in data for mime in self.grading_mime_types):
                if self._grading_kept + size <= self.max_grading_output_bytes:
                    self._grading_kept += size
                    return self._store(outs, msg, display_id, cell_index)
                self._drop(outs, cell_index, size)
                return None
            if size > self._room(cell_index):
                if msg_type != "execute_result" or any(o.get("output_type") == "execute_result" for o in outs):
                    self._drop(outs, cell_index, size)
                    return None
                # a cell's value can be its partial credit: keep the start of its text
                plain = head(str(data.get("text/plain", "")), MAX_VALUE_TEXT)
                self._drop(outs, cell_index, max(0, size - text_bytes(plain)))
                content["data"], content["metadata"] = {"text/plain": plain}, {}
                size = text_bytes(plain)
            self._keep(cell_index, size)
            return self._store(outs, msg, display_id, cell_index)
        return self._store(outs, msg, display_id, cell_index)

    def _store(self, outs, msg, display_id, cell_index):
        return super().output(outs, msg, display_id, cell_index)

    def _update_display_id(self, display_id, msg):
        if self._off_the_record:
            return  # code run after the last cell must not change what the notebook's cells show
        data = msg["content"].get("data", {})
        size = sum(data_bytes(v) for v in data.values())
        if size > self.max_cell_output_bytes:
            self._dropped_bytes += size  # an update over the cap is ignored: the old display stays
            return
        super()._update_display_id(display_id, msg)

    def handle_comm_msg(self, outs, msg, cell_index):
        """Ignore widget messages: no widget state or Output-widget capture while grading."""
        return None
