"""How much of a notebook's output the grader keeps: caps per cell, per notebook and for what grading reads.

:class:`OutputCaps` decides, message by message, what of an output is kept in
the grader's memory and in the graded notebook; the rest is dropped with a
note "output truncated: N bytes dropped". Outputs that grading reads are
never dropped, only trimmed: errors, the start of stderr, a cell's value
(``execute_result``), and the probe results (the grading MIME types, with their
own larger cap). :class:`~autograder.sandbox.execute.SandboxedExecute` asks it
before nbclient stores an output.
"""

from __future__ import annotations

import json
from typing import Callable

from nbformat import NotebookNode

from autograder.sandbox.limits import MAX_ERROR_TEXT, MAX_TRACEBACK, MAX_VALUE_TEXT, RunLimits


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


def display_bytes(content: dict) -> int:
    """Size of a display message's data (what a display update would store)."""
    return sum(data_bytes(v) for v in content.get("data", {}).values())


#: Stores a (possibly trimmed) output message as nbclient does; returns the stored output.
Store = Callable[[dict], "NotebookNode | None"]


class OutputCaps:
    """The bookkeeping of one notebook's kept and dropped output.

    Parameters
    ----------
    limits : RunLimits
        ``max_cell_output_bytes``, ``max_notebook_output_bytes``, ``max_grading_output_bytes``.
    grading_mime_types : list of str
        Display data that grading reads (the probe's results).
    """

    def __init__(self, limits: RunLimits, grading_mime_types: list[str]):
        self.cell_bytes = limits.max_cell_output_bytes
        self.notebook_bytes = limits.max_notebook_output_bytes
        self.grading_bytes = limits.max_grading_output_bytes
        self.grading_mime_types = list(grading_mime_types)
        self.kept: dict[int, int] = {}  # cell index -> bytes of ordinary output kept
        self.kept_total = 0
        self.grading_kept = 0
        self.dropped_bytes = 0
        self.notes: dict[int, tuple[NotebookNode, int]] = {}  # cell index -> (its note output, bytes dropped)

    def is_grading_output(self, content: dict) -> bool:
        return any(mime in content.get("data", {}) for mime in self.grading_mime_types)

    def room(self, cell_index: int) -> int:
        return max(0, min(self.cell_bytes - self.kept.get(cell_index, 0), self.notebook_bytes - self.kept_total))

    def keep(self, cell_index: int, size: int) -> None:
        self.kept[cell_index] = self.kept.get(cell_index, 0) + size
        self.kept_total += size

    def drop(self, outs: list, cell_index: int, size: int) -> None:
        """Count ``size`` bytes as dropped from the cell and say so in its note (one note per cell, at its end)."""
        self.dropped_bytes += size
        note, dropped = self.notes.get(cell_index, (None, 0))
        if note is None or not any(o is note for o in outs):
            note, dropped = NotebookNode(output_type="stream", name="stdout", text=""), 0
            outs.append(note)
        self.notes[cell_index] = note, dropped + size
        note.text = f"\n[output truncated: {dropped + size} bytes dropped]\n"

    def is_note(self, cell_index: int, output) -> bool:
        return output is self.notes.get(cell_index, (None, 0))[0]

    def forget_cell(self, cell_index: int) -> None:
        """The cell's outputs were cleared: its room comes back."""
        self.kept_total -= self.kept.pop(cell_index, 0)
        self.notes.pop(cell_index, None)

    def admit_grading_output(self, content: dict) -> bool:
        """Whether a display of grading output still fits under its own cap (counted if it does)."""
        size = sum(data_bytes(v) for v in content["data"].values()) + data_bytes(content.get("metadata", {}))
        if self.grading_kept + size <= self.grading_bytes:
            self.grading_kept += size
            return True
        return False

    def admit(self, outs: list, msg: dict, cell_index: int, store: Store) -> NotebookNode | None:
        """Keep ``msg``'s output within the caps: store it (maybe trimmed) with ``store``, or drop it with a note.

        Parameters
        ----------
        outs : list
            The cell's outputs so far.
        msg : dict
            An output message (``stream``, ``error``, ``display_data``, ``execute_result``); trimmed in place.
        cell_index : int
            The cell's index in the notebook.
        store : callable
            Stores a message as nbclient does (``NotebookClient.output``).

        Returns
        -------
        NotebookNode or None
            The stored output, or None if it was dropped.
        """
        msg_type = msg["msg_type"]
        content = msg["content"]
        if msg_type == "stream":
            text = content.get("text", "")
            size, room = text_bytes(text), self.room(cell_index)
            if size <= room:
                self.keep(cell_index, size)
                return store(msg)
            # over the cap: keep what fits; a stream that grading reads (stderr) keeps existing, even empty
            out = None
            if room > 0 or not any(o.get("output_type") == "stream" and o.get("name") == content.get("name")
                                   and not self.is_note(cell_index, o) for o in outs):
                content["text"] = head(text, room)
                self.keep(cell_index, text_bytes(content["text"]))
                out = store(msg)
            self.drop(outs, cell_index, size - text_bytes(content.get("text", "")) if out else size)
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
            if size > self.room(cell_index) and any(o.get("output_type") == "error" for o in outs):
                self.drop(outs, cell_index, size)
                return None
            self.keep(cell_index, size)
            return store(msg)
        if msg_type in ("display_data", "execute_result"):
            data = content.get("data", {})
            size = sum(data_bytes(v) for v in data.values()) + data_bytes(content.get("metadata", {}))
            if self.is_grading_output(content):
                if self.admit_grading_output(content):
                    return store(msg)
                self.drop(outs, cell_index, size)
                return None
            if size > self.room(cell_index):
                if msg_type != "execute_result" or any(o.get("output_type") == "execute_result" for o in outs):
                    self.drop(outs, cell_index, size)
                    return None
                # a cell's value can be its partial credit: keep the start of its text
                plain = head(str(data.get("text/plain", "")), MAX_VALUE_TEXT)
                self.drop(outs, cell_index, max(0, size - text_bytes(plain)))
                content["data"], content["metadata"] = {"text/plain": plain}, {}
                size = text_bytes(plain)
            self.keep(cell_index, size)
            return store(msg)
        return store(msg)
