"""What DESIGN.md says the committed tiny GPT's heads do: every sentence is checked against fresh measurements,
and shown able to fail (it is false for the untrained model)."""

import numpy as np
import pytest

from autograder.assignments.a09_tiny_gpt import analysis, data
from autograder.assignments.a09_tiny_gpt.findings import FINDINGS, false_findings, measure
from autograder.assignments.a09_tiny_gpt.model import Config, generate, init_parameters, load_weights


@pytest.fixture(scope="module")
def trained():
    params, config = load_weights()
    return measure(params, config)


@pytest.fixture(scope="module")
def untrained():
    config = Config()
    return measure(init_parameters(config, 0), config, n_eval=300)


@pytest.mark.parametrize("finding", FINDINGS, ids=lambda f: f.name)
def test_every_sentence_holds_for_the_committed_weights(finding, trained):
    assert finding.holds(trained), finding.sentence


@pytest.mark.parametrize("finding", FINDINGS, ids=lambda f: f.name)
def test_every_sentence_is_false_for_the_untrained_model(finding, untrained):
    assert not finding.holds(untrained), f"{finding.name} holds even before training"


def test_false_findings(trained):
    assert false_findings(trained) == []


@pytest.mark.parametrize("weights", ["committed", "untrained"])
def test_the_sampled_sequences_are_what_generate_samples_one_sequence_at_a_time(weights):
    # analysis.sampled_sequences decodes its sequences side by side; each must be generate's, token for token
    params, config = load_weights() if weights == "committed" else (init_parameters(Config(), 0), Config())
    rng = np.random.default_rng(4)  # sampled_sequences' draws, in its order: a prompt, then its uniform numbers
    expected = []
    for _ in range(12):
        prompt = np.concatenate([[data.BOS], rng.choice(np.arange(1, config.vocab_size), 2, replace=False)])
        n_new = config.block_size - prompt.size
        expected.append(generate(params, config, prompt, n_new, temperature=1.0, uniforms=rng.random(n_new)))
    np.testing.assert_array_equal(analysis.sampled_sequences(params, config, n_sequences=12), np.array(expected))


def test_pattern_keys_hand_worked():
    # BOS a b a b: query 3 (token a, seen at 1) — duplicate key 1, induction key 2 (after the earlier a)
    tokens = np.array([[0, 5, 6, 5, 6]])
    keys = analysis.pattern_keys(tokens)
    duplicate, defined = keys["duplicate"]
    assert np.flatnonzero(duplicate[0, 3]).tolist() == [1] and np.flatnonzero(duplicate[0, 4]).tolist() == [2]
    induction, _ = keys["induction"]
    assert np.flatnonzero(induction[0, 3]).tolist() == [2] and np.flatnonzero(induction[0, 4]).tolist() == [3]
    assert defined[0].tolist() == [False, False, False, True, True]
    previous, _ = keys["previous"]
    assert np.flatnonzero(previous[0, 4]).tolist() == [3]


def test_design_note_is_current(trained):
    from autograder.assignments.a09_tiny_gpt import design, bank
    from autograder.grader.draft_rewrites import replace_generated

    text = design.DESIGN.read_text(encoding="utf-8")
    assert replace_generated(text, design.generated(trained)) == text, (
        "autograder/assignments/a09_tiny_gpt/DESIGN.md is stale: run .venv/bin/python -m autograder.assignments.a09_tiny_gpt.design")
    for name in [*bank.CORRECT, *bank.KNOWN_MISTAKES]:
        assert f"**{name}**" in text, name
