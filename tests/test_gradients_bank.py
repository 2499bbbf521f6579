"""Assignment 6's draft answer bank: the solution and every correct variant equal the reference on every hidden
case; every known mistake applies exactly once and differs from the reference on a hidden case of its step."""

import numpy as np
import pytest

from autograder.assignments.a06_gradients import bank
from autograder.grader.draft_rewrites import Edit, Rewrite, apply_edit, apply_rewrite, call, compare, run_cells

# mistakes such as the unguarded fully masked row produce NaN on purpose
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")

ALL_CASES = [(name, case) for name, step in bank.STEPS.items() for case in step.cases()]


def _outcome(namespace, case):
    """("ok", value) or ("raised", exception name)."""
    return call(namespace, case.function, case.args, case.kwargs)


def _expected(case):
    return bank.REFERENCE[case.function](*case.args, **dict(case.kwargs))


def _compare(result, expected) -> str:
    return compare(result, expected, bank.RTOL, bank.ATOL)


def _verdicts(cells, step_names=None):
    namespace = run_cells(cells, bank.GIVEN)
    verdicts = {}
    for name, case in ALL_CASES:
        if step_names is not None and name not in step_names:
            continue
        status, value = _outcome(namespace, case)
        verdicts[(name, case.description)] = "raised" if status == "raised" else _compare(value, _expected(case))
    return verdicts


def test_solution_cells_equal_the_reference_on_every_hidden_case():
    verdicts = _verdicts(bank.SOLUTION)
    assert set(verdicts.values()) == {"equal"}, {k: v for k, v in verdicts.items() if v != "equal"}


def test_bank_sizes():
    assert len(bank.CORRECT) >= 9 and len(bank.MISTAKES) >= 12
    assert set(bank.STEPS) == set(bank.SOLUTION)
    assert all(isinstance(v, Rewrite) for v in bank.CORRECT.values())
    assert all(isinstance(m, Edit) and m.breaks in bank.STEPS and m.hint for m in bank.MISTAKES.values())


@pytest.mark.parametrize("name", sorted(bank.CORRECT))
def test_correct_variant_equals_the_reference_on_every_hidden_case(name):
    variant = bank.CORRECT[name]
    cells = apply_rewrite(bank.SOLUTION, variant)
    assert any(cells[c] != bank.SOLUTION[c] for c in variant.cells), "a variant must rewrite something"
    verdicts = _verdicts(cells)
    assert set(verdicts.values()) == {"equal"}, {k: v for k, v in verdicts.items() if v != "equal"}


@pytest.mark.parametrize("name", sorted(bank.MISTAKES))
def test_mistake_applies_once_and_differs_on_a_hidden_case_of_its_step(name):
    mistake = bank.MISTAKES[name]
    cells = apply_edit(bank.SOLUTION, mistake)                      # raises unless the old text occurs once
    verdicts = _verdicts(cells, {mistake.breaks})
    wrong = {k: v for k, v in verdicts.items() if v != "equal"}
    assert wrong, f"{name} passes every hidden case of {mistake.breaks}: it is not caught"
    if mistake.shape_only:
        assert set(wrong.values()) & {"shape", "raised"}, f"{name} is marked shape_only but never changes a shape"
    else:
        assert "value" in wrong.values(), (f"{name} is only caught by a shape or an exception ({wrong}); "
                                           "a hidden case with matching shapes must show its wrong numbers")


def test_cases_expose_the_mistakes_they_name():
    for step_name, step in bank.STEPS.items():
        for case in step.cases():
            for mistake_name in case.exposes:
                mistake = bank.MISTAKES[mistake_name]
                assert mistake.breaks == step_name, (mistake_name, case.description)
                namespace = run_cells(apply_edit(bank.SOLUTION, mistake), bank.GIVEN)
                status, value = _outcome(namespace, case)
                assert status == "raised" or _compare(value, _expected(case)) != "equal", (
                    f"case {case.description!r} claims to expose {mistake_name}, but that mistake passes it")


def test_every_mistake_is_named_by_a_case():
    named = {m for step in bank.STEPS.values() for case in step.cases() for m in case.exposes}
    assert named == set(bank.MISTAKES), set(bank.MISTAKES) - named


def test_apply_edit_refuses_stale_or_ambiguous_edits():
    with pytest.raises(ValueError, match="occurs 0 times"):
        apply_edit(bank.SOLUTION, Edit("x", "softmax_jacobian", "no such text", "y", "h", "softmax_jacobian"))
    with pytest.raises(ValueError, match="occurs 3 times"):
        apply_edit(bank.SOLUTION, Edit("x", "attention_backward", "/ c\n", "", "h", "attention_backward"))
    with pytest.raises(ValueError, match="does not have"):
        apply_edit(bank.SOLUTION, Edit("x", "nope", "a", "b", "h", "nope"))
    with pytest.raises(ValueError, match="does not have"):
        apply_rewrite(bank.SOLUTION, Rewrite("x", {"nope": ""}))


def test_hidden_cases_are_deterministic():
    for step in bank.STEPS.values():
        first, second = step.cases(), step.cases()
        for a, b in zip(first, second):
            for x, y in zip(a.args, b.args):
                if isinstance(x, np.ndarray):
                    np.testing.assert_array_equal(x, y)


def _signature(cells, step_name):
    """The outputs of a bank entry on the hidden cases of one step, rounded so that equal answers compare equal."""
    namespace = run_cells(cells, bank.GIVEN)
    out = []
    for case in bank.STEPS[step_name].cases():
        status, value = _outcome(namespace, case)
        if status == "raised":
            out.append(("raised", value))
            continue
        values = value if isinstance(value, tuple) else (value,)
        out.append(tuple(np.round(np.asarray(v, dtype=float), 6).tobytes() for v in values))
    return tuple(out)


def test_mistakes_of_one_step_are_told_apart_by_the_hidden_cases():
    # feedback names a mistake by matching outputs, so no two mistakes of a step may agree on every case
    by_step = {}
    for name, mistake in bank.MISTAKES.items():
        by_step.setdefault(mistake.breaks, []).append(name)
    for step_name, names in by_step.items():
        signatures = {name: _signature(apply_edit(bank.SOLUTION, bank.MISTAKES[name]), step_name) for name in names}
        for a in names:
            for b in names:
                if a < b:
                    assert signatures[a] != signatures[b], f"{a} and {b} give the same outputs on {step_name}"


def _random_inputs(seed):
    """Random calls beyond the hidden cases: shapes, masks (with fully masked rows) and scale modes vary."""
    rng = np.random.default_rng(1000 + seed)
    batch = [(), (2,), (2, 3)][seed % 3]
    T_q, T_k, d_k, d_v = rng.integers(1, 6, size=4)
    Q, K, V = (rng.normal(size=batch + shape) for shape in ((T_q, d_k), (T_k, d_k), (T_k, d_v)))
    G = rng.normal(size=batch + (T_q, d_v))
    mask = rng.random((T_q, T_k)) < 0.7 if seed % 2 else None
    scale = [True, False, float(rng.uniform(0.5, 4.0))][seed % 3]
    p = rng.dirichlet(np.ones(T_k), size=batch + (T_q,))
    calls = [("attention_backward", (Q, K, V, G), {"mask": mask, "scale": scale}),
             ("softmax_jacobian", (p,), {}), ("softmax_backward", (p, rng.normal(size=p.shape)), {})]
    loss = bank.coupled_cubic_loss(tuple(rng.normal(size=(2, 2)) for _ in range(4)))
    calls.append(("numerical_gradient", (loss, rng.normal(size=(2, 2))), {"eps": float(rng.choice([1e-6, 1e-3]))}))
    calls.append(("relative_error", (rng.normal(size=4), rng.normal(size=4)), {}))
    return calls


@pytest.mark.parametrize("name", sorted(bank.CORRECT))
def test_correct_variant_equals_the_reference_on_random_inputs(name):
    namespace = run_cells(apply_rewrite(bank.SOLUTION, bank.CORRECT[name]), bank.GIVEN)
    for seed in range(12):
        for function, args, kwargs in _random_inputs(seed):
            status, value = call(namespace, function, args, kwargs)
            assert status == "ok", (seed, function, value)
            expected = bank.REFERENCE[function](*args, **kwargs)
            assert _compare(value, expected) == "equal", (seed, function)
