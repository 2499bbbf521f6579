"""Assignment 9's tiny GPT: backward against central differences, training, the committed weights, the KV cache,
generation (greedy and inverse-CDF sampling), the generated data, and the model's building blocks."""

import json
import math

import numpy as np
import pytest

from autograder.assignments.a01_attention import reference
from autograder.assignments.a05_kv_cache import reference as reference_kv_cache
from autograder.assignments.a02_multi_head import reference as reference_multi_head
from autograder.assignments.a06_gradients.reference import numerical_gradient, relative_error
from autograder.assignments.a09_tiny_gpt import data, model
from autograder.assignments.a09_tiny_gpt.backward import cross_entropy, forward_with_tape, loss_and_gradients
from autograder.assignments.a09_tiny_gpt.model import (
    TRAINING_FILE,
    WEIGHTS_FILE,
    Config,
    check_greedy_margin,
    forward,
    generate,
    greedy_margins,
    init_parameters,
    load_weights,
    sample_token,
)
from autograder.assignments.a09_tiny_gpt.train import EVAL_SEED, Schedule, evaluate, train

SMALL = Config(vocab_size=7, block_size=8, d_model=8, n_heads=2, n_layers=2, d_mlp=12)


@pytest.fixture(scope="module")
def committed():
    return load_weights()


def _bumpy_parameters(config, seed):
    """Initial parameters plus N(0, 0.3²) noise, so that no gradient is tiny and LN gains are not all 1."""
    rng = np.random.default_rng(seed)
    return {k: v + rng.normal(0, 0.3, v.shape) for k, v in init_parameters(config, seed).items()}


# ---------------------------------------------------------------- backward and training

def test_backward_matches_central_differences_for_every_parameter():
    params = _bumpy_parameters(SMALL, 0)
    tokens = np.random.default_rng(1).integers(0, SMALL.vocab_size, (3, SMALL.block_size + 1))
    selected = np.random.default_rng(2).random((3, SMALL.block_size)) < 0.7
    loss, grads = loss_and_gradients(params, tokens, SMALL, selected)
    assert set(grads) == set(params)
    for name in params:
        def f(z, name=name):
            return loss_and_gradients(dict(params, **{name: z}), tokens, SMALL, selected)[0]

        error = relative_error(grads[name], numerical_gradient(f, params[name]))
        assert error <= 1e-6, (name, error)


def test_taped_forward_equals_the_model_forward():
    params = _bumpy_parameters(SMALL, 3)
    tokens = np.random.default_rng(4).integers(0, SMALL.vocab_size, (2, SMALL.block_size))
    np.testing.assert_allclose(forward_with_tape(params, tokens, SMALL).logits, forward(params, tokens, SMALL).logits,
                               rtol=1e-12, atol=1e-13)


def test_cross_entropy_hand_worked():
    logits = np.log(np.array([[0.5, 0.25, 0.25], [0.1, 0.8, 0.1]]))
    loss, dlogits = cross_entropy(logits, np.array([0, 1]))
    assert math.isclose(loss, -(math.log(0.5) + math.log(0.8)) / 2, rel_tol=1e-12)
    np.testing.assert_allclose(dlogits, np.array([[-0.5, 0.25, 0.25], [0.1, -0.2, 0.1]]) / 2, atol=1e-15)
    loss, _ = cross_entropy(logits, np.array([0, 1]), np.array([False, True]))
    assert math.isclose(loss, -math.log(0.8), rel_tol=1e-12)


def test_a_short_training_run_lowers_the_loss():
    _, losses = train(Config(), Schedule(steps=300, batch_size=16, warmup=20))
    assert math.isclose(losses[0], math.log(20), abs_tol=0.05)        # an untrained model: about uniform
    assert np.mean(losses[-20:]) < np.mean(losses[:10]) - 0.4          # measured: 2.99 → 2.41 nats


def test_training_is_deterministic():
    config = Config(block_size=16, d_model=16, d_mlp=32)
    first, losses_first = train(config, Schedule(steps=5, batch_size=4, warmup=2))
    second, losses_second = train(config, Schedule(steps=5, batch_size=4, warmup=2))
    assert losses_first == losses_second
    for name in first:
        np.testing.assert_array_equal(first[name], second[name])


# ---------------------------------------------------------------- the committed weights

def test_committed_weights_are_small_and_match_their_summary(committed):
    params, config = committed
    assert WEIGHTS_FILE.stat().st_size <= 5 * 2 ** 20
    summary = json.loads(TRAINING_FILE.read_text())
    assert summary["config"] == {k: getattr(config, k) for k in summary["config"]}
    assert summary["seeds"] == {"init": 0, "data": 1, "eval": EVAL_SEED}
    assert summary["training_seconds"] < 15 * 60
    # the stored evaluation is what these weights score: weights and summary come from the same run
    stored = summary["evaluation"]
    fresh = evaluate(params, config)
    assert fresh["n_predictable"] == stored["n_predictable"]
    assert math.isclose(fresh["predictable_accuracy"], stored["predictable_accuracy"], abs_tol=1e-12)
    assert math.isclose(fresh["predictable_loss"], stored["predictable_loss"], rel_tol=1e-6)


def test_committed_model_predicts_the_predictable_part_of_fresh_sequences(committed):
    params, config = committed
    scores = evaluate(params, config, n_sequences=1000, seed=12345)   # a stream used neither in training nor above
    assert scores["n_predictable"] > 20000
    assert scores["predictable_accuracy"] >= 0.95                      # measured: 1.0000 (23 590 of 23 590)
    assert scores["all_accuracy"] < 0.9                                # the first block cannot be predicted


def test_committed_model_loads_and_continues_a_repetition(committed):
    params, config = committed
    block = np.array([7, 3, 15, 1, 9])
    prompt = np.concatenate([[data.BOS], block, block[:2]])
    out = generate(params, config, prompt, n_new=config.block_size - prompt.size)
    expected = np.concatenate([[data.BOS], np.resize(block, config.block_size - 1)])
    np.testing.assert_array_equal(out, expected)


# ---------------------------------------------------------------- cache and generation

def test_incremental_forward_with_cache_equals_the_full_forward(committed):
    params, config = committed
    tokens, _ = data.repeated_blocks(2, config.block_size, config.vocab_size, (3, 12), np.random.default_rng(5))
    full = forward(params, tokens, config).logits
    for chunk in (1, 3, 7):
        cache, pieces = None, []
        for start in range(0, config.block_size, chunk):
            result = forward(params, tokens[:, start:start + chunk], config, cache=cache)
            cache, pieces = result.cache, pieces + [result.logits]
        np.testing.assert_allclose(np.concatenate(pieces, axis=1), full, rtol=1e-10, atol=1e-12)
        assert cache[0].K.shape == (2, config.n_heads, config.block_size, config.d_head)


def test_generation_with_and_without_cache_gives_the_same_tokens(committed):
    params, config = committed
    rng = np.random.default_rng(6)
    prompts = [np.array([0, 4, 8, 12, 4]), np.array([0, 5]), rng.integers(1, config.vocab_size, 9)]
    for prompt in prompts:
        n_new = config.block_size - prompt.size
        greedy = generate(params, config, prompt, n_new, use_cache=True)
        np.testing.assert_array_equal(greedy, generate(params, config, prompt, n_new, use_cache=False))
        u = rng.random(n_new)
        sampled = generate(params, config, prompt, n_new, temperature=1.3, uniforms=u, use_cache=True)
        np.testing.assert_array_equal(sampled,
                                      generate(params, config, prompt, n_new, temperature=1.3, uniforms=u,
                                               use_cache=False))
        np.testing.assert_array_equal(sampled[:prompt.size], prompt)


def test_sample_token_inverse_cdf_rule():
    logits = np.log([0.2, 0.5, 0.3])                                   # cdf 0.2, 0.7, 1.0
    picks = [sample_token(logits, 1.0, u) for u in (0.0, 0.1999, 0.2001, 0.6999, 0.7001, 0.9999)]
    assert picks == [0, 0, 1, 1, 2, 2]                                 # the smallest i with u < cdf_i
    assert sample_token(logits, 1e-3, 0.999) == 1                      # cold: almost greedy
    assert sample_token(logits, 1e3, 0.34) == 1                        # hot: almost uniform (1/3 … 2/3 → 1)
    # a token of probability 0 (cdf 0.5, 0.5, 1.0) is never drawn, not even at u = 0.5 exactly
    assert sample_token(np.array([0.0, -1e300, 0.0]), 1.0, 0.5) == 2


def test_greedy_margin_check_rejects_ties_and_accepts_clear_prompts(committed):
    params, config = committed
    tied = dict(params, W_out=np.zeros_like(params["W_out"]))          # every logit 0: a tie at every step
    with pytest.raises(ValueError, match="top-2 logit margin of 0 < 1e-06"):
        check_greedy_margin(tied, config, np.array([0, 3, 4]), 2)
    prompt = np.array([0, 3, 4, 5, 3, 4])
    check_greedy_margin(params, config, prompt, 10)
    assert greedy_margins(params, config, prompt, 10).min() > 1.0


@pytest.mark.parametrize("call, words", [
    (lambda p, c: forward(p, np.array([0, 20]), c), "tokens must be ids in [0, 19] (vocab_size = 20)"),
    (lambda p, c: forward(p, np.array([0.5]), c), "tokens must be integer token ids of shape (T,) or (B, T)"),
    (lambda p, c: forward(p, np.zeros(33, int), c), "the sequence would have 33 positions; the model reads at most "
                                                     "block_size = 32"),
    (lambda p, c: forward(p, np.zeros(3, int), c, head_mask=np.ones(2)), "head_mask must have shape (n_layers, "
                                                                         "n_heads) = (2, 2)"),
    (lambda p, c: forward({k: v for k, v in p.items() if k != "W_out"}, np.zeros(3, int), c),
     "params is missing 'W_out' (shape (32, 20))"),
    (lambda p, c: generate(p, c, np.array([0, 1]), 31), "prompt (2 tokens) + n_new (31) exceeds block_size = 32"),
    (lambda p, c: generate(p, c, np.array([0, 1]), -1), "n_new must be an integer >= 0; received -1"),
    (lambda p, c: generate(p, c, np.array([[0, 1]]), 1), "prompt must be one sequence of token ids, shape (T,)"),
    (lambda p, c: generate(p, c, np.array([0, 1]), 3, temperature=1.0), "uniforms must have shape (n_new,) = (3,)"),
    (lambda p, c: generate(p, c, np.array([0, 1]), 3, uniforms=np.zeros(3)), "uniforms are only used when sampling"),
    (lambda p, c: sample_token(np.zeros(3), 0.0, 0.5), "temperature must be a positive finite number; received 0.0"),
    (lambda p, c: sample_token(np.zeros(3), 1.0, 1.0), "u must be a uniform random number in [0, 1); received 1.0"),
])
def test_errors(committed, call, words):
    params, config = committed
    with pytest.raises(ValueError) as error:
        call(params, config)
    assert words in str(error.value)


# ---------------------------------------------------------------- building blocks against earlier assignments

def test_attention_sublayer_equals_assignment_2_with_a_causal_mask_and_assignment_5_per_head():
    rng = np.random.default_rng(7)
    T, d_model, n_heads = 6, 8, 2
    x = rng.normal(size=(T, d_model))
    W_q, W_k, W_v, W_o = (rng.normal(size=(d_model, d_model)) for _ in range(4))
    ours, weights, _ = model.causal_self_attention(x, W_q, W_k, W_v, W_o, n_heads)
    theirs, their_weights = reference_multi_head.multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads,
                                                                      mask=reference.causal_mask(T))
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(weights, their_weights, rtol=1e-12, atol=1e-15)
    d_head = d_model // n_heads
    heads = [reference_kv_cache.decode_incrementally(x, W_q[:, h * d_head:(h + 1) * d_head],
                                                     W_k[:, h * d_head:(h + 1) * d_head],
                                                     W_v[:, h * d_head:(h + 1) * d_head]) for h in range(n_heads)]
    np.testing.assert_allclose(np.concatenate(heads, axis=1) @ W_o, ours, rtol=1e-12, atol=1e-13)


def test_layer_norm_uses_the_biased_variance_and_epsilon_inside_the_root():
    x = np.array([[1.0, 2.0, 3.0, 6.0]])
    variance = np.mean((x - 3.0) ** 2)                                  # 3.5, divided by d = 4 (not 3)
    expected = (x - 3.0) / np.sqrt(variance + 1e-5)
    np.testing.assert_allclose(model.layer_norm(x, np.ones(4), np.zeros(4)), expected, rtol=1e-15)
    np.testing.assert_allclose(model.layer_norm(np.full((1, 4), 2.0), np.ones(4), np.full(4, 0.5)), 0.5)
    with pytest.raises(ValueError, match=r"gain must have shape \(d,\) = \(4,\)"):
        model.layer_norm(x, np.ones(3), np.zeros(4))


def test_gelu_is_the_tanh_approximation():
    assert math.isclose(model.gelu(1.0), 0.5 * (1 + math.tanh(math.sqrt(2 / math.pi) * (1 + 0.044715))),
                        rel_tol=1e-15)
    x = np.linspace(-6, 6, 10001)
    exact = 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    difference = np.abs(model.gelu(x) - exact)
    assert 4.7e-4 < difference.max() < 4.8e-4                          # the largest gap between the two forms,
    assert abs(abs(x[np.argmax(difference)]) - 2.7) < 0.01             # at x ≈ ±2.70 (the gap is even in x)


# ---------------------------------------------------------------- data

def test_repeated_blocks_and_which_targets_are_predictable():
    tokens, lengths = data.repeated_blocks(200, 33, 20, (3, 12), np.random.default_rng(8))
    assert tokens.shape == (200, 33) and np.all(tokens[:, 0] == data.BOS)
    assert np.all(tokens[:, 1:] >= 1) and np.all(tokens[:, 1:] <= 19)
    for row, L in zip(tokens, lengths):
        assert len(set(row[1:L + 1])) == L                              # the block's tokens are distinct
        np.testing.assert_array_equal(row[1 + L:], row[1:33 - L])       # and repeat with period L
    predictable = data.predictable_targets(lengths, 33)
    np.testing.assert_array_equal(predictable, data.seen_before(tokens))
    np.testing.assert_array_equal(predictable[0], np.arange(32) >= lengths[0] + 1)
    assert set(lengths.tolist()) == set(range(3, 13))
    with pytest.raises(ValueError, match="L_max <= vocab_size - 1 = 19"):
        data.repeated_blocks(1, 33, 20, (3, 20), np.random.default_rng(0))


def test_the_student_packages_loader_reads_the_same_weights_as_the_grader():
    """``attention_lab`` must not import the grader, so it has its own loader; both read the same arrays."""
    from attention_lab.a09_tiny_gpt.weights import load_weights as student_load

    params, config = student_load()
    reference_params, reference_config = model.load_weights()
    assert set(params) == set(reference_params)
    assert all(np.array_equal(params[name], reference_params[name]) for name in params)
    assert config == {"vocab_size": reference_config.vocab_size, "block_size": reference_config.block_size,
                      "n_heads": reference_config.n_heads, "n_layers": reference_config.n_layers,
                      "ln_eps": reference_config.ln_eps}
