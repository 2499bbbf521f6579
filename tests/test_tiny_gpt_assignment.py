"""Assignment 9 (the tiny-GPT capstone) as a graded assignment: what is particular to it (the generic tests,
parametrised over every assignment, cover the rest: tests/test_stand_ins.py, test_grader.py, test_mistake_edits.py,
test_questions.py, test_notebooks.py, test_worked_cases.py).

Everything here runs in this process and is cheap (the committed weights, short hidden prompts):

* the solution and every correct variant equal the reference on every hidden case, and every known mistake is
  wrong on exactly the cases of its step that ``bank.PASSES`` does not list;
* the mistakes whose functions ``generate`` calls (the cache on the head axis, the sampler's) cost points in their
  own step only: ``generate`` is graded with stand-ins for ``model_forward`` and ``next_token``, and a hidden
  generation case needs at most ``stand_ins.MAX_PASSES`` passes and at most ``probe.MAX_CALLS`` recorded calls;
* the hidden prompts keep a clear greedy margin and the uniform numbers stay away from the CDF's boundaries;
* what the notebook says (steps, points, conventions, the question on a named head, the explorer on the learner's
  own ``model_forward``) is what the spec grades and what the trained model measurably does;
* the student package generates with the committed weights on its own, in well under a second.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from answer_bank_checks import assert_table_matches_steps, call as call_on_case
from attention_lab.core import probe
from autograder import assignments
from autograder.assignments.a09_tiny_gpt import bank, model
from autograder.grader import stand_ins
from autograder.grader.answers import answer_namespace
from autograder.grader.comparison import same
from autograder.grader.in_process import grade_variant
from autograder.grader.spec import Variant
from autograder.nbgrader.notebook_cells import nbgrader_meta, read
from conftest import REPO

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

A9 = assignments.get("09_tiny_gpt")
NOTEBOOK = REPO / "source" / A9.name / A9.notebook


@pytest.fixture(scope="module")
def cases():
    return bank.hidden_cases()


@pytest.fixture(scope="module")
def solution_outputs(cases):
    namespace = answer_namespace(A9.name, A9.notebook)
    return {grade_id: [call_on_case(namespace[case.function], case) for case in step_cases]
            for grade_id, step_cases in cases.items()}


def _outputs(cells, cases, grade_ids):
    namespace = answer_namespace(A9.name, A9.notebook, dict(cells))
    return {grade_id: [call_on_case(namespace[case.function], case) for case in cases[grade_id]]
            for grade_id in grade_ids}


def test_the_solution_equals_the_reference_on_every_hidden_case(cases, solution_outputs):
    for grade_id, step_cases in cases.items():
        for case, got in zip(step_cases, solution_outputs[grade_id]):
            expected = bank.REFERENCE[case.function](*case.args, **dict(case.kwargs))
            assert same(got, expected, case), (grade_id, case.description)


def test_every_correct_variant_equals_the_solution_on_the_steps_it_rewrites(cases, solution_outputs):
    assert len(bank.CORRECT) >= 9 and len(bank.KNOWN_MISTAKES) >= 12
    for name, variant in bank.CORRECT.items():
        steps = {f"test_{cell}" for cell in variant.cells}
        got = _outputs(variant.cells, cases, steps)
        for grade_id in steps:
            for case, mine, want in zip(cases[grade_id], got[grade_id], solution_outputs[grade_id]):
                assert same(mine, want, case), (name, case.description)


def test_every_mistake_is_wrong_exactly_where_its_passes_do_not_say_otherwise(cases, solution_outputs):
    for name, mistake in bank.KNOWN_MISTAKES.items():
        got = _outputs(mistake.cells(bank.SOLUTION), cases, {mistake.step})[mistake.step]
        right = {case.description for case, mine, want in zip(cases[mistake.step], got, solution_outputs[mistake.step])
                 if same(mine, want, case)}
        assert right == set(mistake.passes), name


@pytest.mark.parametrize("name", ["attn_cache_on_head_axis", "sample_rank_not_id", "sample_unnormalised",
                                  "forward_positions_restart", "gelu_erf"])
def test_a_mistake_that_generate_calls_is_charged_in_its_own_step_only(name):
    """generate calls model_forward and next_token: the grader answers those calls with the reference's values."""
    results = grade_variant(A9, A9.mistakes[name])
    lost = {grade_id for grade_id, r in results.items() if r.score < r.points}
    (step,) = A9.mistakes[name].breaks
    assert lost == {step} and results[step].named == [name]
    assert results["test_generate"].score == results["test_generate"].points


def test_a_generation_chain_fits_the_stand_in_passes_and_the_recorded_calls():
    """With the cache, the prompt fed token by token (a correct variant), each call of model_forward depends on the
    previous one's cache and each next_token on its logits: one stand-in pass per call must fit."""
    longest_prompt = max(len(prompt) for _, prompt, *_ in bank.GENERATION)
    chain = longest_prompt + (bank.N_NEW - 1) + bank.N_NEW  # prefill calls, later model_forward calls, next_token calls
    assert chain < stand_ins.MAX_PASSES and chain <= probe.MAX_CALLS


def test_the_hidden_prompts_keep_a_clear_greedy_margin_and_the_uniforms_clear_the_cdf_boundaries():
    params, config = model.load_weights()
    for description, prompt, temperature, seed, _ in bank.GENERATION:
        assert len(prompt) + bank.N_NEW <= config.block_size
        if temperature is None:
            model.check_greedy_margin(params, config, np.array(prompt), bank.N_NEW, minimum=0.02)
        else:
            margins = model.sampling_margins(params, config, np.array(prompt), bank.uniforms(seed), temperature)
            assert margins.min() > 1e-3, description


def test_the_notebooks_table_and_cells_say_what_the_spec_grades():
    nb = read(NOTEBOOK)
    assert_table_matches_steps(nb, bank.STEPS)
    text = "\n".join(c.source for c in nb.cells)
    # the conventions: which public ones are accepted and which are named mistakes
    for words in ("unbiased ÷ (d − 1)", "inside the root", "the exact erf form", "named mistakes of step 2 only",
                  "post-LN", "tied to the embeddings", "token-id order", "float32 LayerNorm or GELU: accepted"):
        assert words in text, words
    # the explorer runs on the learner's own model_forward, in a cell that is not graded
    (explorer,) = [c for c in nb.cells if "explore_heads(" in c.source]
    assert "explore_heads(model_forward, params, config)" in explorer.source
    assert not nbgrader_meta(explorer).get("grade") and not nbgrader_meta(explorer).get("solution")


def test_the_question_on_a_named_head_says_what_the_trained_model_measurably_does():
    """Question 1's answer (c, an induction head) and its figures are findings.py's measured sentences."""
    from autograder.assignments.a09_tiny_gpt import findings

    sentences = " ".join(finding.sentence for finding in findings.FINDINGS)
    assert "L1H0 is an induction head" in sentences and "L0H0 is a previous-token head" in sentences
    assert "zeroing L1H0 drops next-token accuracy on the predictable targets from 100 % to below 10 %" \
        in sentences.replace("Zeroing", "zeroing")
    question = next(q for q in A9.questions if q.name == "named_head")
    assert question.answer == "c"
    text = "\n".join(c.source for c in read(NOTEBOOK).cells)
    assert "about\n3 %" in text or "about 3 %" in " ".join(text.split())


def test_the_student_package_generates_with_the_committed_weights_in_well_under_a_second():
    from attention_lab.a09_tiny_gpt.weights import load_weights

    start = time.process_time()
    params, config = load_weights()
    namespace = answer_namespace(A9.name, A9.notebook)
    tokens = namespace["generate"](params, config, [0, 5, 9, 2, 14], 12)
    seconds = time.process_time() - start
    assert tokens.tolist() == [0, 5, 9, 2, 14] + [5, 9, 2, 14] * 3
    assert seconds < 5  # a generous bound on CPU time: loading and generating take about 0.15 s


def test_wrong_tokens_that_match_no_known_mistake_are_located():
    source = bank.SOLUTION["generate"].replace("tokens.append(next_token(logits[-1], temperature, u))",
                                               "tokens.append(next_token(logits[-1], temperature, u) % 19 + 1)")
    feedback = grade_variant(A9, Variant("shifted tokens", {"generate": source}, frozenset({"test_generate"})))[
        "test_generate"]
    assert feedback.score == 0 and feedback.named == []
    assert "The first wrong token is new token" in " ".join(feedback.text().split())


# ---- values on the wire: a model's parameters (a dict) and a list of caches -----------------------------------

def test_a_dict_of_arrays_and_a_list_of_caches_cross_the_wire_and_are_screened_as_the_probe_sends_them():
    from attention_lab.core import values as wire
    from autograder.grader.probe_output import Forged, _value

    params = {"W_emb": np.arange(6.0).reshape(3, 2), "block0.b_1": np.zeros(4), "n": 3}
    caches = [(np.ones((2, 3, 4)), np.zeros((2, 3, 4))), (np.full((2, 3, 4), 2.0), np.ones((2, 3, 4)))]
    for value in (params, (np.ones((3, 5)), caches)):
        encoded = json.loads(wire.dumps(wire.encode(value)))
        assert _value(encoded) == encoded  # the grader's screening keeps what the genuine probe sends
        back = wire.decode(encoded)
        assert same_structure(back, value)
    assert list(wire.decode(wire.encode(params))) == ["W_emb", "block0.b_1", "n"]  # the caller's key order
    assert wire.encode({1: np.ones(2)}) == {"unsupported": "a builtins.dict"}  # only string keys
    for forged in ({"dict": [["a"]]}, {"dict": {"a": 1}}, {"dict": [[1, 2]]}):
        with pytest.raises(Forged):
            _value(forged)


def same_structure(a, b) -> bool:
    if isinstance(b, dict):
        return isinstance(a, dict) and list(a) == list(b) and all(same_structure(a[k], b[k]) for k in b)
    if isinstance(b, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same_structure(x, y) for x, y in zip(a, b))
    if isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    return a == b


def test_digests_and_sizes_are_computed_without_writing_json_and_tell_values_apart():
    from attention_lab.core import values as wire

    params, _ = model.load_weights()
    encoded = wire.encode(params)
    assert abs(wire.size(encoded) - len(wire.dumps(encoded))) <= 0.01 * len(wire.dumps(encoded))
    assert probe.call_digest("f", [encoded], {}) == probe.call_digest("f", [wire.encode(dict(params))], {})
    changed = dict(params, W_out=params["W_out"] + 1e-12)
    assert probe.call_digest("f", [encoded], {}) != probe.call_digest("f", [wire.encode(changed)], {})
    # kinds and lengths are part of what is hashed: these pairs would write the same bytes otherwise
    assert wire.digest(["ab", "c"]) != wire.digest(["a", "bc"]) and wire.digest([1]) != wire.digest(["1"])
    assert wire.digest({"a": [1, 2]}) != wire.digest([["a", [1, 2]]])


def test_a_list_of_caches_of_the_wrong_length_is_described():
    source = bank.SOLUTION["model_forward"].replace("return x @ params[\"W_out\"], new_caches",
                                                    "return x @ params[\"W_out\"], new_caches[:1]")
    feedback = grade_variant(A9, Variant("one cache", {"model_forward": source}, frozenset({"test_model_forward"})))[
        "test_model_forward"]
    assert feedback.score == 0 and "the caches should be a list of 2 values" in " ".join(feedback.text().split())
