"""What the committed tiny GPT's heads really do, as sentences paired with checks over measured values.

:func:`measure` computes the numbers (attention-pattern scores on sequences
the model sampled itself and on fresh task sequences, per-position profiles,
head ablations, blocks longer than in training); each :class:`Finding` is a
sentence DESIGN.md and a notebook may state, with a predicate that is True
exactly when the sentence is true of the measurements.
``tests/test_tiny_gpt_findings.py`` checks every sentence against the
committed weights, so retraining cannot silently change what the course claims.

Heads are named L<layer>H<head>, from 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from . import analysis
from .model import Config


@dataclass(frozen=True)
class Measurements:
    """The numbers the findings are about (see :func:`measure`)."""

    sampled_scores: Mapping[str, np.ndarray]     #: pattern → (layers, heads), on the model's own samples
    fresh_scores: Mapping[str, np.ndarray]       #: pattern → (layers, heads), on fresh task sequences
    entropy: np.ndarray                          #: (layers, heads), mean H_t / ln(t+1)
    l0h0_profile: Mapping[str, np.ndarray]       #: "previous", "bos" → (T,) mean weight of L0H0 per position
    ablation: Mapping[str, Mapping[str, float]]  #: "none", "L0H0", …, "L0H1+L1H1" → evaluate() scores
    long_blocks: Mapping[int, np.ndarray]        #: block length → accuracy per block index (13, 14)
    sampled_sequences: np.ndarray                #: (n, T) the sampled sequences themselves


def measure(params: Mapping[str, np.ndarray], config: Config, n_eval: int = 2000) -> Measurements:
    """Compute every measurement (about 10 s on one core)."""
    sampled = analysis.sampled_sequences(params, config)
    fresh, _ = analysis.fresh_sequences(config, 500, 3)
    weights = analysis.attention_weights(params, config, fresh)  # one forward pass for the three analyses of fresh
    return Measurements(
        sampled_scores=analysis.pattern_scores(params, config, sampled),
        fresh_scores=analysis.pattern_scores(params, config, fresh, weights),
        entropy=analysis.normalised_entropy(params, config, fresh, weights),
        l0h0_profile=analysis.position_profile(params, config, 0, 0, fresh, weights),
        ablation=analysis.ablation(params, config, n_eval),
        long_blocks={L: analysis.accuracy_by_block_index(params, config, L) for L in (13, 14)},
        sampled_sequences=sampled,
    )


@dataclass(frozen=True)
class Finding:
    """A sentence about the trained model and the predicate that makes it true."""

    name: str
    sentence: str
    holds: Callable[[Measurements], bool]


def _accuracy(m: Measurements, ablated: str) -> float:
    return m.ablation[ablated]["predictable_accuracy"]


def _previous_token_head(m: Measurements) -> bool:
    previous, bos = m.l0h0_profile["previous"], m.l0h0_profile["bos"]
    return bool(np.all(previous[2:14] >= 0.9) and np.all(bos[14:31] >= 0.8) and np.all(previous[14:31] <= 0.1))


def _induction_head(m: Measurements) -> bool:
    return all(s["induction"][1, 0] >= 0.9 and s["duplicate"][1, 0] <= 0.1 and s["previous"][1, 0] <= 0.1
               for s in (m.sampled_scores, m.fresh_scores))


def _diffuse_heads(m: Measurements) -> bool:
    others = [m.fresh_scores[p][layer, 1] for p in analysis.PATTERNS for layer in (0, 1)]
    return bool(m.entropy[0, 1] >= 0.9 and m.entropy[1, 1] >= 0.9 and max(others) <= 0.2
                and m.entropy[0, 0] <= 0.3 and m.entropy[1, 0] <= 0.3)


def _ablation(m: Measurements) -> bool:
    return (_accuracy(m, "none") >= 0.999 and _accuracy(m, "L1H0") < 0.1 and _accuracy(m, "L0H0") < 0.3
            and _accuracy(m, "L0H1") > 0.99 and _accuracy(m, "L1H1") > 0.99 and _accuracy(m, "L0H1+L1H1") > 0.99)


def _first_block_helper(m: Measurements) -> bool:
    base = m.ablation["none"]["unpredictable_loss"]
    return (m.ablation["L1H1"]["unpredictable_loss"] - base > 0.05
            and m.ablation["L0H1"]["unpredictable_loss"] - base < m.ablation["L1H1"]["unpredictable_loss"] - base)


def _long_blocks(m: Measurements) -> bool:
    ok13 = m.long_blocks[13]
    ok14 = m.long_blocks[14]
    return (ok13[12] <= 0.05 and np.all(ok13[:12] >= 0.95)
            and np.all(ok14[12:] <= 0.05) and np.all(ok14[:12] >= 0.95))


def _samples_repeat(m: Measurements) -> bool:
    """Every sampled sequence ends periodic: its last 8 tokens repeat with some period ≤ 12."""
    tail_periodic = []
    for row in m.sampled_sequences:
        body = row[1:]
        tail_periodic.append(any(np.array_equal(body[-8:], body[-8 - p:len(body) - p]) for p in range(1, 13)))
    return bool(np.mean(tail_periodic) >= 0.95)


FINDINGS: tuple[Finding, ...] = (
    Finding("previous_token_head",
            "L0H0 is a previous-token head, but only at positions 2–13: there it puts at least 0.9 of its weight "
            "on the previous token; from position 14 to 30 it puts at least 0.8 on BOS and at most 0.1 on the "
            "previous token. Positions ≤ 13 are exactly where a first block of at most 12 tokens and the token "
            "after it can lie.",
            _previous_token_head),
    Finding("induction_head",
            "L1H0 is an induction head: at positions whose token occurred before, at least 0.9 of its weight "
            "goes to the positions right after earlier occurrences of that token (the answer), at most 0.1 to "
            "the earlier occurrences themselves and at most 0.1 to the previous token — on sequences the model "
            "sampled itself as on fresh task sequences.",
            _induction_head),
    Finding("diffuse_heads",
            "L0H1 and L1H1 attend almost uniformly (mean entropy at least 0.9 of the ceiling ln(t + 1), no "
            "pattern above 0.2), unlike L0H0 and L1H0 (at most 0.3 of the ceiling).",
            _diffuse_heads),
    Finding("ablation",
            "Zeroing L1H0 drops next-token accuracy on the predictable targets from 100 % to below 10 %, zeroing "
            "L0H0 to below 30 %; zeroing L0H1, L1H1 or both leaves it above 99 %.",
            _ablation),
    Finding("first_block_helper",
            "L1H1 helps where nothing is predictable: zeroing it raises the loss on the first block's targets by "
            "more than 0.05 nats, more than zeroing L0H1 does (a guess: it averages the tokens seen so far, "
            "which tells which tokens are still unused; not checked further).",
            _first_block_helper),
    Finding("long_blocks",
            "Blocks longer than in training expose the position limit: with L = 13 the model fails (≤ 5 % "
            "accuracy) exactly on the inputs equal to the block's 13th token, whose successor sits at position "
            "14, and stays ≥ 95 % on the others; with L = 14 it fails on the 13th and 14th.",
            _long_blocks),
    Finding("samples_repeat",
            "Sampled at temperature 1 from BOS and two tokens, the model invents a block and then repeats it: at "
            "least 95 % of its samples end periodic (the last 8 tokens repeat with a period of at most 12).",
            _samples_repeat),
)


def false_findings(measurements: Measurements) -> list[str]:
    """Names of the findings whose predicate is False (empty when every sentence is true)."""
    return [finding.name for finding in FINDINGS if not finding.holds(measurements)]
