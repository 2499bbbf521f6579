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
from .model import Config, forward, generate
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
    :func:`~autograder.assignments.a09_tiny_gpt.train.evaluate` (fresh evaluation sequences).
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


def sampled_sequences(params: Mapping[str, np.ndarray], config: Config, n_sequences: int = 200,
                      seed: int = 4, temperature: float = 1.0) -> np.ndarray:
    """Sequences the model writes itself: BOS and two distinct random tokens, then sampled to ``block_size``.

    The uniform numbers come from ``seed``; returns (n_sequences, block_size) token ids.
    """
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_sequences):
        prompt = np.concatenate([[data.BOS], rng.choice(np.arange(1, config.vocab_size), 2, replace=False)])
        n_new = config.block_size - prompt.size
        out.append(generate(params, config, prompt, n_new, temperature=temperature, uniforms=rng.random(n_new)))
    return np.array(out)


def position_profile(params: Mapping[str, np.ndarray], config: Config, layer: int, head: int,
                     tokens: np.ndarray) -> dict[str, np.ndarray]:
    """One head's mean weight, per query position t, on the previous token (t − 1) and on BOS: name → (T,)."""
    weights = forward(params, tokens, config).weights[layer][:, head]          # (n, T, T)
    T = tokens.shape[1]
    t = np.arange(T)
    previous = np.r_[np.nan, weights[:, t[1:], t[1:] - 1].mean(axis=0)]
    return {"previous": previous, "bos": weights[:, :, 0].mean(axis=0)}


def normalised_entropy(params: Mapping[str, np.ndarray], config: Config, tokens: np.ndarray) -> np.ndarray:
    """Mean over rows t ≥ 2 of H_t / ln(t + 1) (1 = uniform over the prefix), per layer and head: (layers, heads)."""
    weights = np.stack(forward(params, tokens, config).weights, axis=1)         # (n, layers, heads, T, T)
    safe = np.where(weights > 0, weights, 1.0)
    H = -(weights * np.log(safe)).sum(axis=-1)[..., 2:]
    return (H / np.log(np.arange(2, tokens.shape[1]) + 1.0)).mean(axis=(0, 3))


def accuracy_by_block_index(params: Mapping[str, np.ndarray], config: Config, block_length: int,
                            n_sequences: int = 300, seed: int = 9) -> np.ndarray:
    """Accuracy on the predictable targets of blocks of one length, split by the block index of the input token.

    Entry b is the accuracy on the targets whose input token is the block's (b+1)-th token, i.e. whose
    answer sits right after position b + 1 in the first block. Used for blocks longer than in training.
    """
    rng = np.random.default_rng(seed)
    tokens, lengths = data.repeated_blocks(n_sequences, config.block_size + 1, config.vocab_size,
                                           (block_length, block_length), rng)
    logits = forward(params, tokens[:, :-1], config).logits
    correct = logits.argmax(axis=-1) == tokens[:, 1:]
    predictable = data.predictable_targets(lengths, config.block_size + 1)
    index = (np.arange(config.block_size) - 1) % block_length
    return np.array([correct[predictable & (index[None, :] == b)].mean() for b in range(block_length)])
