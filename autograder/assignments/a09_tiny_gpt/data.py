"""Generated training data for the tiny GPT: repeated random tokens, which only attention can continue.

A sequence is ``BOS`` followed by a block of ``L`` **distinct** random
content tokens repeated until the sequence is ``T`` tokens long::

    BOS  a₁ a₂ … a_L  a₁ a₂ … a_L  a₁ …        (L drawn per sequence)

The first block is unpredictable (any unused token may come next), and so is
the first token of the second block (the model cannot know that the block
has ended). From then on every token is determined: the current token
appeared exactly once before, one block back, and the next token is the one
that followed it there. Predicting it needs attention to *where the current
token occurred before* and *what came after it*, which is what an induction
head does (Olsson et al. 2022, "In-context Learning and Induction Heads",
which uses repeated random tokens for the same reason); the position of the
answer moves with L, so a fixed positional offset cannot do it.

Token 0 is ``BOS``; content tokens are 1 … vocab_size − 1.
"""

from __future__ import annotations

import numpy as np

from autograder.assignments.validation import require_positive_int

BOS = 0


def repeated_blocks(n_sequences: int, T: int, vocab_size: int, block_lengths: tuple[int, int],
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``n_sequences`` sequences of repeated random blocks.

    Parameters
    ----------
    n_sequences : int
        Number of sequences, ≥ 1.
    T : int
        Tokens per sequence, including BOS; ≥ 2.
    vocab_size : int
        Token ids 0 … vocab_size − 1; the block's tokens are drawn without
        replacement from 1 … vocab_size − 1.
    block_lengths : (int, int)
        Smallest and largest block length L (inclusive), 1 ≤ L_min ≤ L_max ≤ vocab_size − 1.
    rng : numpy.random.Generator

    Returns
    -------
    tokens : numpy.ndarray of int64, shape (n_sequences, T)
    lengths : numpy.ndarray of int64, shape (n_sequences,)
        Each sequence's block length L.

    Raises
    ------
    ValueError
        If a size is out of range.
    """
    n_sequences = require_positive_int("n_sequences", n_sequences)
    T = require_positive_int("T", T)
    vocab_size = require_positive_int("vocab_size", vocab_size)
    low, high = (require_positive_int("block_lengths[0]", block_lengths[0]),
                 require_positive_int("block_lengths[1]", block_lengths[1]))
    if T < 2 or not low <= high <= vocab_size - 1:
        raise ValueError(f"need T >= 2 and 1 <= L_min <= L_max <= vocab_size - 1 = {vocab_size - 1}; received "
                         f"T={T}, block_lengths={block_lengths}")
    lengths = rng.integers(low, high + 1, size=n_sequences)
    # a random permutation of the content tokens per sequence; its first L entries are the block
    blocks = np.argsort(rng.random((n_sequences, vocab_size - 1)), axis=1) + 1
    positions = np.arange(T - 1)
    tokens = np.empty((n_sequences, T), dtype=np.int64)
    tokens[:, 0] = BOS
    tokens[:, 1:] = np.take_along_axis(blocks, positions[None, :] % lengths[:, None], axis=1)
    return tokens, lengths.astype(np.int64)


def predictable_targets(lengths, T: int) -> np.ndarray:
    """Which next-token targets a model can know: (n_sequences, T − 1) bool, aligned with ``tokens[:, 1:]``.

    Target j is ``tokens[:, j + 1]``, predicted from ``tokens[:, :j + 1]``.
    With the block at positions 1 … L, target j is predictable when the
    input token at position j is a repeat, i.e. j ≥ L + 1.

    Parameters
    ----------
    lengths : array_like of int, shape (n_sequences,)
        Block lengths from :func:`repeated_blocks`.
    T : int
        Tokens per sequence.

    Returns
    -------
    numpy.ndarray of bool, shape (n_sequences, T − 1)
    """
    lengths = np.asarray(lengths)
    return np.arange(T - 1)[None, :] >= lengths[:, None] + 1


def seen_before(tokens) -> np.ndarray:
    """(n, T − 1) bool: input token j (for target j) occurred earlier in its sequence, after BOS.

    The task's rule for predictability, computed from the tokens alone; for
    sequences of :func:`repeated_blocks` it equals :func:`predictable_targets`.
    """
    tokens = np.asarray(tokens)
    inputs = tokens[:, :-1]
    earlier = (inputs[:, :, None] == inputs[:, None, :]) & np.tri(inputs.shape[1], k=-1, dtype=bool)
    earlier[:, :, 0] = False       # BOS at position 0 does not count
    return earlier.any(axis=-1) & (inputs != BOS)
