"""Assignment 9's draft answer bank: the solution and every correct variant equal the reference model on every
hidden case; every known mistake applies exactly once and differs from it on a hidden case of its step; the
hidden prompts keep the top-2 logit margin the spec needs."""

import numpy as np
import pytest

from autograder.assignments.a09_tiny_gpt import bank
from autograder.grader.draft_rewrites import Edit, Rewrite, apply_edit, apply_rewrite, call, compare, run_cells

# mistakes may overflow or divide by zero on purpose
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@pytest.fixture(scope="module")
def cases():
    return {name: step.cases() for name, step in bank.STEPS.items()}


@pytest.fixture(scope="module")
def expected(cases):
    return {(name, case.description): bank.REFERENCE[case.function](*case.args, **dict(case.kwargs))
            for name, step_cases in cases.items() for case in step_cases}


def _verdicts(cells, cases, expected, steps=None):
    namespace = run_cells(cells, bank.GIVEN)
    verdicts = {}
    for name, step_cases in cases.items():
        if steps is not None and name not in steps:
            continue
        step = bank.STEPS[name]
        for case in step_cases:
            status, value = call(namespace, case.function, case.args, case.kwargs)
            verdicts[(name, case.description)] = ("raised" if status == "raised" else
                                                  compare(value, expected[(name, case.description)], step.rtol,
                                                          step.atol))
    return verdicts


def test_solution_equals_the_reference_model_on_every_hidden_case(cases, expected):
    verdicts = _verdicts(bank.SOLUTION, cases, expected)
    assert set(verdicts.values()) == {"equal"}, {k: v for k, v in verdicts.items() if v != "equal"}


def test_bank_sizes():
    assert len(bank.CORRECT) >= 9 and len(bank.MISTAKES) >= 12
    assert set(bank.STEPS) == set(bank.SOLUTION) == set(bank.REFERENCE)
    assert all(isinstance(v, Rewrite) for v in bank.CORRECT.values())
    assert all(isinstance(m, Edit) and m.breaks in bank.STEPS and m.hint for m in bank.MISTAKES.values())


@pytest.mark.parametrize("name", sorted(bank.CORRECT))
def test_correct_variant_equals_the_reference_on_every_hidden_case(name, cases, expected):
    cells = apply_rewrite(bank.SOLUTION, bank.CORRECT[name])
    verdicts = _verdicts(cells, cases, expected)
    assert set(verdicts.values()) == {"equal"}, {k: v for k, v in verdicts.items() if v != "equal"}


@pytest.mark.parametrize("name", sorted(bank.MISTAKES))
def test_mistake_applies_once_and_differs_on_a_hidden_case_of_its_step(name, cases, expected):
    mistake = bank.MISTAKES[name]
    verdicts = _verdicts(apply_edit(bank.SOLUTION, mistake), cases, expected, {mistake.breaks})
    wrong = {k: v for k, v in verdicts.items() if v != "equal"}
    assert wrong, f"{name} passes every hidden case of {mistake.breaks}"
    if mistake.shape_only:
        assert set(wrong.values()) & {"shape", "raised"}
    else:
        assert "value" in wrong.values(), f"{name} is only caught by a shape or an exception: {wrong}"


def test_cases_expose_the_mistakes_they_name(cases, expected):
    named = set()
    for name, step_cases in cases.items():
        for case in step_cases:
            for mistake_name in case.exposes:
                named.add(mistake_name)
                mistake = bank.MISTAKES[mistake_name]
                assert mistake.breaks == name
                namespace = run_cells(apply_edit(bank.SOLUTION, mistake), bank.GIVEN)
                status, value = call(namespace, case.function, case.args, case.kwargs)
                step = bank.STEPS[name]
                assert status == "raised" or compare(value, expected[(name, case.description)], step.rtol,
                                                     step.atol) != "equal", (mistake_name, case.description)
    assert named == set(bank.MISTAKES), set(bank.MISTAKES) - named


def test_mistakes_of_one_step_are_told_apart(cases):
    by_step = {}
    for name, mistake in bank.MISTAKES.items():
        by_step.setdefault(mistake.breaks, []).append(name)
    for step_name, names in by_step.items():
        signatures = {}
        for name in names:
            namespace = run_cells(apply_edit(bank.SOLUTION, bank.MISTAKES[name]), bank.GIVEN)
            out = []
            for case in cases[step_name]:
                status, value = call(namespace, case.function, case.args, case.kwargs)
                out.append(value if status == "raised" else repr(np.round(np.asarray(value[0] if isinstance(
                    value, tuple) else value, dtype=float), 6).tolist()))
            signatures[name] = tuple(out)
        assert len(set(signatures.values())) == len(names), signatures.keys()


def test_hidden_prompts_keep_a_clear_greedy_margin():
    margins = bank.prompt_margins()
    assert set(margins) == set(bank.GREEDY_PROMPTS)
    assert min(margins.values()) >= 1e-3, margins          # the bound is 1e-6; these clear float32 rounding
    assert min(bank.sampling_margins()) >= 1e-4


def test_the_exposing_cases_need_the_cache():
    # the cache mistakes pass every case without a cache: the cached cases are what catches them
    mistake = bank.MISTAKES["forward_positions_restart"]
    namespace = run_cells(apply_edit(bank.SOLUTION, mistake), bank.GIVEN)
    no_cache = [c for c in bank.STEPS["model_forward"].cases() if "caches" not in c.kwargs]
    for case in no_cache:
        _, value = call(namespace, case.function, case.args, case.kwargs)
        assert compare(value, bank.REFERENCE[case.function](*case.args), 1e-4, 1e-4) == "equal"


def _random_calls(seed):
    """Random calls beyond the hidden cases, under the committed weights: token sequences, cache splits, logits."""
    from autograder.assignments.a09_tiny_gpt import model

    rng = np.random.default_rng(2000 + seed)
    params = bank.committed_parameters()
    T = int(rng.integers(2, 20))
    tokens = rng.integers(0, 20, size=T)
    split = int(rng.integers(1, T))
    _, caches = bank.reference.model_forward(params, tokens[:split], bank.LEARNER_CONFIG)
    calls = [("model_forward", (params, tokens, bank.LEARNER_CONFIG), {}),
             ("model_forward", (params, tokens[split:], bank.LEARNER_CONFIG), {"caches": caches})]
    logits = rng.normal(size=20) * 2
    temperature = float(rng.uniform(0.3, 3.0))
    z = logits / temperature
    cdf = np.cumsum(np.exp(z - z.max()) / np.exp(z - z.max()).sum())
    u = float(rng.random())
    if np.min(np.abs(cdf - u)) > 1e-9:          # away from a boundary, every correct rule draws the same token
        calls.append(("next_token", (logits, temperature, u), {}))
    prompt = [0, *rng.choice(np.arange(1, 20), size=int(rng.integers(1, 8)), replace=False)]
    n_new = 32 - len(prompt)
    config = bank.model_config(params, bank.LEARNER_CONFIG)
    if model.greedy_margins(params, config, np.array(prompt), n_new).min() >= 1e-6:
        calls.append(("generate", (params, bank.LEARNER_CONFIG, prompt, n_new), {"use_cache": bool(seed % 2)}))
    return calls


@pytest.mark.parametrize("name", sorted(bank.CORRECT))
def test_correct_variant_equals_the_reference_on_random_inputs(name):
    namespace = run_cells(apply_rewrite(bank.SOLUTION, bank.CORRECT[name]), bank.GIVEN)
    for seed in range(6):
        for function, args, kwargs in _random_calls(seed):
            status, value = call(namespace, function, args, kwargs)
            assert status == "ok", (seed, function, value)
            step = bank.STEPS[function]
            expected = bank.REFERENCE[function](*args, **kwargs)
            assert compare(value, expected, step.rtol, step.atol) == "equal", (seed, function)
