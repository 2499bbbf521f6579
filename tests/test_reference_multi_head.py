"""Assignment 2 (multi-head attention): the reference's hand-worked values, properties and error messages;
the hidden cases, which expose every known mistake; the grader's diagnoses in plain words; and the visible
self-checks (attention_lab.a02_multi_head.checks), which pass every correct answer and name every known mistake."""

import contextlib
import io
import math

import numpy as np
import pytest

from attention_lab.a02_multi_head import checks as multi_head_checks
from attention_lab.core.worked import SelfCheckFailed
from autograder.assignments.a01_attention import reference as ref
from autograder.grader.answers import answer_namespace
from autograder.assignments.a02_multi_head.spec import ASSIGNMENT
from autograder.grader.in_process import grade_answers
from autograder.assignments.a02_multi_head.reference import merge_heads, multi_head_attention, split_heads


# ---------------------------------------------------------------- split_heads / merge_heads
def test_split_heads_hand_worked():
    X = np.arange(8.0).reshape(2, 4)  # tokens (0 1 2 3), (4 5 6 7); mistakes.md M12
    np.testing.assert_array_equal(split_heads(X, 2), [[[0, 1], [4, 5]], [[2, 3], [6, 7]]])
    np.testing.assert_array_equal(split_heads(np.arange(12.0).reshape(2, 6), 3),
                                  [[[0, 1], [6, 7]], [[2, 3], [8, 9]], [[4, 5], [10, 11]]])
    np.testing.assert_array_equal(split_heads(X, 1), X[None])
    np.testing.assert_array_equal(split_heads(X, 4), [[[0], [4]], [[1], [5]], [[2], [6]], [[3], [7]]])


def test_merge_heads_hand_worked_and_inverse_of_split():
    H = np.array([[[0.0, 1.0], [4.0, 5.0]], [[2.0, 3.0], [6.0, 7.0]]])
    np.testing.assert_array_equal(merge_heads(H), [[0, 1, 2, 3], [4, 5, 6, 7]])
    rng = np.random.default_rng(0)
    for T, d_model, n_heads in [(5, 12, 3), (1, 8, 8), (7, 6, 2), (3, 16, 4)]:
        X = rng.normal(size=(T, d_model))
        np.testing.assert_array_equal(merge_heads(split_heads(X, n_heads)), X)
        H = rng.normal(size=(n_heads, T, d_model // n_heads))
        np.testing.assert_array_equal(split_heads(merge_heads(H), n_heads), H)


def test_split_and_merge_keep_float_dtypes_and_convert_integers():
    X32 = np.ones((3, 4), dtype=np.float32)
    assert split_heads(X32, 2).dtype == np.float32 and merge_heads(split_heads(X32, 2)).dtype == np.float32
    assert split_heads(np.arange(8).reshape(2, 4), 2).dtype == np.float64


def test_split_heads_leaves_its_input_unchanged():
    X = np.arange(12.0).reshape(3, 4)
    before = X.copy()
    split_heads(X, 2)
    np.testing.assert_array_equal(X, before)


@pytest.mark.parametrize("X, n_heads, message", [
    (np.ones((3, 10)), 4, r"d_model = X\.shape\[1\] = 10 must be divisible by n_heads = 4"),
    (np.ones((3, 10)), 0, "n_heads must be an integer >= 1; received 0"),
    (np.ones((3, 10)), 2.0, "n_heads must be an integer >= 1; received 2.0"),
    (np.ones((3, 10)), True, "n_heads must be an integer >= 1; received True"),
    (np.ones(10), 2, r"X must have shape \(T, d_model\) \(at least 2 dimensions\); received shape \(10,\)"),
    (np.ones((2, 3, 4)), 2, r"X must have shape \(T, d_model\) with every size >= 1; received shape \(2, 3, 4\)"),
    (np.ones((0, 4)), 2, r"received shape \(0, 4\)"),
    (np.array([["a", "b"]]), 1, "X must be a real numeric array"),
])
def test_split_heads_bad_input(X, n_heads, message):
    with pytest.raises(ValueError, match=message):
        split_heads(X, n_heads)


@pytest.mark.parametrize("H, message", [
    (np.ones((3, 4)), r"H must have shape \(n_heads, T, d_head\) \(at least 3 dimensions\); received shape \(3, 4\)"),
    (np.ones((2, 3, 4, 5)), r"received shape \(2, 3, 4, 5\)"),
    (np.ones((2, 0, 4)), r"every size >= 1; received shape \(2, 0, 4\)"),
])
def test_merge_heads_bad_input(H, message):
    with pytest.raises(ValueError, match=message):
        merge_heads(H)


# ---------------------------------------------------------------- multi_head_attention
def test_multi_head_attention_hand_worked():
    # d_model = 2, two heads of size 1 (√d_head = 1); W_q = W_k = W_v = I, so head h sees feature h only.
    x = np.array([[2.0, 0.0], [0.0, 1.0]])
    W_o = np.array([[1.0, 1.0], [0.0, 1.0]])  # output = (head 0, head 0 + head 1)
    output, weights = multi_head_attention(x, np.eye(2), np.eye(2), np.eye(2), W_o, 2)
    e4, e1 = math.exp(4.0), math.e
    # head 0: q = k = v = (2, 0): scores [[4, 0], [0, 0]]; head 1: (0, 1): scores [[0, 0], [0, 1]]
    expected_weights = [[[e4 / (e4 + 1), 1 / (e4 + 1)], [0.5, 0.5]], [[0.5, 0.5], [1 / (1 + e1), e1 / (1 + e1)]]]
    np.testing.assert_allclose(weights, expected_weights, rtol=1e-12)
    head0 = [2 * e4 / (e4 + 1), 1.0]
    head1 = [0.5, e1 / (1 + e1)]
    np.testing.assert_allclose(output, np.column_stack([head0, np.add(head0, head1)]), rtol=1e-12)


def test_uniform_causal_heads_average_the_values():
    # W_q = 0 makes every score 0: causal row t averages value rows 0..t, in every head.
    x = np.arange(1.0, 13.0).reshape(3, 4)
    output, weights = multi_head_attention(x, np.zeros((4, 4)), np.eye(4)[::-1], np.eye(4), 2 * np.eye(4), 2,
                                           mask=ref.causal_mask(3))
    np.testing.assert_allclose(weights, [[[1, 0, 0], [0.5, 0.5, 0], [1 / 3, 1 / 3, 1 / 3]]] * 2)
    np.testing.assert_allclose(output, 2 * np.cumsum(x, axis=0) / np.arange(1, 4)[:, None])


def _per_head_formula(x, W_q, W_k, W_v, W_o, n_heads, mask=None):
    """§3.2.2 head by head: Concat(head_1, …, head_h) W_o, head_i = Attention(x W_q^i, x W_k^i, x W_v^i)."""
    d_head = x.shape[1] // n_heads
    heads, weights = [], []
    for h in range(n_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        scores = (x @ W_q[:, cols]) @ (x @ W_k[:, cols]).T / math.sqrt(d_head)
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
        w = np.exp(scores - scores.max(axis=1, keepdims=True))
        w /= w.sum(axis=1, keepdims=True)
        heads.append(w @ (x @ W_v[:, cols]))
        weights.append(w)
    return np.concatenate(heads, axis=1) @ W_o, np.stack(weights)


@pytest.mark.parametrize("T, d_model, n_heads, causal", [(5, 12, 3, False), (6, 8, 2, True), (4, 16, 4, True),
                                                        (3, 6, 6, False), (7, 10, 1, True)])
def test_matches_the_paper_head_by_head(T, d_model, n_heads, causal):
    rng = np.random.default_rng(T * 100 + d_model)
    x = rng.normal(size=(T, d_model))
    Ws = [rng.normal(size=(d_model, d_model)) / math.sqrt(d_model) for _ in range(4)]
    mask = ref.causal_mask(T) if causal else None
    output, weights = multi_head_attention(x, *Ws, n_heads, mask=mask)
    expected_output, expected_weights = _per_head_formula(x, *Ws, n_heads, mask=mask)
    assert output.shape == (T, d_model) and weights.shape == (n_heads, T, T)
    np.testing.assert_allclose(weights, expected_weights, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(output, expected_output, rtol=1e-10, atol=1e-12)


def test_one_head_is_single_head_attention_followed_by_W_o():
    rng = np.random.default_rng(3)
    x, W_q, W_k, W_v, W_o = rng.normal(size=(6, 8)), *rng.normal(size=(4, 8, 8))
    output, weights = multi_head_attention(x, W_q, W_k, W_v, W_o, 1, mask=ref.causal_mask(6))
    single, single_weights = ref.causal_self_attention(x, W_q, W_k, W_v)
    np.testing.assert_allclose(weights[0], single_weights, rtol=1e-12)
    np.testing.assert_allclose(output, single @ W_o, rtol=1e-10, atol=1e-12)


def test_each_head_is_scaled_by_sqrt_d_head_not_sqrt_d_model():
    # d_model = 16, 4 heads of 4: identity projections, head 0 sees features 0..3.
    x = np.zeros((2, 16))
    x[0, 0], x[1, 0] = 2.0, 1.0
    _, weights = multi_head_attention(x, np.eye(16), np.eye(16), np.eye(16), np.eye(16), 4)
    # query 0 · keys = (4, 2) → ÷√4 = (2, 1) → softmax
    np.testing.assert_allclose(weights[0, 0], [math.e / (math.e + 1), 1 / (math.e + 1)], rtol=1e-12)
    np.testing.assert_allclose(weights[1:], 0.5)  # the other heads see only zeros


def test_causal_mask_applies_to_every_head_and_the_future_does_not_leak():
    rng = np.random.default_rng(4)
    x, Ws = rng.normal(size=(6, 8)), rng.normal(size=(4, 8, 8))
    output, weights = multi_head_attention(x, *Ws, 2, mask=ref.causal_mask(6))
    assert np.all(np.triu(weights, 1) == 0)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0)
    changed = x.copy()
    changed[-1] += 10.0
    output_after, _ = multi_head_attention(changed, *Ws, 2, mask=ref.causal_mask(6))
    np.testing.assert_array_equal(output_after[:-1], output[:-1])
    assert not np.allclose(output_after[-1], output[-1])


def test_a_per_head_mask_broadcasts():
    rng = np.random.default_rng(5)
    x, Ws = rng.normal(size=(4, 6)), rng.normal(size=(4, 6, 6))
    masks = np.stack([ref.causal_mask(4), np.ones((4, 4), dtype=bool)])
    _, weights = multi_head_attention(x, *Ws, 2, mask=masks)
    assert np.all(np.triu(weights[0], 1) == 0) and np.all(weights[1] > 0)


def test_float32_stays_float32():
    rng = np.random.default_rng(6)
    x, Ws = rng.normal(size=(4, 8)).astype(np.float32), rng.normal(size=(4, 8, 8)).astype(np.float32)
    output, weights = multi_head_attention(x, *Ws, 2)
    assert output.dtype == np.float32 and weights.dtype == np.float32


@pytest.mark.parametrize("change, message", [
    ({"x": np.ones(8)}, r"x must have shape \(T, d_model\)"),
    ({"W_q": np.ones((8, 4))}, r"W_q must have shape \(d_model, d_model\) = \(8, 8\) with d_model from x; "
                               r"received shape \(8, 4\)"),
    ({"W_o": np.ones((4, 8))}, r"W_o must have shape \(d_model, d_model\) = \(8, 8\)"),
    ({"W_v": np.ones((8, 8, 1))}, r"W_v must have shape \(d_model, d_model\) = \(8, 8\) with every size >= 1"),
    ({"n_heads": 3}, r"d_model = X\.shape\[1\] = 8 must be divisible by n_heads = 3"),
    ({"mask": np.ones((3, 3))}, "mask must be a boolean array"),
    ({"mask": np.ones((3, 3), dtype=bool)}, r"mask must be broadcastable to the scores' shape"),
    ({"mask": np.zeros((4, 4), dtype=bool)}, "mask blocks every key for at least one query row"),
])
def test_multi_head_attention_bad_input(change, message):
    rng = np.random.default_rng(7)
    arguments = {"x": rng.normal(size=(4, 8)), "W_q": np.eye(8), "W_k": np.eye(8), "W_v": np.eye(8),
                 "W_o": np.eye(8), "n_heads": 2, "mask": None}
    arguments.update(change)
    with pytest.raises(ValueError, match=message):
        multi_head_attention(**arguments)


# ---------------------------------------------------------------- the assignment's hidden cases and diagnoses
def _cases(grade_id):
    return list(ASSIGNMENT.step(grade_id).cases())


def test_hidden_multi_head_cases_avoid_inputs_that_hide_mistakes():
    for case in _cases("test_multi_head_attention"):
        x, W_q, W_k, W_v, W_o, n_heads = case.args
        T, d_model = x.shape
        assert n_heads >= 2 and d_model // n_heads != d_model and T not in (1, n_heads, d_model // n_heads)
        assert len({row.tobytes() for row in x}) == T  # token rows differ
        for W in (W_q, W_k, W_v, W_o):
            assert not np.allclose(W, np.eye(d_model)) and not np.allclose(W, W.T)
        assert not any(np.allclose(a, b) for i, a in enumerate((W_q, W_k, W_v)) for b in (W_q, W_k, W_v)[i + 1:])
    assert any("mask" in case.kwargs for case in _cases("test_multi_head_attention"))
    assert any(case.raises == "ValueError" for case in _cases("test_split_heads"))
    for case in _cases("test_split_heads"):
        (T, d_model), n_heads = case.args[0].shape, case.args[1]
        assert n_heads >= 2 and T not in (1, n_heads, d_model // n_heads)
    for case in _cases("test_merge_heads"):
        n_heads, T, d_head = case.args[0].shape
        assert n_heads >= 2 and len({n_heads, T, d_head}) == 3
    assert all(case.args[0].ndim == 3 for case in _cases("test_from_assignment_1"))


def test_every_mistake_is_visible_on_every_case_it_should_be():
    # Mistakes that change every result of their step must be caught by each case, not only by some.
    results = {key: grade_answers(ASSIGNMENT, dict(ASSIGNMENT.mistakes[key].cells))
               for key in ("split_without_transpose", "merge_without_transpose", "merge_reversed", "scale_by_d_model",
                           "forgot_W_o", "one_projection", "head_slice_rows", "split_before_projecting")}
    for key, steps in results.items():
        (grade_id,) = ASSIGNMENT.mistakes[key].breaks
        value_cases = [c for c in _cases(grade_id) if c.raises is None]
        failed = [line for line in steps[grade_id].lines if line.lstrip().startswith("✗")]
        assert len(failed) == len(value_cases), (key, steps[grade_id].text())
    # The mask mistake is caught on each masked case and only there.
    masked = sum("mask" in c.kwargs for c in _cases("test_multi_head_attention"))
    step = grade_answers(ASSIGNMENT, dict(ASSIGNMENT.mistakes["mask_ignored"].cells))["test_multi_head_attention"]
    assert sum(line.lstrip().startswith("✗") for line in step.lines) == masked


class _Feedback:
    """A step's verdict whose text() has its wrapped lines joined (feedback wraps at 100 columns)."""

    def __init__(self, verdict):
        self.verdict, self.score, self.named = verdict, verdict.score, verdict.named

    def text(self) -> str:
        return " ".join(self.verdict.text().split())


def _feedback(cells, grade_id):
    return _Feedback(grade_answers(ASSIGNMENT, cells)[grade_id])


def test_split_diagnoses_unknown_mistakes_in_words():
    reversed_heads = "def split_heads(X, n_heads):\n    T, d = X.shape\n" \
                     "    return X.reshape(T, n_heads, d // n_heads).transpose(1, 0, 2)[::-1]"
    step = _feedback({"split_heads": reversed_heads}, "test_split_heads")
    assert step.score == 0.5 and not step.named
    assert "The heads are in reverse order" in step.text()
    tokens_reversed = "def split_heads(X, n_heads):\n    T, d = X.shape\n" \
                      "    return X[::-1].reshape(T, n_heads, d // n_heads).transpose(1, 0, 2)"
    text = _feedback({"split_heads": tokens_reversed}, "test_split_heads").text()
    assert "Head 0, row 0 holds features of token(s) [4]" in text and "tokens must not mix" in text
    shape = "def split_heads(X, n_heads):\n    return X.reshape(X.shape[0], n_heads, -1)"
    text = _feedback({"split_heads": shape}, "test_split_heads").text()
    assert "should have shape (n_heads, T, d_head) = (2, 5, 4)" in text
    no_error = "def split_heads(X, n_heads):\n    d = X.shape[1] // n_heads\n" \
               "    return np.stack([X[:, h * d:(h + 1) * d] for h in range(n_heads)])"
    step = _feedback({"split_heads": no_error}, "test_split_heads")  # the known mistake split_without_check
    assert step.score == 1.5 and "it should raise ValueError, but it returned" in step.text()


def test_merge_diagnoses_unknown_mistakes_in_words():
    interleaved = "def merge_heads(H):\n    return H.transpose(1, 2, 0).reshape(H.shape[1], -1)"
    step = _feedback({"merge_heads": interleaved}, "test_merge_heads")
    assert step.score == 0 and "Each row holds the right token's features, but not in order" in step.text()
    tokens_mixed = "def merge_heads(H):\n    return H.transpose(1, 0, 2)[::-1].reshape(H.shape[1], -1)"
    assert "Row 0 holds features of token(s) [4]" in _feedback({"merge_heads": tokens_mixed}, "test_merge_heads").text()


def test_multi_head_diagnoses_unknown_mistakes_in_words():
    transposed_W_o = ("def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):\n"
                      "    Q, K, V = (split_heads(x @ W, n_heads) for W in (W_q, W_k, W_v))\n"
                      "    out, w = scaled_dot_product_attention(Q, K, V, mask)\n"
                      "    return merge_heads(out) @ W_o.T, w")
    text = _feedback({"multi_head_attention": transposed_W_o}, "test_multi_head_attention").text()
    assert "The weights of every head are right, so the mistake is after the softmax" in text
    divides_by_d_head = ("def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):\n"
                         "    Q, K, V = (split_heads(x @ W, n_heads) for W in (W_q, W_k, W_v))\n"
                         "    out, w = scaled_dot_product_attention(Q / np.sqrt(Q.shape[-1]), K, V, mask)\n"
                         "    return merge_heads(out) @ W_o, w")
    text = _feedback({"multi_head_attention": divides_by_d_head}, "test_multi_head_attention").text()
    assert "The weights of every head are wrong" in text and "(by √d_head)" in text
    averaged = ("def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):\n"
                "    Q, K, V = (split_heads(x @ W, n_heads) for W in (W_q, W_k, W_v))\n"
                "    out, w = scaled_dot_product_attention(Q, K, V, mask)\n"
                "    return merge_heads(out) @ W_o, w.mean(axis=0)")
    text = _feedback({"multi_head_attention": averaged}, "test_multi_head_attention").text()
    assert "return every head's weights, shape (n_heads, T, T)" in text
    leaky = ("def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):\n"
             "    Q, K, V = (split_heads(x @ W, n_heads) for W in (W_q, W_k, W_v))\n"
             "    leaky = None if mask is None else mask | np.eye(len(mask), k=1, dtype=bool)\n"
             "    out, w = scaled_dot_product_attention(Q, K, V, leaky)\n"
             "    return merge_heads(out) @ W_o, w")
    text = _feedback({"multi_head_attention": leaky}, "test_multi_head_attention").text()
    assert "A blocked position has weight" in text and "masked keys must get weight 0 in every head" in text


def test_assignment_1_diagnoses_unknown_mistakes_in_words():
    cells = {"from_assignment_1": (
        "def softmax(x, axis=-1):\n    e = np.exp(x - x.max(axis=axis, keepdims=True))\n"
        "    return e / e.sum(axis=axis, keepdims=True)\n"
        "def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):\n"
        "    s = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])\n"
        "    s = s if mask is None else np.where(mask, s, -np.inf)\n"
        "    w = softmax(s)\n    return w @ V + 1.0, w\n"
        "def attention_entropy(weights):\n    safe = np.where(weights > 0, weights, 1.0)\n"
        "    return -2 * np.sum(weights * np.log(safe), axis=-1)\n")}
    text = _feedback(cells, "test_from_assignment_1").text()
    assert "The weights are right, so the output is wrong: it should be weights @ V" in text
    assert "The entropies are 2 times the correct ones" in text


def test_example_students_are_named_as_the_brief_asks():
    names = [student.split("-")[0] for student in ASSIGNMENT.example_students]
    assert names == ["mia", "ned", "ora", "pat"]
    results = {student: grade_answers(ASSIGNMENT, dict(variant.cells))
               for student, variant in ASSIGNMENT.example_students.items()}
    assert sum(s.score for s in results["pat-loops-over-heads"].values()) == 7 + 2  # the steps, the two questions
    assert results["mia-split-without-transpose"]["test_split_heads"].named == ["split_without_transpose"]
    assert results["ned-forgot-W_o"]["test_multi_head_attention"].named == ["forgot_W_o"]
    assert results["ora-scales-by-d_model"]["test_multi_head_attention"].named == ["scale_by_d_model"]


# ---------------------------------------------------------------- the visible self-checks
SELF_CHECKS = {  # solution cell → the self-check cell(s) after it, as the notebook calls them
    "from_assignment_1": lambda ns: multi_head_checks.check_from_assignment_1(
        ns["softmax"], ns["scaled_dot_product_attention"], ns["attention_entropy"]),
    "split_heads": lambda ns: multi_head_checks.check_split_heads(ns["split_heads"]),
    "merge_heads": lambda ns: multi_head_checks.check_merge_heads(ns["merge_heads"], ns["split_heads"]),
    "multi_head_attention": lambda ns: multi_head_checks.check_multi_head_attention(ns["multi_head_attention"]),
    "facts": lambda ns: multi_head_checks.check_multi_head_facts(ns["multi_head_attention"],
                                                                 ns["scaled_dot_product_attention"]),
}


def _self_check(cells, which):
    """The failure message of one self-check on the solution with ``cells`` replaced, or None if it passes."""
    namespace = answer_namespace(ASSIGNMENT.name, ASSIGNMENT.notebook, cells)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            SELF_CHECKS[which](namespace)
    except SelfCheckFailed as failure:
        return str(failure)
    return None


@pytest.mark.parametrize("variant", ["source solution", *sorted(ASSIGNMENT.correct)])
def test_correct_answers_pass_every_self_check(variant):
    cells = {} if variant == "source solution" else dict(ASSIGNMENT.correct[variant].cells)
    assert {which: _self_check(cells, which) for which in SELF_CHECKS} == dict.fromkeys(SELF_CHECKS)


@pytest.mark.parametrize("key", sorted(ASSIGNMENT.function_mistakes))
def test_each_mistake_fails_its_own_self_check_and_is_named(key):
    variant = ASSIGNMENT.mistakes[key]
    (cell,) = variant.cells
    message = _self_check(dict(variant.cells), cell)
    assert message is not None
    assert "This looks like a known mistake" in message  # (for from_assignment_1: "…made in from_assignment_1…")
    assert f"{variant.description}. Hint: {variant.hint}" in message


def test_split_self_check_properties_in_plain_words():
    silent = "def split_heads(X, n_heads):\n    d = X.shape[1] // n_heads\n" \
             "    return np.stack([X[:, h * d:(h + 1) * d] for h in range(n_heads)])"
    assert "should raise ValueError" in _self_check({"split_heads": silent}, "split_heads")
    vague = "def split_heads(X, n_heads):\n    if X.shape[1] % n_heads:\n        raise ValueError('bad split')\n" \
            "    return X.reshape(len(X), n_heads, -1).transpose(1, 0, 2)"
    assert "should name n_heads and d_model; its message is 'bad split'" in _self_check({"split_heads": vague},
                                                                                        "split_heads")
    in_place = "def split_heads(X, n_heads):\n    if X.shape[1] % n_heads:\n        raise ValueError(n_heads)\n" \
               "    H = X.reshape(len(X), n_heads, -1).transpose(1, 0, 2).copy()\n    X[:] = 0\n    return H"
    assert "split_heads modified its argument X in place" in _self_check({"split_heads": in_place}, "split_heads")


def test_merge_round_trip_is_checked_only_with_a_working_split():
    wrong_split = dict(ASSIGNMENT.mistakes["split_strided"].cells)
    assert _self_check(wrong_split, "merge_heads") is None  # merge is right; split's own check reports split
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        SELF_CHECKS["merge_heads"](answer_namespace(ASSIGNMENT.name, ASSIGNMENT.notebook, wrong_split))
    assert "not checked: your split_heads does not pass its own self-check yet" in out.getvalue()


def test_multi_head_self_check_properties_in_plain_words():
    transposed_W_o = ("def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):\n"
                      "    Q, K, V = (split_heads(x @ W, n_heads) for W in (W_q, W_k, W_v))\n"
                      "    out, w = scaled_dot_product_attention(Q, K, V, mask)\n"
                      "    return merge_heads(out) @ W_o.T, w")
    assert "wrong values in the output" in _self_check({"multi_head_attention": transposed_W_o},
                                                       "multi_head_attention")
    swapped = ("def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):\n"
               "    Q, K, V = (split_heads(x @ W, n_heads) for W in (W_q, W_k, W_v))\n"
               "    out, w = scaled_dot_product_attention(Q, K, V, mask)\n"
               "    return w, merge_heads(out) @ W_o")
    message = _self_check({"multi_head_attention": swapped}, "multi_head_attention")
    assert "the output" in message and "(2, 2, 2)" in message  # the weights came back where the output belongs
    one_step_ahead = ("def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):\n"
                      "    Q, K, V = (split_heads(x @ W, n_heads) for W in (W_q, W_k, W_v))\n"
                      "    leaky = None if mask is None else mask | np.eye(len(mask), k=1, dtype=bool)\n"
                      "    out, w = scaled_dot_product_attention(Q, K, V, leaky)\n"
                      "    return merge_heads(out) @ W_o, w")
    message = _self_check({"multi_head_attention": one_step_ahead}, "facts")
    assert "changing only the last token changed the outputs at positions [4]" in message
