"""Answer banks written as edits of a solution: correct rewrites of whole cells, and known mistakes as small edits.

An assignment's draft bank (e.g. :mod:`autograder.assignments.a06_gradients.bank`)
has a reference-style **solution** (solution-cell id → source, in notebook
order), **correct variants** (:class:`Rewrite`: cells replaced wholesale,
each must equal the reference within tolerance) and **known mistakes**
(:class:`Edit`: one exact text replacement in one cell; applying it must
change the cell, and the edited answer must differ from the reference on at
least one hidden case of the step it breaks).

Writing a mistake as an edit keeps it in step with the solution: when the
solution changes so that the old text no longer occurs exactly once,
:func:`apply_edit` fails loudly instead of testing a stale copy (issue 11,
"known mistakes are written as small edits of the solution").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from autograder.grader.bank import apply_edits


@dataclass(frozen=True)
class Rewrite:
    """A correct, differently written answer: some solution cells replaced.

    Attributes
    ----------
    description : str
        What it does differently.
    cells : mapping of str to str
        Cell id → full replacement source; other cells keep the solution.
    """

    description: str
    cells: Mapping[str, str]


@dataclass(frozen=True)
class Edit:
    """A known mistake as one exact text replacement in one solution cell.

    Attributes
    ----------
    description : str
        The mistake, in words (for instructors).
    cell : str
        Id of the solution cell the edit applies to.
    old, new : str
        ``old`` must occur exactly once in that cell; it is replaced by ``new``.
    hint : str
        What the learner reads when their answer behaves like this one: names
        the mistake and the idea, without giving the code.
    breaks : str
        The step (autograder cell) that must lose points.
    shape_only : bool
        True when the mistake's nature is a wrong shape (or an error) on some
        hidden input, so that a shape check may be what catches it.
    """

    description: str
    cell: str
    old: str
    new: str
    hint: str
    breaks: str
    shape_only: bool = False


def apply_edit(solution: Mapping[str, str], edit: Edit) -> dict[str, str]:
    """The solution with ``edit`` applied.

    Raises
    ------
    ValueError
        If the cell does not exist, or ``edit.old`` does not occur exactly
        once in it, or the edit does not change the text.
    """
    if edit.cell not in solution:
        raise ValueError(f"edit names cell {edit.cell!r}, which the solution does not have ({sorted(solution)})")
    return {**solution, **apply_edits(solution, (edit,))}  # the grader's banks apply their edits the same way


def apply_rewrite(solution: Mapping[str, str], rewrite: Rewrite) -> dict[str, str]:
    """The solution with the rewrite's cells replaced; ValueError if it names a cell the solution lacks."""
    unknown = sorted(set(rewrite.cells) - set(solution))
    if unknown:
        raise ValueError(f"rewrite replaces cells the solution does not have: {unknown}")
    return {**solution, **rewrite.cells}


def run_cells(cells: Mapping[str, str], given: str = "") -> dict:
    """Execute ``given`` then every cell, in order, in one namespace (as a notebook kernel would); return it.

    The namespace starts with ``np`` and ``math``, which the notebooks import.
    """
    namespace: dict = {"np": np, "math": math, "__name__": "answer"}
    if given:
        exec(compile(given, "<given>", "exec"), namespace)  # noqa: S102 - our own bank's source
    for cell_id, source in cells.items():
        exec(compile(source, f"<cell {cell_id}>", "exec"), namespace)  # noqa: S102
    return namespace


def call(namespace: Mapping, function: str, args=(), kwargs=None) -> tuple[str, object]:
    """Call ``namespace[function](*args, **kwargs)``: ("ok", result) or ("raised", the exception's class name)."""
    try:
        return "ok", namespace[function](*args, **dict(kwargs or {}))
    except Exception as error:  # noqa: BLE001 - a wrong answer may raise anything
        return "raised", type(error).__name__


def compare(result, expected, rtol: float, atol: float) -> str:
    """"equal", "shape" (another structure, shape or kind) or "value" (same shapes, other numbers).

    Tuples and lists are compared item by item (a result may use either for a
    reference tuple); numbers and arrays with :func:`numpy.allclose`; NaN is
    never equal. A structure is "value" when any item of matching shape has
    other numbers (even if another item's shape differs): the wrong numbers
    are then visible without the shape.
    """
    if isinstance(expected, (tuple, list)):
        if not isinstance(result, (tuple, list)) or len(result) != len(expected):
            return "shape"
        verdicts = [compare(r, e, rtol, atol) for r, e in zip(result, expected)]
        return "value" if "value" in verdicts else ("shape" if "shape" in verdicts else "equal")
    result, expected = np.asarray(result), np.asarray(expected)
    if result.shape != expected.shape or result.dtype.kind not in "biuf":
        return "shape"
    close = np.allclose(result.astype(float), expected.astype(float), rtol=rtol, atol=atol)
    return "equal" if close else "value"


# ---------------------------------------------------------------- design notes

BEGIN, END = "<!-- generated: begin (do not edit by hand) -->", "<!-- generated: end -->"


def render_bank(correct: Mapping[str, Rewrite], mistakes: Mapping[str, Edit]) -> str:
    """Markdown of an answer bank: the correct variants as a list, each mistake as a diff of the solution."""
    lines = [f"### Correct variants ({len(correct)})", ""]
    for name, rewrite in correct.items():
        lines.append(f"- **{name}** (replaces {', '.join(f'`{c}`' for c in rewrite.cells)}): {rewrite.description}.")
    lines += ["", f"### Known mistakes ({len(mistakes)}), as edits of the solution", ""]
    for name, edit in mistakes.items():
        kind = " A shape mistake by nature." if edit.shape_only else ""
        lines += [f"**{name}** — breaks step `{edit.breaks}`; edit in cell `{edit.cell}`: {edit.description}.{kind}",
                  "", "```diff"]
        lines += [f"- {line}" for line in edit.old.splitlines()]
        lines += [f"+ {line}" for line in edit.new.splitlines()]     # none: the lines are deleted
        lines += ["```", f"Hint: {edit.hint}", ""]
    return "\n".join(lines)


def replace_generated(text: str, generated: str) -> str:
    """``text`` with the part between :data:`BEGIN` and :data:`END` replaced by ``generated``.

    Raises
    ------
    ValueError
        If the markers are missing or out of order.
    """
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the design note needs the markers {BEGIN!r} and {END!r}, in that order")
    return text[:start + len(BEGIN)] + "\n" + generated.strip("\n") + "\n" + text[end:]
