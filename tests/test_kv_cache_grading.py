"""Assignment 5's hidden cases and diagnoses: what the grader says about answers that match no known mistake.

(Every correct variant and known mistake is graded by the generic tests in test_grader.py.)
"""

import numpy as np
import pytest

from autograder.assignments.a05_kv_cache.spec import ASSIGNMENT
from autograder.grader.in_process import grade_answers
from autograder.assignments.a01_attention.reference import causal_self_attention
from autograder.assignments.a05_kv_cache.reference import decode_incrementally


def step_text(cells: dict[str, str], grade_id: str) -> tuple[float, str]:
    result = grade_answers(ASSIGNMENT, cells)[grade_id]
    return result.score, result.text()


def test_decoding_is_graded_against_full_causal_self_attention_to_1e_12():
    for case in ASSIGNMENT.step("test_decode_incrementally").cases():
        assert case.rtol == 0 and case.atol == 1e-12
        full, _ = causal_self_attention(*case.args)
        np.testing.assert_array_equal(ASSIGNMENT.reference["decode_incrementally"](*case.args, **case.kwargs), full)
        np.testing.assert_allclose(decode_incrementally(*case.args, **case.kwargs), full, rtol=0, atol=1e-13)


def test_hidden_cases_avoid_inputs_that_hide_cache_mistakes():
    attend = ASSIGNMENT.step("test_attend_with_cache").cases()
    shapes = [(case.args[1].shape[0], case.args[0].shape[0]) for case in attend]  # (T_past, T_new)
    assert (0, 4) in shapes  # an empty cache with a chunk: the mask inside the chunk
    assert any(T_past > 0 and T_new == 1 for T_past, T_new in shapes)  # one token over a cache
    assert any(T_past > 0 and T_new > 1 for T_past, T_new in shapes)  # a chunk over a cache
    assert all(case.args[0].shape[1] != case.args[3].shape[1] for case in attend)  # d_model ≠ d_head
    decode = ASSIGNMENT.step("test_decode_incrementally").cases()
    chunks = [(case.args[0].shape[0], case.kwargs.get("chunk", 1)) for case in decode]
    assert any(T % chunk for T, chunk in chunks) and any(chunk > T for T, chunk in chunks)
    masks = [case.args for case in ASSIGNMENT.step("test_causal_mask").cases()]
    assert (1, 6) in masks and (3, 7) in masks and (5,) in masks and (6, 4) in masks


def test_a_mask_that_leaks_one_step_ahead_is_described():
    score, text = step_text({"causal_mask": '''
def causal_mask(T_q, T_k=None):
    T_k = T_q if T_k is None else T_k
    if T_q > T_k:
        raise ValueError("T_q > T_k")
    return np.tril(np.ones((T_q, T_k), dtype=bool), k=T_k - T_q + 1)
'''}, "test_causal_mask")
    assert score == pytest.approx(0.4)
    assert "New query 0 (position 4) may attend to a later position: the future must be blocked." in text


def test_a_transposed_mask_is_described():
    _, text = step_text({"causal_mask": '''
def causal_mask(T_q, T_k=None):
    T_k = T_q if T_k is None else T_k
    if T_q > T_k:
        raise ValueError("T_q > T_k")
    return np.triu(np.ones((T_k, T_q), dtype=bool), k=T_q - T_k)
'''}, "test_causal_mask")
    assert "The mask is transposed: rows are the T_q new queries, columns the T_k keys." in text


def test_an_attention_slip_with_right_caches_is_located():
    score, text = step_text({"attend_with_cache": '''
def attend_with_cache(x_new, K_cache, V_cache, W_q, W_k, W_v):
    K = np.concatenate([K_cache, x_new @ W_k])
    V = np.concatenate([V_cache, x_new @ W_v])
    out, _ = scaled_dot_product_attention(x_new @ W_q * 1.5, K, V, mask=causal_mask(len(x_new), len(K)))
    return out, K, V
'''}, "test_attend_with_cache")
    assert score == 0
    assert "The caches are right, so the attention is wrong" in text


def test_a_cache_whose_old_rows_change_is_described():
    _, text = step_text({"attend_with_cache": '''
def attend_with_cache(x_new, K_cache, V_cache, W_q, W_k, W_v):
    K = np.concatenate([K_cache * 0.5, x_new @ W_k])
    V = np.concatenate([V_cache, x_new @ W_v])
    out, _ = scaled_dot_product_attention(x_new @ W_q, K, V, mask=causal_mask(len(x_new), len(K)))
    return out, K, V
'''}, "test_attend_with_cache")
    assert "The first T_past rows of the new key cache should be the old cache, unchanged." in text


def test_float32_rounding_in_decoding_is_named_and_costs_the_step():
    score, text = step_text({"decode_incrementally": '''
def decode_incrementally(x, W_q, W_k, W_v, chunk=1):
    x, W_q, W_k, W_v = (a.astype(np.float32) for a in (x, W_q, W_k, W_v))
    K_cache = V_cache = np.zeros((0, W_k.shape[1]), dtype=np.float32)
    outputs = []
    for start in range(0, len(x), chunk):
        out, K_cache, V_cache = attend_with_cache(x[start:start + chunk], K_cache, V_cache, W_q, W_k, W_v)
        outputs.append(out)
    return np.concatenate(outputs).astype(np.float64)
'''}, "test_decode_incrementally")
    assert score == 0
    assert "the size of float32 rounding" in text


def test_decoding_that_loses_the_cache_after_a_while_names_the_first_wrong_row():
    _, text = step_text({"decode_incrementally": '''
def decode_incrementally(x, W_q, W_k, W_v, chunk=1):
    K_cache = V_cache = np.zeros((0, W_k.shape[1]))
    outputs = []
    for start in range(0, len(x), chunk):
        out, K_cache, V_cache = attend_with_cache(x[start:start + chunk], K_cache[-4:], V_cache[-4:], W_q, W_k, W_v)
        outputs.append(out)
    return np.concatenate(outputs)
'''}, "test_decode_incrementally")
    assert "Rows 0…4 are right; row 5 (in chunk 5) is the first wrong one" in text


def test_cost_diagnoses_name_a_whole_factor_but_never_the_expected_count():
    score, text = step_text({"attention_cost_per_token": '''
def attention_cost_per_token(t, d_model, d_head, cached):
    n = 1 if cached else t
    return 2 * (3 * n * d_model * d_head + 2 * n * t * d_head)
'''}, "test_attention_cost_per_token")
    assert score == 0
    assert text.count("Your count is off by a factor of 2 (too large).") == 6
    for case in ASSIGNMENT.step("test_attention_cost_per_token").cases():
        expected = ASSIGNMENT.reference["attention_cost_per_token"](*case.args, **case.kwargs)
        assert f" {expected}" not in text and f"{expected:.6g}" not in text


RECOMPUTED = {  # decoders that give full attention's numbers without a cache, and the cases they still pass
    "full attention on the prefix": ('''
def decode_incrementally(x, W_q, W_k, W_v, chunk=1):
    outs = []
    for start in range(0, x.shape[0], chunk):
        stop = min(start + chunk, x.shape[0])
        out, _ = scaled_dot_product_attention(x[:stop] @ W_q, x[:stop] @ W_k, x[:stop] @ W_v, mask=causal_mask(stop))
        outs.append(out[start:stop])
    return np.concatenate(outs)
''', []),
    "attend_with_cache on empty caches": ('''
def decode_incrementally(x, W_q, W_k, W_v, chunk=1):
    outs = []
    for start in range(0, x.shape[0], chunk):
        stop = min(start + chunk, x.shape[0])
        empty = np.zeros((0, W_k.shape[1]))
        out, _, _ = attend_with_cache(x[:stop], empty, empty, W_q, W_k, W_v)
        outs.append(out[start:stop])
    return np.concatenate(outs)
''', [3]),  # chunk = 8 > T = 5: one call, the whole sequence, as with a cache
    "one call on everything": ('''
def decode_incrementally(x, W_q, W_k, W_v, chunk=1):
    empty = np.zeros((0, W_k.shape[1]))
    return attend_with_cache(x, empty, empty, W_q, W_k, W_v)[0]
''', [3]),
    "the chunks on fresh caches, the answer from full attention": ('''
def decode_incrementally(x, W_q, W_k, W_v, chunk=1):
    empty = np.zeros((0, W_k.shape[1]))
    for start in range(0, x.shape[0], chunk):
        attend_with_cache(x[start:start + chunk], empty, empty, W_q, W_k, W_v)
    T = x.shape[0]
    return scaled_dot_product_attention(x @ W_q, x @ W_k, x @ W_v, mask=causal_mask(T))[0]
''', [3]),
    "one token at a time whatever chunk says": ('''
def decode_incrementally(x, W_q, W_k, W_v, chunk=1):
    K = V = np.zeros((0, W_k.shape[1]))
    outs = []
    for t in range(x.shape[0]):
        out, K, V = attend_with_cache(x[t:t + 1], K, V, W_q, W_k, W_v)
        outs.append(out)
    return np.concatenate(outs)
''', [0]),  # chunk omitted: one token at a time is what it asks
}
UNFINISHED_ATTEND = "def attend_with_cache(x_new, K_cache, V_cache, W_q, W_k, W_v):\n    raise NotImplementedError()\n"


@pytest.mark.parametrize("attend", ["own", "unfinished"])
@pytest.mark.parametrize("name", sorted(RECOMPUTED))
def test_decoding_without_the_cache_gets_only_the_cases_where_it_is_the_same_as_with_it(name, attend):
    """The same numbers as full attention are not enough: the notebook asks for attend_with_cache chunk by chunk,
    and a decoder that recomputes the prefix scores only where one chunk is the whole sequence, also when an
    unfinished attend_with_cache makes a stand-in pass decide (the calls of every pass are checked)."""
    source, kept = RECOMPUTED[name]
    cells = {"decode_incrementally": source, **({"attend_with_cache": UNFINISHED_ATTEND} if attend != "own" else {})}
    result = grade_answers(ASSIGNMENT, cells)["test_decode_incrementally"]
    assert [index for index, passed in enumerate(result.passed) if passed] == kept, result.text()
    assert "must call your attend_with_cache once per chunk" in " ".join(result.text().split())


@pytest.mark.parametrize("attend", ["own", "unfinished"])
def test_decoding_with_the_cache_keeps_every_case(attend):
    """The source solution's decoder and np.array_split's pieces (each at most chunk tokens) keep the rule."""
    from autograder.assignments.a05_kv_cache.bank import CORRECT

    for cells in ({}, dict(CORRECT["array_split_chunks"].cells)):
        if attend != "own":
            cells = {**cells, "attend_with_cache": UNFINISHED_ATTEND}
        result = grade_answers(ASSIGNMENT, cells)["test_decode_incrementally"]
        assert all(result.passed) and result.score == result.points, result.text()


def test_caches_returned_as_lists_and_passed_on_are_carried():
    """attend_with_cache returning its caches as lists is its own mistake (charged in its step); the decoder that
    passes on what it was returned carries the cache and keeps its points (a reviewer found it charged twice)."""
    from autograder.grader.answers import source_solutions

    solution = source_solutions(ASSIGNMENT.name, ASSIGNMENT.notebook)["attend_with_cache"]
    returns = [line for line in solution.splitlines() if line.strip().startswith("return ")]
    assert len(returns) == 1
    listed = solution.replace(returns[0], returns[0].replace("return ", "out, K_all, V_all = ")
                              + "\n    return out, list(K_all), list(V_all)")
    graded = grade_answers(ASSIGNMENT, {"attend_with_cache": listed})
    assert graded["test_attend_with_cache"].score < graded["test_attend_with_cache"].points
    assert graded["test_decode_incrementally"].score == graded["test_decode_incrementally"].points, \
        graded["test_decode_incrementally"].text()


#: decode_incrementally calling attend_with_cache through a name bound elsewhere: a default argument, a global alias
_THROUGH_DEFAULT = '''
def decode_incrementally(x, W_q, W_k, W_v, chunk=1, step=attend_with_cache):
    d_head = W_k.shape[1]
    K_cache, V_cache = np.zeros((0, d_head)), np.zeros((0, d_head))
    outputs = []
    for start in range(0, x.shape[0], chunk):
        out_new, K_cache, V_cache = step(x[start:start + chunk], K_cache, V_cache, W_q, W_k, W_v)
        outputs.append(out_new)
    return np.concatenate(outputs)
'''
DECODE_THROUGH = {
    "a default argument": _THROUGH_DEFAULT,
    "a global alias": "step = attend_with_cache\n" + _THROUGH_DEFAULT.replace(", step=attend_with_cache)", ")"),
}


@pytest.mark.parametrize("how", sorted(DECODE_THROUGH))
def test_attend_with_cache_called_under_another_name_is_seen_and_stood_in_for(how):
    """The decode rule counts calls of attend_with_cache; a call through a default argument or an
    alias of the same function is that call (it used to score 0, the calls unseen), and a mistake of
    attend_with_cache costs points in its own step only (a stand-in answers the alias too)."""
    cells = {"decode_incrementally": DECODE_THROUGH[how]}
    results = grade_answers(ASSIGNMENT, cells)
    assert all(r.score == r.points for r in results.values()), [r.text() for r in results.values()
                                                                  if r.score < r.points]
    wrong = {**cells, **ASSIGNMENT.mistakes["unscaled_scores"].cells}
    charged = {g: r for g, r in grade_answers(ASSIGNMENT, wrong).items() if r.score < r.points}
    assert set(charged) == {"test_attend_with_cache"} and charged["test_attend_with_cache"].named == ["unscaled_scores"]
