"""Answers as running code in the grader's process: the source solutions, optionally with variant cells.

The grader needs the functions of the instructor's solution with some cells
replaced (a known mistake, a learner's earlier mistake it has identified), to
compute what those answers return on the hidden inputs. Solution cells may use
``np`` and the functions of earlier solution cells, nothing else from the
notebook; this module runs them in that order in a fresh namespace.

Only trusted code runs here: the source notebook and the variants in
``autograder/assignments/<folder>/bank.py``. A learner's code never does (it runs in the
sandboxed kernel).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import io
import warnings
from pathlib import Path

import numpy as np

from autograder.nbgrader.notebook_cells import read_json, solution_cells
from autograder.course import REPO



def run_cell(source: str, namespace: dict):
    """Execute a cell like IPython: its statements, then the value of a final expression (or None)."""
    statements, last = _compiled(source)
    exec(statements, namespace)
    if last is not None:
        return eval(last, namespace)
    return None


@functools.lru_cache(maxsize=4096)
def _compiled(source: str):
    """A cell's statements and its final expression (or None), compiled once per source: the same solution, variant
    and self-check cells are run in a fresh namespace for every answer graded. A cell that does not compile raises
    every time (an exception is not cached)."""
    tree = ast.parse(source)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    return (compile(tree, "<cell>", "exec"),
            None if last is None else compile(ast.Expression(last.value), "<cell>", "eval"))


@functools.lru_cache(maxsize=None)
def _solutions(notebook_path: str, mtime: float) -> tuple[tuple[str, str], ...]:
    return tuple(solution_cells(read_json(notebook_path)).items())


def source_solutions(assignment_name: str, notebook: str, course_dir: Path = REPO) -> dict[str, str]:
    """``grade_id`` → source of each solution cell of ``source/<assignment>/<notebook>``, in notebook order.

    Raises
    ------
    FileNotFoundError
        If the source notebook does not exist under ``course_dir``.
    """
    path = Path(course_dir) / "source" / assignment_name / notebook
    if not path.is_file():
        raise FileNotFoundError(f"source notebook not found: {path}")
    return dict(_solutions(str(path), path.stat().st_mtime))


def namespace_with(cells: dict[str, str]) -> dict:
    """A fresh notebook namespace (``np`` imported) with ``cells`` run in order.

    A cell that raises is skipped, as in a kernel where one cell fails and the
    notebook goes on; its output is discarded.
    """
    namespace = {"np": np, "__name__": "__main__"}
    for source in cells.values():
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                run_cell(source, namespace)
            except Exception:  # noqa: BLE001 — like a kernel: an error in one cell, the notebook goes on
                pass
    return namespace


def answer_namespace(assignment_name: str, notebook: str, overrides: dict[str, str] | None = None,
                     course_dir: Path = REPO) -> dict:
    """The source solution of an assignment with ``overrides`` (grade_id → source) applied, run in order."""
    cells = source_solutions(assignment_name, notebook, course_dir)
    unknown = set(overrides or {}) - set(cells)
    if unknown:
        raise KeyError(f"{assignment_name}: no solution cell with grade_id {sorted(unknown)}")
    return namespace_with({**cells, **(overrides or {})})
