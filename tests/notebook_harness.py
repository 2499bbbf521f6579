"""Run an assignment's cells in this process, as a fast model of the kernel.

Used to test the tests: every autograder-test cell (hidden part included) is
executed against many differently written answers without starting a kernel
per answer. The end-to-end tests check that nbgrader gives the same scores.
"""

from __future__ import annotations

import ast
import contextlib
import io

import numpy as np

from attention_lab import checks, plots
from autograder.notebook_cells import read, solution_cells, test_cells


def run_cell(source: str, namespace: dict):
    """Execute a cell like IPython: statements, then the value of a final expression (or None)."""
    tree = ast.parse(source)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, "<cell>", "exec"), namespace)
    if last is not None:
        return eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace)
    return None


def namespace_with(answers: dict[str, str]) -> dict:
    """A fresh notebook namespace (the setup cell's imports) with the given solution cells run."""
    namespace = {"np": np, "checks": checks, "plots": plots, "__name__": "__main__"}
    for source in answers.values():
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            try:
                run_cell(source, namespace)
            except Exception:  # like a kernel: an error in one cell, the notebook goes on
                pass
    return namespace


def grade_in_process(source_nb_path, overrides: dict[str, str]) -> dict[str, tuple[float, float, str, str]]:
    """Score each test cell for the source solutions with ``overrides`` applied.

    Returns
    -------
    dict
        test-cell grade_id → (score, points, stdout, stderr). The score follows
        nbgrader's rule: 0 on an error or any stderr output, the returned float
        when the cell ends in a number, else full points.
    """
    nb = read(source_nb_path)
    answers = {**solution_cells(nb), **overrides}
    namespace = namespace_with(answers)
    results = {}
    for grade_id, (source, points) in test_cells(nb).items():
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                value = run_cell(source, namespace)
            except Exception as error:  # an error output in nbgrader
                print(f"{type(error).__name__}: {error}", file=err)
                value = None
        if err.getvalue():
            score = 0.0
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            score = float(value)
        else:
            score = points
        results[grade_id] = (score, points, out.getvalue(), err.getvalue())
    return results
