"""The generated part of assignment 6's DESIGN.md: steps and hidden cases, the answer bank, the measured curves.

``python -m autograder.assignments.a06_gradients.design`` rewrites the part of
``DESIGN.md`` between the ``generated`` markers; ``tests/test_gradient_design.py``
fails when the file is stale.
"""

from __future__ import annotations

import inspect
import math
from pathlib import Path

from autograder.grader.draft_rewrites import render_bank, replace_generated

from . import bank, findings
from .experiment import SCALINGS, assignment1_fact3_entropies, gradient_curves

DESIGN = Path(__file__).with_name("DESIGN.md")


def steps_section() -> str:
    lines = ["### Steps, points and hidden cases", "",
             "Each step's points are shared equally among its hidden cases (the weight column). "
             f"Comparison: `numpy.allclose` with rtol = {bank.RTOL:g}, atol = {bank.ATOL:g} "
             "(float32 answers pass, see the `float32` variant); shapes must match exactly.", ""]
    total = sum(step.points for step in bank.STEPS.values())
    for number, (name, step) in enumerate(bank.STEPS.items(), start=1):
        signature = inspect.signature(bank.REFERENCE[name])
        signature = signature.replace(parameters=[q.replace(annotation=inspect.Parameter.empty)
                                                  for q in signature.parameters.values()],
                                      return_annotation=inspect.Signature.empty)
        cases = step.cases()
        lines += [f"**Step {number} — `{name}{signature}`**: {step.title}, {step.points:g} point{'' if step.points == 1 else 's'}.", "",
                  "| hidden case | weight | exposes |", "|---|---|---|"]
        for case in cases:
            exposes = ", ".join(f"`{m}`" for m in case.exposes) or "—"
            lines.append(f"| {case.description} | {step.points / len(cases):.3g} | {exposes} |")
        lines.append("")
    lines.append(f"Total: {total:g} points for the functions (the conceptual questions come on top).")
    return "\n".join(lines)


def experiment_section() -> str:
    c = gradient_curves(T=32, seed=0)
    labels = list(SCALINGS.values())
    header = ("| d_head | " + " | ".join(f"‖J‖₂ {lab}" for lab in labels) + " | "
              + " | ".join(f"‖dq‖ {lab}" for lab in labels) + " | " + " | ".join(f"H {lab}" for lab in labels) + " |")
    lines = ["### Measured curves (T = 32, seed 0, 256 rows per d_head)", "", header, "|" + "---|" * 10]
    for i, d in enumerate(c.d_heads):
        cells = ([f"{c.gain[k][i]:.4f}" for k in SCALINGS] + [f"{c.query_gradient[k][i]:.4f}" for k in SCALINGS]
                 + [f"{c.entropy[k][i]:.3f}" for k in SCALINGS])
        lines.append(f"| {d} | " + " | ".join(cells) + " |")
    lines += ["", f"Uniform row: ‖J‖₂ = 1/T = {c.uniform_gain:.4f}, gradient reaching the scores "
                  f"{c.uniform_score_gradient:.4f}; ceiling ln T = {c.ceiling:.4f} nats. Medians over rows; "
                  "entropy is the mean.", "",
              "### Findings (each sentence is a predicate in `findings.py`, tested for T ∈ {16, 32, 64} × seeds {0, 1})",
              ""]
    lines += [f"{number}. {finding.sentence}" for number, finding in enumerate(findings.FINDINGS, start=1)]
    fact3 = assignment1_fact3_entropies()
    lines += ["", "### Numbers for the corrections of issue 12 §3", "",
              "Assignment 1's fact 3 (its own draw: `default_rng(3)`, T = 32 queries and keys, d_head = 256, no mask):",
              "",
              f"- mean row entropy ÷1: **{fact3['none']:.2f}** nats, ÷√d_k: **{fact3['sqrt']:.2f}** nats, "
              f"÷d_k: **{fact3['linear']:.2f}** nats; ceiling ln 32 = **{fact3['ceiling']:.2f}** nats;",
              f"- so ÷√d_k is {fact3['sqrt'] / fact3['ceiling']:.0%} of the ceiling (not \"close to\" it), and ÷d_k is "
              f"{fact3['linear'] / fact3['ceiling']:.2%} of it: near-uniform weights, the scores ignored;",
              f"- score standard deviation under ÷√d_k over d_head = 1 … 512 (T = 32): "
              f"{min(c.score_std['sqrt']):.3f} … {max(c.score_std['sqrt']):.3f} (variance ≈ 1); mean row entropy "
              f"{min(c.entropy['sqrt']):.3f} … {max(c.entropy['sqrt']):.3f} nats "
              f"({min(c.entropy['sqrt']) / math.log(32):.2f}–{max(c.entropy['sqrt']) / math.log(32):.2f} of ln T): "
              "independent of d_head."]
    return "\n".join(lines)


def generated() -> str:
    """The generated part of DESIGN.md."""
    return "\n\n".join([steps_section(), render_bank(bank.CORRECT, bank.MISTAKES), experiment_section()])


def main() -> None:
    DESIGN.write_text(replace_generated(DESIGN.read_text(encoding="utf-8"), generated()), encoding="utf-8")


if __name__ == "__main__":
    main()
