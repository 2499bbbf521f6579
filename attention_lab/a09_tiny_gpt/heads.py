"""What the tiny GPT's heads do, measured through any ``model_forward`` of the learner's API.

The head explorer (:mod:`.visual`) runs on the learner's own ``model_forward(params, tokens, config, caches=None)
-> (logits, caches)``, which returns logits and, per layer, the KV cache ``(K, V)`` of shape
(n_heads, T, d_head) — but no attention weights. They are recovered without any other API:

* **K** of layer l is the cache the forward pass returns for layer l;
* **Q** of layer l is that same cache of a second forward pass in which layer l's ``W_k`` is replaced by its
  ``W_q``: the cache then holds LN₁(x_l) W_q split into heads. Layers below l are unchanged (they do not read
  layer l's weights), so x_l is the same; what the substitution changes above layer l is not read;
* the weights are softmax(Q Kᵀ / √d_head) with the causal mask (Vaswani et al. 2017, eq. 1), as
  ``reference.attention_weights`` computes them — ``tests/test_tiny_gpt_visual.py`` checks that they are equal.

So n_layers + 1 forward passes give every head's weights on one sequence: the map shows the learner's embeddings,
LayerNorm, blocks below and projections, and the explorer's softmax of their Q and K.

A head is **zeroed** by zeroing its d_head rows of ``W_o`` (its block of Concat(heads) W_o), which removes its
output exactly as a head mask would; accuracy is counted on the *predictable* targets (the current token occurred
before, one block back), where the trained model is right every time.

The sequences are the training task's, drawn here as ``autograder/assignments/a09_tiny_gpt/data.py`` draws them
(this package never imports the grader; a test checks that the two agree), and the patterns, scores and thresholds
are those of the grader's ``analysis.py`` and ``findings.py`` (also checked by a test): the description of a head
says only what these measurements show.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

BOS = 0  # token 0 begins every sequence; content tokens are 1 … vocab_size − 1
#: The block lengths L of the training task (``training.json``'s ``task.block_lengths``).
BLOCK_LENGTHS = (3, 12)
#: The fresh sequences the measurements and the ablation use: few enough that the learner's model runs on them in
#: about a second, enough for about 700 predictable targets.
N_MEASURE = 32
MEASURE_SEED = 2026
#: The attention patterns of ``analysis.PATTERNS``, in its order.
PATTERNS = ("previous", "duplicate", "induction", "bos", "self")
PATTERN_NAMES = {"previous": "previous token", "duplicate": "earlier occurrences", "induction": "after earlier "
                 "occurrences", "bos": "BOS", "self": "itself"}

# The thresholds of findings.py's sentences (tests/test_tiny_gpt_visual.py checks the descriptions against them).
PREVIOUS_MIN = 0.9       # a previous-token position: at least this weight on t − 1
BOS_MIN = 0.8            # a BOS position: at least this weight on position 0 …
OTHER_MAX = 0.1          # … and at most this on the previous token; induction: at most this on duplicate/previous
INDUCTION_MIN = 0.9      # an induction head: at least this weight after earlier occurrences of the current token
DIFFUSE_ENTROPY_MIN = 0.9  # almost uniform: mean entropy at least this fraction of the ceiling ln(t + 1) …
DIFFUSE_PATTERN_MAX = 0.2  # … and no pattern above this
FOCUSED_ENTROPY_MAX = 0.3  # focused: mean entropy at most this fraction of the ceiling


class ModelError(ValueError):
    """A ``model_forward`` returned something other than (logits, caches) of the learner's API; says what."""


def repeated_blocks(n_sequences: int, T: int, vocab_size: int, block_lengths: tuple[int, int],
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Sequences of the training task: BOS, then a block of L distinct random tokens repeated to T tokens.

    The same draws as the grader's ``data.repeated_blocks`` for the same generator state.

    Parameters
    ----------
    n_sequences : int
        ≥ 1.
    T : int
        Tokens per sequence, BOS included, ≥ 2.
    vocab_size : int
        Content tokens are drawn without replacement from 1 … vocab_size − 1.
    block_lengths : (int, int)
        Smallest and largest L, inclusive, 1 ≤ L_min ≤ L_max ≤ vocab_size − 1.
    rng : numpy.random.Generator

    Returns
    -------
    tokens : numpy.ndarray of int64, shape (n_sequences, T)
    lengths : numpy.ndarray of int64, shape (n_sequences,)

    Raises
    ------
    ValueError
        If a size is out of range (the message names it).
    """
    low, high = block_lengths
    if n_sequences < 1 or T < 2 or not 1 <= low <= high <= vocab_size - 1:
        raise ValueError(f"need n_sequences >= 1, T >= 2 and 1 <= L_min <= L_max <= vocab_size - 1 = "
                         f"{vocab_size - 1}; received n_sequences={n_sequences}, T={T}, block_lengths={block_lengths}")
    lengths = rng.integers(low, high + 1, size=n_sequences)
    blocks = np.argsort(rng.random((n_sequences, vocab_size - 1)), axis=1) + 1
    tokens = np.empty((n_sequences, T), dtype=np.int64)
    tokens[:, 0] = BOS
    tokens[:, 1:] = np.take_along_axis(blocks, np.arange(T - 1)[None, :] % lengths[:, None], axis=1)
    return tokens, lengths.astype(np.int64)


def predictable_targets(lengths, T: int) -> np.ndarray:
    """(n, T − 1) bool: target j (token j + 1, predicted at position j) is determined, i.e. j ≥ L + 1."""
    return np.arange(T - 1)[None, :] >= np.asarray(lengths)[:, None] + 1


def softmax_causal(Q: np.ndarray, K: np.ndarray) -> np.ndarray:
    """Causal scaled dot-product attention weights softmax(Q Kᵀ / √d_head), future keys masked.

    Parameters
    ----------
    Q, K : numpy.ndarray, shape (n_heads, T, d_head), float

    Returns
    -------
    numpy.ndarray of float64, shape (n_heads, T, T)
        Rows (query positions) sum to 1; zero above the diagonal.
    """
    T = Q.shape[-2]
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    scores = np.where(np.tri(T, dtype=bool), scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    return weights / weights.sum(axis=-1, keepdims=True)


def d_head_of(params: Mapping[str, np.ndarray], config: Mapping) -> int:
    """d_model / n_heads, read from ``W_emb`` and ``config["n_heads"]``."""
    return params["W_emb"].shape[1] // int(config["n_heads"])


def with_substitution(params: Mapping[str, np.ndarray], replace: Mapping[str, np.ndarray]) -> dict:
    """A fresh copy of every parameter array, with the arrays of ``replace`` in place of theirs.

    Copies, so that a ``model_forward`` that changes its parameters in place cannot change the explorer's.
    """
    return {name: np.array(replace.get(name, value), dtype=float, copy=True) for name, value in params.items()}


def zeroed_head(params: Mapping[str, np.ndarray], config: Mapping, layer: int, head: int) -> dict:
    """Parameters with head ``head`` of layer ``layer`` removed: its d_head rows of that layer's ``W_o`` zeroed.

    Concat(heads) W_o = Σ_h head_h W_o[h d_head:(h + 1) d_head], so zeroing those rows removes head h's output and
    nothing else — what the grader's ``head_mask`` does (a test compares them).
    """
    d_head = d_head_of(params, config)
    W_o = np.array(params[f"block{layer}.W_o"], dtype=float, copy=True)
    W_o[head * d_head:(head + 1) * d_head] = 0.0
    return with_substitution(params, {f"block{layer}.W_o": W_o})


def checked_output(result, tokens: np.ndarray, config: Mapping, d_head: int, name: str) -> tuple[np.ndarray, list]:
    """``(logits, caches)`` returned by ``model_forward``, checked against the learner's API.

    Raises
    ------
    ModelError
        If the result is not a pair, the logits are not finite (T, vocab_size), or the caches are not n_layers
        pairs (K, V) of shape (n_heads, T, d_head); the message says what was expected and what came.
    """
    T, vocab, layers, heads = len(tokens), int(config["vocab_size"]), int(config["n_layers"]), int(config["n_heads"])
    call = f"{name}(params, tokens of shape ({T},), config)"
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise ModelError(f"{call} returned {type(result).__name__}; expected a pair (logits, caches)")
    logits, caches = result
    logits = np.asarray(logits) if not isinstance(logits, np.ndarray) else logits
    if logits.shape != (T, vocab) or logits.dtype.kind not in "fiu":
        raise ModelError(f"{call} returned logits of shape {logits.shape}, dtype {logits.dtype}; expected real "
                         f"numbers of shape ({T}, {vocab})")
    if not np.isfinite(logits).all():
        raise ModelError(f"{call} returned NaN or infinite logits")
    if not isinstance(caches, (tuple, list)) or len(caches) != layers:
        got = f"{len(caches)} caches" if isinstance(caches, (tuple, list)) else type(caches).__name__
        raise ModelError(f"{call} returned {got}; expected one cache (K, V) per layer, {layers} in all")
    expected = (heads, T, d_head)
    for layer, cache in enumerate(caches):
        K = np.asarray(cache[0]) if isinstance(cache, (tuple, list)) and len(cache) == 2 else None
        if K is None or K.shape != expected or not np.isfinite(K).all():
            got = f"K of shape {K.shape}" if K is not None else type(cache).__name__
            raise ModelError(f"{call}: the cache of layer {layer} is {got}; expected (K, V), each of shape "
                             f"(n_heads, T, d_head) = {expected}, finite")
    return logits.astype(float), caches


def forward_calls(model_forward: Callable, params: Mapping[str, np.ndarray], config: Mapping,
                  sequences: np.ndarray, name: str = "model_forward") -> dict:
    """Every forward pass the explorer needs on ``sequences``, each sequence one call of ``model_forward``.

    Per sequence: the plain pass (logits; K of every layer), one pass per layer with that layer's W_k replaced by
    its W_q (Q of that layer, see the module's docstring) and one per head with that head zeroed
    (:func:`zeroed_head`).

    Parameters
    ----------
    model_forward : callable
        ``model_forward(params, tokens (T,) int, config) -> (logits (T, vocab_size), caches)``.
    params : mapping of str to numpy.ndarray
    config : mapping
        ``vocab_size``, ``block_size``, ``n_heads``, ``n_layers``, ``ln_eps``.
    sequences : numpy.ndarray of int, shape (n, T)
        The model's inputs, T ≤ block_size.
    name : str
        The function's name for messages.

    Returns
    -------
    dict
        ``"weights"``: (n, n_layers, n_heads, T, T) float64, rows = query positions;
        ``"predictions"``: (n, 1 + n_layers · n_heads, T) int argmax of the logits, first with nothing zeroed,
        then with head (layer, head) zeroed in the order L0H0, L0H1, …

    Raises
    ------
    ModelError
        If ``model_forward`` returns something other than its API says (what it raises is the caller's to catch).
    """
    layers, heads = int(config["n_layers"]), int(config["n_heads"])
    d_head = d_head_of(params, config)
    substituted = [with_substitution(params, {f"block{layer}.W_k": params[f"block{layer}.W_q"]})
                   for layer in range(layers)]
    zeroed = [zeroed_head(params, config, layer, head) for layer in range(layers) for head in range(heads)]
    n, T = sequences.shape
    weights = np.empty((n, layers, heads, T, T))
    predictions = np.empty((n, 1 + len(zeroed), T), dtype=np.int64)
    for i, tokens in enumerate(sequences):
        logits, caches = checked_output(model_forward(with_substitution(params, {}), tokens.copy(), dict(config)),
                                        tokens, config, d_head, name)
        predictions[i, 0] = logits.argmax(axis=-1)
        for layer in range(layers):
            _, q_caches = checked_output(model_forward(with_substitution(substituted[layer], {}), tokens.copy(),
                                                       dict(config)), tokens, config, d_head, name)
            weights[i, layer] = softmax_causal(np.asarray(q_caches[layer][0], dtype=float),
                                               np.asarray(caches[layer][0], dtype=float))
        for k, changed in enumerate(zeroed):
            logits, _ = checked_output(model_forward(with_substitution(changed, {}), tokens.copy(), dict(config)),
                                       tokens, config, d_head, name)
            predictions[i, 1 + k] = logits.argmax(axis=-1)
    return {"weights": weights, "predictions": predictions}


def pattern_keys(tokens: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """For each pattern, which (query t, key j) pairs it names, and where it is defined (as ``analysis.pattern_keys``).

    previous: j = t − 1; bos: j = 0; self: j = t (defined for t ≥ 1); duplicate: 1 ≤ j < t with the same token;
    induction: j − 1 ≥ 1 an earlier occurrence of the current token (j is right after it). The repeat patterns are
    defined where the current token occurred before.

    Parameters
    ----------
    tokens : numpy.ndarray of int, shape (n, T)

    Returns
    -------
    dict of str to (numpy.ndarray of bool (n, T, T), numpy.ndarray of bool (n, T))
    """
    n, T = tokens.shape
    t = np.arange(T)
    same = tokens[:, :, None] == tokens[:, None, :]
    duplicate = same & (t[None, :] < t[:, None]) & (t[None, :] >= 1)
    after = np.zeros_like(same)
    after[:, :, 1:] = same[:, :, :-1] & ((t[None, 1:] - 1 < t[:, None]) & (t[None, 1:] - 1 >= 1))
    repeat = duplicate.any(axis=-1)
    from_one = np.broadcast_to(t >= 1, (n, T))
    bos = np.zeros((n, T, T), dtype=bool)
    bos[:, :, 0] = True
    masks = {"previous": np.broadcast_to(np.eye(T, k=-1, dtype=bool), (n, T, T)), "duplicate": duplicate,
             "induction": after, "bos": bos, "self": np.broadcast_to(np.eye(T, dtype=bool), (n, T, T))}
    defined = {"previous": from_one, "duplicate": repeat, "induction": repeat, "bos": from_one, "self": from_one}
    return {name: (masks[name], defined[name]) for name in PATTERNS}


@dataclass(frozen=True)
class HeadMeasures:
    """What the explorer measures of every head on the :data:`N_MEASURE` fresh sequences.

    Attributes
    ----------
    scores : dict of str to numpy.ndarray (n_layers, n_heads)
        Pattern → mean weight on the pattern's keys over the queries where it is defined (``analysis.pattern_scores``).
    entropy : numpy.ndarray (n_layers, n_heads)
        Mean over rows t ≥ 2 of H_t / ln(t + 1), entropy in nats (1 = uniform over the prefix).
    previous_profile, bos_profile : numpy.ndarray (n_layers, n_heads, T)
        Mean weight per query position on the previous token (NaN at t = 0) and on BOS.
    accuracy : numpy.ndarray (1 + n_layers · n_heads,)
        Next-token accuracy on the predictable targets, with nothing zeroed, then with L0H0, L0H1, … zeroed.
    n_predictable : int
    """

    scores: dict
    entropy: np.ndarray
    previous_profile: np.ndarray
    bos_profile: np.ndarray
    accuracy: np.ndarray
    n_predictable: int


def measure(weights: np.ndarray, predictions: np.ndarray, tokens: np.ndarray, lengths: np.ndarray) -> HeadMeasures:
    """The measurements of :class:`HeadMeasures` from :func:`forward_calls`' output on ``tokens[:, :-1]``.

    Parameters
    ----------
    weights : numpy.ndarray, shape (n, n_layers, n_heads, T, T)
    predictions : numpy.ndarray of int, shape (n, 1 + n_layers · n_heads, T)
    tokens : numpy.ndarray of int, shape (n, T + 1)
        Inputs and the last target.
    lengths : numpy.ndarray of int, shape (n,)

    Returns
    -------
    HeadMeasures
    """
    inputs = tokens[:, :-1]
    T = inputs.shape[1]
    scores = {}
    for name, (mask, defined) in pattern_keys(inputs).items():
        mass = (weights * mask[:, None, None]).sum(axis=-1)
        scores[name] = (mass * defined[:, None, None]).sum(axis=(0, 3)) / defined.sum()
    safe = np.where(weights > 0, weights, 1.0)
    H = -(weights * np.log(safe)).sum(axis=-1)[..., 2:]
    entropy = (H / np.log(np.arange(2, T) + 1.0)).mean(axis=(0, 3))
    t = np.arange(1, T)
    previous = np.concatenate([np.full(weights.shape[1:3] + (1,), np.nan),
                               weights[..., t, t - 1].mean(axis=0)], axis=-1)
    predictable = predictable_targets(lengths, T + 1)
    correct = predictions == tokens[:, None, 1:]
    accuracy = correct.transpose(1, 0, 2)[:, predictable].mean(axis=1)
    return HeadMeasures(scores, entropy, previous, weights[..., 0].mean(axis=0), accuracy, int(predictable.sum()))


def runs(positions: np.ndarray) -> list[tuple[int, int]]:
    """The maximal runs of consecutive integers in a sorted array: [2, 3, 4, 7] → [(2, 4), (7, 7)]."""
    found: list[tuple[int, int]] = []
    for p in positions.tolist():
        if found and p == found[-1][1] + 1:
            found[-1] = (found[-1][0], p)
        else:
            found.append((p, p))
    return found


def span_text(spans: list[tuple[int, int]]) -> str:
    """"2–13" or "2–5 and 9–13" for runs of at least two positions."""
    return " and ".join(f"{a}–{b}" for a, b in spans)


def describe_head(m: HeadMeasures, layer: int, head: int) -> str:
    """What head (layer, head) does, in one or two sentences, saying only what the measurements show.

    The sentences and thresholds are those of ``findings.py``: a previous-token head where it puts ≥ 0.9 on the
    previous token (with the positions where it does), BOS where it puts ≥ 0.8 on BOS and ≤ 0.1 on the previous
    token, an induction head with ≥ 0.9 after earlier occurrences and ≤ 0.1 on the occurrences and on the previous
    token, almost uniform with mean entropy ≥ 0.9 of ln(t + 1) and no pattern above 0.2, focused at ≤ 0.3.

    Returns
    -------
    str
        Plain text (no HTML), beginning with the head's name: "L1H0: an induction head — …".
    """
    s = {name: float(m.scores[name][layer, head]) for name in PATTERNS}
    entropy = float(m.entropy[layer, head])
    parts = []
    previous = m.previous_profile[layer, head]
    bos = m.bos_profile[layer, head]
    at_previous = [r for r in runs(np.flatnonzero(previous >= PREVIOUS_MIN)) if r[1] > r[0]]
    at_bos = [r for r in runs(np.flatnonzero((bos >= BOS_MIN) & ~(previous > OTHER_MAX))) if r[1] > r[0]]
    if s["induction"] >= INDUCTION_MIN and s["duplicate"] <= OTHER_MAX and s["previous"] <= OTHER_MAX:
        parts.append(f"an induction head — where the current token occurred before, {s['induction']:.2f} of its weight "
                     f"goes to the positions right after its earlier occurrences (the answer), {s['duplicate']:.2f} "
                     f"to the occurrences themselves and {s['previous']:.2f} to the previous token")
    if at_previous:
        parts.append(f"a previous-token head at positions {span_text(at_previous)} (there at least {PREVIOUS_MIN} of "
                     "its weight is on the previous token)")
        if at_bos:
            parts.append(f"at positions {span_text(at_bos)} it puts at least {BOS_MIN} on BOS and at most "
                         f"{OTHER_MAX} on the previous token")
    named = bool(parts)  # an induction or previous-token clause
    largest = max(PATTERNS, key=lambda name: s[name])
    if entropy >= DIFFUSE_ENTROPY_MIN and s[largest] <= DIFFUSE_PATTERN_MAX:
        parts.append(f"almost uniform: mean entropy {entropy:.2f} of the ceiling ln(t + 1), no pattern "
                     f"above {DIFFUSE_PATTERN_MAX} (largest: {PATTERN_NAMES[largest]}, {s[largest]:.2f})")
        return f"L{layer}H{head}: " + "; ".join(parts) + "."
    if not named:
        parts.append(f"no pattern reaches the thresholds of a previous-token or induction head; its largest is "
                     f"{PATTERN_NAMES[largest]} ({s[largest]:.2f})")
    if entropy <= FOCUSED_ENTROPY_MAX:
        parts.append(f"focused: mean entropy {entropy:.2f} of the ceiling ln(t + 1)")
    elif not named:
        parts.append(f"mean entropy {entropy:.2f} of the ceiling ln(t + 1)")
    return f"L{layer}H{head}: " + "; ".join(parts) + "."
