"""One mistake, one charge: each step is graded on its own, whatever is wrong with the earlier functions it calls.

In-process (the model of ``nbgrader autograde``; ``test_grading`` checks nbgrader gives the same scores):
the probe's recording and stand-ins (:mod:`attention_lab.core.probe`), the grader's passes
(:mod:`autograder.grader.stand_ins`), and broken earlier functions of every kind in every assignment.
"""

import re

import numpy as np
import pytest

from attention_lab.core import probe, values as wire
from autograder import assignments
from autograder.examples import hostile
from autograder.grader import stand_ins
from autograder.grader.answers import answer_namespace, source_solutions
from autograder.grader.in_process import grade_answers, grader_for, kernel_results
from a07_memory_stand_in import a07_memory_stand_in, memory_stand_in  # noqa: F401 — a fixture: a07's memory step on its stand-in case

pytestmark = pytest.mark.usefixtures("a07_memory_stand_in")

ASSIGNMENTS = assignments.all_assignments()
A1 = ASSIGNMENTS["01_scaled_dot_product_attention"]
A5 = ASSIGNMENTS["05_kv_cache"]


def lost(assignment, cells, **options) -> set[str]:
    return {g for g, r in grade_answers(assignment, cells, **options).items() if r.score < r.points}


def graded_functions(assignment) -> dict[str, set[str]]:
    """grade_id → the functions its hidden cases call."""
    return {step.grade_id: {case.function for case in step.cases()} for step in assignment.steps}


def called_by_later_steps(assignment) -> list[str]:
    """The earlier functions that the solution's later functions call on the hidden inputs (from the probe's record)."""
    grader = grader_for(assignment)
    namespace = answer_namespace(assignment.name, assignment.notebook)
    called = set()
    for step in assignment.steps:
        for record in kernel_results(namespace, grader.request(step.grade_id))["results"]:
            called |= {call["function"] for call in record["calls"]}
    return sorted(called)


# ---- broken earlier functions of every kind, in every assignment where a step calls earlier functions ----

BREAKS = {
    "raises": "raise ValueError('broken')",
    "NotImplementedError": "raise NotImplementedError()",
    "wrong shape": "return _broken(_value, lambda a: a[None])",  # an extra leading axis
    # complex: an integer result as floats is no mistake where a number is asked for (a token id 3.0 is 3)
    "wrong dtype": "return _broken(_value, lambda a: a.astype(complex))",
    "wrong values not in the bank": "return _broken(_value, lambda a: ~a if a.dtype == bool else a * 1.5 + 0.25)",
}
BROKEN = '''
def _broken(value, change):
    return tuple(_broken(v, change) for v in value) if isinstance(value, tuple) else change(np.asarray(value))

_correct_{f} = {f}

def {f}(*args, **kwargs):
    _value = _correct_{f}(*args, **kwargs)
    {body}
'''


def broken(assignment, function: str, kind: str) -> dict[str, str]:
    """The solution with ``function`` broken in the way ``kind`` says (its cell replaced)."""
    solutions = source_solutions(assignment.name, assignment.notebook)
    cell = next(c for c, source in solutions.items() if re.search(rf"^def {function}\(", source, re.M))
    return {cell: solutions[cell] + BROKEN.format(f=function, body=BREAKS[kind])}


with memory_stand_in():  # the hidden cases the tests grade on (a07_memory_stand_in): not T = 20 000 at collection
    EARLIER = [(a.name, f) for a in ASSIGNMENTS.values() for f in called_by_later_steps(a)]


def test_every_assignment_has_steps_that_call_earlier_functions():
    assert {name for name, _ in EARLIER} == set(ASSIGNMENTS)


@pytest.mark.parametrize("kind", list(BREAKS))
@pytest.mark.parametrize("name,function", EARLIER)
def test_a_broken_earlier_function_costs_points_exactly_in_its_own_steps(name, function, kind):
    assignment = ASSIGNMENTS[name]
    own_steps = {g for g, functions in graded_functions(assignment).items() if function in functions}
    if kind in ("wrong shape", "wrong dtype"):
        # a break of every result alike: a step graded on the learner's own results of an earlier step (each case
        # has its Case.twin there, assignment 1's scaling) is right given them, and only that earlier step pays
        own_steps -= {g for g in own_steps
                      if all(c.twin is not None and c.twin[0] in own_steps for c in assignment.step(g).cases())}
    assert lost(assignment, broken(assignment, function, kind)) == own_steps


@pytest.mark.parametrize("name,function", EARLIER)
def test_without_the_stand_in_passes_the_steps_that_call_it_would_be_charged_too(name, function):
    """The passes are what makes the difference (the test above fails without them)."""
    assignment = ASSIGNMENTS[name]
    own_steps = {g for g, functions in graded_functions(assignment).items() if function in functions}
    # an extra leading axis is the usual break; where a given helper legitimately sums it away (assignment 6's
    # sum_to_shape after softmax_backward), wrong values show the same difference
    assert any(lost(assignment, broken(assignment, function, kind), stand_ins=False) > own_steps
               for kind in ("wrong shape", "wrong values not in the bank"))


def test_a_chain_of_two_broken_earlier_functions_charges_each_once():
    # softmax and attention both wrong in ways the bank has no name for: self-attention calls attention, which
    # calls softmax; it is graded with the reference's attention standing in, and keeps its points
    cells = {**broken(A1, "softmax", "wrong values not in the bank"),
             **broken(A1, "scaled_dot_product_attention", "wrong shape")}
    results = grade_answers(A1, cells)
    assert {g for g, r in results.items() if r.score < r.points} == {"test_softmax", "test_scaled_dot_product_attention"}
    assert not any(r.named for r in results.values())
    text = " ".join(results["test_causal_self_attention"].text().split())
    assert "Graded on its own: scaled_dot_product_attention, from an earlier step, is wrong or unfinished" in text


def test_a_chain_through_the_kv_cache_settles_one_pass_per_level():
    # decoding feeds each stand-in's new cache into the next call: 9 tokens one by one need 9 passes
    cells = {**broken(A5, "scaled_dot_product_attention", "wrong values not in the bank"),
             **broken(A5, "attend_with_cache", "wrong values not in the bank")}
    assert lost(A5, cells) == {"test_from_assignment_1", "test_attend_with_cache"}
    grader = grader_for(A5)
    namespace = answer_namespace(A5.name, A5.notebook, cells)
    first = {g: kernel_results(namespace, grader.request(g)) for g in grader.cases}
    runs = []
    stand_ins.run_passes(grader, first, lambda request: runs.append(request["grade_id"]) or kernel_results(namespace,
                                                                                                          request))
    assert runs.count("test_decode_incrementally") == 9


def test_a_mask_of_ones_and_zeros_is_taken_by_the_stand_in_as_the_learners_own_function_takes_it():
    """Self-attention passing np.tril(np.ones(...)) as the mask keeps its points whether attention is right or wrong;
    a wrong attention is charged in its own step only, and no message quotes the reference's argument check."""
    attention_ignores_scale = (
        "def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):\n"
        "    s = attention_scores(Q, K)\n"  # the slip: scale is not passed on
        "    if mask is not None:\n        s = np.where(mask, s, -np.inf)\n"
        "    w = softmax(s)\n    return w @ V, w\n")
    float_mask = (
        "def causal_self_attention(x, W_q, W_k, W_v, scale=True):\n"
        "    T = x.shape[0]\n"
        "    return scaled_dot_product_attention(x @ W_q, x @ W_k, x @ W_v, mask=np.tril(np.ones((T, T))), "
        "scale=scale)\n")
    alone = grade_answers(A1, {"causal_self_attention": float_mask})
    assert all(r.score == r.points for r in alone.values())
    results = grade_answers(A1, {"scaled_dot_product_attention": attention_ignores_scale,
                                 "causal_self_attention": float_mask})
    assert {g for g, r in results.items() if r.score < r.points} == {"test_scaled_dot_product_attention"}
    assert "boolean" not in results["test_causal_self_attention"].text()


SUBLAYER_BY_SUBLAYER_GENERATE = """
def generate(params, config, prompt, n_new, temperature=None, uniforms=None, use_cache=True):
    tokens = [int(t) for t in prompt]
    eps, H = config["ln_eps"], config["n_heads"]
    for k in range(n_new):
        T = len(tokens)
        x = params["W_emb"][np.array(tokens)] + params["W_pos"][:T]
        for layer in range(config["n_layers"]):
            p = f"block{layer}."
            h = layer_norm(x, params[p + "ln1.gain"], params[p + "ln1.bias"], eps)
            a, _ = causal_attention(h, params[p + "W_q"], params[p + "W_k"], params[p + "W_v"], params[p + "W_o"], H)
            x = x + a
            h = layer_norm(x, params[p + "ln2.gain"], params[p + "ln2.bias"], eps)
            x = x + mlp(h, params[p + "W_1"], params[p + "b_1"], params[p + "W_2"], params[p + "b_2"])
        x = layer_norm(x, params["ln_f.gain"], params["ln_f.bias"], eps)
        u = None if uniforms is None else uniforms[k]
        tokens.append(int(next_token((x @ params["W_out"])[-1], temperature, u)))
    return np.array(tokens)
"""


def test_a_long_chain_of_stand_ins_settles_and_the_later_step_keeps_its_points():
    """generate written sublayer by sublayer, with mlp unfinished: every mlp call of every token of every block is
    a level of the chain (37 passes, past MAX_PASSES): each pass advances the chain, so the passes go on up to
    MAX_CHAIN_PASSES; generate is correct and keeps its points, mlp alone is charged."""
    A9 = assignments.get("09_tiny_gpt")
    cells = {"generate": SUBLAYER_BY_SUBLAYER_GENERATE,
             "mlp": "def mlp(x, W_1, b_1, W_2, b_2):\n    raise NotImplementedError()\n"}
    results = grade_answers(A9, cells)
    assert {g for g, r in results.items() if r.score < r.points} == {"test_mlp"}, results["test_generate"].text()


def disjoint_groups(variants: dict) -> list[dict]:
    """The correct variants packed into groups whose cells do not overlap (first fit, in the bank's order).

    Every group's cells together are a correct answer set (each cell is some variant's correct rewrite), so a
    mistake combined with a whole group meets each of its variants at once: the combinations stay the same
    (every variant meets every mistake) in a fraction of the gradings (issue 11's budget at nine assignments).
    """
    groups: list[dict] = []
    for key, variant in variants.items():
        home = next((g for g in groups if not set(variant.cells) & set(g["cells"])), None)
        if home is None:
            home = {"keys": [], "cells": {}}
            groups.append(home)
        home["keys"].append(key)
        home["cells"].update(variant.cells)
    return groups


def test_disjoint_groups_put_every_variant_in_one_group_without_overlapping_cells():
    for assignment in ASSIGNMENTS.values():
        groups = disjoint_groups(assignment.correct)
        assert sorted(k for g in groups for k in g["keys"]) == sorted(assignment.correct)
        for group in groups:
            cells = [c for k in group["keys"] for c in assignment.correct[k].cells]
            assert len(cells) == len(set(cells)), (assignment.name, group["keys"])


@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_every_known_mistake_combined_with_every_correct_variant_is_charged_once_where_it_is(name):
    assignment = ASSIGNMENTS[name]
    # the functions' mistakes with the functions' variants: a question reads only its own answer variable, which no
    # function calls (tests/test_questions.py grades every answer of every question)
    answers = {question.variable for question in assignment.questions}
    variants = {key: v for key, v in assignment.correct.items() if not set(v.cells) <= answers}
    charged_by = {}  # a group whose every cell the mistake replaces gives the mistake's cells again: graded once
    for mistake_key, mistake in assignment.function_mistakes.items():
        for group in disjoint_groups(variants):
            cells = {**group["cells"], **mistake.cells}
            key = frozenset(cells.items())
            if key not in charged_by:
                results = grade_answers(assignment, cells)
                charged_by[key] = {g for g, r in results.items() if r.score < r.points}
            assert charged_by[key] == set(mistake.breaks), (mistake_key, group["keys"], charged_by[key])


# ---- the probe: recording and stand-ins in the kernel ---------------------------------------------

def _namespace():
    namespace = {"np": np}
    exec("def inner(x):\n    return x + 1\n"
         "def outer(x):\n    return inner(x) * 2\n"
         "def later(x):\n    y = outer(x)\n    y[0] = -1\n    y[1] += 1\n    return outer(y) + inner(x)\n", namespace)
    return namespace


def _case(x):
    return {"function": "later", "args": [wire.encode(x)], "kwargs": {}, "seconds": 3.0}


def test_the_first_pass_records_only_the_graded_functions_own_calls_and_restores_the_namespace():
    namespace = _namespace()
    before = dict(namespace)
    record = probe.call_case(namespace, _case(np.zeros(2)), earlier=["inner", "outer"])
    assert [call["function"] for call in record["calls"]] == ["outer", "outer", "inner"]  # not outer's own inner
    assert wire.decode(record["calls"][0]["returned"]).tolist() == [2.0, 2.0]
    assert namespace == before


def test_an_earlier_function_under_another_name_a_default_or_a_closure_is_recorded_and_put_back():
    """Calls through an alias (``attend = attend_with_cache``), a default argument or a closure cell used to bypass
    the wrappers: not recorded (a05's decode rule then saw no call) and never answered by a stand-in (an earlier
    mistake cost the later step too)."""
    namespace = _namespace()
    exec("alias = outer\n"
         "def by_default(x, f=outer, *, g=inner):\n    return f(x) + g(x)\n"
         "def make(f):\n    def closed(x):\n        return f(x)\n    return closed\n"
         "by_closure = make(inner)\n"
         "def later(x):\n    return alias(x) + by_default(x) + by_closure(x)\n", namespace)
    before = dict(namespace)
    defaults, kwdefaults = namespace["by_default"].__defaults__, namespace["by_default"].__kwdefaults__
    cell = namespace["by_closure"].__closure__[0]
    record = probe.call_case(namespace, _case(np.zeros(2)), earlier=["inner", "outer"])
    assert [call["function"] for call in record["calls"]] == ["outer", "outer", "inner", "inner"]
    assert wire.decode(record["value"]).tolist() == [2.0 + 2.0 + 1.0 + 1.0] * 2
    assert namespace == before and namespace["alias"] is namespace["outer"]
    assert namespace["by_default"].__defaults__ == defaults and namespace["by_default"].__kwdefaults__ == kwdefaults
    assert cell.cell_contents is namespace["inner"]
    answers = {probe.call_digest(c["function"], c["args"], c["kwargs"]): {"value": wire.encode(np.full(2, 10.0))}
               for c in record["calls"]}
    answered = probe.call_case(namespace, _case(np.zeros(2)), earlier=["inner", "outer"], stand_ins=answers)
    assert answered["status"] == "returned" and wire.decode(answered["value"]).tolist() == [40.0, 40.0]
    assert namespace == before


def test_a_stand_in_answers_with_a_fresh_copy_and_stops_at_arguments_it_has_no_value_for():
    namespace = _namespace()
    first = probe.call_case(namespace, _case(np.zeros(2)), earlier=["inner", "outer"])
    answers = {probe.call_digest(c["function"], c["args"], c["kwargs"]): {"value": wire.encode(np.full(2, 10.0))}
               for c in first["calls"][:1]}  # outer(x) only; `later` changes the answer it gets, not the stored one
    record = probe.call_case(namespace, _case(np.zeros(2)), earlier=["inner", "outer"], stand_ins=answers)
    assert record["status"] == "incomplete"
    assert [wire.decode(call["args"][0]).tolist() for call in record["calls"]] == [[-1.0, 11.0]]  # outer(y): no value
    answers[probe.call_digest("outer", record["calls"][0]["args"], {})] = {"value": wire.encode(np.ones(2))}
    answers[probe.call_digest("inner", first["calls"][2]["args"], {})] = {"raises": {"type": "ValueError",
                                                                                      "message": "no"}}
    record = probe.call_case(namespace, _case(np.zeros(2)), earlier=["inner", "outer"], stand_ins=answers)
    assert (record["status"], record["type"], record["calls"]) == ("raised", "ValueError", [])


def test_a_missing_earlier_function_is_recorded_so_that_a_stand_in_can_answer_it():
    namespace = _namespace()
    del namespace["outer"]
    record = probe.call_case(namespace, _case(np.zeros(2)), earlier=["inner", "outer"])
    assert record["type"] == "NameError" and record["calls"][0]["function"] == "outer"
    assert "outer" not in namespace


def test_the_grader_computes_stand_ins_only_for_earlier_functions_and_small_arguments():
    grader = grader_for(A1)
    small = {"function": "softmax", "args": [wire.encode(np.zeros((2, 3)))], "kwargs": {}}
    assert grader.stand_in("test_scaled_dot_product_attention", small) is not None
    own = {**small, "function": "scaled_dot_product_attention"}  # the step's own function: never its reference
    assert grader.stand_in("test_scaled_dot_product_attention", own) is None
    assert grader.stand_in("test_softmax", small) is None  # softmax is graded there
    huge = {"function": "causal_mask", "args": [10**6], "kwargs": {}}  # would need 10¹² bytes in the grader
    assert grader.stand_in("test_causal_self_attention", huge) is None
    garbage = {"function": "softmax", "args": [{"ndarray": "not base64"}], "kwargs": {}}
    assert grader.stand_in("test_scaled_dot_product_attention", garbage) is None


def test_calls_that_never_settle_stop_after_the_bound_and_earn_nothing(monkeypatch):
    """A fresh call every pass (the hostile bank's stash-and-replay) never advances a chain: its passes stop at
    MAX_PASSES, not at MAX_CHAIN_PASSES, so the notebook's wall clock is not spent on them."""
    runs = []
    monkeypatch.setattr(stand_ins, "MAX_PASSES", 3)
    cells = {"scaled_dot_product_attention": (
        "def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):\n"
        "    softmax(np.random.default_rng().normal(size=3))\n    raise ValueError('no')\n")}
    grader = grader_for(A1)
    namespace = answer_namespace(A1.name, A1.notebook, cells)
    first = {g: kernel_results(namespace, grader.request(g)) for g in grader.cases}

    def run(request):
        runs.append(request["grade_id"])
        return kernel_results(namespace, request)

    finals = stand_ins.run_passes(grader, first, run)
    assert runs.count("test_scaled_dot_product_attention") == 3 and not finals["test_scaled_dot_product_attention"]


def test_stashing_the_stand_ins_answers_and_replaying_them_gains_nothing():
    """The hostile submission of autograder.examples.hostile, in-process: attention cannot replay its own reference values."""
    results = grade_answers(A1, dict(hostile.STASH_AND_REPLAY))
    honest = grade_answers(A1, {"scaled_dot_product_attention": hostile.UNWRITTEN_ATTENTION})
    assert {g: r.score for g, r in results.items()} == {g: r.score for g, r in honest.items()}
    assert results["test_scaled_dot_product_attention"].score == 0


def test_an_earlier_function_returning_an_object_that_cannot_be_sent_is_still_stood_in_for():
    # the first pass records attention called with that object as its mask: no stand-in may answer that call,
    # but with the reference's mask standing in it is not made again
    cells = {"causal_mask": "class _Anything:\n    def __array__(self, *a, **k):\n        raise TypeError('no')\n"
                            "def causal_mask(T):\n    return _Anything()"}
    assert lost(A1, cells) == {"test_causal_mask"}


def test_the_instructors_in_notebook_grading_runs_the_stand_in_passes_too(capsys):
    from autograder.grader.in_notebook import grade_step

    namespace = answer_namespace(A1.name, A1.notebook, {"softmax": "def softmax(x, axis=-1):\n"
                                                                   "    raise NotImplementedError()"})
    assert grade_step(namespace, A1.name, "test_softmax") == 0.0
    assert grade_step(namespace, A1.name, "test_scaled_dot_product_attention") == 2.0
    assert "Graded on its own: softmax" in " ".join(capsys.readouterr().out.split())
