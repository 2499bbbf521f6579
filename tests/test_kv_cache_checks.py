"""Assignment 5's visible self-checks: correct answers pass, each known mistake is named in its own check,
and wrong answers that match no known mistake get a plain-words property."""

import pytest

from attention_lab.a05_kv_cache import checks
from attention_lab.core.worked import SelfCheckFailed
from autograder.grader.answers import answer_namespace
from autograder.assignments.a05_kv_cache.spec import ASSIGNMENT

CHECKS = {
    "from_assignment_1": lambda ns: checks.check_from_assignment_1(ns["softmax"], ns["scaled_dot_product_attention"]),
    "causal_mask": lambda ns: checks.check_causal_mask(ns["causal_mask"]),
    "attend_with_cache": lambda ns: checks.check_attend_with_cache(ns["attend_with_cache"]),
    "decode_incrementally": lambda ns: checks.check_decode_incrementally(
        ns["decode_incrementally"], ns["scaled_dot_product_attention"], ns["causal_mask"]),
    "attention_cost_per_token": lambda ns: checks.check_attention_cost_per_token(ns["attention_cost_per_token"]),
}


def namespace(cells: dict[str, str]) -> dict:
    return answer_namespace(ASSIGNMENT.name, ASSIGNMENT.notebook, cells)


@pytest.mark.parametrize("variant", ["source solution", *sorted(ASSIGNMENT.correct)])
def test_correct_answers_pass_every_self_check(variant, capsys):
    cells = {} if variant == "source solution" else dict(ASSIGNMENT.correct[variant].cells)
    ns = namespace(cells)
    for check in CHECKS.values():
        check(ns)
    out = capsys.readouterr().out
    assert "✓ decoding with the cache equals your full causal self-attention to 1e-12" in out
    assert out.count("✓") == 15


@pytest.mark.parametrize("key", sorted(ASSIGNMENT.function_mistakes))
def test_each_mistake_fails_its_own_self_check_with_its_hint(key):
    mistake = ASSIGNMENT.mistakes[key]
    (cell,) = mistake.cells
    with pytest.raises(SelfCheckFailed) as failure:
        CHECKS[cell](namespace(dict(mistake.cells)))
    assert mistake.description in str(failure.value)
    assert mistake.hint in str(failure.value)


def failure_of(cell: str, source: str) -> str:
    with pytest.raises(SelfCheckFailed) as failure:
        CHECKS[cell](namespace({cell: source}))
    return str(failure.value)


def test_a_cache_that_is_not_float64_is_named():
    # float16 passes the worked cases' exact small numbers only if they are representable; the property
    # check on random inputs names the dtype either way.
    message = failure_of("attend_with_cache", '''
def attend_with_cache(x_new, K_cache, V_cache, W_q, W_k, W_v):
    K = np.concatenate([K_cache, x_new @ W_k]).astype(np.float16)
    V = np.concatenate([V_cache, x_new @ W_v]).astype(np.float16)
    out, _ = scaled_dot_product_attention(x_new @ W_q, K, V, mask=causal_mask(x_new.shape[0], K.shape[0]))
    return out, K, V
''')
    assert "float16" in message or "This looks like a known mistake" in message


def test_modifying_the_cache_in_place_is_named():
    message = failure_of("attend_with_cache", '''
def attend_with_cache(x_new, K_cache, V_cache, W_q, W_k, W_v):
    K = np.concatenate([K_cache, x_new @ W_k])
    V = np.concatenate([V_cache, x_new @ W_v])
    out, _ = scaled_dot_product_attention(x_new @ W_q, K, V, mask=causal_mask(x_new.shape[0], K.shape[0]))
    x_new *= 0  # "free" the tokens
    return out, K, V
''')
    assert "attend_with_cache modified its argument x_new in place" in message


def test_a_chunk_that_differs_from_one_token_at_a_time_is_explained():
    # Only the last new token of a chunk sees the other new tokens: right for one token, wrong inside a chunk.
    message = failure_of("attend_with_cache", '''
def attend_with_cache(x_new, K_cache, V_cache, W_q, W_k, W_v):
    K = np.concatenate([K_cache, x_new @ W_k])
    V = np.concatenate([V_cache, x_new @ W_v])
    mask = np.ones((len(x_new), len(K)), dtype=bool)
    mask[:-1, K_cache.shape[0]:] = False
    out, _ = scaled_dot_product_attention(x_new @ W_q, K, V, mask=mask)
    return out, K, V
''')
    assert "worked case" in message or "the same outputs as the same 3 tokens one call at a time" in message


def test_decoding_that_is_off_only_by_float32_rounding_is_named():
    message = failure_of("decode_incrementally", '''
def decode_incrementally(x, W_q, W_k, W_v, chunk=1):
    d_head = W_k.shape[1]
    K_cache, V_cache = np.zeros((0, d_head)), np.zeros((0, d_head))
    outputs = []
    for start in range(0, x.shape[0], chunk):
        out, K_cache, V_cache = attend_with_cache(x[start:start + chunk], K_cache, V_cache, W_q, W_k, W_v)
        outputs.append(out.astype(np.float32).astype(np.float64))
    return np.concatenate(outputs)
''')
    assert "float32" in message


def test_a_cost_that_is_not_linear_with_the_cache_is_explained():
    # Passes no worked case: the message comes from the worked cases, then (if they pass) the properties.
    message = failure_of("attention_cost_per_token", '''
def attention_cost_per_token(t, d_model, d_head, cached):
    if cached:
        return 3 * d_model * d_head + 2 * t * d_head + (t // 4) * d_head
    return 3 * t * d_model * d_head + 2 * t * t * d_head
''')
    assert "grows by" in message or "worked case" in message


def test_a_cost_that_differs_at_t_1_is_explained_by_the_property():
    source = '''
def attention_cost_per_token(t, d_model, d_head, cached):
    if cached:
        return 3 * d_model * d_head + 2 * t * d_head
    return 3 * t * d_model * d_head + 2 * t * t * d_head + (d_model * d_head if d_model > 4 else 0)
'''
    message = failure_of("attention_cost_per_token", source)
    assert "for the first token (t = 1) there is nothing to reuse" in message


def test_a_mask_that_is_right_on_the_worked_cases_but_not_for_other_sizes_is_explained():
    message = failure_of("causal_mask", '''
def causal_mask(T_q, T_k=None):
    T_k = T_q if T_k is None else T_k
    if T_q > T_k:
        raise ValueError("T_q > T_k")
    if T_k <= 4:
        return np.tril(np.ones((T_q, T_k), dtype=bool), k=T_k - T_q)
    return np.tril(np.ones((T_q, T_k), dtype=bool))
''')
    assert "in causal_mask(1, 5), new query 0 is position 4 of 5, so it may attend to keys 0…4" in message
    assert "aligned top-left" in message


def test_unfinished_functions_say_so():
    message = failure_of("decode_incrementally", '''
def decode_incrementally(x, W_q, W_k, W_v, chunk=1):
    raise NotImplementedError()
''')
    assert message.startswith("decode_incrementally is not answered yet") and " — " not in message
