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
from .model import Config, check_parameters, decoder_block, forward, layer_norm, sample_token
from .train import BLOCK_LENGTHS, evaluation_chunks, evaluation_scores, evaluation_sequences

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


def attention_weights(params: Mapping[str, np.ndarray], config: Config, tokens: np.ndarray) -> np.ndarray:
    """Every head's attention weights on ``tokens`` (n, T): (n, layers, heads, T, T), from one forward pass.

    The functions below that read the weights take them as ``weights``, so that several analyses of the
    same sequences share one forward pass.
    """
    return np.stack(forward(params, tokens, config).weights, axis=1)


def pattern_scores(params: Mapping[str, np.ndarray], config: Config, tokens: np.ndarray,
                   weights: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Mean attention mass on each pattern's keys, per layer and head: pattern → (n_layers, n_heads).

    The mean is over the query positions where the pattern is defined
    (:func:`pattern_keys`) in every sequence of ``tokens`` (n, T). ``weights``, if given, is
    :func:`attention_weights` of these tokens (else it is computed).
    """
    if weights is None:
        weights = attention_weights(params, config, tokens)             # (n, layers, heads, T, T)
    scores = {}
    for name, (mask, defined) in pattern_keys(tokens).items():
        mass = (weights * mask[:, None, None]).sum(axis=-1)              # (n, layers, heads, T)
        scores[name] = (mass * defined[:, None, None]).sum(axis=(0, 3)) / defined.sum()
    return scores


def ablation(params: Mapping[str, np.ndarray], config: Config, n_sequences: int = 2000) -> dict[str, dict]:
    """Accuracy on the predictable targets with each head, and each pair of heads, zeroed.

    Returns ``{"none": scores, "L0H1": scores, …, "L0H0+L1H1": scores, …}`` with the scores of
    :func:`~autograder.assignments.a09_tiny_gpt.train.evaluate` (fresh evaluation sequences), bit for bit:
    the same sequences, in the same chunks, through the same blocks. Ablations that zero the same heads of
    the first layers share those layers' outputs (:func:`_ablated_logits`).
    """
    heads = [(layer, head) for layer in range(config.n_layers) for head in range(config.n_heads)]
    masks: dict[str, np.ndarray | None] = {"none": None}
    for k in (1, 2):
        for chosen in itertools.combinations(heads, k):
            mask = np.ones((config.n_layers, config.n_heads))
            for layer, head in chosen:
                mask[layer, head] = 0.0
            masks["+".join(f"L{layer}H{head}" for layer, head in chosen)] = mask
    tokens, lengths = evaluation_sequences(config, n_sequences)
    chunks = [_ablated_logits(params, config, chunk, masks) for chunk in evaluation_chunks(tokens)]
    return {name: evaluation_scores(np.concatenate([logits[name] for logits in chunks]), tokens, lengths, config)
            for name in masks}


def _ablated_logits(params: Mapping[str, np.ndarray], config: Config, tokens: np.ndarray,
                    masks: Mapping[str, np.ndarray | None]) -> dict[str, np.ndarray]:
    """``forward(params, tokens, config, head_mask=mask).logits`` for every mask, computed block by block.

    Each block runs once per distinct set of head masks up to it: the first layers' outputs depend only on
    their own rows of the mask. A row of ones is the same as no mask (multiplying by 1.0 changes no number).
    """
    params = check_parameters(params, config)
    tokens = np.asarray(tokens).astype(np.int64)
    states = {(): params["W_emb"][tokens] + params["W_pos"][:tokens.shape[-1]]}
    paths = {name: () for name in masks}
    for layer in range(config.n_layers):
        rows = {}
        for name, mask in masks.items():
            row = None if mask is None else np.asarray(mask, dtype=float)[layer]
            path = (*paths[name], None if row is None or np.all(row == 1.0) else tuple(row.tolist()))
            rows.setdefault(path, (paths[name], row))
            paths[name] = path
        states = {path: decoder_block(states[before], params, layer, config, None, row)[0]
                  for path, (before, row) in rows.items()}
    logits = {}
    for name in masks:
        h = layer_norm(states[paths[name]], params["ln_f.gain"], params["ln_f.bias"], config.ln_eps)
        logits[name] = h @ params["W_out"]
    return logits


def sampled_sequences(params: Mapping[str, np.ndarray], config: Config, n_sequences: int = 200,
                      seed: int = 4, temperature: float = 1.0) -> np.ndarray:
    """Sequences the model writes itself: BOS and two distinct random tokens, then sampled to ``block_size``.

    The uniform numbers come from ``seed``; returns (n_sequences, block_size) token ids. Each row is
    ``generate(params, config, prompt, n_new, temperature=temperature, uniforms=...)`` of its own prompt and
    uniform numbers, drawn in the order one sequence after the other would draw them; the sequences are
    decoded side by side (one batched forward pass with the KV cache per position, each row's token by
    :func:`~autograder.assignments.a09_tiny_gpt.model.sample_token`), which computes each row's logits with the
    same products as one sequence alone (tests/test_tiny_gpt_findings.py compares them with ``generate``).
    """
    rng = np.random.default_rng(seed)
    prompts, uniforms = [], []
    for _ in range(n_sequences):
        prompts.append(np.concatenate([[data.BOS], rng.choice(np.arange(1, config.vocab_size), 2, replace=False)]))
        uniforms.append(rng.random(config.block_size - prompts[-1].size))
    sequences = np.array(prompts).astype(np.int64)
    new, cache = sequences, None
    for k in range(config.block_size - sequences.shape[1]):
        result = forward(params, new, config, cache=cache)
        cache = result.cache
        tokens = [sample_token(logits, temperature, u[k]) for logits, u in zip(result.logits[:, -1], uniforms)]
        sequences = np.concatenate([sequences, np.array(tokens, dtype=np.int64)[:, None]], axis=1)
        new = sequences[:, -1:]
    return sequences


def position_profile(params: Mapping[str, np.ndarray], config: Config, layer: int, head: int,
                     tokens: np.ndarray, weights: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """One head's mean weight, per query position t, on the previous token (t − 1) and on BOS: name → (T,).

    ``weights``, if given, is :func:`attention_weights` of ``tokens``.
    """
    if weights is None:
        weights = attention_weights(params, config, tokens)
    weights = weights[:, layer, head]                                           # (n, T, T)
    T = tokens.shape[1]
    t = np.arange(T)
    previous = np.r_[np.nan, weights[:, t[1:], t[1:] - 1].mean(axis=0)]
    return {"previous": previous, "bos": weights[:, :, 0].mean(axis=0)}


def normalised_entropy(params: Mapping[str, np.ndarray], config: Config, tokens: np.ndarray,
                       weights: np.ndarray | None = None) -> np.ndarray:
    """Mean over rows t ≥ 2 of H_t / ln(t + 1) (1 = uniform over the prefix), per layer and head: (layers, heads).

    ``weights``, if given, is :func:`attention_weights` of ``tokens``.
    """
    if weights is None:
        weights = attention_weights(params, config, tokens)                     # (n, layers, heads, T, T)
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
