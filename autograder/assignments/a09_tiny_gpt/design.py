"""The generated part of assignment 9's DESIGN.md: training summary, steps and cases, margins, bank, head findings.

``python -m autograder.assignments.a09_tiny_gpt.design`` rewrites the part of ``DESIGN.md``
between the ``generated`` markers (about 15 s: it measures the committed
model); ``tests/test_tiny_gpt_findings.py`` fails when the file is stale.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from autograder.grader.draft_rewrites import replace_generated

from . import analysis, bank, findings, model
from .model import TRAINING_FILE, load_weights

DESIGN = Path(__file__).with_name("DESIGN.md")


def training_section() -> str:
    summary = json.loads(TRAINING_FILE.read_text(encoding="utf-8"))
    config, schedule, scores = summary["config"], summary["schedule"], summary["evaluation"]
    return "\n".join([
        "### The committed model (`attention_lab/a09_tiny_gpt/training.json`)", "",
        "- config: " + ", ".join(f"{k} = {v}" for k, v in config.items()),
        f"- task: {summary['task']['name']}, L ∈ {summary['task']['block_lengths']}, "
        f"{summary['task']['sequence_tokens']} tokens per training sequence (BOS = {summary['task']['bos']})",
        f"- Adam, {schedule['steps']} steps of {schedule['batch_size']} sequences, lr {schedule['lr']:g} "
        f"(warm-up {schedule['warmup']}, cosine to lr/10), β = ({schedule['beta1']}, {schedule['beta2']}), "
        f"clip {schedule['clip']}; seeds {summary['seeds']}",
        f"- loss {summary['first_loss']:.3f} → {summary['final_loss_mean_last_100_steps']:.3f} nats (mean of the "
        f"last 100 steps); trained in {summary['training_seconds']:.0f} s on {summary['machine']}",
        f"- fresh sequences (seed {summary['seeds']['eval']}, 2000 sequences): next-token accuracy "
        f"**{scores['predictable_accuracy']:.2%}** on the {scores['n_predictable']} predictable targets "
        f"(loss {scores['predictable_loss']:.2g} nats), {scores['all_accuracy']:.2%} on all targets; loss on "
        f"the unpredictable targets {scores.get('unpredictable_loss', float('nan')):.3f} nats",
    ])


def _tolerance(case) -> str:
    return "exact" if case.rtol == case.atol == 0 else f"rtol {case.rtol:g}, atol {case.atol:g}"


def steps_section() -> str:
    cases_of = bank.hidden_cases()
    lines = ["### Steps, points and hidden cases", "",
             "A step's points are shared among its cases by their weights; floating results are compared with "
             "`numpy.allclose` at the case's tolerances, tokens exactly. \"fails\" lists the known mistakes of the "
             "step whose output is wrong on the case (every other one keeps its points there: `bank.PASSES`).", ""]
    for number, (grade_id, (title, points)) in enumerate(bank.STEPS.items()):
        cases = cases_of[grade_id]
        total = sum(case.weight for case in cases)
        mistakes = [(name, m) for name, m in bank.KNOWN_MISTAKES.items() if m.step == grade_id]
        lines += [f"**Step {number} — `{grade_id}`** ({points} point{'' if points == 1 else 's'}): {title}; "
                  f"{_tolerance(cases[-1])}.", "", "| hidden case | weight | fails |", "|---|---|---|"]
        for case in cases:
            fails = ", ".join(f"`{name}`" for name, m in mistakes if case.description not in m.passes) or "—"
            lines.append(f"| {case.description} | {points * case.weight / total:.3g} | {fails} |")
        lines.append("")
    params, config = load_weights()
    lines += [f"Total: {sum(points for _, points in bank.STEPS.values())} points, and 1 for each question.", "",
              "Generation cases (committed weights, " f"{bank.N_NEW} new tokens): the smallest top-2 logit margin over "
              "the greedy steps (`model.check_greedy_margin` refuses one below 1e-6), or the smallest distance of a "
              "uniform number from a CDF boundary for the sampled ones:", "",
              "| case | prompt | smallest margin |", "|---|---|---|"]
    for description, prompt, temperature, seed, _ in bank.GENERATION:
        if temperature is None:
            margin = model.greedy_margins(params, config, np.array(prompt), bank.N_NEW).min()
        else:
            margin = model.sampling_margins(params, config, np.array(prompt), bank.uniforms(seed), temperature).min()
        lines.append(f"| {description} | {prompt} | {margin:.3g} |")
    return "\n".join(lines)


def bank_section() -> str:
    lines = [f"### Correct variants ({len(bank.CORRECT)})", ""]
    for name, variant in bank.CORRECT.items():
        lines.append(f"- **{name}** (replaces {', '.join(f'`{c}`' for c in variant.cells)}): {variant.description}.")
    lines += ["", f"### Known mistakes ({len(bank.KNOWN_MISTAKES)}), as edits of the solution", ""]
    for name, mistake in bank.KNOWN_MISTAKES.items():
        lines += [f"**{name}** — charged in `{mistake.step}`: {mistake.description}.", "", "```diff"]
        for edit in mistake.edits:
            lines += [f"- {line}" for line in edit.old.splitlines()]
            lines += [f"+ {line}" for line in edit.new.splitlines()]
        lines += ["```", f"Hint: {mistake.hint}", ""]
    return "\n".join(lines)


def _head_table(scores) -> list[str]:
    heads = [f"L{layer}H{head}" for layer in range(2) for head in range(2)]
    lines = ["| pattern | " + " | ".join(heads) + " |", "|---|" + "---|" * len(heads)]
    for pattern in analysis.PATTERNS:
        lines.append(f"| {pattern} | " + " | ".join(f"{v:.3f}" for v in np.ravel(scores[pattern])) + " |")
    return lines


def findings_section(m: findings.Measurements) -> str:
    lines = ["### What the trained model does (measured; each sentence is a predicate in `findings.py`)", ""]
    lines += [f"{number}. {finding.sentence}" for number, finding in enumerate(findings.FINDINGS, start=1)]
    lines += ["", f"Mean attention weight on each pattern's keys, on {len(m.sampled_sequences)} sequences the model "
                  "sampled itself (temperature 1, from BOS and two random tokens):", ""]
    lines += _head_table(m.sampled_scores)
    lines += ["", "The same on 500 fresh task sequences (seed 3):", ""]
    lines += _head_table(m.fresh_scores)
    lines += ["", "Mean row entropy as a fraction of the ceiling ln(t + 1): " + ", ".join(
        f"L{layer}H{head} {m.entropy[layer, head]:.3f}" for layer in range(2) for head in range(2)) + ".", "",
        "L0H0 per query position t (mean weight on the previous token / on BOS):", "",
        "| t | " + " | ".join(str(t) for t in range(1, 32)) + " |", "|---|" + "---|" * 31,
        "| previous | " + " | ".join(f"{v:.2f}" for v in m.l0h0_profile["previous"][1:]) + " |",
        "| BOS | " + " | ".join(f"{v:.2f}" for v in m.l0h0_profile["bos"][1:]) + " |", "",
        "Ablation (head output zeroed), on 2000 fresh sequences:", "",
        "| zeroed | accuracy, predictable targets | loss, predictable (nats) | loss, unpredictable (nats) |",
        "|---|---|---|---|"]
    for name, scores in m.ablation.items():
        lines.append(f"| {name} | {scores['predictable_accuracy']:.2%} | {scores['predictable_loss']:.3g} | "
                     f"{scores['unpredictable_loss']:.3f} |")
    lines += ["", "Blocks longer than in training: accuracy by the block index of the input token "
                  "(index b: the answer follows position b + 1 of the first block):", ""]
    for L, accuracy in m.long_blocks.items():
        lines.append(f"- L = {L}: " + ", ".join(f"{b + 1}: {a:.0%}" for b, a in enumerate(accuracy)))
    return "\n".join(lines)


def generated(measurements: findings.Measurements | None = None) -> str:
    """The generated part of DESIGN.md (measures the committed model unless ``measurements`` is given)."""
    if measurements is None:
        measurements = findings.measure(*load_weights())
    return "\n\n".join([training_section(), steps_section(), bank_section(),
                        findings_section(measurements)])


def main() -> None:
    DESIGN.write_text(replace_generated(DESIGN.read_text(encoding="utf-8"), generated()), encoding="utf-8")


if __name__ == "__main__":
    main()
