"""What the trained tiny GPT's heads do: attention-pattern scores per head and head ablations.

On sequences of repeated blocks (block length L, block at positions 1 … L),
for a query at position t the candidate patterns are

* **previous token**: attend to t − 1;
* **duplicate token**: attend to t − L, the earlier occurrence of the
  current token (defined for t ≥ L + 1);
* **induction**: attend to t − L + 1, the token that *followed* the earlier
  occurrence of the current token — the answer itself (Olsson et al. 2022);
* **BOS**: attend to position 0; **self**: attend to t.

A head's score for a pattern is its mean attention weight on that key, over
the query positions where the pattern is defined (t ≥ L + 1 for the repeat
patterns, t ≥ 1 for the others) and over many sequences. The ablation
zeroes a head's output (``head_mask``) and measures next-token accuracy on
the predictable targets again.
"""

from __future__ import annotations

import itertools
from typing import Mapping

import numpy as np

from . import data
from .model import Config, forward
from .train import BLOCK_LENGTHS, evaluate

PATTERNS = ("previous", "duplicate", "induction", "bos", "self")


def fresh_sequences(config: Config, n_sequences: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n_sequences`` evaluation sequences of ``block_size`` tokens (inputs only) and their block lengths."""
    rng = np.random.default_rng(seed)
    tokens, lengths = data.repeated_blocks(n_sequences, config.block_size, config.vocab_size, BLOCK_LENGTHS, rng)
    return tokens, lengths


def pattern_keys(tokens: np.ndarray) -> dict[str, np.ndarray]:
    """For each pattern, which (query t, key j) pairs it names: pattern → bool (n, T, T), and → where it is defined.

    * previous: j = t − 1; bos: j = 0; self: j = t (defined for t ≥ 1);
    * duplicate: j < t, j ≥ 1 and tokens[j] = tokens[t] (every earlier occurrence);
    * induction: 1 ≤ j ≤ t and tokens[j − 1] = tokens[t], j − 1 ≥ 1 (every position right after an
      earlier occurrence of the current token).

    The repeat patterns are defined for queries whose token occurred before (t ≥ L + 1).
    Returns the masks and a (n, T) bool "defined" array per pattern.
    """
    n, T = tokens.shape
    t = np.arange(T)
    same = tokens[:, :, None] == tokens[:, None, :]                      # (n, t, j): tokens[j] == tokens[t]
    earlier = (t[None, :] < t[:, None]) & (t[None, :] >= 1)               # (t, j): 1 <= j < t
    duplicate = same & earlier
    after = np.zeros_like(same)
    after[:, :, 1:] = same[:, :, :-1] & ((t[None, 1:] - 1 < t[:, None]) & (t[None, 1:] - 1 >= 1))  # j - 1 earlier
    repeat = duplicate.any(axis=-1)
    eye = np.broadcast_to(np.eye(T, dtype=bool), (n, T, T))
    previous = np.broadcast_to(np.eye(T, k=-1, dtype=bool), (n, T, T))
    bos = np.zeros((n, T, T), dtype=bool)
    bos[:, :, 0] = True
    from_one = np.broadcast_to(t >= 1, (n, T))
    masks = {"previous": previous, "duplicate": duplicate, "induction": after, "bos": bos, "self": eye}
    defined = {"previous": from_one, "duplicate": repeat, "induction": repeat, "bos": from_one, "self": from_one}
    return {name: (masks[name], defined[name]) for name in PATTERNS}


def pattern_scores(params: Mapping[str, np.ndarray], config: Config, tokens: np.ndarray) -> dict[str, np.ndarray]:
    """Mean attention mass on each pattern's keys, per layer and head: pattern → (n_layers, n_heads).

    The mean is over the query positions where the pattern is defined
    (:func:`pattern_keys`) in every sequence of ``tokens`` (n, T).
    """
    weights = np.stack(forward(params, tokens, config).weights, axis=1)   # (n, layers, heads, T, T)
    scores = {}
    for name, (mask, defined) in pattern_keys(tokens).items():
        mass = (weights * mask[:, None, None]).sum(axis=-1)              # (n, layers, heads, T)
        scores[name] = (mass * defined[:, None, None]).sum(axis=(0, 3)) / defined.sum()
    return scores


def ablation(params: Mapping[str, np.ndarray], config: Config, n_sequences: int = 2000) -> dict[str, dict]:
    """Accuracy on the predictable targets with each head, and each pair of heads, zeroed.

    Returns ``{"none": scores, "L0H1": scores, …, "L0H0+L1H1": scores, …}`` with the scores of
    :func:`~autograder.a09_tiny_gpt.train.evaluate` (fresh evaluation sequences).
    """
    heads = [(layer, head) for layer in range(config.n_layers) for head in range(config.n_heads)]
    results = {"none": evaluate(params, config, n_sequences)}
    for k in (1, 2):
        for chosen in itertools.combinations(heads, k):
            mask = np.ones((config.n_layers, config.n_heads))
            for layer, head in chosen:
                mask[layer, head] = 0.0
            name = "+".join(f"L{layer}H{head}" for layer, head in chosen)
            results[name] = evaluate(params, config, n_sequences, head_mask=mask)
    return results
